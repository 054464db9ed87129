"""The probes' interleaved bursts (rnndoctor.capture.pairs), with fake bursts: no TensorFlow."""

from __future__ import annotations

import pytest

from rnndoctor.capture import pairs


def arm(name: str, ms: float, steps: int = 2, spe: int = 1) -> pairs.ArmRecord:
    return pairs.ArmRecord(name, lambda: [(ms, spe)] * steps)


def test_alternate_runs_until_each_arm_has_ten_steps_and_one_second():
    a, b = arm("A", 100.0), arm("B", 50.0)
    assert pairs.alternate([a, b], lambda: 60.0) is None
    assert sum(a.steps) >= 10 and a.timed_s >= 1.0 and b.timed_s >= 1.0
    ratio = pairs.pair(a, b, phase="compute-only probe")
    assert ratio.ratio == pytest.approx(2.0) and ratio.low <= 2.0 <= ratio.high
    assert ratio.median_a_ms == 100.0 and ratio.steps_b == sum(b.steps)


def test_steps_per_execution_intervals_count_every_step_they_cover():
    many = arm("16", 1.0, steps=2, spe=16)  # 2 executions of 16 steps, 1 ms per step
    many.add(many.burst())
    assert many.steps == [32] and many.timed_s == pytest.approx(0.032)


def test_a_budget_or_a_failing_arm_cuts_short_with_the_figures():
    a, b = arm("A", 10.0), arm("B", 10.0)
    why = pairs.alternate([a, b], lambda: 0.0)
    assert why.startswith("out of the comparison's time allowance") and "A 0 steps" in why
    bad = pairs.ArmRecord("B", lambda: [])
    why = pairs.alternate([arm("A", 10.0), bad], lambda: 60.0)
    assert "arm B failed" in why and pairs.pair(arm("A", 1.0), bad, phase=None) is None


def test_a_round_that_would_overrun_the_allowance_does_not_start():
    now = [0.0]

    def slow_burst():
        now[0] += 3.0  # each burst: 3 s of wall time
        return [(100.0, 1)]

    a, b = pairs.ArmRecord("A", slow_burst), pairs.ArmRecord("B", slow_burst)
    why = pairs.alternate([a, b], lambda: 10.0 - now[0], clock=lambda: now[0])
    assert len(a.steps) == 1 and "allowance" in why  # after 6 s, 4 s left < a 6 s round


def noisy_arm(name: str, values: list[float]) -> pairs.ArmRecord:
    """An arm whose bursts cycle through ``values`` (ms per step), one 1 s burst each."""
    it = iter(values * 100)
    return pairs.ArmRecord(name, lambda: [(next(it), int(1000 / values[0]))])


def test_a_precise_comparison_goes_on_past_the_floor_until_its_interval_is_tight():
    # B's bursts scatter by +-15%: at the floor (1 s of bursts each, one round) the interval of
    # A / B cannot be formed; asked for precision, the rounds go on until it is within 20%
    a, b = noisy_arm("A", [2.0]), noisy_arm("B", [1.0, 1.15, 0.85, 1.05, 0.95])
    assert pairs.alternate([a, b], lambda: 60.0) is None
    assert len(a.steps) == 1  # the floor: one round
    a, b = noisy_arm("A", [2.0]), noisy_arm("B", [1.0, 1.15, 0.85, 1.05, 0.95])
    assert pairs.alternate([a, b], lambda: 60.0, precise=True) is None  # done, not cut short
    assert len(a.steps) > 3 and not pairs.imprecise([a, b])
    ratio = pairs.pair(a, b, phase=None)
    assert ratio.high - ratio.low <= pairs.PRECISE_WIDTH * ratio.ratio
    # steady arms stop at the floor even when precision is asked for
    a, b = arm("A", 100.0), arm("B", 50.0)
    pairs.alternate([a, b], lambda: 60.0)
    floor = len(a.steps)
    a, b = arm("A", 100.0), arm("B", 50.0)
    pairs.alternate([a, b], lambda: 60.0, precise=True)
    assert len(a.steps) == floor
    # out of rounds after the floor: the floor was met, so it is done, not cut short
    a, b = noisy_arm("A", [2.0]), noisy_arm("B", [1.0, 2.0, 0.5])
    assert pairs.alternate([a, b], lambda: 60.0, precise=True, max_rounds=4) is None
    assert len(a.steps) == 4


