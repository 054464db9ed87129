"""How the run-on after the window stops a script that blocks (``rnndoctor/capture/
after_window.py``: the stop signal's handler, ``rnndoctor/capture/__main__.py``: the backstop),
and that saves from two threads never mix (``Facts.save``). The review of the change: a stop
signal arriving after the script had returned would raise StopScript in rnndoctor's own code
(exit 70), a backstop whose save failed would keep the lock and hang the check, and two
threads saving at once shared one temporary file. No TensorFlow."""

from __future__ import annotations

import json
import signal
import threading
import types

import pytest

from rnndoctor.capture import after_window
from rnndoctor.capture.__main__ import _end_blocked
from rnndoctor.facts import Facts, RunInfo

pytestmark = pytest.mark.skipif(after_window._STOP_SIGNAL is None, reason="no real-time signals")


class Stopped(Exception):
    pass


def _session():
    def end_script():
        raise Stopped

    return types.SimpleNamespace(
        after_window=types.SimpleNamespace(expired=False, own=False), script_over=False,
        end_script=end_script, stop_signal=None, stopping=False,
    )  # fmt: skip


@pytest.fixture
def restore_handler():
    previous = signal.getsignal(after_window._STOP_SIGNAL)
    yield
    signal.signal(after_window._STOP_SIGNAL, previous)


def _signal_self(sig: int) -> None:
    signal.pthread_kill(threading.main_thread().ident, sig)


def test_the_stop_signal_ends_the_script_only_after_the_budget_and_before_its_return(
    restore_handler,
):
    session = _session()
    after_window.install_stop_signal(session)
    assert session.stop_signal == after_window._STOP_SIGNAL
    _signal_self(session.stop_signal)  # a stray signal, the budget not spent: nothing
    session.after_window.expired = True
    with pytest.raises(Stopped):  # the budget spent, the script running: end_script
        _signal_self(session.stop_signal)
        for _ in range(1000):  # the handler runs at the next bytecode
            pass
    session.script_over = True  # the script returned: rnndoctor's own code is not stopped
    _signal_self(session.stop_signal)


def test_the_backstop_gives_way_to_the_main_thread_or_ends_the_process_whatever_its_save_does(
    monkeypatch,
):
    from rnndoctor.capture import __main__ as child

    ended = []
    monkeypatch.setattr(child, "end_process", ended.append)
    session = types.SimpleNamespace(end_lock=threading.Lock())
    session.end_lock.acquire()  # the main thread holds it: the backstop leaves the end to it
    _end_blocked(session, 0.0, "a note")
    assert ended == []

    def failing_save(*args, **kwargs):
        raise OSError("the --out folder is gone")

    monkeypatch.setattr(child, "_finish", failing_save)
    session = types.SimpleNamespace(end_lock=threading.Lock())
    _end_blocked(session, 0.0, "a note")  # its save fails: the process ends all the same
    assert ended == [0] and session.end_lock.locked()


def test_the_stop_signal_waits_for_a_stop_already_unwinding_and_for_rnndoctors_own_timing(
    restore_handler,
):
    session = _session()
    session.stopping = False
    session.after_window.own = False
    after_window.install_stop_signal(session)
    session.after_window.expired = True
    session.stopping = True  # end_script's tracer is at work: a second stop would break it
    _signal_self(session.stop_signal)
    session.stopping, session.after_window.own = False, True  # timing predict vs model(x)
    _signal_self(session.stop_signal)


def test_saves_from_two_threads_never_leave_a_half_written_file(tmp_path):
    path = tmp_path / "facts.json"
    facts = Facts(run=RunInfo(script="s.py", argv=[], cwd="."))
    facts.run.notes = [f"note {i}" for i in range(2000)]  # a file large enough to interleave
    errors = []

    def save():
        try:
            for _ in range(30):
                facts.save(path)
        except Exception as exc:  # noqa: BLE001 - the test reports any failure
            errors.append(exc)

    threads = [threading.Thread(target=save) for _ in range(2)]
    for t in threads:
        t.start()
    for _ in range(60):
        if path.exists():
            json.loads(path.read_text())  # never half a file
    for t in threads:
        t.join()
    assert errors == []
    assert Facts.load(path).run.notes == facts.run.notes
    assert sorted(p.name for p in tmp_path.iterdir()) == ["facts.json"]  # no temporary left


def test_a_killed_saves_leftover_is_found_by_its_prefix_and_no_users_file_is(tmp_path):
    from rnndoctor.facts import SAVE_TEMP_PREFIX, save_leftovers

    left = tmp_path / f"{SAVE_TEMP_PREFIX}abc123.tmp"
    left.write_text("{")
    (tmp_path / "facts.json.old.tmp").write_text("the user's")
    (tmp_path / "notes.tmp").write_text("the user's")
    assert save_leftovers(tmp_path) == [left]
