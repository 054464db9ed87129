"""Under load a fixed-cost ratio reads low (``rnndoctor.dispatch.unloaded_ratio``): RD403 and
RD301 read their pairs' upper bound with the load's slowdown taken out of the compute, so that a
finding the load pushed below its cut-off is "inconclusive", not absent (issue 11: under one
busy core no finding disappears at warning or above). Pure: fixture facts, no TensorFlow.

The fixtures are the under-load runs in the README's table at 68a0856:
tests/scripts/fit_loop_predict.py's RD403 ratio 1.29–1.40x idle and 1.13–1.15x under one busy
core; the demo's batch-size ratio 1.8–1.9x idle and 1.49x under load.
"""

from __future__ import annotations

import pytest
from test_rules_input_batch import facts, run
from test_trust_rules import paired

from rnndoctor import dispatch
from rnndoctor.facts import MachinePhase, ProbePoint
from rnndoctor.findings import Severity

SPE = "steps_per_execution probe"


def busy(phase: str, foreign_cores: float = 1.0, cpus: int = 2) -> MachinePhase:
    """A phase with ``foreign_cores`` taken by other processes, as the capture records it."""
    share = foreign_cores / cpus
    widen = min(3.0, 1.0 + foreign_cores)
    return MachinePhase(phase, share, foreign_cores, 2.0, cpus, 8.0, True, widen, "noisy machine")


def ratio(c: float, d: float, per: float) -> float:
    """The model's ratio: a fixed cost ``d`` once per unit of compute ``c`` in arm A, once per
    ``per`` units in arm B."""
    return (c + d) / (c + d / per)


@pytest.mark.parametrize("per", [2.0, 4.0, 16.0])
@pytest.mark.parametrize("slowdown", [1.0, 1.5, 2.0, 3.0])
def test_taking_the_slowdown_out_of_the_compute_recovers_the_idle_ratio(per, slowdown):
    for c, d in ((1.0, 0.05), (1.0, 0.4), (2.0, 3.0)):
        idle, loaded = ratio(c, d, per), ratio(c * slowdown, d, per)
        assert loaded <= idle
        assert dispatch.unloaded_ratio(loaded, per, slowdown) == pytest.approx(idle, rel=1e-12)


def test_the_bound_matches_the_loaded_runs_idle_figures():
    assert 1.26 < dispatch.unloaded_ratio(1.14, 16, 2.0) < 1.30  # RD403: idle 1.29-1.40x
    assert 1.80 < dispatch.unloaded_ratio(1.49, 4, 2.0) < 1.90  # RD301: idle 1.8-1.9x


def test_outside_the_model_the_ratio_comes_back_unchanged():
    assert dispatch.unloaded_ratio(0.9, 16, 2.0) == 0.9  # no fixed cost to amortise
    assert dispatch.unloaded_ratio(1.0, 16, 2.0) == 1.0
    assert dispatch.unloaded_ratio(5.0, 4, 2.0) == 5.0  # past the model's limit (per)
    with pytest.raises(ValueError):
        dispatch.unloaded_ratio(1.2, 1, 2.0)
    with pytest.raises(ValueError):
        dispatch.unloaded_ratio(1.2, 16, 0.5)


def test_the_slowdown_is_what_the_others_leave_the_compute():
    assert dispatch.compute_slowdown(None) == 1.0
    quiet = MachinePhase(SPE, 0.05, 0.1, 0.3, 2, 8.0, False, 1.0, "quiet machine")
    assert dispatch.compute_slowdown(quiet) == 1.0
    assert dispatch.compute_slowdown(busy(SPE)) == pytest.approx(2.0)  # 2 CPUs, one busy
    assert dispatch.compute_slowdown(busy(SPE, 0.5)) == pytest.approx(2 / 1.5)
    assert dispatch.compute_slowdown(busy(SPE, 1.0, cpus=16)) == pytest.approx(16 / 15)
    # 4 CPUs' worth (2 / 0.5) capped at the phase's widen factor, 1 + 1.5 = 2.5
    assert dispatch.compute_slowdown(busy(SPE, 1.5)) == pytest.approx(2.5)
    assert dispatch.compute_slowdown(busy(SPE, 2.0)) == pytest.approx(3.0)  # none left: widen


def spe_facts(r: float, low: float, high: float):
    f = facts(step=4.0, compute=3.8)
    f.probes.spe_probe = [
        ProbePoint(1, 3.8),
        ProbePoint(16, 3.8 / r, paired=paired(r, low, high, 3.8, 3.8 / r, SPE)),
    ]
    return f