def test_a_second_stage_runs_once_asked_and_only_when_the_interval_straddles_a_cutoff():
    asked = []

    def straddles(answer: bool):
        def undecided(arms):
            asked.append(min(len(a.steps) for a in arms))
            return answer

        return undecided

    # decided at the first stage: the rounds stop there, the question asked once
    a, b = noisy_arm("A", [2.0]), noisy_arm("B", [1.0, 1.1, 0.9])
    assert pairs.alternate([a, b], lambda: 60.0, undecided=straddles(False)) is None
    first = len(a.steps)
    assert asked == [first] and first < pairs.MAX_ROUNDS
    # undecided: the rounds go on to MAX_ROUNDS, and the question is not asked again
    asked.clear()
    a, b = noisy_arm("A", [2.0]), noisy_arm("B", [1.0, 1.1, 0.9])
    assert pairs.alternate([a, b], lambda: 60.0, undecided=straddles(True)) is None
    assert asked == [first] and len(a.steps) == len(b.steps) == pairs.MAX_ROUNDS
    # asked only once the floor is met: a comparison cut short is never asked
    asked.clear()
    a, b = arm("A", 10.0), arm("B", 10.0)
    assert pairs.alternate([a, b], lambda: 0.0, undecided=straddles(True)) is not None
    assert asked == []


def test_a_second_stage_ends_with_the_allowance_and_is_then_done_not_cut_short():
    now = [0.0]

    def burst():
        now[0] += 0.5  # each burst: 0.5 s of wall time, 1 s of timed steps
        return [(100.0, 10)]

    a, b = pairs.ArmRecord("A", burst), pairs.ArmRecord("B", burst)
    why = pairs.alternate([a, b], lambda: 5.0 - now[0], clock=lambda: now[0],
                          undecided=lambda arms: True)  # fmt: skip
    assert why is None  # the floor was met at the first round
    assert 1 < len(a.steps) < pairs.MAX_ROUNDS and now[0] <= 5.0


def test_a_failing_second_stage_test_leaves_the_first_stages_pairs_standing():
    def broken(arms):
        raise ZeroDivisionError("a 0 ms burst")

    a, b = noisy_arm("A", [2.0]), noisy_arm("B", [1.0, 1.1, 0.9])
    assert pairs.alternate([a, b], lambda: 60.0, undecided=broken) is None
    assert 1 <= len(a.steps) == len(b.steps) < pairs.MAX_ROUNDS


def _batch_arms(base_ms: float, ratios: dict[int, list[float]], base: int = 64):
    """The batch-size probe's arms: the user's batch ``base`` at ``base_ms`` a step, and each
    larger batch at the step that gives, pair by pair, the listed samples/s ratios."""
    arms = [pairs.ArmRecord(f"batch size {base}", lambda: [(base_ms, 1)])]
    for size, per_pair in ratios.items():
        steps = iter([base_ms * size / base / r for r in per_pair])
        arms.append(pairs.ArmRecord(f"batch size {size}", lambda s=steps: [(next(s), 1)]))
    return arms


def test_the_early_look_stops_where_a_larger_batch_clears_rd301s_cutoff_in_every_pair():
    # the demo's shape: 2b straddles 1.5x, 4b is past it in all 5 pairs; long steps, so the
    # floor (10 steps and 1 s per arm) is far off at 5 pairs
    arms = _batch_arms(400.0, {128: [1.4, 1.6, 1.45, 1.55, 1.5] * 4,
                               256: [1.9, 1.8, 2.0, 1.85, 1.95] * 4})  # fmt: skip
    decided = pairs.ThroughputDecided([64, 128, 256], 1.5)
    why = pairs.alternate(arms, lambda: 600.0, early=pairs.EarlyLook(decided))
    assert [len(a.steps) for a in arms] == [5, 5, 5]
    assert why.startswith(
        "RD301's decision made at 5 pairs, the one early look: batch 256 trains 1.80–2.00x the "
        "samples/s of batch 64 (90% interval), past the 1.5x cut-off;"
    )
    assert pairs.pair(arms[0], arms[2], phase=None).low * 4 == pytest.approx(1.8)


