"""The time outside the window (issue 12, defect 5), without TensorFlow: the fit loop read from
the source, RD406 on facts, and the job forecast over the whole loop."""

from __future__ import annotations

import textwrap

import pytest

from rnndoctor.capture import after_window
from rnndoctor.engine import evaluate
from rnndoctor.facts import (
    CodeLoop,
    Facts,
    FitConfig,
    FitLoop,
    ModelCallStats,
    OutsideWindowFacts,
    PairedRatio,
    RunInfo,
    SourceLocation,
    StepTimes,
)
from rnndoctor.findings import Severity

SCRIPT = textwrap.dedent(
    """\
    EPOCHS = 40
    for epoch in range(EPOCHS):
        model.fit(x, y, epochs=1)
        for diversity in [0.2, 0.5, 1.0, 1.2]:
            for i in range(400):
                preds = model.predict(x_pred, verbose=0)[0]
    while True:
        model.fit(x, y)
    for a in range(1, 7, 2):
        for b in data:
            model.fit(x, y)
    """
)


@pytest.fixture
def script(tmp_path):
    path = tmp_path / "train.py"
    path.write_text(SCRIPT)
    return str(path)


def _line(needle: str, nth: int = 0) -> int:
    return [i for i, t in enumerate(SCRIPT.splitlines(), 1) if needle in t][nth]


def test_a_fit_in_a_range_loop_counts_its_calls_from_a_name_assigned_a_literal(script):
    loop = after_window.fit_loop(SourceLocation(script, _line("model.fit")))
    assert loop == FitLoop(loops=[CodeLoop(2, "for", 40, "range(EPOCHS), EPOCHS = 40")], calls=40)


def test_nested_loops_multiply_and_unknown_counts_leave_the_calls_unknown(script):
    (loop,) = after_window.enclosing_loops(script, _line("model.fit", 1))
    assert (loop.kind, loop.iterations) == ("while", None)
    assert after_window.fit_loop(SourceLocation(script, _line("model.fit", 1))).calls is None
    outer, inner = after_window.enclosing_loops(script, _line("model.fit", 2))
    assert (outer.iterations, inner.iterations) == (3, None)  # range(1, 7, 2); a name
    predict = after_window.enclosing_loops(script, _line("model.predict"))
    assert [p.iterations for p in predict] == [40, 4, 400]
    assert predict[1].iterations_source == "a literal list of 4"


def test_a_fit_outside_any_loop_has_no_fit_loop(tmp_path):
    path = tmp_path / "once.py"
    path.write_text("model.fit(x, y, epochs=3)\n")
    assert after_window.fit_loop(SourceLocation(str(path), 1)) is None


def _facts(ended: str = "budget", with_loop: bool = True) -> Facts:
    facts = Facts(run=RunInfo(script="gen.py", argv=[], cwd="."))
    facts.fit = FitConfig(data_kind="numpy", batch_size=32, epochs=1, batches_per_epoch=100)
    if with_loop:
        facts.fit.fit_in_loop = FitLoop([CodeLoop(10, "for", 40, "range(40)")], calls=40)
    facts.steps = StepTimes(warmup_steps=1, measured_steps=3, median_step_time_ms=20.0)
    predict = ModelCallStats(
        method="predict", calls=150, total_s=9.9, median_ms=66.0, single_sample_calls=150,
        batch_sizes=[1], location=SourceLocation(
            "gen.py", 14, code="preds = model.predict(x_pred, verbose=0)[0]",
            call_source="model.predict(x_pred, verbose=0)"),
        loops=[CodeLoop(12, "for", 4), CodeLoop(13, "for", 400)], calls_per_iteration=1600,
    )  # fmt: skip
    facts.outside_window = OutsideWindowFacts(
        ended=ended, seconds=10.5, budget_s=10.5, calls=[predict], python_s=0.6,
        per_call_ms={"predict": 64.0, "model(x, training=False)": 9.0, "predict_on_batch": 2.0},
        per_call_paired=[
            PairedRatio(ratio=7.0, low=6.0, high=8.0, pairs=12, median_a_ms=64.0,
                        median_b_ms=9.0, a="predict", b="model(x, training=False)"),
            PairedRatio(ratio=32.0, low=28.0, high=35.0, pairs=12, median_a_ms=64.0,
                        median_b_ms=2.0, a="predict", b="predict_on_batch"),
        ],
    )  # fmt: skip
    return facts


