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

import signal
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
    raise Stopped(signal.Signals(signum).name)


def stop_on_signals() -> None:
    """Installs the handlers (from the main thread; SIGINT keeps Python's own, which raises
    ``KeyboardInterrupt``). Signals that were ignored when the CLI started (``nohup``) stay
    ignored."""
    for signum in STOP_SIGNALS:
        if signal.getsignal(signum) is not signal.SIG_IGN:
            signal.signal(signum, _stop)