def test_the_early_look_stops_where_every_larger_batch_is_below_the_cutoff():
    arms = _batch_arms(400.0, {128: [1.1, 1.2, 1.15] * 10, 256: [1.3, 1.2, 1.25] * 10})
    look = pairs.EarlyLook(pairs.ThroughputDecided([64, 128, 256], 1.5))
    why = pairs.alternate(arms, lambda: 600.0, early=look)
    assert [len(a.steps) for a in arms] == [5, 5, 5] and look.asked
    assert "every larger batch under the 1.5x cut-off (batch 128 1.20x, batch 256 1.30x)" in why


def test_the_early_look_is_taken_once_and_a_straddle_runs_on_to_the_floor():
    # one pair of five below the cut-off: nothing decided, and no second look at 6, 7, ... pairs
    arms = _batch_arms(400.0, {128: [1.7, 1.8, 1.4, 1.9, 1.75] * 10})
    calls = []

    def test(records):
        calls.append(min(len(r.steps) for r in records))
        return pairs.ThroughputDecided([64, 128], 1.5)(records)

    why = pairs.alternate(arms, lambda: 600.0, early=pairs.EarlyLook(test))
    assert calls == [5] and why is None  # done: 10 steps and 4 s of each arm
    assert [len(a.steps) for a in arms] == [10, 10]


def test_the_early_look_decides_nothing_on_a_noisy_phase():
    arms = _batch_arms(400.0, {256: [1.9, 1.8, 2.0, 1.85, 1.95] * 4})
    decided = pairs.ThroughputDecided([64, 256], 1.5, noisy=lambda: True)
    assert pairs.alternate(arms, lambda: 600.0, early=pairs.EarlyLook(decided)) is None
    assert [len(a.steps) for a in arms] == [10, 10]


def test_a_failing_early_test_lets_the_rounds_go_on():
    def broken(records):
        raise ZeroDivisionError("a test that fails")

    arms = _batch_arms(400.0, {256: [1.9] * 20})
    assert pairs.alternate(arms, lambda: 600.0, early=pairs.EarlyLook(broken)) is None
    assert [len(a.steps) for a in arms] == [10, 10]


def _timed_batch_arms(
    now: list[float], ratios: dict[int, list[float]], base_ms: float = 400.0, call_s: float = 0.0
):
    """:func:`_batch_arms` whose bursts advance the fake clock ``now`` by their timed time, plus
    ``call_s`` of untimed wall time each (a ``fit`` call's own cost)."""
    arms = _batch_arms(base_ms, ratios)
    for record in arms:
        inner = record.burst

        def burst(inner=inner):
            intervals = inner()
            now[0] += sum(ms * n for ms, n in intervals) / 1000.0 + call_s
            return intervals

        record.burst = burst
    return arms


def _rounds(
    ratios: dict[int, list[float]],
    allowance_s: float,
    phase_s: float | None = 600.0,
    extension_s: float = 60.0,
    **arm_kwargs,
):
    """The batch-size probe's rounds of the user's batch 64 against ``ratios`` on a fake clock
    (:func:`_timed_batch_arms`), with RD301's early look at 1.5x: the comparison's allowance
    ``allowance_s``, the phase's budget ``phase_s`` (None: not given), the second stage's
    ``extension_s``. Returns the arms, the look and the stop reason."""
    now = [0.0]
    arms = _timed_batch_arms(now, ratios, **arm_kwargs)
    look = pairs.EarlyLook(pairs.ThroughputDecided([64, 256], 1.5), extension_s=extension_s,
                           clock=lambda: now[0])  # fmt: skip
    phase_left = None if phase_s is None else (lambda: phase_s - now[0])
    why = pairs.alternate(arms, lambda: allowance_s - now[0], clock=lambda: now[0],
                          phase_left=phase_left, early=look)  # fmt: skip
    return arms, look, why


