"""Renders a :class:`rnndoctor.compare.Comparison`: a rich table and a self-contained HTML page."""

from __future__ import annotations

from rnndoctor.compare import Comparison
from rnndoctor.reports.formatting import ms
from rnndoctor.reports.templating import environment


def ratio_text(comparison: Comparison) -> str:
    """The measured step-time change, as "1.33x faster (median step 250.0 ms -> 188.0 ms)"."""
    ratio = comparison.step_time_ratio
    if ratio is None:
        return "not measured (a run has no measured step)"
    steps = f"(median step {ms(comparison.before_step_ms)} -> {ms(comparison.after_step_ms)})"
    if round(ratio, 2) == 1.0:
        return f"about the same, 1.00x {steps}"
    if ratio > 1:
        return f"{ratio:.2f}x faster {steps}"
    return f"{1 / ratio:.2f}x slower {steps}"


_GROUPS = ("fixed", "unverified", "new", "remaining")


def print_comparison(comparison: Comparison, before: str, after: str) -> None:
    """Prints the comparison as a table (rich) on stdout."""
    from rich.console import Console
    from rich.table import Table

    console = Console(highlight=False, soft_wrap=True)
    console.print(f"before: {before}\nafter:  {after}", markup=False)
    table = Table(title="rnndoctor compare")
    table.add_column("")
    table.add_column("before", no_wrap=True)
    table.add_column("after", no_wrap=True)
    table.add_row("outcome", comparison.before.run.outcome, comparison.after.run.outcome)
    table.add_row("median step time", ms(comparison.before_step_ms), ms(comparison.after_step_ms))
    table.add_row(
        "findings",
        str(len(comparison.fixed) + len(comparison.unverified) + len(comparison.remaining)),
        str(len(comparison.new) + len(comparison.remaining)),
    )
    console.print(table, markup=False)
    console.print(f"step time: {ratio_text(comparison)}", markup=False)
    for label in _GROUPS:
        for f in getattr(comparison, label):
            console.print(f"{label:<10} {f.rule_id} {f.severity.label:<7} {f.layer or '-'}",
                          markup=False)  # fmt: skip
    if not any(getattr(comparison, label) for label in _GROUPS):
        console.print("no findings in either run", markup=False)
    for note in comparison.notes:
        console.print(f"note: {note}", markup=False)


def render_comparison_html(comparison: Comparison, before: str, after: str) -> str:
    """The comparison as one self-contained HTML page (autoescaped, no network loads)."""
    return (
        environment()
        .get_template("compare.html.j2")
        .render(
            c=comparison,
            before=before,
            after=after,
            ratio=ratio_text(comparison),
            groups=[(label, getattr(comparison, label)) for label in _GROUPS],
        )
    )