def test_rd403_under_load_is_inconclusive_where_the_bias_can_hide_the_share():
    """fit_loop_predict.py under one busy core: 1.14x (1.12-1.16x), a share of 11% against the
    20% cut-off. Quiet, that is no finding; under load the load's slowdown taken out of the
    compute reaches 1.32x (share 23%), so the finding is inconclusive, not absent."""
    f = spe_facts(1.14, 1.12, 1.16)
    assert run(f, "RD403")[1] == []
    f.run.machine = [busy(SPE)]
    _, (finding,) = run(f, "RD403")
    assert finding.severity is Severity.INFO and "inconclusive: " in finding.message
    assert finding.speedup is None
    rows = {e.label: e.value for e in finding.evidence}
    bound = dispatch.unloaded_ratio(1.16, 16, 2.0)
    assert rows["under load, bias taken out"].startswith(
        f"the pairs' upper bound 1.16x (share 13%) reads {bound:.2f}x (share 23%)"
    )
    assert "2.00x faster" in rows["under load, bias taken out"]


def test_a_quiet_probe_phase_leaves_rd403_as_it_was_whatever_else_widens_the_share():
    """A drifting window or a noisy compute-only probe widens RD403's share, but the load's bias
    is about the steps_per_execution probe's own phase: quiet there, the median decides as
    before (no finding at 11%, although the pairs' upper bound 1.36x would reach 20%), and no
    "under load" row is shown."""
    f = spe_facts(1.14, 1.10, 1.36)
    f.steps.drifted, f.steps.drift = True, "the second half 12% slower"
    f.run.machine = [busy("compute-only probe")]
    assert run(f, "RD403")[1] == []
    f = spe_facts(1.5, 1.45, 1.55)  # a clear warning on a quiet machine: no under-load row
    _, (finding,) = run(f, "RD403")
    assert finding.severity is Severity.WARNING
    assert "under load, bias taken out" not in {e.label for e in finding.evidence}


def test_under_load_a_clear_finding_stays_clear():
    """The bound only turns "no finding" into "inconclusive": a share that clears its cut-off
    by more than the load's widening still warns (4.0x, share 71%: an error even at 1 / 2)."""
    f = spe_facts(4.0, 3.9, 4.1)
    f.run.machine = [busy(SPE)]
    _, (finding,) = run(f, "RD403")
    assert finding.severity in (Severity.WARNING, Severity.ERROR)
    assert finding.speedup is not None


def test_rd403_under_load_stays_absent_where_no_bias_reaches_the_cut_off():
    """A model whose dispatch is a few percent of its step: even with the compute 2x faster the
    share stays far below 20%, so the load does not make every model's RD403 inconclusive."""
    f = spe_facts(1.02, 1.01, 1.03)
    f.run.machine = [busy(SPE)]
    assert run(f, "RD403")[1] == []


def test_rd403_at_a_users_steps_per_execution_reads_the_bias_at_that_value():
    """compile(steps_per_execution=4): the cost left per step is (r - 1) / 3 of the step at 4,
    and the bias bound is taken at per = 4, not at the 16 of an uncompiled model: 1.30x
    (1.28-1.32x) under load is 19% at per 4 (no finding) where per 16 would give 20%."""
    f = facts(step=3.0, compute=2.4, spe=4)

    def at(r: float, low: float, high: float) -> None:
        f.probes.spe_probe = [
            ProbePoint(1, 3.8),
            ProbePoint(4, 3.8 / r, paired=paired(r, low, high, 3.8, 3.8 / r, SPE)),
        ]

    at(1.30, 1.28, 1.32)
    scale = (3.8 / 1.30) / 3.0  # the step at 4 over the real step
    assert scale * (dispatch.unloaded_ratio(1.32, 16, 2.0) - 1) / 3 >= 0.2  # per 16: reaches
    assert scale * (dispatch.unloaded_ratio(1.32, 4, 2.0) - 1) / 3 < 0.2  # per 4: does not
    f.run.machine = [busy(SPE)]
    assert run(f, "RD403")[1] == []
    at(1.6, 1.58, 1.62)
    f.run.machine = []
    # the step at 4 is 79% of the real step: (1.62 - 1) / 3 x 0.79 = 16%, below 20%
    assert run(f, "RD403")[1] == []
    f.run.machine = [busy(SPE)]
    _, (finding,) = run(f, "RD403")  # 1.62x -> 2.03x at per 4: (1.03 / 3) x 0.79 = 27%
    assert finding.severity is Severity.INFO and "inconclusive: " in finding.message
    assert "steps_per_execution=16" in finding.fix.code  # 4 N
    row = {e.label: e.value for e in finding.evidence}["under load, bias taken out"]
    assert f"reads {dispatch.unloaded_ratio(1.62, 4, 2.0):.2f}x (share 27%)" in row


