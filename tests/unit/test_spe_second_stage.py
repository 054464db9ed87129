"""The steps_per_execution probe's second stage (issue 11: findings that hold from run to run):
the ratio at which RD403's share reaches its cut-off (rnndoctor.dispatch), the probe's test on
its pairs (capture/probes.py: _Straddle), and the cut-offs handed to the capture child. Pure:
fixture facts and fake bursts, no TensorFlow.

The fixture is written from two idle runs of tests/scripts/fit_loop_predict.py: 1 vs 16 steps
per call gave 1.249x (90% interval 1.213–1.373x, 7 pairs; no finding) and 1.315x
(1.281–1.391x, 5 pairs; RD403 warning), the compute-only probe's real / compute-only ratio 1.03,
so the cut-off of 20% of the step sits at a ratio of 1.259x: inside the first interval.
"""

from __future__ import annotations

import math

import pytest
from test_rules_input_batch import facts, run
from test_trust_rules import paired

from rnndoctor import dispatch
from rnndoctor.capture import pairs
from rnndoctor.capture.probes import _Straddle
from rnndoctor.engine import batch_min_speedup, spe_share_cutoffs
from rnndoctor.facts import ProbePoint
from rnndoctor.findings import Severity
from rnndoctor.options import Options, parse_child_args
from rnndoctor.paired import paired_from_samples


@pytest.mark.parametrize(("value", "compiled"), [(16, 1), (8, 8), (2, 2)])
def test_the_ratio_at_a_share_inverts_the_share_at_a_ratio(value, compiled):
    for scale in (0.3, 0.97, 1.0):
        for share in (0.05, 0.2, 0.29):
            at = dispatch.ratio_at_share(share, scale, value, compiled)
            assert dispatch.share_at_ratio(at, scale, value, compiled) == pytest.approx(share)
    # at 1 step per call the saving is at most the compute-only step's share: never 40% of 30%
    assert dispatch.ratio_at_share(0.4, 0.3, 16, 1) == math.inf


def fit_loop_predict(spe_low: float, spe_ratio: float = 1.28):
    f = facts(step=3.79, compute=3.61)
    f.probes.compute_paired = paired(1.03, 1.01, 1.05, 3.61, 3.5, "compute-only probe")
    timed = paired(spe_ratio, spe_low, 1.39, 3.65, 2.7, "steps_per_execution probe")
    f.probes.spe_probe = [ProbePoint(1, 3.65), ProbePoint(16, 2.7, paired=timed)]
    return f


def test_the_probes_ratio_cut_off_is_where_rd403_stops_clearing():
    f = fit_loop_predict(1.3)
    scale = dispatch.real_scale(f.probes, 3.65, f.steps.median_step_time_ms)
    at = dispatch.ratio_at_share(0.2, scale, 16, 1)
    assert at == pytest.approx(1.259, abs=0.001)
    _, (finding,) = run(fit_loop_predict(at * 1.002), "RD403")
    assert finding.severity is Severity.WARNING
    _, (finding,) = run(fit_loop_predict(at * 0.998), "RD403")
    assert finding.severity is Severity.INFO and "inconclusive: " in finding.message
    assert run(fit_loop_predict(1.2, spe_ratio=at * 0.998), "RD403")[1] == []  # below


def records(a_ms: list[float], b_ms: list[float]) -> list[pairs.ArmRecord]:
    one, many = pairs.ArmRecord("1", list), pairs.ArmRecord("16", list)
    for a, b in zip(a_ms, b_ms, strict=True):
        one.add([(a, 100)])
        many.add([(b, 100)])
    return [one, many]


def straddle(cutoffs=(0.2, 0.5)) -> _Straddle:
    f = fit_loop_predict(1.3)
    arms = [(ProbePoint(1), pairs.ArmRecord("1", list)), (ProbePoint(16), None)]
    return _Straddle(f.probes, f.steps.median_step_time_ms, 1, cutoffs, arms)


def test_the_probe_pairs_on_only_while_its_interval_holds_a_cut_off():
    # ratios 1.20-1.32 around the 1.259x cut-off: undecided
    a = [3.65] * 7
    b = [3.65 / r for r in (1.20, 1.32, 1.24, 1.30, 1.22, 1.29, 1.27)]
    result = paired_from_samples(a, b)
    assert result.low < 1.259 <= result.high
    test = straddle()
    assert test(records(a, b)) is True
    assert "cut-off 20% of the step (a ratio of 1.259x)" in test.why
    # all pairs well above it (and below the 50% cut-off's 2.06x): decided at the first stage
    test = straddle()
    clear = [3.65 / r for r in (1.50, 1.52, 1.49, 1.51, 1.50, 1.53, 1.48)]
    assert test(records(a, clear)) is False
    assert test.why is None
    # no cut-offs handed down (the capture child run by hand), or too few pairs: one stage
    assert straddle(cutoffs=())(records(a, b)) is False
    assert straddle()(records(a[:2], b[:2])) is False


