"""Interleaved bursts for the probes' comparisons, recorded as ``facts.PairedRatio``.

The probes compare ways of running the user's training step (the real step vs the compute-only
step, batch b vs 2b vs 4b, ``steps_per_execution`` 1 vs 16). Each way is an **arm**; one
**burst** of an arm is one short Keras ``fit`` on it, whose first step is its own warm-up (the
iterator starts, the train function is looked up) and whose later steps are timed one by one,
from one ``on_train_batch_end`` to the next, as the diagnosis window times them. Bursts of the
arms alternate, A B (C) A B (C) ..., until **each** arm has at least ``MIN_STEPS`` timed steps
and ``MIN_SECONDS`` of timed time (the issue's floor, ``rnndoctor.paired``), or the phase's
budget ends. The i-th burst of each arm forms the i-th pair, and
:func:`rnndoctor.paired.paired_from_samples` gives the median per arm, the median of the paired
ratios and its 90% bootstrap interval.

Timing inside each ``fit`` (rather than the ``fit`` call as a whole, as
:func:`rnndoctor.paired.measure_paired` does) keeps the ``fit`` call's own set-up out of the
per-step times, which the breakdown needs in absolute milliseconds.

Pure Python: the bursts are callables, so this is unit-tested without TensorFlow.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from rnndoctor.facts import PairedRatio
from rnndoctor.paired import INTERVAL_PAIRS, MIN_SECONDS, MIN_STEPS, paired_from_samples
from rnndoctor.stats import PairedResult

# The most rounds of bursts: past this, more pairs narrow the interval little (its width
# shrinks as 1/sqrt(pairs)), and every burst is one more fit call.
MAX_ROUNDS = 24

# A comparison asked for a precise ratio goes on past the floor while the 90% interval of any
# arm's ratio to the first is wider than this share of the ratio (and time and rounds allow):
# +-10%, the sequential "fixed-width confidence interval" stopping rule (Chow and Robbins,
# Ann. Math. Statist. 36(2), 1965). Source: rnndoctor's choice; the steps_per_execution probe's
# 5 pairs at the floor gave RD403 intervals of 18-41% and 21-30% on the same script
# (tests/scripts/input_fast_pipeline.py, issue 11) around its 20% cut-off.
PRECISE_WIDTH = 0.20

# The pairs at which a comparison with a rule's cut-off takes its one early look (EarlyLook):
# at 5 pairs the 90% bootstrap interval of the median ratio is the pairs' own extremes (with
# 2000 resamples, as paired_from_samples draws them), so an interval wholly on one side of a
# cut-off means all 5 pairs are: for a ratio exactly at the cut-off, a chance of 1 in 2**5 = 32
# per side (the sign test). Source: rnndoctor's choice, from that bound.
EARLY_LOOK_PAIRS = 5

# The pairs a comparison with an early look goes on to, within its phase's budget, where its
# time allowance ends the rounds before the floor and the look did not find the rule's decision
# made (EarlyLook.extends): at 5 pairs the interval is the pairs' extremes, so one slow pair (a
# collection, another process's burst) decides whether a ratio clears its cut-off; at 10 the
# 90% interval's bounds are about the third-lowest and third-highest pair's ratio (with the
# expanded interval and 2000 resamples of paired_from_samples: that pair's, or at times the
# mean of two neighbouring pairs', since a resample's median of 10 is the mean of two), so one
# or two slow pairs no longer decide. The bundled demo's RD301 at 5 pairs on an idle machine,
# in 4 checks at 4956f45: lower bounds 1.56, 1.26, 1.64 and 1.56x against its 1.5x cut-off,
# warning, inconclusive, warning, warning (README, "The batch-size probe's second stage").
# Source: rnndoctor's choice, from those order statistics.
EXTENDED_PAIRS = 10

# The start of stop_reason's text for rounds that the comparison's time allowance ended
_ALLOWANCE = "out of the comparison's time allowance"

# A burst: run one burst of the arm and return its timed intervals, each as (ms per step, steps
# it covered: steps_per_execution), empty when it timed none; or raise.
Burst = Callable[[], Sequence[tuple[float, int]]]


@dataclass
class ArmRecord:
    """One arm's bursts so far: per-step mean (ms) and step count of each burst."""

    name: str
    burst: Burst
    per_step_ms: list[float] = field(default_factory=list)
    steps: list[int] = field(default_factory=list)
    timed_s: float = 0.0
    failed: str | None = None

    def add(self, intervals: Sequence[tuple[float, int]]) -> bool:
        """Records one burst's intervals ((ms per step, steps) each); False when it timed none."""
        steps = sum(n for _, n in intervals)
        if steps < 1:
            return False
        total_ms = float(sum(v * n for v, n in intervals))
        self.per_step_ms.append(total_ms / steps)
        self.steps.append(steps)
        self.timed_s += total_ms / 1000.0
        return True

    def done(self, min_steps: int, min_seconds: float) -> bool:
        return sum(self.steps) >= min_steps and self.timed_s >= min_seconds


