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


def test_the_workers_run_again_up_to_three_attempts_where_the_time_left_allows():
    from rnndoctor.cli.workers import MAX_ATTEMPTS, may_run_again

    assert MAX_ATTEMPTS == 3
    assert may_run_again(1, 20.0, 30.0) and may_run_again(2, 20.0, 30.0)
    assert not may_run_again(3, 20.0, 1e9)  # three attempts in all, whatever the time left
    assert not may_run_again(1, 20.0, 29.9)  # 1.5 times the longest attempt must fit
    assert may_run_again(2, 10.0, float("inf"))  # no --timeout


def test_each_crashed_attempt_is_kept_and_the_note_names_them_all(tmp_path):
    from rnndoctor.cli.workers import attempts_note, keep_attempt

    texts = []
    for attempt in (1, 2):
        (tmp_path / "workers" / "worker-1").mkdir(parents=True)
        (tmp_path / "workers" / "worker-1" / "script.log").write_text(f"attempt {attempt}")
        (tmp_path / "profile").mkdir()
        texts.append(keep_attempt(1, ABRT, tmp_path, attempt))
        log = tmp_path / f"workers-attempt-{attempt}" / "worker-1" / "script.log"
        assert log.read_text() == f"attempt {attempt}"  # kept, not overwritten
        assert not (tmp_path / "workers").exists() and not (tmp_path / "profile").exists()
        assert texts[-1] == (
            f"worker 1 was ended by SIGABRT (a crash in native code) in the "
            f"{('first', 'second')[attempt - 1]} attempt (its log: {log})"
        )
    assert (
        attempts_note(texts[:1], False)
        == f"{texts[0]}; the workers ran once more; this report is the second's"
    )
    assert attempts_note(texts[:1], True).endswith(
        "once more; the second attempt ended the same way"
    )
    assert attempts_note(texts, False) == (
        f"{texts[0]}; {texts[1]}; the workers ran twice more; this report is the third's"
    )
    assert attempts_note(texts, True).endswith("twice more; the third attempt ended the same way")