def test_the_cli_hands_rd403s_configured_cut_offs_to_the_capture_child():
    assert spe_share_cutoffs() == (0.2, 0.5)
    assert spe_share_cutoffs({"RD403": {"min_dispatch_share": 0.3}}) == (0.3, 0.5)
    argv = Options(out="o", spe_share_cutoffs=(0.3, 0.5)).child_argv()
    options, script, _ = parse_child_args([*argv, "train.py"])
    assert options.spe_share_cutoffs == (0.3, 0.5) and script == "train.py"


def test_without_a_window_step_the_probe_divides_by_the_step_at_one_as_the_rule_does():
    # a model compiled with steps_per_execution=8, no window step, no compute-only pairs: the
    # rule's share is of the step at 1 (rules/rd403_tiny_steps.py: step), so is the probe's
    f = facts(step=4.0, compute=4.0, spe=8)
    f.steps = None
    one, many = [4.0] * 6, [4.0 / r for r in (1.8, 2.6, 2.1, 2.4, 1.9, 2.5)]
    result = paired_from_samples(one, many)
    scale = dispatch.real_scale(f.probes, result.median_b, result.median_a)
    assert scale == pytest.approx(result.median_b / result.median_a)  # at 8 over at 1
    cutoff = dispatch.share_at_ratio(result.ratio, scale, 8, 8)  # the median's share
    arms = [(ProbePoint(1), None), (ProbePoint(8), None)]
    test = _Straddle(f.probes, None, 8, (cutoff,), arms)
    assert test(records(one, many)) is True and test.first_pairs == 6
    assert f"a ratio of {result.ratio:.3f}x" in test.why


def test_rd403s_evidence_says_why_its_pairs_had_a_second_stage():
    f = fit_loop_predict(1.3)
    why = "RD403's cut-off 20% of the step (a ratio of 1.259x) was inside ..."
    f.probes.spe_probe[1].paired.second_stage = why
    _, (finding,) = run(f, "RD403")
    (row,) = [e for e in finding.evidence if e.label == "dispatch share of the step"]
    assert row.source.endswith("; second stage: " + why)


def test_the_cli_hands_rd301s_configured_cut_off_to_the_capture_child():
    assert batch_min_speedup() == 1.5
    assert batch_min_speedup({"RD301": {"min_speedup": 2.0}}) == 2.0
    options, _, _ = parse_child_args([*Options(out="o").child_argv(), "train.py"])
    assert options.batch_min_speedup is None  # none handed down: no early look
    argv = Options(out="o", batch_min_speedup=2.0).child_argv()
    options, script, _ = parse_child_args([*argv, "train.py"])
    assert options.batch_min_speedup == 2.0 and script == "train.py"


def _batch_records(per_pair: list[float]) -> list[pairs.ArmRecord]:
    """Batch 64 at 400 ms a step and batch 256 at the steps that give these samples/s ratios."""
    base = pairs.ArmRecord("batch size 64", lambda: [])
    big = pairs.ArmRecord("batch size 256", lambda: [])
    for r in per_pair:
        base.add([(400.0, 1)])
        big.add([(400.0 * 4 / r, 1)])
    return [base, big]


@pytest.mark.parametrize(
    ("per_pair", "severity"),
    [([1.9, 1.8, 2.0, 1.85, 1.95], Severity.WARNING), ([1.3, 1.2, 1.25, 1.3, 1.2], None)],
)
def test_rd301_on_the_pairs_an_early_look_stopped_at_decides_as_the_look_did(per_pair, severity):
    """The probe stops at 5 pairs where its look says RD301's decision is made; the rule, on
    those 5 pairs as the probe records them (``pairs.pair``), makes that decision."""
    records = _batch_records(per_pair)
    why = pairs.ThroughputDecided([64, 256], 1.5)(records)
    assert why is not None and why.startswith("RD301's decision made at 5 pairs")
    f = facts()
    recorded = pairs.pair(records[0], records[1], phase="batch-size probe", cut_short=why)
    f.probes.batch_probe = [
        ProbePoint(64, 400.0, 160.0, 5),
        ProbePoint(256, recorded.median_b_ms, 256_000.0 / recorded.median_b_ms, 5,
                   paired=recorded),
    ]  # fmt: skip
    _, findings = run(f, "RD301")
    assert [x.severity for x in findings] == ([severity] if severity else [])
