"""`rnndoctor check` on custom training loops and eager fit (real CLI, real TF; slow).

One check per script variant (tests/scripts/custom_loop.py, run_eagerly_fit.py), shared by the
assertions through module-scoped fixtures.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

SCRIPTS = Path(__file__).parents[1] / "scripts"
FAST = ["--steps", "4", "--warmup", "1", "--profile-steps", "1", "--timeout", "240"]
FAIL_ON = ["--fail-on", "error"]


def check(
    tmp_path_factory, script: str, mode: str, *options: str
) -> tuple[Path, dict, subprocess.CompletedProcess]:
    work = tmp_path_factory.mktemp(mode)
    out = work / "report"
    result = subprocess.run(
        [sys.executable, "-m", "rnndoctor", "check", str(SCRIPTS / script), "--out", str(out),
         *FAST, *FAIL_ON, *options, "--", mode],
        cwd=work, capture_output=True, text=True, timeout=300,
        env=dict(os.environ, COLUMNS="200"),
    )  # fmt: skip
    report = json.loads((out / "report.json").read_text())
    return out, report, result


def exited_as_its_findings_say(result: subprocess.CompletedProcess, report: dict) -> bool:
    """``--fail-on error``: exit 1 when an error finding exists, else 0 (never a crash)."""
    errors = any(f["severity"] == "error" for f in report["findings"])
    return result.returncode == (1 if errors else 0) and "Traceback" not in result.stderr


def line_of(script: str, needle: str) -> int:
    lines = (SCRIPTS / script).read_text().splitlines()
    return next(i for i, t in enumerate(lines, 1) if needle in t)


def found(report: dict, rule_id: str) -> list[dict]:
    return [f for f in report["findings"] if f["rule_id"] == rule_id]


@pytest.fixture(scope="module")
def eager(tmp_path_factory):
    return check(tmp_path_factory, "custom_loop.py", "eager")


@pytest.fixture(scope="module")
def traced(tmp_path_factory):
    return check(tmp_path_factory, "custom_loop.py", "traced")


@pytest.fixture(scope="module")
def retrace(tmp_path_factory):
    return check(tmp_path_factory, "custom_loop.py", "retrace")


@pytest.fixture(scope="module")
def eager_fit(tmp_path_factory):
    # RD401 rests on the compile flag alone (rules/rd401_run_eagerly.py needs the environment):
    # no probes, whose eager steps cost about 15 s here and decide nothing this test reads
    return check(tmp_path_factory, "run_eagerly_fit.py", "compile", "--no-probes")


def test_eager_loop_gives_rd402_at_the_step_function(eager):
    out, report, result = eager
    assert exited_as_its_findings_say(result, report), result.stderr
    (finding,) = found(report, "RD402")
    assert finding["location"]["line"] == line_of("custom_loop.py", "def train_step(")
    assert "@tf.function(input_signature=[" in finding["fix"]["code"]
    labels = {e["label"]: e["value"] for e in finding["evidence"]}
    assert labels["step function, eager"] > labels["step function, tf.function"] > 0
    assert finding["speedup"] > 1 and finding["gain"].startswith("measured traced twin")
    assert "RD402" in result.stdout


def test_eager_loop_gets_a_full_report(eager):
    out, report, _ = eager
    facts = report["facts"]
    assert facts["run"]["outcome"] == "completed" and facts["fit"] is None
    assert facts["loop"]["eager"] and facts["loop"]["model"] == facts["model"]["name"]
    assert facts["loop"]["location"]["line"] == line_of("custom_loop.py", "# apply-line")
    steps = facts["steps"]
    assert steps["source"] == "custom loop" and steps["measured_steps"] == 4
    assert steps["median_step_time_ms"] > 0 and steps["batch_size"] == 16
    (rnn,) = facts["model"]["rnn_layers"]
    assert rnn["class_name"] == "LSTM" and rnn["location"]["line"] > 0
    profile = facts["profile"]
    assert profile["profiled_steps"] == 1 and profile["xspace_files"] and not profile["error"]
    assert (out / "report.html").exists()
    assert "LOOP ENDED" not in (out / "script.log").read_text()  # stopped after the window


def test_traced_loop_gives_neither_rd402_nor_rd405(traced):
    _, report, result = traced
    assert exited_as_its_findings_say(result, report), result.stderr
    assert not found(report, "RD402") and not found(report, "RD405")
    facts = report["facts"]
    assert facts["loop"]["step_is_tf_function"] and not facts["loop"]["eager"]
    statuses = {r["rule_id"]: r["status"] for r in report["rules"]}
    assert statuses["RD402"] == statuses["RD405"] == "passed"
    (step,) = [t for t in facts["probes"]["traces"] if t["role"] == "custom_step"]
    assert step["has_input_signature"] and step["calls"] == 1 + 4 + 1


def test_retracing_loop_gives_rd405_with_the_tracing_count(retrace):
    _, report, result = retrace
    assert exited_as_its_findings_say(result, report), result.stderr
    (finding,) = found(report, "RD405")
    (step,) = [t for t in report["facts"]["probes"]["traces"] if t["role"] == "custom_step"]
    labels = {e["label"]: e["value"] for e in finding["evidence"]}
    assert labels["tracing count"] == step["traces"] >= 6
    assert labels["calls that traced"] == "6 of 6"
    assert "tf.TensorSpec([None, None, 4], tf.float32),  # x" in finding["fix"]["code"]
    assert finding["location"]["line"] == line_of("custom_loop.py", "def train_step(")
    assert not found(report, "RD402")


def test_run_eagerly_fit_gives_rd401_at_compile(eager_fit):
    _, report, result = eager_fit
    assert exited_as_its_findings_say(result, report), result.stderr
    (finding,) = found(report, "RD401")
    assert finding["location"]["line"] == line_of("run_eagerly_fit.py", "# compile-line")
    # the user's compile call as written (double quotes kept), without run_eagerly
    assert finding["fix"]["code"] == 'model.compile(optimizer="adam", loss="mse")'
    statuses = {r["rule_id"]: r for r in report["rules"]}
    for rule_id in ("RD302", "RD601", "RD602", "RD604"):  # CPU: never a silent pass
        assert statuses[rule_id]["status"] == "not_evaluated"
        assert statuses[rule_id]["reason"].startswith("needs a GPU")
