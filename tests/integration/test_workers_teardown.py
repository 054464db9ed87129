"""The --workers launcher ends every worker's process tree: on a timeout, after one worker
failed (the others would wait in a collective), and on Ctrl-C. Real processes, no TensorFlow:
each worker is a Python process that sleeps, and starts a child of its own."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import uuid

import psutil

from rnndoctor.cli import supervisor, workers

_SLEEPER = (
    "import subprocess, sys, time; "
    "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)']); time.sleep(120)"
)


def _start(tmp_path, codes: list[str]) -> list[workers.Worker]:
    run_id = uuid.uuid4().hex
    env = dict(os.environ, **{supervisor.RUN_ID_VAR: run_id})
    started = []
    for i, code in enumerate(codes):
        folder = tmp_path / f"worker-{i}"
        folder.mkdir()
        proc = subprocess.Popen([sys.executable, "-c", code], env=env, start_new_session=True)
        run = supervisor.ChildRun(started_s=time.monotonic())
        started.append(workers.Worker(i, folder, proc, run, run_id))
    time.sleep(0.5)  # the grandchildren start
    return started


def _left(started: list[workers.Worker]) -> list[int]:
    return supervisor.marked_processes(started[0].run_id)


def test_a_timeout_ends_every_worker_and_its_children(tmp_path):
    started = _start(tmp_path, [_SLEEPER, _SLEEPER])
    assert len(_left(started)) == 4
    workers.wait_workers(started, timeout_s=1.0)
    assert all(w.run.timed_out for w in started)
    assert _left(started) == []


def test_a_failed_worker_ends_the_others_after_the_grace(tmp_path, monkeypatch):
    monkeypatch.setattr(workers, "_PEER_GRACE_S", 0.5)
    started = _start(tmp_path, ["import sys; sys.exit(3)", _SLEEPER])
    begin = time.monotonic()
    workers.wait_workers(started, timeout_s=60.0)
    assert time.monotonic() - begin < 30  # not the timeout: the grace after the failure
    assert started[0].run.status == 3 and not started[1].run.timed_out
    assert _left(started) == []


def test_ctrl_c_ends_every_worker(tmp_path):
    started = _start(tmp_path, [_SLEEPER, _SLEEPER])
    threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT)).start()
    workers.wait_workers(started, timeout_s=60.0)
    assert all(w.run.interrupted for w in started)
    assert _left(started) == []
    assert not any(psutil.pid_exists(w.proc.pid) and w.proc.poll() is None for w in started)


def test_a_spawn_that_fails_on_the_second_worker_ends_the_first(tmp_path, monkeypatch):
    from rnndoctor.options import Options

    run_id = uuid.uuid4().hex
    monkeypatch.setattr(
        supervisor, "capture_command", lambda *a, **k: [sys.executable, "-c", _SLEEPER]
    )
    real_popen = subprocess.Popen
    started: list[subprocess.Popen] = []
    running_before: list[int] = []

    def popen(command, **kwargs):
        if started:
            raise OSError(24, "Too many open files")  # the second worker's spawn
        proc = real_popen(command, **kwargs)
        started.append(proc)
        time.sleep(0.5)  # its own child starts
        running_before.extend(supervisor.marked_processes(run_id))
        return proc

    monkeypatch.setattr(workers.subprocess, "Popen", popen)
    options = Options(workers=2, out=str(tmp_path))
    try:
        workers.start_workers(tmp_path / "train.py", [], options, tmp_path, run_id)
    except OSError as exc:
        assert exc.errno == 24
    else:
        raise AssertionError("start_workers did not re-raise the spawn's OSError")
    assert len(started) == 1
    assert len(running_before) == 2  # the first worker and its child were running
    assert started[0].poll() is not None
    assert supervisor.marked_processes(run_id) == []