def test_rd406_gives_the_cost_per_call_of_each_way_and_the_share_of_an_iteration():
    report = evaluate(_facts())
    (found,) = [f for f in report.findings if f.rule_id == "RD406"]
    training = 0.020 * 100  # one fit call: 2 s
    predict = 1600 * 0.066  # 105.6 s per iteration
    python = 0.6 * 1600 / 150
    iteration = training + predict + python
    assert found.severity is Severity.ERROR and found.location.line == 14
    assert "1600 times per iteration" in found.message and "66.0 ms a call" in found.message
    assert f"{predict / iteration:.0%} of an iteration" in found.message
    assert "predict_on_batch takes 2.00 ms a call against predict's 64.00 ms" in found.message
    assert "32.0x (90% interval 28.0-35.0x, 12 pairs)" in found.message
    assert found.fix.code == "preds = model.predict_on_batch(x_pred)[0]"
    assert found.fix.before == "preds = model.predict(x_pred, verbose=0)[0]"
    assert found.fix.safety == "safe"
    saved = predict * (1 - 1 / 32.0)  # the measured predict time, divided by the paired ratio
    assert found.speedup == pytest.approx(iteration / (iteration - saved), rel=1e-3)
    assert "paired on the same sample, 90% interval 28.0-35.0x" in found.gain
    evidence = {e.label: e.value for e in found.evidence}
    assert evidence["predict calls per iteration"] == 1600
    assert evidence["model(x, training=False), per call (same sample)"] == 9.0
    assert evidence["predict / predict_on_batch, paired"] == 32.0


def test_rd406_is_inconclusive_info_when_the_paired_interval_does_not_clear_one():
    facts = _facts()
    facts.outside_window.per_call_paired[1].low = 0.9  # predict_on_batch: 32x, 0.9-35x
    (found,) = [f for f in evaluate(facts).findings if f.rule_id == "RD406"]
    assert found.severity is Severity.INFO and found.speedup is None
    assert "inconclusive: 32.0x" in found.message and "inconclusive" in found.gain
    facts.outside_window.per_call_paired[1].low = 28.0
    facts.outside_window.per_call_paired[1].pairs = 1  # one pair: its interval is the ratio
    (found,) = [f for f in evaluate(facts).findings if f.rule_id == "RD406"]
    assert found.severity is Severity.INFO and found.speedup is None
    assert "1 pairs; 3 needed" in found.gain
    facts.outside_window.per_call_paired = []  # older facts: timed, but not paired
    (found,) = [f for f in evaluate(facts).findings if f.rule_id == "RD406"]
    assert found.speedup is None and found.gain.startswith("not estimated")


def test_rd406_picks_model_call_when_it_is_the_faster_and_skips_batched_predicts():
    facts = _facts()
    facts.outside_window.per_call_ms = {"model(x, training=False)": 1.0, "predict_on_batch": 3.0}
    facts.outside_window.per_call_paired[0].ratio = 60.0
    (found,) = [f for f in evaluate(facts).findings if f.rule_id == "RD406"]
    assert found.fix.code == "preds = model(x_pred, training=False).numpy()[0]"
    facts.outside_window.calls[0].single_sample_calls = 3  # predicts on whole batches
    assert not [f for f in evaluate(facts).findings if f.rule_id == "RD406"]


def test_the_forecast_covers_every_fit_call_and_what_runs_between_them():
    facts = _facts()
    forecast = evaluate(facts).forecast
    training, outside = 2.0, 1600 * 0.066 + 0.6 * 1600 / 150
    assert forecast.fit_calls == 40 and forecast.training_s == pytest.approx(training)
    assert forecast.outside_s == pytest.approx(outside)
    assert forecast.now_s == pytest.approx(40 * (training + outside))
    assert "x 40 fit calls (the loop at line 10)" in forecast.covers
    assert "extrapolated" in forecast.covers and "predict 150 of 1600 calls" in forecast.covers
    rd406 = [f for f in evaluate(facts).findings if f.rule_id == "RD406"][0]
    assert forecast.after_s == pytest.approx(forecast.now_s / rd406.speedup)


