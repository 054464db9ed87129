"""The one breakdown-share formula of the reports: the verdict's sentence, the HTML bar and
table, and the Markdown table all show these shares (through :mod:`rnndoctor.reports.view`)."""

from __future__ import annotations

from dataclasses import dataclass

from rnndoctor.facts import StepBreakdown

# The parts of the median step, in the order every output lists them: (key, label).
BREAKDOWN_PARTS = (
    ("input", "input (waiting for the next batch)"),
    ("compute", "compute (train step on cached batches)"),
    ("host", "host overhead (per-batch callbacks)"),
    ("other", "other (Keras' per-step overhead, run-to-run difference)"),
)


@dataclass(frozen=True)
class Part:
    """One part of the median step: its ``key`` (``input``, ``compute``, ``host``, ``other``),
    label, time in ms and ``share`` of :attr:`Breakdown.total_ms` (None when that is 0)."""

    key: str
    label: str
    ms: float
    share: float | None


@dataclass(frozen=True)
class Breakdown:
    """The probes' step-time breakdown as shares.

    ``total_ms`` is the larger of the median step and the sum of the positive parts: the probes
    run after the window, under the machine load of their own moment, so when their parts add up
    to more than the step the shares are of that sum. ``over_ms`` is how much they exceed the step
    (a negative ``other_ms``), else 0 (also under 0.005 ms: rounding, not a note).
    """

    step_ms: float
    total_ms: float
    parts: tuple[Part, ...]  # all four, in BREAKDOWN_PARTS order
    over_ms: float

    @property
    def shown(self) -> tuple[Part, ...]:
        """The parts of more than 0 ms, the ones a bar or a table shows."""
        return tuple(p for p in self.parts if p.ms > 0)

    def part(self, key: str) -> Part:
        """The part named ``key``."""
        return next(p for p in self.parts if p.key == key)


def breakdown_shares(breakdown: StepBreakdown | None) -> Breakdown | None:
    """The one share formula of the reports (the verdict, the bar, the tables); None without a
    breakdown."""
    if breakdown is None:
        return None
    times = {
        "input": breakdown.input_ms,
        "compute": breakdown.compute_ms,
        "host": breakdown.host_ms,
        "other": breakdown.other_ms,
    }
    total = max(breakdown.step_ms, sum(ms for ms in times.values() if ms > 0))
    parts = tuple(
        Part(key, label, times[key], times[key] / total if total else None)
        for key, label in BREAKDOWN_PARTS
    )
    over = -breakdown.other_ms
    # under 0.005 ms, the paired breakdown's rounding: no "0.00 ms more" note
    return Breakdown(breakdown.step_ms, total, parts, over if over >= 0.005 else 0.0)
