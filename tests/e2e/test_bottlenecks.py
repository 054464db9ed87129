"""Measured bottlenecks end to end: the real CLI on real scripts (tests/scripts), real TF (slow).

One check per script, shared by the assertions on it (module-scoped fixtures):

- ``input_slow_generator.py``: RD201 at error with a measured share >= 50%, RD204 at the
  ``from_generator`` line; on CPU, xprof's "No step time measured" verdict sits beside
  rnndoctor's own input / compute / host breakdown in report.json.
- ``input_fast_pipeline.py`` (the same job built from arrays, tf ops, a parallel map and a
  prefetch): no RD201 at warning or above.
- ``small_batch_slow_callback.py``: RD301 with the probe's samples/s per batch size, RD404 at the
  callback's construction line.
- ``clean_control.py``: no finding at warning or above; the report (html, md, terminal) shows
  the batch-size and steps_per_execution probes' paired ratios with their intervals (issue 11's
  acceptance; the script compiles with ``steps_per_execution=8``, probed at 1 and 8).

The two input scripts' checks leave out RD301, RD702 and RD403, and the small batch's RD403, so
that the probes only those rules read do not run (``FOCUS``); the clean control runs them all.
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
# More measured steps than the other e2e tests: the rules read medians of step times.
ARGS = ["--steps", "10", "--warmup", "1", "--profile-steps", "2", "--timeout", "240"]
# A check whose tests read neither the batch-size nor the steps_per_execution probe leaves
# out the rules that read them, and so the probes (rnndoctor.engine.PROBE_READERS): 10-20 s
# a check on 2 cores.
FOCUS = ["--ignore", "RD301,RD702,RD403"]
# A check whose tests read no xprof figure (only RD201's evidence rows and RD302, a GPU rule,
# read the profile) profiles no step: the profiler and the xprof conversion cost 2-3 s.
NO_PROFILE = ["--profile-steps", "0"]


def check(script: str, out: Path, *extra: str) -> dict:
    result = subprocess.run(
        [sys.executable, "-m", "rnndoctor", "check", str(SCRIPTS / script), "--out", str(out),
         "--fail-on", "never", *ARGS, *extra],
        cwd=out.parent, capture_output=True, text=True, timeout=300,
        env=dict(os.environ, COLUMNS="200"),
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    doc = json.loads((out / "report.json").read_text())
    assert doc["facts"]["run"]["outcome"] == "completed", doc["facts"]["run"]
    doc["out"] = str(out)
    doc["stdout"] = result.stdout
    return doc


def line_of(script: str, needle: str) -> int:
    text = (SCRIPTS / script).read_text().splitlines()
    return next(i for i, line in enumerate(text, 1) if needle in line)


def findings(doc: dict, rule_id: str) -> list[dict]:
    return [f for f in doc["findings"] if f["rule_id"] == rule_id]


@pytest.fixture(scope="module")
def slow_generator(tmp_path_factory):
    return check("input_slow_generator.py", tmp_path_factory.mktemp("slow") / "report", *FOCUS)


@pytest.fixture(scope="module")
def fast_pipeline(tmp_path_factory):
    return check(
        "input_fast_pipeline.py", tmp_path_factory.mktemp("fast") / "report", *FOCUS, *NO_PROFILE
    )


@pytest.fixture(scope="module")
def small_batch(tmp_path_factory):
    out = tmp_path_factory.mktemp("small") / "report"
    # RD301 and RD404 are read
    return check("small_batch_slow_callback.py", out, "--ignore", "RD403", *NO_PROFILE)


@pytest.fixture(scope="module")
def control(tmp_path_factory):
    out = tmp_path_factory.mktemp("control") / "report"
    return check("clean_control.py", out, "--format", "html,json,md", *NO_PROFILE)


def test_slow_generator_is_input_bound_at_error(slow_generator):
    probes = slow_generator["facts"]["probes"]
    assert probes["input_bound_share"] >= 0.5
    (rd201,) = findings(slow_generator, "RD201")
    evidence = {e["label"]: e for e in rd201["evidence"]}
    if "noisy machine" not in evidence:
        assert rd201["severity"] == "error"
    else:  # issue 11: under another process's load the interval widens; the finding stays
        assert rd201["severity"] in ("error", "warning") or (
            rd201["severity"] == "info" and rd201["gain"].startswith("inconclusive: ")
        ), (rd201, evidence["noisy machine"])
    assert (
        evidence["input-bound share"]["value"] >= 50.0
        and evidence["input-bound share"]["unit"] == "%"
    )
    assert evidence["compute-only step time"]["value"] == probes["compute_only_ms"]
    assert rd201["location"]["line"] == line_of("input_slow_generator.py", "ds = ds.batch(32)")
    assert "removed: about" in rd201["gain"]
    if rd201["severity"] != "info":  # an inconclusive share forecasts no speedup
        assert rd201["speedup"] >= 2.0
    assert ".prefetch(tf.data.AUTOTUNE)" in rd201["fix"]["code"]


def test_slow_generator_names_the_from_generator_line(slow_generator):
    (rd204,) = findings(slow_generator, "RD204")
    assert rd204["location"]["line"] == line_of("input_slow_generator.py", "from_generator(")
    assert "Dataset.from_generator" in rd204["message"]
    data = slow_generator["facts"]["data"]
    assert data["source_kinds"] == ["generator"] and data["python_ops"]


def test_cpu_report_has_the_breakdown_beside_xprofs_verdict(slow_generator):
    facts = slow_generator["facts"]
    assert facts["environment"]["gpu_count"] == 0
    profile = facts["profile"]
    assert profile["xprof_step_time_measured"] is False
    assert profile["xprof_verdict"].startswith("No step time measured")
    pipeline = profile["input_pipeline"]
    assert pipeline["input_share"] is None
    assert pipeline["not_measured"].startswith("No step time measured")
    assert any("Generator" in op["name"] for op in pipeline["slowest_ops"])
    b = facts["probes"]["breakdown"]
    assert b["input_ms"] > 0 and b["compute_ms"] > 0 and b["host_ms"] == 0.0
    total = b["input_ms"] + b["compute_ms"] + b["host_ms"] + b["other_ms"]
    assert total == pytest.approx(b["step_ms"], abs=1e-3)
    assert b["step_ms"] == facts["steps"]["median_step_time_ms"]


def test_fast_pipeline_is_not_input_bound(fast_pipeline):
    assert [f["severity"] for f in findings(fast_pipeline, "RD201")] in ([], ["info"])
    assert fast_pipeline["facts"]["probes"]["input_bound_share"] < 0.2
    data = fast_pipeline["facts"]["data"]
    assert data["parallel_maps"] == 1 and data["prefetch_last"] is True
    assert not findings(fast_pipeline, "RD204") and not findings(fast_pipeline, "RD202")


def test_small_batch_gives_rd301_with_samples_per_second_per_batch_size(small_batch):
    (rd301,) = findings(small_batch, "RD301")
    points = small_batch["facts"]["probes"]["batch_probe"]
    assert [p["value"] for p in points] == [4, 8, 16]
    evidence = {e["label"]: e for e in rd301["evidence"]}
    for p in points:
        assert evidence[f"batch {p['value']}"]["value"] == p["samples_per_s"]
        assert evidence[f"batch {p['value']}"]["unit"] == "samples/s"
    assert rd301["speedup"] >= 1.5
    assert "batch_size=" in rd301["fix"]["code"] and "learning rate" in rd301["fix"]["title"]


def test_sleeping_callback_gives_rd404_at_its_line(small_batch):
    (rd404,) = findings(small_batch, "RD404")
    assert "SleepyLogger" in rd404["message"]
    line = line_of("small_batch_slow_callback.py", "logger = SleepyLogger()")
    assert rd404["location"]["line"] == line
    (cb,) = small_batch["facts"]["probes"]["callbacks"]
    assert cb["name"] == "SleepyLogger" and cb["per_step_ms"] >= 3.5  # time.sleep(0.004)


def test_clean_control_has_no_finding_at_warning_or_above(control):
    loud = [
        (f["rule_id"], f["severity"], f["message"])
        for f in control["findings"]
        if f["severity"] in ("warning", "error")
    ]
    assert loud == []
    probes = control["facts"]["probes"]
    assert probes["compute_only_ms"] and probes["batch_probe"]


def test_clean_control_report_shows_the_probes_intervals(control):
    probes = control["facts"]["probes"]
    out = Path(control["out"])
    html = (out / "report.html").read_text()
    md = (out / "report.md").read_text().replace("\\", "")  # md_text backslashes "_"
    terminal = control["stdout"]
    assert 'id="intervals"' in html
    for point in probes["batch_probe"][1:]:  # each larger batch, paired with the user's
        paired = point["paired"]
        assert paired["pairs"] >= 1 and paired["low"] <= paired["ratio"] <= paired["high"]
        line = f"batch {point['value']} vs {probes['batch_probe'][0]['value']}: samples/s"
        assert line in html and line in md and line in terminal
    # steps_per_execution=8 in the script's compile: probed at 1 and 8, paired (A = 1, B = 8)
    assert probes["spe_probe_not_measured"] is None
    one, eight = probes["spe_probe"]
    assert (one["value"], eight["value"]) == (1, 8)
    paired = eight["paired"]
    assert paired["pairs"] >= 1 and paired["low"] <= paired["ratio"] <= paired["high"]
    assert (paired["a"], paired["b"]) == ("1", "8")
    line = "steps_per_execution 8 vs 1: step time 1 / 8 = "
    for text in (html, md, terminal):
        (shown,) = [t for t in text.splitlines() if line in t]
        if paired["pairs"] >= 3:
            assert f"{paired['ratio']:.2f}x (90% interval {paired['low']:.2f}–" in shown
        else:  # 1 or 2 pairs give no bootstrap interval, and the report says so
            assert f"{paired['ratio']:.2f}x (no interval: {paired['pairs']} pair" in shown
    statuses = {r["rule_id"]: r["status"] for r in control["rules"]}
    assert statuses["RD403"] in ("passed", "fired")  # evaluated on the pair (info at most)
