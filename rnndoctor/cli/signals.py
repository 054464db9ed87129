"""SIGTERM and SIGHUP stop a check as Ctrl-C does.

The capture child runs in its own session (:mod:`rnndoctor.cli.supervisor`), so a signal sent to
``rnndoctor``'s process group (a CI job cancelled, ``timeout``, a closed terminal) never reaches
it; with Python's default action the parent died at once and left the child running, past
``--timeout``. Here both signals raise :class:`Stopped` (a ``KeyboardInterrupt``) in the parent's
main thread, so every path that handles Ctrl-C ends the script's process tree, writes the partial
report and exits with ``ExitCode.INTERRUPTED`` (130). Imports nothing heavy: the CLI installs it
before any command runs.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

# The signals that stop a check as Ctrl-C does: SIGTERM (kill, timeout(1), a cancelled CI job)
# and SIGHUP (the terminal closed).
STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


class Stopped(KeyboardInterrupt):
    """A stop signal reached the CLI; ``cause`` names it (``"SIGTERM"``)."""

    def __init__(self, cause: str) -> None:
        super().__init__(cause)
        self.cause = cause


def cause_of(exc: BaseException) -> str:
    """What interrupted the check: the signal's name, or ``"Ctrl-C"`` (SIGINT)."""
    return exc.cause if isinstance(exc, Stopped) else "Ctrl-C"


def _stop(signum: int, frame: FrameType | None) -> None:
    # Only the first: a second signal while the process tree is being ended would abandon it.
    for other in STOP_SIGNALS:
        signal.signal(other, signal.SIG_IGN)
    if signum == signal.SIGHUP:
        _away_from_the_terminal()
    raise Stopped(signal.Signals(signum).name)


def _away_from_the_terminal() -> None:
    """After SIGHUP the terminal is gone and writing to it fails (EIO), which would replace the
    stop with an OSError in the middle of the cleanup: stdout and stderr go to /dev/null."""
    try:
        null = os.open(os.devnull, os.O_WRONLY)
    except OSError:
        return
    for fd in (1, 2):
        try:
            os.dup2(null, fd)
        except OSError:
            pass
    os.close(null)


@contextmanager
def deferred() -> Iterator[None]:
    """Within the block, Ctrl-C (SIGINT) and the stop signals wait until it has finished, then
    raise as they would have (``KeyboardInterrupt``, :class:`Stopped`): the end of a process
    tree (:func:`rnndoctor.cli.supervisor.end_process_tree`) is never abandoned halfway by a
    second signal (a CI runner's SIGTERM after a Ctrl-C, ``timeout`` firing during the sweep).
    A block that raises keeps its own exception. Only handlers that raise (Python's SIGINT
    handler, this module's) are deferred, and only in the main thread, where Python runs them;
    elsewhere nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []

    def record(signum: int, frame: FrameType | None) -> None:
        caught.append(signum)

    saved = {}
    for signum in (signal.SIGINT, *STOP_SIGNALS):
        handler = signal.getsignal(signum)
        if handler is signal.default_int_handler or handler is _stop:
            saved[signum] = handler
            signal.signal(signum, record)
    try:
        yield
    finally:
        for signum, handler in saved.items():
            signal.signal(signum, handler)
    if caught:  # the block finished: the first signal raises now
        if caught[0] == signal.SIGINT:
            raise KeyboardInterrupt
        _stop(caught[0], None)


def stop_on_signals() -> None:
    """Installs the handlers (from the main thread; SIGINT keeps Python's own, which raises
    ``KeyboardInterrupt``). Signals that were ignored when the CLI started (``nohup``) stay
    ignored."""
    for signum in STOP_SIGNALS:
        if signal.getsignal(signum) is not signal.SIG_IGN:
            signal.signal(signum, _stop)
