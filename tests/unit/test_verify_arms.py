"""The warm arms' start (``WarmRunner.prepare``) with fake children: at most two warm up at once,
each has its own deadline, and each gets ``TF_FORCE_GPU_ALLOW_GROWTH`` unless the user set it."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

from rnndoctor.cli import arms, supervisor
from rnndoctor.options import Options

# A fake capture child: logs its start, environment and readiness, sleeps the seconds its
# "script" holds, says ready on its control pipe, then waits for the pipe's end.
_CHILD = """
import json, os, sys, time
log, control, script = sys.argv[1], sys.argv[2], sys.argv[3]
read_fd, write_fd = (int(v) for v in control.split(","))
def note(event):
    with open(log, "a") as f:
        f.write(json.dumps({"script": script, "event": event, "t": time.time(),
                            "growth": os.environ.get("TF_FORCE_GPU_ALLOW_GROWTH")}) + "\\n")
note("start")
time.sleep(float(open(script).read()))
os.write(write_fd, b'{"ready": true}\\n')
note("ready")
os.read(read_fd, 1)
"""


@pytest.fixture
def fake_children(tmp_path, monkeypatch):
    child = tmp_path / "child.py"
    child.write_text(_CHILD)
    log = tmp_path / "log.jsonl"

    def command(script, script_args, options):
        return [sys.executable, str(child), str(log), options.control, str(script)]

    monkeypatch.setattr(supervisor, "capture_command", command)
    return log


def _scripts(tmp_path: Path, sleeps: list[float]) -> list[Path]:
    paths = []
    for i, seconds in enumerate(sleeps):
        path = tmp_path / f"s{i}.py"
        path.write_text(str(seconds))
        paths.append(path)
    return paths


def _events(log: Path) -> list[dict]:
    return [json.loads(line) for line in log.read_text().splitlines()]


def test_at_most_two_arms_warm_up_at_once_each_with_its_own_deadline(tmp_path, fake_children):
    scripts = _scripts(tmp_path, [1.0, 30.0, 0.5, 1.0])  # the second never gets ready in time
    runner = arms.WarmRunner([], Options(out=str(tmp_path / "o")), tmp_path / "arms")
    began = time.monotonic()
    try:
        runner.prepare(scripts, timeout_s=2.5)
        spent = time.monotonic() - began
        states = [runner.arms[s.resolve()] for s in scripts]
        assert [a.ready for a in states] == [True, False, True, True]
        assert states[1].ended_early and states[1].closed
    finally:
        runner.close()
    assert spent > 3.0  # the fourth: ready past 2.5 s, on its own deadline
    events = _events(fake_children)
    running = most = 0
    for event in sorted(events, key=lambda e: e["t"]):
        running += 1 if event["event"] == "start" else -1
        most = max(most, running)
    assert most == 2  # a killed child never says ready: it stays counted, still at most 2
    assert {e["growth"] for e in events} == {"true"}


def test_a_users_gpu_memory_growth_setting_is_kept():
    assert arms.arm_environment({})["TF_FORCE_GPU_ALLOW_GROWTH"] == "true"
    env = arms.arm_environment({"TF_FORCE_GPU_ALLOW_GROWTH": "false", "X": "1"})
    assert env["TF_FORCE_GPU_ALLOW_GROWTH"] == "false" and env["X"] == "1"
    assert env["PYTHONUNBUFFERED"] == "1"


def test_the_timeout_bounds_the_verification_budget_and_each_run():
    from rnndoctor.cli.verify import verify_limits

    # no --timeout: 3x the plain check, a run max(60, 3x plain)
    assert verify_limits(Options(out="o", timeout=None), 30.0) == (90.0, 90.0, None)
    # --timeout 100 after a 30 s plain check: 100 - 30 - 5 s for the reports is left
    budget, run, left = verify_limits(Options(out="o", timeout=100.0), 30.0)
    assert (budget, run, left) == (65.0, 65.0, 65.0)
    budget, run, left = verify_limits(Options(out="o", timeout=600.0, verify_budget=20.0), 10.0)
    assert (budget, run, left) == (20.0, 60.0, 585.0)
    assert verify_limits(Options(out="o", timeout=20.0), 30.0)[2] == 0.0


def test_no_arm_is_waited_for_past_the_runners_deadline(tmp_path, fake_children):
    scripts = _scripts(tmp_path, [30.0, 30.0, 0.1])
    runner = arms.WarmRunner([], Options(out=str(tmp_path / "o")), tmp_path / "arms")
    runner.deadline = time.monotonic() + 1.5
    began = time.monotonic()
    try:
        runner.prepare(scripts, timeout_s=60.0)
        assert time.monotonic() - began < 5.0
        assert scripts[2].resolve() not in runner.arms  # never started: --timeout was spent
        end = runner(scripts[0], tmp_path / "run", 60.0)
        assert end.timed_out and runner.started == 2  # and no fresh child was started
    finally:
        runner.close()
