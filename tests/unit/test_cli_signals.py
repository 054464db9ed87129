"""SIGTERM and SIGHUP stop a check as Ctrl-C does (rnndoctor/cli/signals.py); the end-to-end
case is tests/e2e/test_corpus.py's "terminated"."""

from __future__ import annotations

import os
import signal
import time

import pytest

from rnndoctor.cli.signals import STOP_SIGNALS, Stopped, cause_of, deferred, stop_on_signals


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


def test_a_signal_during_a_deferred_block_waits_for_its_end(handlers):
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGHUP, signal.SIG_DFL)
    stop_on_signals()
    saved_int = signal.getsignal(signal.SIGINT)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        steps = []
        with pytest.raises(Stopped):
            with deferred():
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(0.2)
                steps.append("the cleanup went on")  # before: Stopped here, cleanup abandoned
        assert steps == ["the cleanup went on"]
        with pytest.raises(KeyboardInterrupt) as interrupted:
            with deferred():
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(0.2)
                steps.append("again")
        assert steps[-1] == "again" and cause_of(interrupted.value) == "Ctrl-C"
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # restored
        with pytest.raises(OSError):  # the block's own exception is kept
            with deferred():
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(0.2)
                raise OSError("the block's own")
    finally:
        signal.signal(signal.SIGINT, saved_int)
