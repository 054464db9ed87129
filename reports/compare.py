"""Renders a :class:`rnndoctor.compare.Comparison`: a rich table and a self-contained HTML page;
for a run checked with ``--verify``, each fix's estimate against its measurement."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rnndoctor.compare import STEP_TIME_LEVEL, Comparison
from rnndoctor.reports.formatting import ms
from rnndoctor.reports.templating import environment
from rnndoctor.reports.verified import VerifiedRow, build_verify_view


def ratio_text(comparison: Comparison) -> str:
    """The measured step-time change with its interval (:class:`rnndoctor.compare.Comparison`),
    as "1.33x faster (90% interval 1.25–1.41x; median step 250.0 ms -> 188.0 ms)", "1.03x (90%
    interval 0.97–1.09x): within noise (median step ...)", or, where a run has fewer than 2
    step times, the change as before with "no interval". "faster" / "slower" only where the
    interval excludes 1; a slowdown's figures are after / before, so that they exceed 1."""
    ratio = comparison.step_time_ratio
    if ratio is None:
        return "not measured (a run has no measured step)"
    steps = f"median step {ms(comparison.before_step_ms)} -> {ms(comparison.after_step_ms)}"
    change, interval = comparison.step_time_change, comparison.step_time_interval
    if change is None or interval is None:
        if round(ratio, 2) == 1.0:
            head = "about the same, 1.00x"
        elif ratio > 1:
            head = f"{ratio:.2f}x faster"
        else:
            head = f"{1 / ratio:.2f}x slower"
        return f"{head} (no interval: a run has fewer than 2 step times; {steps})"
    level = f"{STEP_TIME_LEVEL * 100:.0f}% interval"
    low, high = interval
    if change == "within noise":
        return f"{ratio:.2f}x ({level} {low:.2f}–{high:.2f}x): within noise ({steps})"
    if change == "faster":
        return f"{ratio:.2f}x faster ({level} {low:.2f}–{high:.2f}x; {steps})"
    return f"{1 / ratio:.2f}x slower ({level} {1 / high:.2f}–{1 / low:.2f}x; {steps})"


# The marker in the head of every page render_comparison_html writes: compare replaces a file at
# its --html path only where it holds this (is_comparison_page), never a file of the user's.
GENERATOR = "rnndoctor compare"
_MARKER = f'<meta name="generator" content="{GENERATOR}">'
# Pages of versions before the marker: their title and heading, both as they wrote them.
_UNMARKED = ("<title>rnndoctor compare</title>", "<h1>rnndoctor compare</h1>")
_READ_BYTES = 1 << 16  # a page's head and heading lie well within its first 64 KiB


def is_comparison_page(path: Path) -> bool:
    """Whether ``path`` is a page that :func:`render_comparison_html` wrote: the generator
    marker (``<meta name="generator" content="rnndoctor compare">``) before its ``</head>``,
    or, from a version before the marker, that page's title and heading. False for anything
    else, and for a path that cannot be read as a file."""
    try:
        with path.open("rb") as handle:
            text = handle.read(_READ_BYTES).decode("utf-8", errors="replace")
    except OSError:
        return False
    end = text.find("</head>")
    if end >= 0 and _MARKER in text[:end]:
        return True
    return end >= 0 and _UNMARKED[0] in text[:end] and _UNMARKED[1] in text[end:]


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
    """The comparison as one self-contained HTML page (autoescaped, no network loads), marked
    as compare's own in its head (:data:`GENERATOR`, :func:`is_comparison_page`)."""
    return (
        environment()
        .get_template("compare.html.j2")
        .render(
            c=comparison,
            generator=GENERATOR,
            before=before,
            after=after,
            ratio=ratio_text(comparison),
            groups=[(label, getattr(comparison, label)) for label in _GROUPS],
            verified=verified_rules(comparison),
        )
    )