# the demo's shape: one slow pair of five (1.26x) keeps batch 256's interval across RD301's 1.5x
_ONE_SLOW_PAIR = {256: [1.8, 1.26, 1.85, 1.75, 1.9, 1.8, 1.82, 1.78, 1.86, 1.8, 1.79, 1.83]}


def test_an_undecided_early_look_when_the_allowance_ends_runs_a_second_stage_to_ten_pairs():
    # the allowance ends after the 5th round (a round: 0.4 + 0.4 * 4 / 1.8 s, about 1.3 s)
    arms, look, why = _rounds(_ONE_SLOW_PAIR, 7.2)
    assert look.asked and look.decided is None and look.extended_from == 5
    assert [len(a.steps) for a in arms] == [pairs.EXTENDED_PAIRS] * 2
    assert why is None  # done: 10 pairs of 1 step are each arm's 10 steps (and 1 s)
    ratio = pairs.pair(arms[0], arms[1], phase=None)
    assert ratio.low * 4 > 1.5  # the slow pair no longer decides: about the third-lowest pair does
    assert look.second_stage(ratio.pairs) == (
        "the time allowance ended at 5 pairs with the rule's decision not made at the early "
        "look: pairs went on to 10 (at most 10) within one more allowance of 60 s"
    )
    assert look.mark(ratio).second_stage == look.second_stage(ratio.pairs)  # what the probe records
    assert look.mark(None) is None and pairs.EarlyLook(look.test).mark(ratio) == ratio


def test_the_second_stage_stops_at_its_own_allowance_and_at_the_phases_budget():
    arms, look, why = _rounds(_ONE_SLOW_PAIR, 7.2, extension_s=2.7)
    assert [len(a.steps) for a in arms] == [7, 7]  # two rounds of 1.3 s in 2.7 s
    # the stop reason is the second stage's, not the first allowance's (then long past)
    assert why.startswith("out of the second stage's allowance (0.1 s left);")
    arms, look, why = _rounds(_ONE_SLOW_PAIR, 7.2, phase_s=8.5)
    assert [len(a.steps) for a in arms] == [6, 6] and look.second_stage(6) is not None
    assert why.startswith("out of the phase's budget (0.4 s left);")


def test_the_second_stage_stops_at_ten_pairs_short_of_the_floor():
    # 50 ms steps, one per burst, and 1 s of wall time per fit call: 10 pairs are 0.5 s of
    # timed steps in the first arm, short of its floor (1 s), so only the cap ends the rounds
    arms, look, why = _rounds(_ONE_SLOW_PAIR, 11.0, extension_s=600.0, base_ms=50.0, call_s=1.0)
    assert look.extended_from == 5 and [len(a.steps) for a in arms] == [10, 10]
    assert why.startswith("the second stage's 10 pairs reached;")


def test_a_second_stage_from_before_the_early_look_says_so():
    # the allowance ends at the 3 pairs an interval needs, before the look at 5, which then
    # finds the decision made: the two texts agree
    arms, look, why = _rounds({256: [1.9, 1.8, 2.0, 1.85, 1.95] * 4}, 1.0)
    assert look.extended_from == 3 and [len(a.steps) for a in arms] == [5, 5]
    assert why.startswith("RD301's decision made at 5 pairs")
    assert look.second_stage(5) == (
        "the time allowance ended at 3 pairs before the early look at 5: pairs went on to 5 "
        "(at most 10) within one more allowance of 60 s"
    )


def test_no_second_stage_where_the_early_look_decided_or_without_the_phases_budget():
    arms, look, why = _rounds({256: [1.9, 1.8, 2.0, 1.85, 1.95] * 4}, 7.2)  # decided at 5
    assert why.startswith("RD301's decision made at 5 pairs") and look.second_stage(5) is None
    arms, look, why = _rounds(_ONE_SLOW_PAIR, 7.2, phase_s=None, extension_s=float("inf"))
    assert [len(a.steps) for a in arms] == [5, 5] and look.extended_from is None
    assert why.startswith("out of the comparison's time allowance")
