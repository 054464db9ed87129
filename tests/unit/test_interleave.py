"""The interleaved rounds of one ``fit`` (rnndoctor.capture.interleave): which arm and round each
timed execution belongs to, the bursts' sizes, and when the rounds stop (pure Python)."""

from __future__ import annotations

import pytest

from rnndoctor.capture import interleave, pairs


def _feed(clock: interleave.RoundClock, ends: list[tuple[int, float]]) -> list:
    rounds = []
    for batch, now in ends:
        done = clock.feed(batch, now)
        if done is not None:
            rounds.append(done)
    return rounds


def test_each_step_goes_to_its_arm_and_round_after_the_warm_up():
    plan = interleave.RoundPlan(bursts=(2, 1), warmup=1)
    assert plan.choices() == [0, 0, 1] and plan.length == 3
    clock = interleave.RoundClock(plan)
    # step 0: warm-up (arm 0), then rounds: steps 1-2 arm 0 (10 ms each), step 3 arm 1 (40 ms)
    ends = [(0, 0.0), (1, 0.010), (2, 0.020), (3, 0.060), (4, 0.070), (5, 0.080), (6, 0.120)]
    rounds = _feed(clock, ends)
    assert len(rounds) == 2
    for done in rounds:
        assert [ms for ms, _ in done[0]] == pytest.approx([10.0, 10.0])
        assert [ms for ms, _ in done[1]] == pytest.approx([40.0])
    assert clock.last_round_s == pytest.approx(0.060)


def test_multi_step_executions_count_every_step_they_cover():
    plan = interleave.plan([2.0, 2.0], steps_per_execution=8)
    assert all(b % 8 == 0 for b in plan.bursts) and plan.warmup == 8
    clock = interleave.RoundClock(interleave.RoundPlan(bursts=(8, 16), warmup=8))
    # Keras reports each execution at its last step: 7 (warm-up), 15, 23, 31
    rounds = _feed(clock, [(7, 0.0), (15, 0.016), (23, 0.048), (31, 0.080)])
    (done,) = rounds
    assert done[0] == [(pytest.approx(2.0), 8)]
    assert [n for _, n in done[1]] == [8, 8] and [ms for ms, _ in done[1]] == pytest.approx([4, 4])


def test_bursts_are_sized_to_a_tenth_of_a_second_per_arm():
    plan = interleave.plan([250.0, 2.0, 40.0])
    assert plan.bursts == (1, 50, 3)
    with pytest.raises(ValueError):
        interleave.plan([0.0])
    with pytest.raises(ValueError):
        interleave.RoundPlan((1, 1), 1).arm_of(2)


def _arm(name: str, steps: int, seconds: float) -> pairs.ArmRecord:
    arm = pairs.ArmRecord(name, lambda: [])
    arm.add([(seconds * 1000.0 / steps, steps)])
    return arm


def test_stop_reason_done_round_limit_and_allowance():
    full = [_arm("a", 10, 1.0), _arm("b", 12, 1.5)]
    assert pairs.stop_reason(full, 5.0, 0.1) == "done"
    assert pairs.finish_reason("done", full) is None
    short = [_arm("a", 4, 0.4), _arm("b", 4, 0.4)]
    assert pairs.stop_reason(short, 5.0, 0.2) is None
    assert pairs.stop_reason(short, 0.1, 0.2).startswith("out of the comparison's time allowance")
    assert pairs.stop_reason(short, 5.0, 0.2, max_rounds=1) == "stopped at 1 rounds"
    why = pairs.finish_reason(pairs.stop_reason(short, 0.0, 0.0), short)
    assert "a 4 steps in 0.40 s" in why and "wanted 10 steps" in why


def test_an_allowance_that_ends_short_of_an_interval_goes_on_within_the_phase_budget():
    """The demo's batch-size probe in an idle stability run: 2 pairs of 0.4-1.0 s steps when
    its 9 s allowance ended, so its RD301 had no interval ("inconclusive: 1.6x (0.2-16.4x)")."""
    from rnndoctor.paired import INTERVAL_PAIRS
    from rnndoctor.rules._measured import MIN_PAIRS

    assert INTERVAL_PAIRS == MIN_PAIRS  # the pairs the rules need for an interval
    two = [_arm("64", 2, 1.0), _arm("128", 2, 1.6)]
    two[0].add([(500.0, 2)])
    two[1].add([(800.0, 2)])  # 2 rounds, short of the floor's 10 steps
    out = "out of the comparison's time allowance"
    assert pairs.stop_reason(two, 0.0, 3.0).startswith(out)  # no phase budget given: as before
    assert pairs.stop_reason(two, 0.0, 3.0, phase_left_s=10.0) is None  # a third round
    assert pairs.stop_reason(two, 0.0, 3.0, phase_left_s=2.0).startswith(out)  # it cannot fit
    for arm in two:
        arm.add([(500.0, 2)])  # the third pair: the allowance stops the rounds again
    assert pairs.stop_reason(two, 0.0, 3.0, phase_left_s=10.0).startswith(out)
    one = [_arm("compute-only", 2, 1.0)]  # one arm: no pairs to wait for
    assert pairs.stop_reason(one, 0.0, 0.5, phase_left_s=10.0).startswith(out)


def test_alternate_takes_rounds_past_the_allowance_until_the_pairs_give_an_interval():
    now = [0.0]

    def slow_burst():
        now[0] += 3.0  # each burst: 3 s of wall time, one step
        return [(3000.0, 1)]

    a, b = pairs.ArmRecord("A", slow_burst), pairs.ArmRecord("B", slow_burst)
    phase = lambda: 30.0 - now[0]  # noqa: E731
    why = pairs.alternate([a, b], lambda: 10.0 - now[0], clock=lambda: now[0], phase_left=phase)
    assert len(a.steps) == len(b.steps) == 3 and "allowance" in why  # 18 s: past 10, within 30
    ratio = pairs.pair(a, b, phase=None)
    assert ratio.pairs == 3


def test_the_phase_budget_still_stops_rounds_short_of_an_interval():
    now = [0.0]

    def slow_burst():
        now[0] += 3.0
        return [(3000.0, 1)]

    a, b = pairs.ArmRecord("A", slow_burst), pairs.ArmRecord("B", slow_burst)
    phase = lambda: 14.0 - now[0]  # noqa: E731  room for 2 rounds of 6 s, not a third
    why = pairs.alternate([a, b], lambda: 4.0 - now[0], clock=lambda: now[0], phase_left=phase)
    assert len(a.steps) == 2
    assert why.startswith("out of the comparison's time allowance (8.0 s past)")
    # a first round run by the caller (not timed as a round) counts by its bursts' timed time
    two = [_arm("A", 1, 3.0), _arm("B", 1, 3.0)]
    assert pairs.stop_reason(two, 0.0, 0.0, phase_left_s=5.0).startswith("out of")  # 6 s > 5
    assert pairs.stop_reason(two, 0.0, 0.0, phase_left_s=7.0) is None