def test_a_run_on_that_reached_the_next_fit_is_measured_not_extrapolated():
    facts = _facts(ended="next fit call")
    forecast = evaluate(facts).forecast
    assert forecast.outside_s == 10.5 and forecast.now_s == pytest.approx(40 * (2.0 + 10.5))
    assert "measured: 10.5 s from the end of fit to the next fit call" in forecast.covers


def test_a_single_fit_with_nothing_watched_after_it_keeps_the_training_only_forecast():
    facts = _facts(with_loop=False)
    facts.outside_window = None  # rnndoctor.diagnose, the Keras callback: no run-on
    forecast = evaluate(facts).forecast
    assert forecast.now_s == pytest.approx(2.0) and forecast.covers is None
    assert forecast.fit_calls is None


def test_a_single_fit_adds_what_runs_after_it_once_and_says_it_measured_it():
    facts = _facts(ended="script end", with_loop=False)
    forecast = evaluate(facts).forecast
    assert forecast.fit_calls == 1 and forecast.training_s == pytest.approx(2.0)
    assert forecast.outside_s == 10.5 and forecast.now_s == pytest.approx(2.0 + 10.5)
    assert "x 40 fit calls" not in forecast.covers and "fit calls" not in forecast.covers
    assert "after fit: measured: 10.5 s from the end of fit to the script end" in forecast.covers
    assert "validation and epoch-end callbacks: not measured" in forecast.covers


def test_a_single_fit_whose_run_on_reached_a_later_fit_says_that_fit_is_not_forecast():
    facts = _facts(ended="next fit call", with_loop=False)
    forecast = evaluate(facts).forecast
    assert forecast.now_s == pytest.approx(2.0 + 10.5)
    assert "a later fit call: its training is not in the forecast" in forecast.covers


def test_rd406_after_a_single_fit_speaks_of_the_job_not_of_an_iteration():
    facts = _facts(with_loop=False)  # the 1600 calls of two loops after the one fit
    (found,) = [f for f in evaluate(facts).findings if f.rule_id == "RD406"]
    training, predict = 0.020 * 100, 1600 * 0.066
    job = training + predict + 0.6 * 1600 / 150  # the run-on stopped at its budget
    assert "1600 times after fit" in found.message and "per iteration" not in found.message
    assert f"{predict / job:.0%} of the job of {job:.1f} s" in found.message
    assert found.severity is Severity.ERROR and "of the job" in found.gain
    evidence = {e.label: e.value for e in found.evidence}
    assert evidence["predict calls after fit"] == 1600
    assert evidence["job (the fit call + what runs after it)"] == pytest.approx(job, abs=1e-3)
    forecast = evaluate(facts).forecast
    assert forecast.after_s == pytest.approx(forecast.now_s / found.speedup)


def test_a_loop_without_a_count_says_so_and_forecasts_one_call():
    facts = _facts()
    facts.fit.fit_in_loop = FitLoop([CodeLoop(10, "while", None)], calls=None)
    facts.outside_window = None
    forecast = evaluate(facts).forecast
    assert forecast.now_s == pytest.approx(2.0) and forecast.fit_calls is None
    assert "has no count in the source: one fit call shown" in forecast.covers


def test_the_new_facts_round_trip_through_json():
    facts = _facts()
    back = Facts.from_dict(facts.to_dict())
    assert back.outside_window == facts.outside_window
    assert back.fit.fit_in_loop == facts.fit.fit_in_loop


def test_rd406_is_not_evaluated_when_nothing_after_the_window_was_watched():
    from rnndoctor.engine import Status

    facts = _facts(with_loop=False)
    facts.outside_window = None
    (outcome,) = [o for o in evaluate(facts).outcomes if o.rule.id == "RD406"]
    assert outcome.status is Status.NOT_EVALUATED
    assert "nothing after fit was watched" in outcome.reason
    facts.outside_window = OutsideWindowFacts(ended="script end", seconds=0.01)
    (outcome,) = [o for o in evaluate(facts).outcomes if o.rule.id == "RD406"]
    assert outcome.status is Status.PASSED  # watched to the script's end: no predict at all
    facts = _facts()
    facts.outside_window = None
    (outcome,) = [o for o in evaluate(facts).outcomes if o.rule.id == "RD406"]
    assert outcome.status is Status.NOT_EVALUATED and "did not run on" in outcome.reason