def test_rd301_under_load_reads_the_bound_where_no_single_pair_reached_the_cut_off():
    """Batch 256 over 64 under load at 1.40x, pairs 1.40-1.49x (a made-up case near the demo's
    loaded 1.49x): no pair past 1.5x, so the pairs alone leave no finding, but the compute 2x
    faster puts the upper bound at 1.84x: inconclusive, not absent."""
    f = facts()
    pair = paired(0.35, 0.35, 0.3725, 300.0, 857.0, "batch-size probe")  # 1.40-1.49x samples/s
    f.probes.batch_probe = [ProbePoint(64, 300.0, 213.0, 10),
                            ProbePoint(256, 857.0, 299.0, 10, paired=pair)]  # fmt: skip
    assert run(f, "RD301")[1] == []
    f.run.machine = [busy("batch-size probe")]
    _, (finding,) = run(f, "RD301")
    assert finding.severity is Severity.INFO and "inconclusive: " in finding.message
    row = {e.label: e.value for e in finding.evidence}["under load, bias taken out"]
    assert row.startswith("the pairs' upper bound 1.49x reads 1.84x")
    pair.ratio, pair.low, pair.high = 0.27, 0.265, 0.275  # 1.06-1.10x: the bound is 1.19x
    assert run(f, "RD301")[1] == []


def verify_lstm_session(noisy: bool):
    """tests/scripts/verify_lstm.py in a loaded stability run: window median 3.87 ms (p90 4.2
    ms), the real step timed beside the cached one 3.66 ms, the batch-8 point 4.98 ms; the
    compute-only probe's phase noisy (one busy core) or quiet."""
    from rnndoctor.capture import probes
    from rnndoctor.capture.session import CaptureSession
    from rnndoctor.capture.step_window import WindowOptions
    from rnndoctor.facts import Facts, ProbeFacts, RunInfo, StepTimes

    f = Facts(run=RunInfo(script="x.py", argv=[], cwd="."))
    f.steps = StepTimes(warmup_steps=3, measured_steps=20, median_step_time_ms=3.87,
                        p90_step_time_ms=4.2)  # fmt: skip
    if noisy:
        f.run.machine = [busy("compute-only probe")]
    session = CaptureSession(f, WindowOptions(), None)
    pr = ProbeFacts(batch_probe=[ProbePoint(value=8, step_time_ms=4.98)], real_step_ms=3.66)
    return probes, session, pr


def test_under_load_the_batch_probes_check_allows_for_the_load_as_the_intervals_do():
    probes, session, pr = verify_lstm_session(noisy=False)
    assert probes._batch_inconsistency(session, pr) == (
        "batch 8: compute-only 5 ms > step 4 ms and > the real step 4 ms timed beside it "
        "(beyond the window's noise: p90 / median = 1.09)"
    )
    probes, session, pr = verify_lstm_session(noisy=True)
    assert probes._load_factor(session) == pytest.approx(2.0)
    assert probes._batch_inconsistency(session, pr) is None
    pr.batch_probe[0].step_time_ms = 9.5  # past even the load's allowance (2.17 x 3.87 ms)
    assert probes._batch_inconsistency(session, pr).endswith(
        "(beyond the window's noise: p90 / median = 1.09, x 2.00 for the noisy machine)"
    )


def test_the_running_phase_counts_as_far_as_it_has_gone():
    """The check runs inside the batch-size probe's phase, before that phase is recorded: its
    load so far (``LoadSampler.peek``) counts too."""
    from rnndoctor.machine import LoadSampler

    probes, session, pr = verify_lstm_session(noisy=False)
    session.load_sampler = LoadSampler(
        busy=iter([100.0, 112.0]).__next__,  # 12 CPU s busy over 6 s on 2 CPUs...
        own=iter([10.0, 16.0]).__next__,  # ...6 of them ours: one foreign core
        clock=iter([0.0, 6.0]).__next__,
        loadavg=lambda: (3.0, 2.0, 1.0),
        cpu_count=lambda: 2,
    ).start()
    assert probes._batch_inconsistency(session, pr) is None
    assert session.load_sampler._before is not None  # peeked, still sampling


def test_the_compute_only_probes_own_check_is_not_widened():
    """Its paired real arm is timed in its own phase, beside the cached one: a compute-only step
    past the real step stays inconsistent on a noisy machine too (the imdb case of issue 11)."""
    probes, session, _ = verify_lstm_session(noisy=True)
    from test_trust_rules import paired as pair

    from rnndoctor.facts import ProbeFacts

    arms = pair(0.61, 0.6, 0.62, 3.66, 6.0, "compute-only probe")
    pr = ProbeFacts(compute_only_ms=6.0, real_step_ms=3.66, compute_paired=arms)
    assert probes.inconsistency(session, pr).startswith("compute-only 6 ms > step 4 ms")
