"""Compares two runs (before / after a change): step time and findings. Pure, no TensorFlow."""

from __future__ import annotations

from dataclasses import dataclass, field

from rnndoctor.engine import evaluate
from rnndoctor.facts import Facts
from rnndoctor.findings import Finding


@dataclass
class Comparison:
    """Two runs side by side.

    ``step_time_ratio`` is before / after of the median step time (> 1: the second run is
    faster), or None when either run measured no step. Findings match on (rule ID, layer path):
    the same layer in both runs, even when the scripts differ.
    """

    before: Facts
    after: Facts
    before_step_ms: float | None
    after_step_ms: float | None
    step_time_ratio: float | None
    fixed: list[Finding] = field(default_factory=list)
    new: list[Finding] = field(default_factory=list)
    remaining: list[Finding] = field(default_factory=list)


def _key(finding: Finding) -> tuple[str, str | None]:
    return finding.rule_id, finding.layer


def compare_facts(before: Facts, after: Facts) -> Comparison:
    """Runs the current rules on both runs' facts and pairs their findings."""
    old = evaluate(before).findings
    new = evaluate(after).findings
    old_keys = {_key(f) for f in old}
    new_keys = {_key(f) for f in new}
    b = before.steps.median_step_time_ms if before.steps else None
    a = after.steps.median_step_time_ms if after.steps else None
    return Comparison(
        before=before,
        after=after,
        before_step_ms=b,
        after_step_ms=a,
        step_time_ratio=round(b / a, 3) if a and b else None,
        fixed=[f for f in old if _key(f) not in new_keys],
        new=[f for f in new if _key(f) not in old_keys],
        remaining=[f for f in new if _key(f) in old_keys],
    )
