"""`rnndoctor check` on a text-generation shape (issue 12, defect 5): fit(epochs=1) in a loop of
5, then 200 single-sample model.predict calls per iteration. The report must give RD406 at the
predict line and a forecast over the whole loop (slow: the real CLI and capture child)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

SCRIPT = Path(__file__).parents[1] / "scripts" / "fit_loop_predict.py"
FAST = ["--steps", "3", "--warmup", "1", "--profile-steps", "0", "--no-probes"]


def _line(needle: str) -> int:
    return next(i for i, t in enumerate(SCRIPT.read_text().splitlines(), 1) if needle in t)


@pytest.fixture(scope="module")
def doc(tmp_path_factory):
    out = tmp_path_factory.mktemp("loop") / "r"
    subprocess.run(
        [sys.executable, "-m", "rnndoctor", "check", str(SCRIPT), "--out", str(out),
         "--format", "json", *FAST, "--timeout", "120", "--fail-on", "never"],
        cwd=out.parent, capture_output=True, text=True, timeout=300,
        env=dict(os.environ, COLUMNS="200"),
    )  # fmt: skip
    return json.loads((out / "report.json").read_text())


def test_the_fit_loop_is_read_from_the_source(doc):
    loop = doc["facts"]["fit"]["fit_in_loop"]
    assert loop["calls"] == 5
    (only,) = loop["loops"]
    assert only["line"] == _line("for iteration in") and only["iterations"] == 5
    assert only["iterations_source"] == "range(ITERATIONS), ITERATIONS = 5"


def test_the_run_on_counts_the_single_sample_predicts_and_times_the_alternatives(doc):
    ow = doc["facts"]["outside_window"]
    assert ow["ended"] in ("budget", "next fit call")
    (predict,) = [c for c in ow["calls"] if c["method"] == "predict"]
    assert predict["calls"] >= 10 and predict["single_sample_calls"] == predict["calls"]
    assert predict["location"]["line"] == _line("the predict line")
    assert predict["calls_per_iteration"] == 200 and predict["batch_sizes"] == [1]
    assert set(ow["per_call_ms"]) == {"predict", "model(x, training=False)", "predict_on_batch"}
    # no other model call was counted: predict's own inner __call__ is not a call of the user's
    assert [c["method"] for c in ow["calls"]] == ["predict"]


def test_rd406_fires_at_the_predict_line_with_a_safe_rewrite(doc):
    (found,) = [f for f in doc["findings"] if f["rule_id"] == "RD406"]
    assert found["location"]["line"] == _line("the predict line")
    assert "200 times per iteration" in found["message"]
    assert found["fix"]["safety"] == "safe"
    assert found["fix"]["code"].startswith(
        (
            "preds = model.predict_on_batch(seed)[0]",
            "preds = model(seed, training=False).numpy()[0]",
        )
    )


def test_the_forecast_includes_the_loop(doc):
    from rnndoctor.engine import evaluate
    from rnndoctor.facts import Facts

    facts = Facts.from_dict(doc["facts"])
    forecast = evaluate(facts).forecast
    training = facts.steps.median_step_time_ms / 1000.0 * facts.fit.batches_per_epoch
    assert forecast.fit_calls == 5 and forecast.training_s == pytest.approx(training)
    (predict,) = facts.outside_window.calls
    assert forecast.outside_s >= 200 * predict.median_ms / 1000.0  # the 200 predicts at least
    assert forecast.now_s == pytest.approx(5 * (training + forecast.outside_s))
    assert "x 5 fit calls" in forecast.covers and "outside fit:" in forecast.covers
