"""`rnndoctor.cli.workers.native_crash`: which ended worker makes `--workers` run once more."""

from __future__ import annotations

import signal
from pathlib import Path

from rnndoctor.cli import supervisor
from rnndoctor.cli.workers import Worker, native_crash


def _worker(index: int, status: int | None) -> Worker:
    return Worker(index, Path("."), None, supervisor.ChildRun(status=status), "run")  # type: ignore[arg-type]


def test_the_first_worker_a_native_crash_signal_ended_is_the_crash():
    workers = [_worker(0, None), _worker(1, -int(signal.SIGABRT)), _worker(2, -int(signal.SIGSEGV))]
    assert native_crash(workers) is workers[1]


def test_an_exit_status_a_kill_or_no_status_is_not_a_crash():
    # 1: the script failed in Python; -9: killed (SIGKILL: the OOM killer, a user); None: ended
    # by rnndoctor after its peer failed; -15: SIGTERM
    workers = [_worker(0, 1), _worker(1, -int(signal.SIGKILL)), _worker(2, None), _worker(3, -15)]
    assert native_crash(workers) is None
