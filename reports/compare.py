"""Renders a :class:`rnndoctor.compare.Comparison`: a rich table and a self-contained HTML page;
for a run checked with ``--verify``, each fix's estimate against its measurement."""

from __future__ import annotations

from dataclasses import dataclass

from rnndoctor.compare import Comparison
from rnndoctor.reports.formatting import ms
from rnndoctor.reports.templating import environment
from rnndoctor.reports.verified import VerifiedRow, build_verify_view


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


@dataclass(frozen=True)
class VerifiedRule:
    """One fix of a run checked with ``--verify``: its estimate against its measurement.

    Attributes:
        run: ``before`` or ``after``: the run whose verification it is.
        row: the fix as the reports show it (:class:`rnndoctor.reports.verified.VerifiedRow`).
        accuracy: measured speedup / estimated speedup (None: either is missing).
    """

    run: str
    row: VerifiedRow
    accuracy: float | None


def verified_rules(comparison: Comparison) -> list[VerifiedRule]:
    """Each verified run's fixes, the first run's first, failed, slower and unsafe first."""
    rules = []
    for run, summary in (("before", comparison.verified_before),
                         ("after", comparison.verified_after)):  # fmt: skip
        if summary is None:
            continue
        for row in build_verify_view(summary).rows:
            est, meas = row.item.estimate, row.item.measured
            rules.append(VerifiedRule(run, row, meas / est if est and meas else None))
    return rules


def verified_line(rule: VerifiedRule) -> str:
    """``before RD301 confirmed; estimate 2.50x, measured 1.80x (...); measured/estimated 0.72``."""
    row = rule.row
    accuracy = f"; measured/estimated {rule.accuracy:.2f}" if rule.accuracy is not None else ""
    return (f"{rule.run:<6} {row.name} {row.status_text}; estimate {row.estimate_text}, "
            f"measured {row.measured_text}{accuracy}")  # fmt: skip


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
    verified = verified_rules(comparison)
    if verified:
        console.print("verified fixes (--verify): estimate vs measured, per rule", markup=False)
    for rule in verified:
        console.print(verified_line(rule), style="red" if rule.row.bad else None, markup=False)
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
            verified=verified_rules(comparison),
        )
    )
