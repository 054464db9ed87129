"""Every option of a check, with its default written once, and the exit codes.

The CLI builds :class:`Options` (command line over ``[tool.rnndoctor]`` over these defaults); the
capture child receives the window part as ``--key value`` arguments (:meth:`Options.child_argv`)
and reads them back with :func:`parse_child_args`; :func:`rnndoctor.diagnose` takes the same
defaults. Pure: no TensorFlow, no typer.
"""

from __future__ import annotations

import argparse
import enum
from dataclasses import dataclass, field
from typing import Any


class ExitCode(enum.IntEnum):
    """Exit codes of ``rnndoctor`` (the README's table) and of the capture child."""

    OK = 0  # nothing at or above --fail-on
    FINDINGS = 1  # findings at or above --fail-on
    USAGE = 2  # a missing script, a directory instead of a script, a bad option
    SCRIPT_FAILED = 3  # the script failed before the diagnosis finished, or cannot be checked
    TIMEOUT = 4  # --timeout: every process of the script was killed
    INTERNAL = 5  # an error in rnndoctor itself
    CHILD_INTERNAL = 70  # the capture child's own status for an error in rnndoctor (EX_SOFTWARE)
    INTERRUPTED = 130  # Ctrl-C (128 + SIGINT, as shells report it)


FORMATS = ("html", "json", "md", "sarif")
FAIL_ON = ("error", "warning", "info", "never")


@dataclass
class Options:
    """One check's options. Each default here is the only place it is written.

    Attributes:
        out: the report folder.
        steps: measured training steps, after the warm-up.
        warmup: warm-up steps, run first and not timed (tracing, allocation).
        profile_steps: steps captured by the TF profiler after the measured ones (0: none).
        timeout: seconds before the script's whole process group is killed.
        fail_on: exit 1 at or above this severity (``error``, ``warning``, ``info``, ``never``).
        format: report formats (``FORMATS``).
        select: rule IDs or names to run (empty: all).
        ignore: rule IDs or names to skip.
        redact: remove home paths, user and host names and secret values from every output.
        no_probes: skip the input / compute / batch-size / steps_per_execution probes and the
            sequence sampling.
        probe_fast_path: run the cuDNN fast-path probe on each LSTM/GRU layer.
        debug: show tracebacks after a failure.
        rule_options: ``[tool.rnndoctor.rules.RD201]`` tables, by rule ID: option name -> value.
    """

    out: str = "rnndoctor-report"
    steps: int = 20
    warmup: int = 3
    profile_steps: int = 3
    timeout: float | None = 600.0
    fail_on: str = "error"
    format: list[str] = field(default_factory=lambda: ["html", "json"])
    select: list[str] = field(default_factory=list)
    ignore: list[str] = field(default_factory=list)
    redact: bool = False
    no_probes: bool = False
    probe_fast_path: bool = True
    debug: bool = False
    rule_options: dict[str, dict[str, Any]] = field(default_factory=dict)

    def child_argv(self) -> list[str]:
        """The capture child's arguments for the window options (before the script)."""
        return [
            "--out", self.out, "--steps", str(self.steps), "--warmup", str(self.warmup),
            "--profile-steps", str(self.profile_steps), "--timeout", str(self.timeout),
            *(["--no-probes"] if self.no_probes else []),
            *([] if self.probe_fast_path else ["--no-probe"]),
        ]  # fmt: skip


DEFAULTS = Options()


def parse_child_args(argv: list[str]) -> tuple[Options, str, list[str]]:
    """Reads the capture child's command line (``Options.child_argv() + [script, *args]``).

    Returns:
        ``(options, script, script_args)``; options not passed keep their defaults.

    Raises:
        SystemExit: argparse's exit on a malformed command line (status 2).
    """
    parser = argparse.ArgumentParser(prog="python -m rnndoctor.capture")
    parser.add_argument("--out", required=True)
    parser.add_argument("--steps", type=int, default=DEFAULTS.steps)
    parser.add_argument("--warmup", type=int, default=DEFAULTS.warmup)
    parser.add_argument("--profile-steps", type=int, default=DEFAULTS.profile_steps)
    parser.add_argument("--no-probe", action="store_true", help="skip the cuDNN fast-path probe")
    parser.add_argument("--timeout", type=float, default=None)
    parser.add_argument("--no-probes", action="store_true", help="skip the input/compute probes")
    parser.add_argument("script")
    parser.add_argument("script_args", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    options = Options(
        out=args.out,
        steps=args.steps,
        warmup=args.warmup,
        profile_steps=args.profile_steps,
        timeout=args.timeout,  # None: no overall limit (the child run by hand)
        no_probes=args.no_probes,
        probe_fast_path=not args.no_probe,
    )
    return options, args.script, list(args.script_args)
