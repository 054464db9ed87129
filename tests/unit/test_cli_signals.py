"""SIGTERM and SIGHUP stop a check as Ctrl-C does (rnndoctor/cli/signals.py); the end-to-end
case is tests/e2e/test_corpus.py's "terminated"."""

from __future__ import annotations

import os
import signal
import time

import pytest

from rnndoctor.cli.signals import STOP_SIGNALS, Stopped, cause_of, stop_on_signals


@pytest.fixture
def handlers():
    saved = {signum: signal.getsignal(signum) for signum in STOP_SIGNALS}
    yield
    for signum, handler in saved.items():
        signal.signal(signum, handler)


def test_sigterm_raises_stopped_once_then_both_signals_are_ignored(handlers):
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGHUP, signal.SIG_DFL)
    stop_on_signals()
    with pytest.raises(Stopped) as stopped:
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)  # the handler runs at the next bytecode
    assert isinstance(stopped.value, KeyboardInterrupt) and cause_of(stopped.value) == "SIGTERM"
    # a second signal while the process tree is being ended does not abandon that
    assert all(signal.getsignal(s) is signal.SIG_IGN for s in STOP_SIGNALS)
    assert cause_of(KeyboardInterrupt()) == "Ctrl-C"


def test_a_signal_ignored_at_start_stays_ignored(handlers):
    signal.signal(signal.SIGHUP, signal.SIG_IGN)  # as under nohup
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    stop_on_signals()
    assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
    assert signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL
