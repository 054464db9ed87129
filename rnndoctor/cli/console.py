"""What one command prints, and how: redacted or not, with tracebacks or not."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

import typer


@dataclass
class Console:
    """The terminal of one ``rnndoctor`` invocation.

    Attributes:
        scrub: applied to every line printed (``--redact`` sets a scrubber: the terminal output
            is redacted as the reports are).
        debug: ``check --debug``: a failure shows the script's tracebacks, and an internal error
            its own.
    """

    scrub: Callable[[str], str] = str
    debug: bool = False

    def redact(
        self, enabled: bool, cwd: str | None = None, script: str | os.PathLike | None = None
    ) -> None:
        """Turns terminal redaction on (paths relative to ``cwd``; the values of ``script``'s
        secret literals removed) or off."""
        if enabled:
            from rnndoctor.redact import make_scrubber

            self.scrub = make_scrubber(cwd, script=script)
        else:
            self.scrub = str

    def say(self, message: str, err: bool = False) -> None:
        """Prints one (scrubbed) line on stdout, or on stderr with ``err``."""
        typer.echo(self.scrub(message), err=err)

    def error(self, message: str) -> None:
        """Prints ``rnndoctor: error: <message>`` on stderr."""
        self.say(f"rnndoctor: error: {message}", err=True)

    def note(self, message: str) -> None:
        """Prints ``rnndoctor: note: <message>`` on stderr: something the check did not do,
        that changes neither its outcome nor its exit code (``--verify`` skipped)."""
        self.say(f"rnndoctor: note: {message}", err=True)
