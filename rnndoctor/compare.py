"""Compares two runs (before / after a change): step time and findings. Pure, no TensorFlow."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from rnndoctor.engine import Report, evaluate
from rnndoctor.facts import Facts, Phase
from rnndoctor.findings import Finding
from rnndoctor.stats import bootstrap_ratio_of_medians_interval
from rnndoctor.verify.summary import VerifySummary

# The coverage of the step-time ratio's interval (a multiple of 0.002, as rnndoctor.stats wants).
STEP_TIME_LEVEL = 0.90


@dataclass
class Comparison:
    """Two runs side by side.

    ``step_time_ratio`` is before / after of the median step time (> 1: the second run is
    faster), or None when either run measured no step. ``step_time_interval`` is its
    :data:`STEP_TIME_LEVEL` (90%) bootstrap interval, (low, high) of the same before / after
    ratio, from the two windows' per-step times (``facts.steps.step_time_ms``): each run's steps
    are resampled on their own (:func:`rnndoctor.stats.bootstrap_ratio_of_medians_interval`,
    seed 0, so the same reports give the same interval). None where either run has fewer than 2
    step times (or a step time that is not positive): "no interval". ``step_time_change`` words
    it: "faster" / "slower" only where the interval excludes 1, "within noise" where it holds 1.

    The interval holds the step-to-step noise inside each window only. The two runs were not
    interleaved (one ran, then the other, perhaps on another day or machine), so whatever
    changed on the machine between them (clocks, thermal state, other load, a driver) is not in
    it: a "faster" between runs far apart can still be drift (``check --verify`` alternates the
    original's windows with a fix's, A B A B, which takes such drift out). The steps of one
    window are not independent either (a slow stretch spans several steps), and a plain
    percentile interval of few steps is narrower than its nominal 90%: with a handful of steps
    per run, read it as rough.

    Findings match on (rule ID, layer path): the same layer in both runs, even when the scripts
    differ. A finding of the first run counts as ``fixed`` only when its rule ran on the second
    run and found nothing there; when the rule could not run (missing facts, skipped), the
    finding is ``unverified``. ``notes`` say what makes the two runs hard to compare (outcome,
    script, environment, a window on a noisy machine). ``verified_before`` and
    ``verified_after``: each run's ``--verify`` outcome (estimate against measurement per fix),
    None for a run checked without it.
    """

    before: Facts
    after: Facts
    before_step_ms: float | None
    after_step_ms: float | None
    step_time_ratio: float | None
    step_time_interval: tuple[float, float] | None = None
    fixed: list[Finding] = field(default_factory=list)
    unverified: list[Finding] = field(default_factory=list)
    new: list[Finding] = field(default_factory=list)
    remaining: list[Finding] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    verified_before: VerifySummary | None = None
    verified_after: VerifySummary | None = None

    @property
    def step_time_change(self) -> str | None:
        """The step-time change in words: "faster" (the interval lies above 1), "slower" (below
        1), "within noise" (it holds 1), or None: no ratio, or no interval (a run with fewer
        than 2 step times)."""
        if self.step_time_ratio is None or self.step_time_interval is None:
            return None
        low, high = self.step_time_interval
        if low > 1.0:
            return "faster"
        if high < 1.0:
            return "slower"
        return "within noise"


def _step_time_interval(before: Facts, after: Facts) -> tuple[float, float] | None:
    """The :data:`STEP_TIME_LEVEL` interval of before / after of the median step time, or None
    where either window has fewer than 2 step times, or one that is not positive."""
    first = list(after.steps.step_time_ms) if after.steps else []
    second = list(before.steps.step_time_ms) if before.steps else []
    if len(first) < 2 or len(second) < 2 or min(first + second) <= 0.0:
        return None
    # median(second) / median(first) = before / after, as step_time_ratio.
    return bootstrap_ratio_of_medians_interval(first, second, level=STEP_TIME_LEVEL, seed=0)


def _key(finding: Finding) -> tuple[str, str | None]:
    return finding.rule_id, finding.layer


def _notes(before: Facts, after: Facts, fixed: list[Finding]) -> list[str]:
    notes = []
    for label, facts in (("first", before), ("second", after)):
        if facts.run.outcome != "completed":
            notes.append(
                f"the {label} run ended with outcome '{facts.run.outcome}' during phase "
                f"'{facts.run.phase}': rules without their facts were not evaluated"
            )
    if before.run.script != after.run.script:
        names = (os.path.basename(before.run.script), os.path.basename(after.run.script))
        notes.append(f"the runs checked different scripts: {names[0]} and {names[1]}")
    env_b, env_a = before.environment, after.environment
    if env_b and env_a:
        for name in ("tensorflow", "keras", "gpu_count", "precision_policy"):
            if getattr(env_b, name) != getattr(env_a, name):
                notes.append(f"different {name}: {getattr(env_b, name)} and {getattr(env_a, name)}")
        if any(f.rule_id.startswith("RD1") for f in fixed) and not (
            env_b.gpu_count or env_a.gpu_count
        ):
            notes.append(
                "the cuDNN fast path that the fixed RD1xx findings open exists on a GPU only; "
                "both runs ran without one, so the step-time ratio shows only the fixes' effect "
                "on this CPU"
            )
    for label, facts in (("first", before), ("second", after)):
        steps = facts.steps
        noisy = _noisy_window(facts)
        if noisy:
            notes.append(
                f"the {label} run's window {noisy}: the step-time ratio may be the machine's, "
                "not the code's; compare runs on a quiet machine, or use check --verify, which "
                "alternates the two"
            )
        if steps and steps.median_step_time_ms and steps.p90_step_time_ms:
            spread = steps.p90_step_time_ms / steps.median_step_time_ms
            if spread >= _SPREAD_NOTE:
                notes.append(
                    f"the {label} run's step times vary widely (p90 {spread:.1f}x the median, "
                    f"over {steps.measured_steps} steps; batches of different lengths, say): "
                    "the ratio of medians is rough; check with more --steps"
                )
    return notes


def _noisy_window(facts: Facts) -> str | None:
    """What may have made the run's measured steps the machine's: their phase noisy (other
    processes' CPU, ``facts.run.machine``: "ran on a noisy machine (other processes used ...)")
    or the window drifting ("drifted (...)"); None when neither. A new user's compare of one
    script checked twice read "1.86x slower (90% interval 1.79–2.06x)", the second run on a
    loaded machine, and said nothing of it."""
    window = (Phase.MEASURED, Phase.LOOP_MEASURED)
    noisy = [m.description for m in facts.run.machine if m.noisy and m.phase in window]
    if noisy:
        return f"ran on a noisy machine ({noisy[0].removeprefix('noisy machine: ')})"
    steps = facts.steps
    if steps is not None and steps.drifted and steps.drift:
        return f"drifted ({steps.drift})"
    return None


# p90 / median at which a run's median step time is called rough (a bucketed pipeline's batches
# differ in length by design; the median of 20 such steps moves from run to run).
_SPREAD_NOTE = 1.5


def compare_reports(before: Report, after: Report) -> Comparison:
    """Pairs the findings of two evaluated reports (and carries their verifications)."""
    evaluated_after = {o.rule.id for o in after.outcomes if o.status in ("fired", "passed")}
    old, new = before.findings, after.findings
    old_keys = {_key(f) for f in old}
    new_keys = {_key(f) for f in new}
    gone = [f for f in old if _key(f) not in new_keys]
    b = before.facts.steps.median_step_time_ms if before.facts.steps else None
    a = after.facts.steps.median_step_time_ms if after.facts.steps else None
    fixed = [f for f in gone if f.rule_id in evaluated_after]
    return Comparison(
        before=before.facts,
        after=after.facts,
        before_step_ms=b,
        after_step_ms=a,
        step_time_ratio=b / a if a and b else None,  # unrounded: displays round once
        step_time_interval=_step_time_interval(before.facts, after.facts) if a and b else None,
        fixed=fixed,
        unverified=[f for f in gone if f.rule_id not in evaluated_after],
        new=[f for f in new if _key(f) not in old_keys],
        remaining=[f for f in new if _key(f) in old_keys],
        notes=_notes(before.facts, after.facts, fixed),
        verified_before=before.verification,
        verified_after=after.verification,
    )


def compare_facts(
    before: Facts,
    after: Facts,
    select: Iterable[str] | None = None,
    ignore: Iterable[str] | None = None,
    rule_options: Mapping[str, Mapping[str, Any]] | None = None,
) -> Comparison:
    """Runs the current rules (the same selection and rule options on both) on both runs' facts
    and pairs them.

    Args:
        before: the first run's facts.
        after: the second run's facts.
        select: rule IDs or names to run; None runs all.
        ignore: rule IDs or names to skip.
        rule_options: ``[tool.rnndoctor.rules.<RULE>]`` option values, as
            :func:`rnndoctor.engine.evaluate` takes them.
    """
    return compare_reports(
        evaluate(before, select=select, ignore=ignore, rule_options=rule_options),
        evaluate(after, select=select, ignore=ignore, rule_options=rule_options),
    )
