"""Renders a :class:`rnndoctor.compare.Comparison`: a rich table and a self-contained HTML page."""

from __future__ import annotations

import jinja2

from rnndoctor.compare import Comparison

_env = jinja2.Environment(
    loader=jinja2.PackageLoader("rnndoctor.reports", "templates"),
    autoescape=True,
    undefined=jinja2.StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)


def _ms(value: float | None) -> str:
    return "not measured" if value is None else f"{value:.1f} ms"


def ratio_text(comparison: Comparison) -> str:
    ratio = comparison.step_time_ratio
    if ratio is None:
        return "not measured (a run has no measured step)"
    if ratio >= 1:
        return (
            f"{ratio:.2f}x faster (median step {_ms(comparison.before_step_ms)} -> "
            f"{_ms(comparison.after_step_ms)})"
        )
    return (
        f"{1 / ratio:.2f}x slower (median step {_ms(comparison.before_step_ms)} -> "
        f"{_ms(comparison.after_step_ms)})"
    )


def print_comparison(comparison: Comparison, before: str, after: str) -> None:
    """Prints the comparison as a table (rich) on stdout."""
    from rich.console import Console
    from rich.table import Table

    console = Console(highlight=False)
    table = Table(title="rnndoctor compare", show_lines=False)
    table.add_column("")
    table.add_column(before, overflow="fold")
    table.add_column(after, overflow="fold")
    table.add_row("median step time", _ms(comparison.before_step_ms), _ms(comparison.after_step_ms))
    table.add_row(
        "findings",
        str(len(comparison.fixed) + len(comparison.remaining)),
        str(len(comparison.new) + len(comparison.remaining)),
    )
    console.print(table, markup=False)
    console.print(f"step time: {ratio_text(comparison)}", markup=False)
    for label, findings in (
        ("fixed", comparison.fixed),
        ("new", comparison.new),
        ("remaining", comparison.remaining),
    ):
        for f in findings:
            console.print(
                f"{label:<9} {f.rule_id} {f.severity.label:<7} {f.layer or '-'}", markup=False
            )
    if not (comparison.fixed or comparison.new or comparison.remaining):
        console.print("no findings in either run", markup=False)


def render_comparison_html(comparison: Comparison, before: str, after: str) -> str:
    """The comparison as one self-contained HTML page (autoescaped, no network loads)."""
    return _env.get_template("compare.html.j2").render(
        c=comparison, before=before, after=after, ratio=ratio_text(comparison)
    )
