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
    assert dispatch.compute_slowdown(busy(SPE, 2.0)) == pytest.approx(3.0)  # capped: widen


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
    assert rows["under load, bias taken out"].startswith("the pairs' upper bound 1.16x reads 1.3")
    assert "2.00x faster" in rows["under load, bias taken out"]


def test_rd403_under_load_stays_absent_where_no_bias_reaches_the_cut_off():
    """A model whose dispatch is a few percent of its step: even with the compute 2x faster the
    share stays far below 20%, so the load does not make every model's RD403 inconclusive."""
    f = spe_facts(1.02, 1.01, 1.03)
    f.run.machine = [busy(SPE)]
    assert run(f, "RD403")[1] == []


def test_rd403_at_a_users_steps_per_execution_reads_the_bias_at_that_value():
    """compile(steps_per_execution=4): the cost left per step is (r - 1) / 3 of the step at 4;
    the bias bound is taken at per = 4, not 16."""
    f = facts(step=3.0, compute=2.4, spe=4)
    f.probes.spe_probe = [
        ProbePoint(1, 3.8),
        ProbePoint(4, 3.8 / 1.6, paired=paired(1.6, 1.58, 1.62, 3.8, 3.8 / 1.6, SPE)),
    ]
    # the step at 4 is 79% of the real step: (1.62 - 1) / 3 x 0.79 = 16%, below 20%
    assert run(f, "RD403")[1] == []
    f.run.machine = [busy(SPE)]
    _, (finding,) = run(f, "RD403")  # 1.62x -> 2.03x at per 4: (1.03 / 3) x 0.79 = 27%
    assert finding.severity is Severity.INFO and "inconclusive: " in finding.message
    assert "steps_per_execution=16" in finding.fix.code  # 4 N
    row = {e.label: e.value for e in finding.evidence}["under load, bias taken out"]
    assert f"{dispatch.unloaded_ratio(1.62, 4, 2.0):.2f}x" in row
    assert dispatch.unloaded_ratio(1.62, 16, 2.0) > dispatch.unloaded_ratio(1.62, 4, 2.0)


def test_rd301_under_load_reads_the_bound_where_no_single_pair_reached_the_cut_off():
    """The demo's batch 256 over 64 under load at 1.49x, with pairs 1.40-1.49x: no pair past
    1.5x, but the compute 2x faster puts the upper bound at 1.84x: inconclusive, not absent."""
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
