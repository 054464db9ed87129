"""The paired timer: one way to compare two ways of running a training step (issue 11).

Every comparison a measured rule rests on (compute-only vs the real step, batch b vs 2b vs 4b,
steps_per_execution 1 vs 16, eager vs traced, and ``--verify`` across processes) is measured as
**interleaved bursts** A B A B ...: each arm first runs its own warm-up (untimed), then bursts of
A and B alternate, and each burst of A with the burst of B that follows it forms one **pair**.
Whatever the machine does at a moment (another process, a frequency change) then weighs on both
arms of a pair alike, and the per-pair ratios cancel it where two separate timings taken at
different moments would not. The result is the median of each arm, the median of the paired
ratios and a bootstrap interval over the pairs (``rnndoctor.stats``).

Pure Python: no TensorFlow. The arms are callables ``run(n_steps)``, the clock is injectable, so
the timer is unit-tested with a fake clock.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from rnndoctor.stats import (
    Interval,
    PairedResult,
    bootstrap_median_interval,
    median,
    relative_spread,
)

# The floor for each arm: "at least 10 timed steps or 1 s (whichever is longer)".
MIN_STEPS = 10
MIN_SECONDS = 1.0
# The pairs --verify takes per fix while its budget lasts (rnndoctor.verify.run.MAX_PAIRS: 5, a
# 90% sign-test interval).
VERIFY_PAIRS = 5
# A --verify arm's window (rnndoctor.cli.arms, rnndoctor.inprocess) goes on past its 5 steps until
# they time this many seconds, so that an arm of VERIFY_PAIRS windows times MIN_SECONDS. Why:
# windows of 5 steps alone timed 50 ms an arm at a new user's 10 ms steps, and for RD501's
# bucketing fix drew 5 of its 8 bucket lengths: the copy's window medians ran 7.4-13.3 ms (with a
# floor of 0.5 s, about 50 steps a window: 9.6-11.3 ms). Not 0.5 s: with no reserve of steps
# for the windows to come (capture/step_window.py: StepWindow._short, added since), that added
# 53 s to the test suite's --verify tests (CI, 20 minutes), mostly warm children started again
# (0.5 s with the reserve is not measured).
ARM_WINDOW_S = MIN_SECONDS / VERIFY_PAIRS
# The fewest pairs that give an interval: a bootstrap over 1 or 2 pairs is degenerate, and the
# rules call such a comparison inconclusive (rules/_measured.py: MIN_PAIRS is this number). With
# 3 or 4 pairs the interval is their range or close to it, which holds the median 75% or 87.5% of
# the time, not 90% (stats.expanded_tail); from 5 pairs on, the expanded interval reaches 90%. A
# probe's comparison whose own wall allowance ends before this many pairs goes on, within its
# phase's budget, until it has them (capture/pairs.py: stop_reason): the demo's batch-size
# probe fitted 2 pairs of 0.4-1.0 s steps in one idle stability run and its RD301 went from
# warning to "inconclusive: 1.6x (0.2-16.4x)".
INTERVAL_PAIRS = 3
# With bursts sized automatically, each arm's bursts are sized to reach its minimum steps and time
# in about this many pairs. The plain percentile bootstrap of a median under-covers with few
# pairs (84-87% with ~10 pairs, 88-91% with ~20, in a simulation with the fake clock of
# tests/unit/test_paired.py: ratio 2, 5% and 20% noise per step, 200 seeds); the expanded
# interval (stats.bootstrap_median_interval) covered 90.5-91.5% in the same simulation, at a
# median of 21 pairs (10 ms steps) and 14 (100 ms steps, 20% noise). Slow steps (>= 50 ms, 1 s
# in fewer than 20 steps) still get the floor (10 steps, 1 s), i.e. ~10 pairs of one
# step each.
TARGET_PAIRS = 20
# The most pairs one measurement takes: past this, more pairs narrow the interval little
# (its width shrinks as 1/sqrt(pairs)) and the bootstrap costs more (2000 medians of each size).
MAX_PAIRS = 200
# A measurement's own budget when the caller gives none: the default probe phase budget is
# larger than this, and two arms of 1 s each plus their warm-ups fit well within it.
BUDGET_S = 20.0
MS_PER_S = 1000.0

# An arm: run ``n_steps`` training steps (or as close as it can) and return the number of steps
# it actually ran, or None when it ran exactly ``n_steps``.
Arm = Callable[[int], int | None]


class PairedTimingError(RuntimeError):
    """The paired timer measured not a single pair within its budget."""


@dataclass
class _Arm:
    """Running totals of one arm (internal, mutable while the measurement runs)."""

    run: Arm
    name: str
    per_step_ms: list[float]
    steps: list[int]
    timed_s: float = 0.0

    def done(self, min_steps: int, min_seconds: float) -> bool:
        return sum(self.steps) >= min_steps and self.timed_s >= min_seconds

    def predict_s(self, n_steps: int) -> float:
        """Seconds a burst of ``n_steps`` should take, from the last burst (0 before any)."""
        return self.per_step_ms[-1] * n_steps / MS_PER_S if self.per_step_ms else 0.0

    def burst(self, n_steps: int, clock: Callable[[], float]) -> float:
        """Run and time one burst; returns its wall time in seconds."""
        start = clock()
        ran = _steps_run(self.run(n_steps), n_steps, self.name)
        elapsed_s = clock() - start
        self.per_step_ms.append(elapsed_s * MS_PER_S / ran)
        self.steps.append(ran)
        self.timed_s += elapsed_s
        return elapsed_s


def _steps_run(returned: object, asked: int, name: str) -> int:
    """The steps an arm ran: what it returned, or ``asked`` when it returned None.

    Raises:
        TypeError: the arm returned something else than None or an int.
        ValueError: it ran no step.
    """
    if returned is None:
        return asked
    if isinstance(returned, bool) or not isinstance(returned, int):
        raise TypeError(f"arm {name} returned {returned!r}: expected None or a step count")
    if returned < 1:
        raise ValueError(f"arm {name} ran {returned} steps in a burst: nothing to time")
    return returned


def _check_options(
    min_steps: int,
    min_seconds: float,
    burst_steps: int | None,
    warmup: int,
    budget_s: float,
    max_pairs: int,
) -> None:
    if min_steps < 1 or min_seconds < 0.0:
        raise ValueError("min_steps must be >= 1 and min_seconds >= 0")
    if burst_steps is not None and burst_steps < 1:
        raise ValueError(f"burst_steps must be >= 1 or None, not {burst_steps}")
    if warmup < 0 or budget_s <= 0.0 or max_pairs < 1:
        raise ValueError("warmup must be >= 0, budget_s > 0 and max_pairs >= 1")


def _auto_burst(per_step_ms: float, min_seconds: float, min_steps: int) -> int:
    """Steps per burst for an arm whose step takes ``per_step_ms``: enough that the arm
    reaches ``min_seconds`` and ``min_steps`` in about :data:`TARGET_PAIRS` pairs.

    Each arm is sized on its own step, so the two bursts of a pair take about the same time.
    That also cancels a fixed per-call cost ``c`` of the arms (a ``fit`` call per burst): with
    ``n_a * t_a = n_b * t_b = T``, ``(t_a + c / n_a) / (t_b + c / n_b) = t_a / t_b`` exactly,
    where equal step counts would bias the ratio towards 1.
    """
    for_steps = math.ceil(min_steps / TARGET_PAIRS)
    if per_step_ms <= 0.0:
        return max(1, for_steps)
    for_time = math.ceil(min_seconds * MS_PER_S / TARGET_PAIRS / per_step_ms)
    return max(1, for_steps, for_time)


def _next_burst(arm: _Arm, burst_steps: int | None, min_seconds: float, min_steps: int) -> int:
    """Steps of the arm's next burst: ``burst_steps``; or, when that is None, 1 for the first
    burst and then :func:`_auto_burst` of the median step of the arm's bursts so far (robust to
    one slow first step)."""
    if burst_steps is not None:
        return burst_steps
    if not arm.per_step_ms:
        return 1
    return _auto_burst(median(arm.per_step_ms), min_seconds, min_steps)


def measure_paired(
    run_a: Arm,
    run_b: Arm,
    *,
    clock: Callable[[], float] = time.perf_counter,
    min_steps: int = MIN_STEPS,
    min_seconds: float = MIN_SECONDS,
    burst_steps: int | None = None,
    warmup: int = 1,
    budget_s: float = BUDGET_S,
    max_pairs: int = MAX_PAIRS,
    level: float = 0.90,
    seed: int = 0,
) -> PairedResult:
    """Time two arms as interleaved bursts A B A B ... and compare them pair by pair.

    Each arm first runs ``warmup`` steps of its own, untimed (tracing, caches). Then bursts
    alternate, A then B, each burst timed as a whole with ``clock``; a burst of A and the burst
    of B after it form one pair, and each burst's per-step time is its time / the steps it ran.
    It stops once **each** arm has at least ``min_steps`` timed steps **and** ``min_seconds`` of
    timed time (so whichever is longer), or earlier when the next pair would overrun
    ``budget_s`` (counted from the call, warm-ups included; each burst of the next pair is
    predicted from its arm's last per-step time) or ``max_pairs`` pairs are reached; then the
    result's ``cut_short`` says why, with the figures.

    Args:
        run_a: arm A, ``run_a(n_steps)``: runs ``n_steps`` steps and returns None, or returns
            the steps it actually ran (an arm with ``steps_per_execution=16`` may round up to a
            multiple of 16; one at the end of its data may run fewer). Put the current setting
            here.
        run_b: arm B, the same; the candidate (``ratio > 1``: B is faster per step).
        clock: seconds, monotonic (``time.perf_counter``); injectable for tests.
        min_steps: timed steps each arm needs at least.
        min_seconds: timed seconds each arm needs at least.
        burst_steps: steps per burst, both arms; None sizes bursts automatically: the first
            pair runs one step per arm, later bursts of each arm enough steps (sized on that
            arm's median step so far) to reach ``min_steps`` and ``min_seconds`` in about
            :data:`TARGET_PAIRS` pairs, so the two bursts of a pair take about as long.
        warmup: untimed steps of each arm before its first burst (0: none).
        budget_s: wall seconds the whole measurement may take.
        max_pairs: most pairs.
        level: coverage of the interval (0.90: 90%).
        seed: seed of the bootstrap.

    Returns:
        The paired result in milliseconds per step (``unit == "ms"``).

    Raises:
        ValueError: an option is out of range, or an arm ran no step in a burst.
        TypeError: an arm returned something else than None or a step count.
        PairedTimingError: the budget ran out before a single pair was measured.
    """
    _check_options(min_steps, min_seconds, burst_steps, warmup, budget_s, max_pairs)
    arms = (_Arm(run_a, "A", [], []), _Arm(run_b, "B", [], []))
    start = clock()
    if warmup:
        for arm in arms:
            _steps_run(arm.run(warmup), warmup, arm.name)
    cut_short = _run_pairs(
        arms, clock, start, budget_s, min_steps, min_seconds, burst_steps, max_pairs
    )
    if not arms[0].steps:
        raise PairedTimingError(cut_short or "no pair measured")
    if cut_short is not None:
        cut_short += "; " + _shortfall(arms, min_steps, min_seconds)
    return paired_from_samples(
        arms[0].per_step_ms,
        arms[1].per_step_ms,
        a_steps=arms[0].steps,
        b_steps=arms[1].steps,
        level=level,
        seed=seed,
        cut_short=cut_short,
    )


def _run_pairs(
    arms: Sequence[_Arm],
    clock: Callable[[], float],
    start_s: float,
    budget_s: float,
    min_steps: int,
    min_seconds: float,
    burst_steps: int | None,
    max_pairs: int,
) -> str | None:
    """Run pairs of bursts until both arms have their steps and time; returns None then, or
    why it stopped before (the pair limit, or a next pair predicted to end past the budget)."""
    while not all(arm.done(min_steps, min_seconds) for arm in arms):
        pairs = len(arms[0].steps)
        if pairs >= max_pairs:
            return f"max_pairs: stopped at {pairs} pairs"
        sizes = [_next_burst(arm, burst_steps, min_seconds, min_steps) for arm in arms]
        spent_s = clock() - start_s
        predicted_s = sum(arm.predict_s(n) for arm, n in zip(arms, sizes, strict=True))
        if spent_s + predicted_s > budget_s:
            return f"budget: {spent_s:.2f} s of {budget_s:.2f} s spent after {pairs} pairs"
        for arm, n in zip(arms, sizes, strict=True):
            arm.burst(n, clock)
    return None


def _shortfall(arms: Sequence[_Arm], min_steps: int, min_seconds: float) -> str:
    """What each arm had against what it needed, for ``cut_short``."""
    parts = [
        f"{arm.name} {sum(arm.steps)} steps in {arm.timed_s:.2f} s"
        for arm in arms  # e.g. "A 4 steps in 0.40 s"
    ]
    return ", ".join(parts) + f" (wanted {min_steps} steps and {min_seconds:.2f} s each)"


def paired_from_samples(
    a_values: Sequence[float],
    b_values: Sequence[float],
    *,
    a_steps: Sequence[int] | None = None,
    b_steps: Sequence[int] | None = None,
    level: float = 0.90,
    resamples: int = 2000,
    seed: int = 0,
    unit: str = "ms",
    cut_short: str | None = None,
) -> PairedResult:
    """A paired result from values already measured in alternation: ``a_values[i]`` and
    ``b_values[i]`` are the i-th pair (e.g. ``--verify``: the median step of the original and of
    the fixed copy, in processes run A B A B).

    Args:
        a_values: arm A's value of each pair (a time per step, in ``unit``), positive.
        b_values: arm B's value of each pair, positive, as many as ``a_values``.
        a_steps: steps behind each value of A (default: 1 each).
        b_steps: steps behind each value of B (default: 1 each).
        level: coverage of the interval (0.90: 90%).
        resamples: bootstrap resamples.
        seed: seed of the bootstrap.
        unit: the unit of the values.
        cut_short: why the measurement stopped early, if it did.

    Returns:
        The result, ``ratio`` = median of ``a / b`` per pair (> 1: B is faster).

    Raises:
        ValueError: no pairs, arms of different lengths, a value that is not positive, or a
            step count below 1 (a step list of another length fails in ``PairedResult``).
    """
    a, b = tuple(float(v) for v in a_values), tuple(float(v) for v in b_values)
    if not a or len(a) != len(b):
        raise ValueError(f"need as many values of A as of B, at least one: {len(a)} and {len(b)}")
    if min(a) <= 0.0 or min(b) <= 0.0:
        raise ValueError("paired values must be positive")
    steps_a = tuple(a_steps) if a_steps is not None else (1,) * len(a)
    steps_b = tuple(b_steps) if b_steps is not None else (1,) * len(b)
    if min(steps_a + steps_b) < 1:
        raise ValueError("every value must rest on at least one step")
    ratios = [x / y for x, y in zip(a, b, strict=True)]
    low, high = bootstrap_median_interval(ratios, level=level, resamples=resamples, seed=seed)
    return PairedResult(
        median_a=median(a),
        median_b=median(b),
        ratio=median(ratios),
        low=low,
        high=high,
        pairs=len(a),
        level=level,
        spread_a=relative_spread(a),
        spread_b=relative_spread(b),
        a_values=a,
        b_values=b,
        a_steps=steps_a,
        b_steps=steps_b,
        unit=unit,
        cut_short=cut_short,
    )


def throughput_ratio(result: PairedResult, batch_a: int, batch_b: int) -> Interval:
    """B's samples/s over A's samples/s, with its interval, when the arms' batches differ.

    Per pair, ``(batch_b / time_b) / (batch_a / time_a) = (time_a / time_b) * batch_b /
    batch_a``: the paired step-time ratio scaled by a constant, so its median and the bootstrap
    quantiles scale by the same constant (both are equivariant under a positive scale) and the
    interval is exact, not an approximation. This, not the step-time ratio, is the gain of a
    larger batch (RD301: "a probe at 2x/4x the batch gives >= 1.5x samples/s"): the step gets
    longer while samples/s rise.

    Raises:
        ValueError: a batch size below 1.
    """
    if batch_a < 1 or batch_b < 1:
        raise ValueError(f"batch sizes must be >= 1, not {batch_a} and {batch_b}")
    scale = batch_b / batch_a
    return Interval(
        result.ratio * scale,
        result.low * scale,
        result.high * scale,
        result.level,
        result.widen_factor,
    )


def samples_per_s(per_step_ms: float, batch_size: int) -> float:
    """Throughput of a step of ``per_step_ms`` over ``batch_size`` samples.

    Raises:
        ValueError: a non-positive step time or batch size.
    """
    if per_step_ms <= 0.0 or batch_size < 1:
        raise ValueError(f"need a positive step time and batch: {per_step_ms}, {batch_size}")
    return batch_size * MS_PER_S / per_step_ms