def test_rd406_is_not_evaluated_when_the_script_raised_before_any_model_call():
    """A new user's fit loop raised KeyError right after the window (the History then lacked
    the epoch: capture/window.py: fill_history), and RD406 passed on a run-on that saw
    nothing."""
    from rnndoctor.engine import Status

    facts = _facts()
    facts.outside_window = OutsideWindowFacts(
        ended="error", seconds=0.007, detail="KeyError: 'loss'"
    )
    (outcome,) = [o for o in evaluate(facts).outcomes if o.rule.id == "RD406"]
    assert outcome.status is Status.NOT_EVALUATED
    assert "raised KeyError: 'loss' after the window, before any model call" in outcome.reason
    facts = _facts(ended="error")  # it raised after its predict calls: those are evidence
    assert [f.rule_id for f in evaluate(facts).findings if f.rule_id == "RD406"] == ["RD406"]


@pytest.mark.parametrize("ended", ["a write", "budget", "running"])  # error: the test above
def test_rd406_is_no_pass_where_the_run_on_stopped_before_the_scripts_end(ended):
    """A new user's ``model.save(...)`` right after ``fit`` stopped the run-on (``a write``)
    before the loop of single-sample ``predict`` calls that follows it, and RD406 "passed"."""
    from rnndoctor.engine import Status

    facts = _facts(with_loop=False)
    facts.outside_window = OutsideWindowFacts(
        ended=ended, seconds=0.0075, detail="the script was about to write (model.save)"
    )
    (outcome,) = [o for o in evaluate(facts).outcomes if o.rule.id == "RD406"]
    assert outcome.status is Status.NOT_EVALUATED
    assert "stopped (the script was about to write (model.save)) before its end" in (outcome.reason)
    for seen in ("script end", "next fit call"):  # seen to the end, nothing found: a pass
        facts.outside_window = OutsideWindowFacts(ended=seen, seconds=0.01)
        (outcome,) = [o for o in evaluate(facts).outcomes if o.rule.id == "RD406"]
        assert outcome.status is Status.PASSED
    # stopped early, with predict calls after the fit line it did not reach: not evaluated
    facts.outside_window = OutsideWindowFacts(ended=ended, unreached_predict_lines=[45, 52])
    (outcome,) = [o for o in evaluate(facts).outcomes if o.rule.id == "RD406"]
    assert outcome.status is Status.NOT_EVALUATED and "(predict at line 45, 52)" in outcome.reason
    # stopped early with none left unreached (a model(x) loop, then model.save): still a pass,
    # so that a fixed predict loop reads "fixed" in compare
    facts.outside_window = OutsideWindowFacts(ended=ended, unreached_predict_lines=[])
    (outcome,) = [o for o in evaluate(facts).outcomes if o.rule.id == "RD406"]
    assert outcome.status is Status.PASSED


def test_a_call_after_a_single_fit_counts_the_calls_of_all_its_loops(tmp_path):
    from types import SimpleNamespace

    path = tmp_path / "once.py"
    path.write_text(
        "model.fit(x, y)\nfor d in [0.2, 1.0]:\n    for i in range(400):\n"
        "        model.predict(x_pred)\nwhile True:\n    model.predict(x_pred)\n"
    )
    facts = Facts(run=RunInfo(script=str(path), argv=[], cwd="."))
    facts.fit = FitConfig(data_kind="numpy", batch_size=32, epochs=1)  # no fit_in_loop
    counted = ModelCallStats(method="predict", location=SourceLocation(str(path), 4))
    unknown = ModelCallStats(method="predict", location=SourceLocation(str(path), 6))
    after_window._place_calls(SimpleNamespace(facts=facts), [counted, unknown])
    assert [loop.line for loop in counted.loops] == [2, 3]
    assert counted.calls_per_iteration == 800  # 2 x 400, after the one fit
    assert unknown.calls_per_iteration is None  # a while loop: the calls seen count