@dataclass
class EarlyLook:
    """One early look at a comparison's pairs, before each arm has its floor (10 steps and 1 s):
    once every arm has ``pairs`` pairs (:data:`EARLY_LOOK_PAIRS`), ``test(arms)`` is asked,
    once; a text (why the rule's decision is already made: each interval wholly on one side
    of its cut-off) ends the rounds there, as the comparison's ``cut_short``; None lets them go
    on to the floor or the allowance as before.

    Why: on long steps the floor is many seconds of timed steps per arm (the demo's batch-size
    probe: 10 steps at 0.2-0.8 s in each of 3 arms, more than its 9 s allowance), spent where
    five pairs already put every pair past the cut-off. Why once: every look at an interval
    against a cut-off is one more chance for a ratio on the cut-off to clear it by chance (the
    "repeated significance tests" of Armitage, McPherson and Rowe, J. R. Statist. Soc. A
    132(2), 1969); one early look at the sign test's 1-in-32 level adds at most that to the
    final look's own error (the Bonferroni bound)."""

    test: Callable[[Sequence[ArmRecord]], str | None]
    pairs: int = EARLY_LOOK_PAIRS
    # the seconds a second stage may run (extends), besides the phase's budget: one more
    # allowance of the comparison (budget.PAIRED_WALL_S); inf: the phase's budget alone
    extension_s: float = float("inf")
    clock: Callable[[], float] = time.monotonic
    asked: bool = False
    decided: str | None = None  # the look's text where it found the decision made
    extended_from: int | None = None  # the pairs at which the allowance ended (extends)
    ended: str | None = None  # why a second stage stopped (extends), its rounds' stop reason
    _extension_end: float | None = None

    def __call__(self, arms: Sequence[ArmRecord]) -> str | None:
        if self.asked or len(arms) < 2 or min(len(a.steps) for a in arms) < self.pairs:
            return None
        self.asked = True
        try:
            self.decided = self.test(arms)
        except Exception:  # a failed test: the rounds go on as without one
            self.decided = None
        return self.decided

    def extends(
        self,
        arms: Sequence[ArmRecord],
        reason: str | None,
        last_round_s: float,
        phase_left_s: float | None,
    ) -> bool:
        """Whether rounds that the time allowance ends (``reason``, :func:`stop_reason`) go on,
        in a **second stage**: the look did not find the decision made (not reached yet, a
        straddle, a noisy phase), the arms have fewer than :data:`EXTENDED_PAIRS` pairs, and
        the phase's budget (``phase_left_s``; None: not given, no second stage) and the second
        stage's own allowance (:attr:`extension_s`, from its first round) leave more than a
        round's time. The look is still taken at its pairs during the second stage; the rule
        reads the pairs where the rounds end, one more look (two in all, as in
        :func:`alternate`'s second stage)."""
        if reason is None or not reason.startswith(_ALLOWANCE) or self.decided is not None:
            return False
        rounds = min(len(a.steps) for a in arms) if arms else 0
        if len(arms) < 2 or phase_left_s is None:
            return False
        if rounds >= EXTENDED_PAIRS:
            return self._end(f"the second stage's {EXTENDED_PAIRS} pairs reached")
        if self._extension_end is None:
            self._extension_end = self.clock() + self.extension_s
        stage_left_s = self._extension_end - self.clock()
        if _round_s(arms, last_round_s) >= min(phase_left_s, stage_left_s):
            if stage_left_s <= phase_left_s:
                return self._end(f"out of the second stage's allowance ({_seconds(stage_left_s)})")
            return self._end(f"out of the phase's budget ({_seconds(phase_left_s)})")
        if self.extended_from is None:
            self.extended_from = rounds
        return True

    def _end(self, why: str) -> bool:
        """Records why a second stage stopped (:attr:`ended`, where one ran); False."""
        if self.extended_from is not None:
            self.ended = why
        return False

    def mark(self, paired: PairedRatio | None) -> PairedRatio | None:
        """``paired`` (one comparison's record) with its ``second_stage`` set where its pairs
        went on past the allowance (:meth:`second_stage`); as it was otherwise."""
        why = self.second_stage(paired.pairs) if paired is not None else None
        return replace(paired, second_stage=why) if why else paired

    def second_stage(self, pairs: int) -> str | None:
        """``PairedRatio.second_stage`` for a comparison that ended at ``pairs`` pairs: why its
        rounds went on past the allowance, or None where they did not."""
        if self.extended_from is None or pairs <= self.extended_from:
            return None
        if self.extended_from < self.pairs:
            why = f"before the early look at {self.pairs}"
        else:
            why = "with the rule's decision not made at the early look"
        return (
            f"the time allowance ended at {self.extended_from} pairs {why}: pairs went on to "
            f"{pairs} (at most {EXTENDED_PAIRS}) "
            + (
                "within the phase's budget"
                if self.extension_s == float("inf")
                else f"within one more allowance of {self.extension_s:g} s"
            )
        )


