"""Issue 11 in the rules: decisions on intervals, consistency with the window, physical bounds
and the noisy-machine path. Pure: fixture facts, no TensorFlow.

The consistency fixtures are written from the real runs in issue 11 (keras-io
``bidirectional_lstm_imdb.py``: window median step 253 ms, compute-only 406 ms; keras-io
``timeseries_weather_forecasting.py``: RD201 projected a 29.9 ms step while the compute-only
step was 39.8 ms).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_rules_input_batch import facts, run

from rnndoctor.engine import Status, evaluate
from rnndoctor.facts import SCHEMA_VERSION, Facts, MachinePhase, PairedRatio, ProbePoint
from rnndoctor.findings import Severity
from rnndoctor.reports.terminal import summary_lines
from rnndoctor.reports.view import build_view

DATA = Path(__file__).parents[1] / "data" / "consistency"


def paired(ratio: float, low: float, high: float, a_ms: float, b_ms: float, phase: str):
    return PairedRatio(ratio=ratio, low=low, high=high, pairs=12, median_a_ms=a_ms,
                       median_b_ms=b_ms, steps_a=20, steps_b=20, phase=phase)  # fmt: skip


def batch_facts(low: float, high: float) -> Facts:
    """Batch 4 -> 8: step-time ratio interval [low, high] (samples/s = 2 x that)."""
    f = facts()
    f.probes.batch_probe = [
        ProbePoint(4, 2.0, 2000.0, 20),
        ProbePoint(8, 2.5, 3200.0, 20,
                   paired=paired(0.8, low, high, 2.0, 2.5, "batch-size probe")),
    ]  # fmt: skip
    return f


def test_rd301_warns_only_when_the_interval_clears_its_cut_off():
    _, (finding,) = run(batch_facts(0.78, 0.83), "RD301")  # 1.56-1.66x samples/s
    assert finding.severity is Severity.WARNING
    assert "1.6x (90% interval 1.6–1.7x)" in finding.message
    assert "samples/s" in finding.gain and "faster step" not in finding.gain
    assert finding.speedup == 1.6


def test_rd301s_evidence_says_why_its_pairs_had_a_second_stage():
    f = batch_facts(0.78, 0.83)
    why = "the time allowance ended at 6 pairs with the rule's decision not made at the early look"
    f.probes.batch_probe[1].paired.second_stage = why
    _, (finding,) = run(f, "RD301")
    sources = [e.source for e in finding.evidence if e.source and "interleaved pairs" in e.source]
    assert sources and all(s.endswith("; second stage: " + why) for s in sources)


def test_rd301_quotes_the_point_whose_interval_clears_over_a_wider_larger_median():
    """From a real run (tests/e2e/test_verify_e2e.py's script, a drifting window): batch 16 vs 8
    gave 2.01x (1.75-2.27x), batch 32 vs 8 gave 3.80x (0.19-5.15x). The clear 2x is the
    evidence; the wide 3.8x alone would have made the finding inconclusive."""
    f = facts()
    f.probes.batch_probe = [
        ProbePoint(8, 2.0, 4000.0, 20),
        ProbePoint(16, 2.0, 8040.0, 20,
                   paired=paired(1.005, 0.875, 1.135, 2.0, 2.0, "batch-size probe")),
        ProbePoint(32, 2.1, 15200.0, 20,
                   paired=paired(0.95, 0.0475, 1.2875, 2.0, 2.1, "batch-size probe")),
    ]  # fmt: skip
    _, (finding,) = run(f, "RD301")
    assert finding.severity is Severity.WARNING
    assert "at batch 16 against" in finding.message and "2.0x (90% interval" in finding.message
    assert finding.speedup == 2.01
    # the points' samples/s are their medians, the ratio the pairs' median: a new user read
    # "3,058 against 1,251 (2.9x ...)" and divided (2.44x); the message says which is which
    assert "against 4,000 at 8, each from its median step; its interleaved pairs: 2.0x" in (
        finding.message
    )
    assert finding.message.endswith(
        "samples/s (the median of their ratios, which the decision reads)."
    )


def test_rd301_is_info_inconclusive_when_only_the_median_clears():
    _, (finding,) = run(batch_facts(0.6, 0.95), "RD301")  # 1.2-1.9x samples/s
    assert finding.severity is Severity.INFO
    assert "inconclusive: 1.6x (90% interval 1.2–1.9x)" in finding.message
    assert finding.speedup is None  # the forecast does not use an inconclusive gain


def test_rd301_noisy_probe_phase_widens_a_clear_interval_into_inconclusive():
    f = batch_facts(0.76, 0.83)  # 1.52-1.66x: clears 1.5x on a quiet machine
    assert run(f, "RD301")[1][0].severity is Severity.WARNING
    f.run.machine = [MachinePhase("batch-size probe", 0.45, 0.9, 2.4, 2, 10.0, True, 1.9,
                                  "noisy machine: ...")]  # fmt: skip
    _, (finding,) = run(f, "RD301")
    assert finding.severity is Severity.INFO and "inconclusive" in finding.message
    rows = {e.label: e.value for e in finding.evidence}
    assert rows["noisy machine"].startswith("noisy machine")
    view = build_view(evaluate(f, select=["RD301"]))
    assert view.noisy.startswith("noisy machine: other processes used 0.9 of 2 CPUs")
    assert "(noisy: batch-size probe); intervals widened up to 1.9x" in view.noisy  # by name
    assert view.noisy in summary_lines(evaluate(f, select=["RD301"]))


def test_rd301_under_load_a_pair_past_the_cut_off_makes_it_inconclusive_not_absent():
    """The demo in a loaded stability run: batch 256 over 64 at 1.49x samples/s from 2 pairs
    (1.12x and 1.86x), the probe's phase noisy; the quiet runs warned at 1.8-1.9x. With the
    median alone short of 1.5x, the finding disappeared: under load it is inconclusive."""
    f = facts()
    pair = PairedRatio(
        ratio=0.3717,
        low=0.2792,
        high=0.4642,
        pairs=2,
        median_a_ms=300.0,
        median_b_ms=807.0,
        steps_a=10,
        steps_b=10,
        phase="batch-size probe",
    )
    f.probes.batch_probe = [ProbePoint(64, 300.0, 213.0, 10),
                            ProbePoint(256, 807.0, 317.0, 10, paired=pair)]  # fmt: skip
    assert run(f, "RD301")[1] == []  # quiet: the median decides, as before
    f.run.machine = [MachinePhase("batch-size probe", 0.45, 0.9, 2.4, 2, 10.0, True, 1.98,
                                  "noisy machine: ...")]  # fmt: skip
    _, (finding,) = run(f, "RD301")
    assert finding.severity is Severity.INFO and "inconclusive: 1.5x" in finding.message
    assert finding.speedup is None
    pair.low, pair.high, pair.ratio = 0.19, 0.21, 0.2  # 0.8x, both pairs short of 1.5x
    assert run(f, "RD301")[1] == []


def test_rd403_decides_on_the_paired_dispatch_share():
    f = facts(step=4.0, compute=3.8)
    clear = paired(2.4, 2.2, 2.6, 3.8, 1.6, "steps_per_execution probe")
    f.probes.spe_probe = [ProbePoint(1, 3.8), ProbePoint(16, 1.65, paired=clear)]
    _, (finding,) = run(f, "RD403")
    assert finding.severity is Severity.ERROR and "interval" in finding.message
    f.probes.spe_probe[1].paired = paired(1.4, 1.05, 2.3, 3.8, 2.7, "steps_per_execution probe")
    _, (finding,) = run(f, "RD403")  # share 0.27, interval 0.05-0.55: inconclusive
    assert finding.severity is Severity.INFO and "inconclusive: " in finding.message


def test_rd403s_gain_adds_up_where_the_compute_only_step_holds_the_step_after():
    """From a fresh user's trial (a batch-16 LSTM): "4.77 ms less per step ... 16.16 ms ->
    11.72 ms", where 16.16 - 4.77 = 11.39: the step after the fix was held at the compute-only
    step at 16 (Bounds), and the sentence did not say so."""
    import re

    f = facts(step=16.16, compute=16.95)
    timed = paired(1.446, 1.40, 1.49, 16.95, 11.72, "steps_per_execution probe")
    f.probes.spe_probe = [ProbePoint(1, 16.95), ProbePoint(16, 11.72, paired=timed)]
    _, (finding,) = run(f, "RD403")
    less, before, after = re.search(
        r"([\d.]+) ms less per step .* step ([\d.]+) ms -> ([\d.]+) ms", finding.gain
    ).groups()
    assert float(before) - float(after) == pytest.approx(float(less), abs=0.011)
    assert float(after) == 11.72 and "held at the compute-only step" in finding.gain


def test_rd403_quotes_no_gain_where_the_compute_only_step_at_n_is_not_below_the_window():
    """A probe timed slower than the window (the window's step 10 ms, the compute-only step
    13 ms even at 16 per call): before, a warning with "-3.00 ms less per step", about 0.8x."""
    f = facts(step=10.0, compute=16.95)
    timed = paired(1.30, 1.27, 1.33, 16.95, 13.0, "steps_per_execution probe")
    f.probes.spe_probe = [ProbePoint(1, 16.95), ProbePoint(16, 13.0, paired=timed)]
    _, (finding,) = run(f, "RD403")
    assert finding.severity is Severity.INFO and finding.speedup is None and finding.gain is None
    assert "No gain can be quoted" in finding.message


def test_rd403_share_rests_on_the_probes_pairs_not_on_the_windows_median():
    """From three runs of tests/scripts/tiny_lstm.py (issue 11): the window's median step moved
    from 2.31 to 3.96 ms (20 steps of about 2.5 ms) while the paired 1 vs 16 ratio held at
    1.30-1.44x. Divided by the window, the share fell below the cut-off in the slow window's run;
    taken of the real step the compute-only probe timed side by side, it does not move."""
    spe = paired(1.37, 1.32, 1.42, 2.6, 1.9, "steps_per_execution probe")
    same_step = paired(1.0, 0.97, 1.04, 2.6, 2.6, "compute-only probe")  # arrays: no input wait
    shares = []
    for window_ms in (2.31, 2.71, 3.96):
        f = facts(step=window_ms, compute=2.6)
        f.probes.compute_paired = same_step
        f.probes.spe_probe = [ProbePoint(1, 2.6), ProbePoint(16, 1.9, paired=spe)]
        _, (finding,) = run(f, "RD403")
        assert finding.severity is Severity.WARNING, window_ms
        shares.append(finding.message.split(", ")[1].split(" (")[0])
    assert len(set(shares)) == 1  # "27%": 1 - 1 / 1.37, whatever the window said
    # An input-bound job: the real step is twice the compute-only step (paired), so the same
    # dispatch saving is half the share of the real step, below the 20% cut-off.
    f = facts(step=2.6, compute=2.6)
    f.probes.compute_paired = paired(2.0, 1.9, 2.1, 5.2, 2.6, "compute-only probe")
    f.probes.spe_probe = [ProbePoint(1, 2.6), ProbePoint(16, 1.9, paired=spe)]
    assert run(f, "RD403")[1] == []


def test_rd403_share_counts_the_callbacks_in_the_real_step_and_needs_a_consistent_probe():
    """The window's step holds the callbacks' hooks, the probe's real arm does not: a sleeping
    4 ms callback on a 2.6 ms compute step (tests/scripts/small_batch_slow_callback.py) makes
    the same dispatch saving a third of the share. An inconsistent compute-only probe (or one
    of 1-2 pairs) is not used: the share falls back to the window's step."""
    spe = paired(1.37, 1.32, 1.42, 2.6, 1.9, "steps_per_execution probe")

    def with_probes(callbacks: float, inconsistent: str | None = None) -> Facts:
        f = facts(step=2.6 + callbacks, compute=2.6, callbacks=callbacks)
        f.probes.compute_paired = paired(1.0, 0.97, 1.04, 2.6, 2.6, "compute-only probe")
        f.probes.inconsistent = inconsistent
        f.probes.spe_probe = [ProbePoint(1, 2.6), ProbePoint(16, 1.9, paired=spe)]
        return f

    _, (finding,) = run(with_probes(0.0), "RD403")
    evidence = {e.label: e.value for e in finding.evidence}
    assert evidence["compute-only step / real step"].startswith("100% (compute-only probe")
    assert run(with_probes(4.0), "RD403")[1] == []  # 27% x 2.6 / 6.6: 11%, below 20%
    f = with_probes(0.0, inconsistent="compute-only 4 ms > step 3 ms")
    f.steps.median_step_time_ms = 3.3  # the share is the window's again: 2.6 / 3.3 of 27%
    _, (finding,) = run(f, "RD403")
    evidence = {e.label: e.value for e in finding.evidence}
    assert "the window's median step" in evidence["compute-only step / real step"]
    assert finding.severity is Severity.INFO  # 21% (19-23%): inconclusive


def load(name: str) -> Facts:
    return Facts.from_dict(json.loads((DATA / name).read_text()))


def test_bidirectional_imdb_inconsistent_probe_is_not_evaluated_with_both_numbers():
    f = load("bidirectional_lstm_imdb.json")
    report = evaluate(f, select=["RD201"])
    (outcome,) = [o for o in report.outcomes if o.rule.id == "RD201"]
    assert outcome.status is Status.NOT_EVALUATED
    assert "compute-only 406 ms > step 253 ms" in outcome.reason
    assert report.findings == []
    lines = build_view(report).intervals
    assert any("406 ms" in line and "253 ms" in line for line in lines)


def test_weather_input_fix_never_estimates_a_step_below_compute_only():
    f = load("timeseries_weather.json")
    _, (finding,) = run(f, "RD201")
    assert "capped at the compute-only step" in finding.gain
    assert "-> 39.80 ms" in finding.gain  # not 29.9 ms
    assert finding.speedup <= f.steps.median_step_time_ms / f.probes.compute_only_ms + 1e-9


def test_old_facts_without_the_new_fields_still_load():
    doc = facts().to_dict()
    doc["schema_version"] = "1.1"
    for key in ("compute_paired", "inconsistent", "remeasured", "batch_probe_inconsistent"):
        doc["probes"].pop(key)
    doc["run"].pop("machine")
    f = Facts.from_dict(doc)
    assert (
        f.schema_version == SCHEMA_VERSION
        and f.run.machine == []
        and f.probes.compute_paired is None
    )


def test_rd301_is_not_evaluated_on_an_inconsistent_batch_probe():
    f = load("bidirectional_lstm_imdb.json")
    f.probes.batch_probe = batch_facts(0.78, 0.83).probes.batch_probe
    f.fit.steps_per_epoch = 100
    report = evaluate(f, select=["RD301"])
    (outcome,) = [o for o in report.outcomes if o.rule.id == "RD301"]
    assert outcome.status is Status.NOT_EVALUATED and "312 ms > step 253 ms" in outcome.reason
    assert report.findings == [] and report.forecast.after_s is None


def test_the_forecast_takes_one_gain_and_no_inconclusive_one():
    f = batch_facts(0.6, 0.95)  # RD301 inconclusive: no speedup
    f.fit.steps_per_epoch = 100
    report = evaluate(f)
    assert all(x.speedup is None for x in report.findings if x.rule_id == "RD301")
    best = max((x.speedup or 0.0) for x in report.findings)
    if report.forecast.after_s is not None:
        assert report.forecast.after_s == report.forecast.now_s / best


def test_the_capture_flags_the_imdb_probe_and_its_breakdown_as_inconsistent():
    from types import SimpleNamespace

    from rnndoctor.capture.probes import inconsistency

    f = load("bidirectional_lstm_imdb.json")
    session = SimpleNamespace(facts=f)
    assert inconsistency(session, f.probes).startswith("compute-only 406 ms > step 253 ms")
    f.probes.compute_only_ms = 200.0  # consistent alone, but the parts overshoot the step
    f.probes.breakdown.compute_ms, f.probes.breakdown.input_ms = 200.0, 150.0
    assert "adds up to 350 ms, 97 ms more than the median step 253 ms" in inconsistency(
        session, f.probes
    )
    f.probes.breakdown.input_ms = 40.0  # 240 ms: within the window's noise
    assert inconsistency(session, f.probes) is None


def test_a_paired_probe_is_checked_against_the_real_step_timed_beside_it():
    """keras2_slow_generator.py in a CI run: the pair measured a 70% input share while the
    machine ran slower than in the window; RD201 (error) went "not evaluated". A pair that
    agrees with itself is consistent; a compute-only step beyond its own real step is not."""
    from types import SimpleNamespace

    from rnndoctor.capture.probes import inconsistency

    f = load("bidirectional_lstm_imdb.json")  # window: 253 ms, p90 / median 1.05 at least
    session = SimpleNamespace(facts=f)
    f.probes.compute_only_ms, f.probes.real_step_ms = 300.0, 420.0  # both slower than 253
    f.probes.compute_paired = paired(1.4, 1.3, 1.5, 420.0, 300.0, "compute-only probe")
    f.probes.breakdown.compute_ms, f.probes.breakdown.input_ms = 300.0, 120.0
    assert inconsistency(session, f.probes) is None
    f.probes.real_step_ms = 260.0  # the compute-only step beyond the real step beside it
    f.probes.compute_paired = paired(0.87, 0.8, 0.9, 260.0, 300.0, "compute-only probe")
    assert inconsistency(session, f.probes).startswith(
        "compute-only 300 ms > step 253 ms and > the real step 260 ms timed beside it"
    )


def test_rd403_share_is_bounded_by_the_paired_saving_when_the_probe_ran_slower():
    # tests/scripts/tiny_lstm.py under load (issue 11): the probe's step at 1 (3.25 ms) was
    # slower than the window's median step (2.44 ms); 1 - 1 / 1.82 = 45% is the most the
    # paired saving can be of the real step, not 3.25 x 45% / 2.44 = 60%.
    f = facts(step=2.44, compute=2.39)
    timed = paired(1.82, 1.6, 2.1, 3.25, 1.79, "steps_per_execution probe")
    f.probes.spe_probe = [ProbePoint(1, 3.25), ProbePoint(16, 2.19, paired=timed)]
    _, (finding,) = run(f, "RD403")
    assert "45% (90% interval 38–52%)" in finding.message
    assert finding.severity is Severity.WARNING  # 38% clears the 20% cut-off, 50% does not
    f.probes.spe_probe[1].paired = paired(1.82, 1.6, 2.1, 2.0, 1.1, "steps_per_execution probe")
    _, (finding,) = run(f, "RD403")  # a probe faster than the window: its share as before
    assert "37% (90% interval 31–43%)" in finding.message


def test_rd403_at_the_users_steps_per_execution_passes_when_nothing_is_left_to_gain():
    # tests/scripts/clean_control.py compiles with steps_per_execution=8: the probe pairs 1
    # with 8. A 60 ms step that 8 steps per call makes 3% faster leaves (1.03 - 1) / 7 of it,
    # 0.4%, in per-call dispatch: no larger value can gain the 20% the rule needs.
    f = facts(step=62.0, compute=60.0, spe=8)
    timed = paired(1.03, 0.98, 1.08, 61.8, 60.0, "steps_per_execution probe")
    f.probes.spe_probe = [ProbePoint(1, 61.8), ProbePoint(8, 60.0, paired=timed)]
    report = evaluate(f, select=["RD403"])
    assert report.findings == []
    (outcome,) = [o for o in report.outcomes if o.rule.id == "RD403"]
    assert outcome.status is Status.PASSED
    # ...and the report shows the pair with its interval
    assert "steps_per_execution 8 vs 1: step time 1 / 8 = 1.03x (90% interval 0.98–1.08x" in (
        "\n".join(build_view(report).intervals)
    )


def test_rd403_is_not_evaluated_where_the_probe_did_not_time_both_settings():
    """A new user's tf_keras LSTM: its compute-only step took 25.8 ms, the probe was not run, and
    RD403 read "passed"; the next check timed it at 24.1 ms. A probe that did not measure is no
    pass."""
    f = facts(step=23.2, compute=25.8)
    skipped = "not run: the compute-only step takes 25.8 ms, over 25 ms: ..."
    f.probes.spe_probe, f.probes.spe_probe_not_measured = [], skipped
    (outcome,) = [o for o in evaluate(f, select=["RD403"]).outcomes if o.rule.id == "RD403"]
    assert outcome.status is Status.NOT_EVALUATED
    assert outcome.reason == "steps_per_execution probe: " + skipped
    # a point that stopped (the budget, a failure) says why, with no reason on the probe
    f.probes.spe_probe_not_measured = None
    f.probes.spe_probe = [ProbePoint(1, 25.8), ProbePoint(16, stopped="budget exhausted")]
    (outcome,) = [o for o in evaluate(f, select=["RD403"]).outcomes if o.rule.id == "RD403"]
    assert outcome.status is Status.NOT_EVALUATED
    assert outcome.reason == "steps_per_execution probe: budget exhausted"


def test_rd403_at_the_users_steps_per_execution_quotes_the_cost_left_and_4n():
    # steps_per_execution=2 on a 2 ms step: 1 per call takes 3.8 ms, 2 per call 2.0 ms, so the
    # per-call cost d = 3.6 ms, and d / 2 = 1.8 ms is left per step at 2: (1.9 - 1) / 1 = 90%
    # of the step at 2, the most any larger value saves; 8 saves three quarters of it.
    f = facts(step=2.0, compute=2.0, spe=2)
    timed = paired(1.9, 1.7, 2.1, 3.8, 2.0, "steps_per_execution probe")
    f.probes.spe_probe = [ProbePoint(1, 3.8), ProbePoint(2, 2.0, paired=timed)]
    _, (finding,) = run(f, "RD403")
    assert "still left at steps_per_execution=2" in finding.message
    assert "90% (90% interval 70–100%, clipped to the share's range 0–100%)" in finding.message
    assert finding.severity is Severity.ERROR  # 70% clears the 50% error cut-off
    assert finding.fix.code.startswith("model.compile(..., steps_per_execution=8)")
    assert "from the paired 1 vs 2 (Bounds), 1.35 ms less per step" in finding.gain
    assert finding.speedup == pytest.approx(2.0 / 0.65, rel=0.01)