class _Session:
    """What ``after_window.start`` reads before it runs on: the facts and the budgets."""

    def __init__(self, facts: Facts) -> None:
        self.facts = facts
        self.budget_asked = False

    def budget(self, phase: str):
        self.budget_asked = True
        raise AssertionError("a worker of a multi-worker job must not reach the budget")


@pytest.mark.parametrize(
    ("workers", "environ"),
    [(2, {}), (1, {"RNNDOCTOR_TRACE_DONE": "/out/workers/trace.done"})],
)
def test_a_worker_of_a_multi_worker_job_does_not_run_on_and_says_why(workers, environ, monkeypatch):
    from rnndoctor.facts import StrategyFacts

    monkeypatch.delenv("RNNDOCTOR_TRACE_DONE", raising=False)
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    facts = _facts()
    facts.strategy = StrategyFacts(strategy="MultiWorkerMirroredStrategy", workers=workers)
    session = _Session(facts)
    assert after_window.start(session, model=None) is False
    assert not session.budget_asked
    assert getattr(session, "after_window", None) is None
    assert any("no run-on after the window" in n and "collective" in n for n in facts.run.notes), (
        facts.run.notes
    )


def test_a_single_process_strategy_is_not_a_multi_worker_job():
    from rnndoctor.facts import StrategyFacts

    single = StrategyFacts(strategy="MirroredStrategy", workers=1)
    assert after_window.multi_worker_reason(single, {}) is None
    assert after_window.multi_worker_reason(None, {}) is None
    assert "3 workers" in after_window.multi_worker_reason(
        StrategyFacts(strategy="MultiWorkerMirroredStrategy", workers=3), {}
    )


def test_a_tf_config_of_several_tasks_is_a_multi_worker_job():
    import json

    from rnndoctor import cluster

    two = json.dumps(
        {"cluster": {"worker": ["h:1", "h:2"]}, "task": {"type": "worker", "index": 0}}
    )
    one = json.dumps({"cluster": {"worker": ["h:1"]}, "task": {"type": "worker", "index": 0}})
    ps = json.dumps({"cluster": {"chief": ["h:1"], "ps": ["h:2"]}, "task": {"type": "chief"}})
    assert cluster.in_multi_worker_job({"TF_CONFIG": two})
    assert cluster.in_multi_worker_job({"TF_CONFIG": ps})  # a parameter server is a task too
    assert not cluster.in_multi_worker_job({"TF_CONFIG": one})
    assert not cluster.in_multi_worker_job({})
    assert cluster.in_multi_worker_job({"TF_CONFIG": "{not json"})  # cannot rule a cluster out
    assert cluster.in_multi_worker_job({cluster.TRACE_DONE_VAR: "/tmp/trace.done"})
    assert "a multi-worker job" in after_window.multi_worker_reason(None, {"TF_CONFIG": two})


def test_the_predict_calls_after_fit_that_an_early_stop_left_unreached(tmp_path):
    """The trial's script: fit, model.save(...) (where the run-on stops), then a loop of
    single-sample predict calls; a predict that ran (its line recorded) is not counted, nor
    one above the fit line."""
    from types import SimpleNamespace

    path = tmp_path / "train_cli.py"
    path.write_text(
        "model.predict(x[:1])\nmodel.fit(x, y)\nmodel.predict(x[:4])\nmodel.save('m.keras')\n"
        "preds = [model.predict(x[i:i + 1]) for i in range(20)]\n"
    )
    facts = Facts(run=RunInfo(script=str(path), argv=[], cwd="."))
    facts.fit = FitConfig(data_kind="numpy", batch_size=32,
                          location=SourceLocation(str(path), 2))  # fmt: skip
    session = SimpleNamespace(facts=facts)
    seen = ModelCallStats(method="predict", calls=1, location=SourceLocation(str(path), 3))
    assert after_window._unreached_predict(session, [seen]) == [5]
    assert after_window._unreached_predict(session, []) == [3, 5]
    facts.fit.location = SourceLocation(str(tmp_path / "gone.py"), 2)
    assert after_window._unreached_predict(session, []) is None