@dataclass
class ThroughputDecided:
    """:class:`EarlyLook`'s test for the batch-size probe: whether RD301's decision is already
    made by its pairs. The arms are the batch sizes ``sizes`` (the user's first); arm ``i``'s
    samples/s ratio to the first is the pairs' step-time ratio (first / arm ``i``: their
    median and 90% bootstrap interval, :func:`pair`'s record of them) times
    ``sizes[i] / sizes[0]``, as the rule reads it (``rules/rd301_small_batch.py``). Made when
    some larger batch's whole interval is at or past ``cutoff`` (the rule's ``min_speedup``:
    it then warns on a point whose interval clears, whatever the others do), or every larger
    batch's whole interval is below it (no finding).

    ``noisy()`` says whether the probe's phase was noisy so far: then nothing is decided here,
    since the rule widens a noisy phase's intervals (``rules/_measured.py: ratio_interval``)
    and more pairs are what narrows them; the rounds go on as without a look."""

    sizes: Sequence[int]
    cutoff: float
    noisy: Callable[[], bool] = lambda: False

    def __call__(self, arms: Sequence[ArmRecord]) -> str | None:
        if self.noisy() or len(arms) < 2:
            return None
        first, base = arms[0], self.sizes[0]
        bounds = []  # (size, low, high): samples/s ratio to the user's batch
        for size, arm in zip(self.sizes[1:], arms[1:], strict=False):
            recorded = pair(first, arm, phase=None)  # what the probe records and RD301 reads
            bounds.append((size, recorded.low * size / base, recorded.high * size / base))
        pairs = min(len(a.per_step_ms) for a in arms)
        made = f"RD301's decision made at {pairs} pairs, the one early look"
        clears = [b for b in bounds if b[1] >= self.cutoff]
        if clears:
            size, low, high = max(clears, key=lambda b: b[1])
            return (
                f"{made}: batch {size} trains {low:.2f}–{high:.2f}x the samples/s of batch "
                f"{base} (90% interval), past the {self.cutoff:g}x cut-off"
            )
        if all(high < self.cutoff for _, _, high in bounds):
            highs = ", ".join(f"batch {size} {high:.2f}x" for size, _, high in bounds)
            return f"{made}: every larger batch under the {self.cutoff:g}x cut-off ({highs})"
        return None


