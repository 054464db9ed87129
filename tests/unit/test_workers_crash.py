"""`rnndoctor.cli.workers.native_crash`: which ended worker makes `--workers` run once more."""

from __future__ import annotations

import signal
from pathlib import Path

from rnndoctor.cli import supervisor
from rnndoctor.cli.workers import Worker, native_crash

ABRT, SEGV = -int(signal.SIGABRT), -int(signal.SIGSEGV)


def _worker(index: int, status: int | None, ended_s: float | None = None, **run) -> Worker:
    child = supervisor.ChildRun(status=status, **run)
    ended = ended_s if ended_s is not None or status is None else float(index)
    return Worker(index, Path("."), None, child, "run", ended)  # type: ignore[arg-type]


def test_the_first_worker_to_fail_is_the_crash_when_a_native_crash_signal_ended_it():
    workers = [_worker(0, None), _worker(1, ABRT, 5.0), _worker(2, SEGV, 7.0)]
    assert native_crash(workers) is workers[1]
    workers = [_worker(0, None), _worker(1, ABRT, 9.0), _worker(2, SEGV, 7.0)]
    assert native_crash(workers) is workers[2]  # worker 2 crashed first


def test_a_crash_after_another_worker_failed_is_its_consequence():
    # worker 0 failed in Python first (exit status 1); TensorFlow then aborted worker 1, left
    # in a broken collective: running again would not help
    workers = [_worker(0, 1, 3.0), _worker(1, ABRT, 4.0)]
    assert native_crash(workers) is None


def test_an_exit_status_a_kill_or_no_status_is_not_a_crash():
    # 1: the script failed in Python; -9: killed (SIGKILL: the OOM killer, a user); None: ended
    # by rnndoctor after its peer failed; -15: SIGTERM
    workers = [_worker(0, 1), _worker(1, -int(signal.SIGKILL)), _worker(2, None), _worker(3, -15)]
    assert native_crash(workers) is None
    assert native_crash([_worker(0, -int(signal.SIGKILL))]) is None


def test_no_run_again_after_a_timeout_or_ctrl_c():
    assert native_crash([_worker(0, ABRT, 1.0), _worker(1, None, timed_out=True)]) is None
    assert native_crash([_worker(0, ABRT, 1.0), _worker(1, None, interrupted=True)]) is None
