"""`rnndoctor check` on a tf.distribute MirroredStrategy script over 2 logical CPU devices,
through the real CLI and capture child (slow): one run shared by every assert."""

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


def _line_of(path: Path, needle: str) -> int:
    return next(i for i, t in enumerate(path.read_text().splitlines(), 1) if needle in t)


@pytest.fixture(scope="module")
def mirrored(tmp_path_factory) -> tuple[subprocess.CompletedProcess, dict, Path]:
    out = tmp_path_factory.mktemp("mirrored") / "r"
    result = subprocess.run(
        [sys.executable, "-m", "rnndoctor", "check", str(SCRIPTS / "mirrored_lstm.py"),
         "--out", str(out), "--format", "json,md,html", "--fail-on", "never", "--no-probes", *FAST],
        cwd=out.parent, capture_output=True, text=True, timeout=300,
        env=dict(os.environ, COLUMNS="200"),
    )  # fmt: skip
    report = out / "report.json"
    return result, json.loads(report.read_text()) if report.is_file() else {}, out


def test_the_strategy_its_two_replicas_and_the_per_replica_batch(mirrored):
    result, doc, _ = mirrored
    assert result.returncode == 0, result.stderr
    st = doc["facts"]["strategy"]
    assert st["strategy"] == "MirroredStrategy" and st["replicas"] == 2 and st["workers"] == 1
    assert st["global_batch_size"] == 32 and st["per_replica_batch_size"] == 16
    assert st["distributed_by"] == "keras"  # fit distributed the dataset itself
    assert st["auto_shard_policy"] == "AUTO" and st["auto_shard_resolved"] == "OFF"
    script = SCRIPTS / "mirrored_lstm.py"
    assert st["dataset_location"]["line"] == _line_of(script, "# the dataset line")
    (worker,) = st["per_worker"]
    assert worker["task"] == "local" and worker["outcome"] == "completed"
    assert worker["median_step_time_ms"] == doc["facts"]["steps"]["median_step_time_ms"]


def test_the_usual_findings_under_the_strategy(mirrored):
    _, doc, _ = mirrored
    assert doc["facts"]["run"]["outcome"] == "completed"
    (rd101,) = [f for f in doc["findings"] if f["rule_id"] == "RD101"]
    assert rd101["location"]["line"] == _line_of(SCRIPTS / "mirrored_lstm.py", "# RD101")


def test_the_reports_show_the_strategy_section(mirrored):
    _, _, out = mirrored
    md = (out / "report.md").read_text()
    assert "## Distribution strategy" in md and "`MirroredStrategy`: 2 replicas in sync" in md
    assert "per replica 16" in md
    html = (out / "report.html").read_text()
    assert '<section id="strategy">' in html and "<code>MirroredStrategy</code>" in html
