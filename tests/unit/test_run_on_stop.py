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
        after_window=types.SimpleNamespace(expired=False), script_over=False,
        end_script=end_script, stop_signal=None,
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


def test_the_backstop_gives_way_to_a_main_thread_that_is_ending_the_check(tmp_path):
    session = types.SimpleNamespace(end_lock=threading.Lock())
    session.end_lock.acquire()  # the main thread holds it: _end_blocked must return
    _end_blocked(session, 0.0, "a note")  # would end this process otherwise


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