def alternate(
    arms: Sequence[ArmRecord],
    left: Callable[[], float],
    *,
    min_steps: int = MIN_STEPS,
    min_seconds: float = MIN_SECONDS,
    max_rounds: int = MAX_ROUNDS,
    clock: Callable[[], float] = time.monotonic,
    precise: bool = False,
    phase_left: Callable[[], float] | None = None,
    undecided: Callable[[Sequence[ArmRecord]], bool] | None = None,
    early: EarlyLook | None = None,
) -> str | None:
    """Run rounds of bursts, one per arm in order, until each arm has ``min_steps`` timed steps
    and ``min_seconds`` of timed time (and, with ``precise``, until every arm's ratio to the
    first has a 90% interval within :data:`PRECISE_WIDTH` of it: :func:`imprecise`). Arms may
    already hold bursts (a first round run by the caller). A round starts only when the seconds
    ``left()`` exceed the last round's wall time (so a round of long steps does not overrun the
    allowance). With ``phase_left`` (the seconds the phase's budget leaves), rounds go on past
    ``left()`` until the arms have :data:`rnndoctor.paired.INTERVAL_PAIRS` pairs, each only
    while ``phase_left()`` exceeds the round's time (:func:`stop_reason`). An arm whose burst
    raises or times nothing is marked ``failed`` and stops the rounds (the pairs so far still
    count).

    With ``undecided``, a **second stage**: once the first stage is done (the floor met, and
    the interval precise where asked), ``undecided(arms)`` is asked once; when True (the
    interval straddles a rule's cut-off), rounds go on until :data:`MAX_ROUNDS` pairs or the
    end of ``left()``, and the figure is the one over all the pairs. Asked once, not after each
    round: stopping as soon as an interval clears a cut-off would look at it again and again,
    and a ratio on the cut-off would clear it at some look far more often than the interval's
    level says (the "repeated significance tests" of Armitage, McPherson and Rowe,
    J. R. Statist. Soc. A 132(2), 1969); two looks keep that small.

    With ``early`` (:class:`EarlyLook`), the rounds before the floor end where its one look
    says the rule's decision is made; its text is the returned reason. Where the allowance
    ends them before the floor with the decision not made, they go on to
    :data:`EXTENDED_PAIRS` pairs within ``phase_left()`` (:meth:`EarlyLook.extends`).

    Returns:
        None when every arm has its steps and time; else why it stopped (the budget, the round
        limit, a failed arm), with each arm's steps and seconds.
    """
    last_round_s = 0.0
    second = False  # the second stage runs
    while True:
        hard = phase_left() if phase_left is not None else None
        reason = stop_reason(arms, left(), last_round_s, min_steps, min_seconds, max_rounds, hard)
        wide = reason == _DONE and not second and precise and imprecise(arms)
        if reason == _DONE and not second and not wide and undecided is not None:
            try:
                second = bool(undecided(arms))
            except Exception:  # a failed test of the pairs: they stand as the first stage left them
                second = False
            undecided = None  # asked once
        if reason == _DONE and (wide or second):
            # the floor is met and the interval is still wide, or straddles a cut-off: one more
            # round while the rounds and the time allow (when they do not, the floor was met:
            # done, not cut short)
            beyond = stop_reason(arms, left(), last_round_s, 2**31, float("inf"), max_rounds,
                                 hard)  # fmt: skip
            reason = None if beyond is None else _DONE
        if not second and not wide:
            reason = look(early, arms, reason, last_round_s, hard)
        if reason is not None:
            break
        started = clock()
        floor_met = all(arm.done(min_steps, min_seconds) for arm in arms)
        for arm in arms:
            try:
                timed = arm.add(arm.burst())
            except Exception as exc:  # out of memory, a failed fit: keep the pairs so far
                arm.failed = f"{type(exc).__name__}: {exc}"[:200]
                timed = False
            if not timed:
                arm.failed = arm.failed or "a burst timed no step"
                if floor_met:  # a round for precision only: the floor's pairs stand
                    return None
                return f"arm {arm.name} failed: {arm.failed}; " + _shortfall(arms)
        last_round_s = clock() - started
    return finish_reason(reason, arms, min_steps, min_seconds)


_DONE = "done"


def look(
    early: EarlyLook | None,
    arms: Sequence[ArmRecord],
    reason: str | None,
    last_round_s: float,
    phase_left_s: float | None,
) -> str | None:
    """The stop reason once ``early`` has had its say on rounds before the floor (``reason``
    from :func:`stop_reason`, not done): its one look's text where it finds the rule's
    decision made, else None where the allowance's stop is extended
    (:meth:`EarlyLook.extends`), else ``reason`` as it was."""
    if early is None or reason == _DONE:
        return reason
    decided = early(arms)
    if decided is not None:
        return decided
    if early.extends(arms, reason, last_round_s, phase_left_s):
        return None
    return early.ended or reason


def imprecise(arms: Sequence[ArmRecord], width: float = PRECISE_WIDTH) -> bool:
    """True when some arm's paired ratio to the first arm has a 90% bootstrap interval wider
    than ``width`` times the ratio (fewer than 3 pairs: True)."""
    first = arms[0]
    for arm in arms[1:]:
        n = min(len(first.per_step_ms), len(arm.per_step_ms))
        if n < 3:
            return True
        # the interval pair() records (same resamples and seed): the one the rules read
        result = paired_from_samples(first.per_step_ms[:n], arm.per_step_ms[:n])
        if result.high - result.low > width * result.ratio:
            return True
    return False


