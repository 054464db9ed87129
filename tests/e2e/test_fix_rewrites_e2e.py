"""Fixes you can paste, end to end (issue 12): the real CLI on two small scripts (slow).

- ``timeseries_float64.py``: a ``keras.utils.timeseries_dataset_from_array`` pipeline of float64
  windows, compiled with metrics. RD205 points at the util's line and caches the user's own
  name; RD207 casts the array the util was given at its assignment (unsafe: ``targets`` is
  sliced from it, so it gets float32 too); RD403 (where it fires) rewrites the compile call at its
  line, keeping the metrics.
- ``batch_size_name.py``: float64 arrays and ``fit(..., batch_size=batch_size)``. RD301 rewrites
  the ``batch_size = 4`` line; RD207 appends the cast to the array's assignment.
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
# No profiled step: no test here reads an xprof figure (the profiler and its conversion: 2-3 s).
ARGS = ["--steps", "10", "--warmup", "1", "--profile-steps", "0", "--timeout", "240"]
# A test that reads no rule of the batch-size probe (RD301, RD702) leaves them out, and so the
# probe (rnndoctor.engine.PROBE_READERS): about 10 s a check on 2 cores.
NO_BATCH_PROBE = ("--ignore", "RD301,RD702")


def check(script: str, out: Path, *options: str) -> dict:
    result = subprocess.run(
        [sys.executable, "-m", "rnndoctor", "check", str(SCRIPTS / script), "--out", str(out),
         "--fail-on", "never", *ARGS, *options],
        cwd=out.parent, capture_output=True, text=True, timeout=300,
        env=dict(os.environ, COLUMNS="200"),
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    return json.loads((out / "report.json").read_text())


def line_of(script: str, needle: str) -> int:
    text = (SCRIPTS / script).read_text().splitlines()
    return next(i for i, line in enumerate(text, 1) if needle in line)


def by_rule(doc: dict) -> dict[str, dict]:
    return {f["rule_id"]: f for f in doc["findings"]}


@pytest.fixture(scope="module")
def timeseries(tmp_path_factory):
    return check("timeseries_float64.py", tmp_path_factory.mktemp("ts") / "report", *NO_BATCH_PROBE)


@pytest.fixture(scope="module")
def named_batch(tmp_path_factory):
    return check("batch_size_name.py", tmp_path_factory.mktemp("bs") / "report")


def test_timeseries_pipeline_findings_point_at_its_line_with_fitting_fixes(timeseries):
    line = line_of("timeseries_float64.py", "# ts-line")
    found = by_rule(timeseries)
    facts = timeseries["facts"]
    assert facts["data"]["input_dtypes"] == ["float64"]
    compile_line = line_of("timeseries_float64.py", "# compile-line")
    assert facts["fit"]["compile_location"]["line"] == compile_line
    rd207 = found["RD207"]
    series_line = line_of("timeseries_float64.py", "series-line")
    assert facts["data"]["array_location"]["line"] == series_line
    assert rd207["location"]["line"] == series_line
    assert rd207["fix"]["code"] == 'series = rng.normal(size=(3000, 6)).astype("float32")'
    assert rd207["fix"]["safety"] == "unsafe"
    for rule_id in ("RD201", "RD202", "RD205"):
        if rule_id in found:  # measured rules: they fire when this machine's timing says so
            assert found[rule_id]["location"]["line"] == line, rule_id
    if "RD205" in found:
        assert found["RD205"]["fix"]["code"] == "dataset_train = dataset_train.cache()"
    if "RD403" in found:
        assert 'metrics=["mae"]' in found["RD403"]["fix"]["code"]
        assert found["RD403"]["location"]["line"] == facts["fit"]["compile_location"]["line"]


def test_named_batch_size_is_rewritten_where_it_is_assigned(named_batch):
    found = by_rule(named_batch)
    fit = named_batch["facts"]["fit"]
    assert fit["batch_size_location"]["line"] == line_of("batch_size_name.py", "# batch-line")
    assert fit["x_location"]["line"] == line_of("batch_size_name.py", "# x-line")
    rd207 = found["RD207"]
    assert rd207["location"]["line"] == line_of("batch_size_name.py", "# x-line")
    assert rd207["fix"]["code"].endswith('.astype("float32")')
    if "RD301" in found:  # measured: the batch-size probe decides
        assert found["RD301"]["location"]["line"] == line_of("batch_size_name.py", "# batch-line")
        assert found["RD301"]["fix"]["before"] == "batch_size = 4"
    if "RD403" in found:
        assert 'metrics=["mae"],' in found["RD403"]["fix"]["code"]


def test_a_cost_only_epoch_1_pays_is_weighed_by_the_job(tmp_path):
    doc = check("generator_cached.py", tmp_path / "report", "--ignore", "RD301,RD702,RD403")
    (rd201,) = [f for f in doc["findings"] if f["rule_id"] == "RD201"]
    assert "Epoch 1 only:" in rd201["message"] and "of a 4-epoch job" in rd201["message"]
    assert f"line {line_of('generator_cached.py', '# cache-line')}" in rd201["message"]
    rows = {e["label"]: e["value"] for e in rd201["evidence"]}
    job = rows["job-wide input share"]
    assert job < 26  # at most a quarter of a (<= 100%) first-epoch share
    assert rd201["severity"] == ("warning" if job >= 20 else "info")