def stop_reason(
    arms: Sequence[ArmRecord],
    remaining_s: float,
    last_round_s: float,
    min_steps: int = MIN_STEPS,
    min_seconds: float = MIN_SECONDS,
    max_rounds: int = MAX_ROUNDS,
    phase_left_s: float | None = None,
) -> str | None:
    """Whether rounds of bursts should stop before the next one: ``"done"`` when every arm has
    ``min_steps`` timed steps and ``min_seconds`` of timed time; why they stop short (the round
    limit, or ``remaining_s`` seconds of the allowance left, not more than the last round's
    ``last_round_s``); None to run another round.

    The allowance does not stop two arms or more short of
    :data:`rnndoctor.paired.INTERVAL_PAIRS` pairs while the phase's budget (``phase_left_s``;
    None: not given) leaves more than a round's time (the last round's wall time, and at least
    the timed seconds of each arm's last burst: a first round run by the caller is not timed
    as a round): without them the comparison has no interval and every rule on it is
    inconclusive."""
    if all(arm.done(min_steps, min_seconds) for arm in arms):
        return _DONE
    rounds = min(len(arm.steps) for arm in arms)
    few = len(arms) > 1 and rounds < INTERVAL_PAIRS  # pairs too few for an interval
    if rounds >= max_rounds:
        return f"stopped at {rounds} rounds"
    if remaining_s <= 0.0 or last_round_s > remaining_s:
        if few and phase_left_s is not None and _round_s(arms, last_round_s) < phase_left_s:
            return None  # an interval needs its pairs: past the allowance, within the phase
        return f"{_ALLOWANCE} ({_seconds(remaining_s)})"
    return None


def _seconds(left_s: float) -> str:
    """Seconds left of an allowance, or past it: "1.2 s left", "0.3 s past"."""
    return f"{left_s:.1f} s left" if left_s >= 0.0 else f"{-left_s:.1f} s past"


def _round_s(arms: Sequence[ArmRecord], last_round_s: float) -> float:
    """A round's expected seconds: the last round's wall time, at least the timed seconds of
    each arm's last burst."""
    bursts = sum(a.per_step_ms[-1] * a.steps[-1] for a in arms if a.steps) / 1000.0
    return max(last_round_s, bursts)


def finish_reason(
    reason: str | None,
    arms: Sequence[ArmRecord],
    min_steps: int = MIN_STEPS,
    min_seconds: float = MIN_SECONDS,
) -> str | None:
    """``cut_short`` for rounds that stopped for ``reason`` (:func:`stop_reason`): None when they
    were done, else the reason with each arm's steps and seconds."""
    if reason is None or reason == _DONE:
        return None
    return f"{reason}; " + _shortfall(arms, min_steps, min_seconds)


def _shortfall(
    arms: Sequence[ArmRecord], min_steps: int = MIN_STEPS, min_seconds: float = MIN_SECONDS
) -> str:
    parts = ", ".join(f"{a.name} {sum(a.steps)} steps in {a.timed_s:.2f} s" for a in arms)
    return f"{parts} (wanted {min_steps} steps and {min_seconds:g} s each)"


def pair(
    a: ArmRecord, b: ArmRecord, *, phase: str | None, cut_short: str | None = None
) -> PairedRatio | None:
    """The paired ratio of arm ``a`` over arm ``b`` (their first ``n`` bursts, ``n`` the fewer),
    or None when they share no burst."""
    n = min(len(a.per_step_ms), len(b.per_step_ms))
    if n < 1:
        return None
    result = paired_from_samples(
        a.per_step_ms[:n],
        b.per_step_ms[:n],
        a_steps=a.steps[:n],
        b_steps=b.steps[:n],
        cut_short=cut_short,
    )
    return to_ratio(result, phase=phase, a=a.name, b=b.name)


def to_ratio(result: PairedResult, *, phase: str | None, a: str, b: str) -> PairedRatio:
    """A :class:`PairedResult` (ms per step) as the facts record it (rounded)."""
    return PairedRatio(
        ratio=round(result.ratio, 4),
        low=round(result.low, 4),
        high=round(result.high, 4),
        level=result.level,
        pairs=result.pairs,
        median_a_ms=round(result.median_a, 4),
        median_b_ms=round(result.median_b, 4),
        steps_a=int(sum(result.a_steps)),
        steps_b=int(sum(result.b_steps)),
        spread_a=round(result.spread_a, 4),
        spread_b=round(result.spread_b, 4),
        widen_factor=result.widen_factor,
        cut_short=result.cut_short,
        phase=phase,
        a=a,
        b=b,
    )


def seconds_left(deadline: float) -> Callable[[], float]:
    """``left()`` for a ``time.monotonic()`` deadline."""
    return lambda: deadline - time.monotonic()
