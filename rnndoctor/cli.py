"""The ``rnndoctor`` command line (typer).

``rnndoctor check SCRIPT [-- ARGS...]`` runs SCRIPT in a child process
(``python -P -m rnndoctor.capture``) for a short diagnosis window, then runs the rules on the facts
the child saved and writes the reports. The CLI itself never imports TensorFlow.
"""

from __future__ import annotations

import enum
import os
import signal
import subprocess
import sys
import time
from importlib import resources
from pathlib import Path

import typer

from rnndoctor import __version__

EXIT_OK = 0
EXIT_FINDINGS = 1
EXIT_USAGE = 2
EXIT_SCRIPT_FAILED = 3
EXIT_TIMEOUT = 4
EXIT_INTERNAL = 5
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells report it

EXIT_CODES_HELP = """Exit codes:

  0  nothing at or above --fail-on

  1  findings at or above --fail-on

  2  usage error (a missing script, a bad option)

  3  the script failed before the diagnosis finished (raised, exited, or never called
     Model.fit); a partial report is still written

  4  timeout (--timeout); a partial report is still written

  5  internal error in rnndoctor (see <out>/script.log)

  130  interrupted (Ctrl-C); a partial report is still written
"""

_KILL_GRACE_S = 5.0  # SIGTERM, then SIGKILL after this long
_LOG_NAME = "script.log"


class FailOn(str, enum.Enum):
    error = "error"
    warning = "warning"
    info = "info"
    never = "never"


class Format(str, enum.Enum):
    html = "html"
    json = "json"
    md = "md"


app = typer.Typer(
    name="rnndoctor",
    help="Diagnose slow RNN (LSTM/GRU) training in TensorFlow/Keras.\n\n" + EXIT_CODES_HELP,
    add_completion=False,
    no_args_is_help=True,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"rnndoctor {__version__}")
        raise typer.Exit(EXIT_OK)


@app.callback()
def _main(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """Diagnose slow RNN (LSTM/GRU) training in TensorFlow/Keras."""


def _error(message: str) -> None:
    typer.echo(f"rnndoctor: error: {message}", err=True)


def _kill_group(proc: subprocess.Popen) -> None:
    """Ends the child's whole process group (the script's own workers too)."""
    for sig, wait_s in ((signal.SIGTERM, _KILL_GRACE_S), (signal.SIGKILL, None)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait_s)
            if sig == signal.SIGTERM:
                # the leader is gone; make sure nothing else of its group survives
                os.killpg(proc.pid, signal.SIGKILL)
            return
        except subprocess.TimeoutExpired:
            continue
        except ProcessLookupError:
            return


def run_check(
    script: Path,
    script_args: list[str],
    out: Path,
    steps: int,
    warmup: int,
    profile_steps: int,
    timeout: float,
    fail_on: FailOn,
    formats: list[str] | None,
) -> int:
    """Runs the whole check and returns the exit code (see ``EXIT_CODES_HELP``).

    ``formats``: report formats as given on the command line (``--format md --format html`` or
    ``--format md,html``); None or empty means html and json.
    """
    from rnndoctor.engine import evaluate
    from rnndoctor.facts import Facts
    from rnndoctor.findings import Severity
    from rnndoctor.reports import write_reports
    from rnndoctor.reports.terminal import summary_lines

    chosen = [f.strip() for item in formats or ["html,json"] for f in item.split(",") if f.strip()]
    unknown = sorted(set(chosen) - {f.value for f in Format})
    if unknown or not chosen:
        _error(f"unknown --format {', '.join(unknown)!s}: choose from html, json, md")
        return EXIT_USAGE
    if not script.exists():
        _error(f"script not found: {script}")
        return EXIT_USAGE
    if not script.is_file():
        _error(f"not a file: {script} (give the training script's .py file)")
        return EXIT_USAGE
    for bad, message in (
        (steps < 1, f"--steps must be at least 1 (got {steps})"),
        (warmup < 0, f"--warmup must be 0 or more (got {warmup})"),
        (profile_steps < 0, f"--profile-steps must be 0 or more (got {profile_steps})"),
        (timeout <= 0, f"--timeout must be more than 0 seconds (got {timeout:g})"),
    ):
        if bad:
            _error(message)
            return EXIT_USAGE
    out = out.resolve()
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        _error(f"cannot create the output directory {out}: {exc.strerror}")
        return EXIT_USAGE
    facts_path = out / "facts.json"
    for stale in ("facts.json", "report.html", "report.json", "report.md"):
        (out / stale).unlink(missing_ok=True)

    command = [
        sys.executable, "-P", "-m", "rnndoctor.capture",
        "--out", str(out), "--steps", str(steps), "--warmup", str(warmup),
        "--profile-steps", str(profile_steps),
        str(script.resolve()), *script_args,
    ]  # fmt: skip
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    log_path = out / _LOG_NAME
    typer.echo(f"rnndoctor: running {script} (script output: {log_path})", err=True)
    started = time.monotonic()
    timed_out = interrupted = False
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env,
            start_new_session=True,
        )  # fmt: skip
        try:
            child_status = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill_group(proc)
            child_status = None
        except KeyboardInterrupt:
            interrupted = True
            _kill_group(proc)
            child_status = None

    try:
        facts = Facts.load(facts_path)
    except (OSError, ValueError) as exc:
        if interrupted:
            _error("interrupted before any fact was saved")
            return EXIT_INTERRUPTED
        if timed_out:
            _error(f"timed out after {timeout:g} s before any fact was saved (log: {log_path})")
            return EXIT_TIMEOUT
        _error(
            f"the capture process failed (status {child_status}) and saved no facts: {exc}; "
            f"see {log_path}"
        )
        return EXIT_INTERNAL
    if timed_out:
        facts.run.outcome = "timeout"
        facts.run.message = (
            f"--timeout {timeout:g} s reached during phase '{facts.run.phase}'; the script was "
            "stopped"
        )
        facts.run.wall_time_s = round(time.monotonic() - started, 3)
    if interrupted:
        facts.run.outcome = "interrupted"
        facts.run.message = f"interrupted (Ctrl-C) during phase '{facts.run.phase}'"
    facts.save(facts_path)

    report = evaluate(facts)
    written = write_reports(report, out, chosen)
    for line in summary_lines(report, written):
        typer.echo(line)

    if timed_out or interrupted:
        _error(facts.run.message or "stopped")
        return EXIT_TIMEOUT if timed_out else EXIT_INTERRUPTED
    if facts.run.outcome in ("script_error", "no_fit", "capture_error"):
        where = ""
        if facts.run.error_location:
            loc = facts.run.error_location
            where = f" at {loc.file}:{loc.line}"
        _error(f"{facts.run.message}{where} (partial report written; script output: {log_path})")
        return EXIT_SCRIPT_FAILED
    if child_status not in (0, None) or facts.run.outcome != "completed":
        _error(f"the capture process failed (status {child_status}); see {log_path}")
        return EXIT_INTERNAL
    threshold = None if fail_on is FailOn.never else Severity.parse(fail_on.value)
    return EXIT_FINDINGS if report.fails(threshold) else EXIT_OK


_OUT = typer.Option(Path("rnndoctor-report"), "--out", help="Directory for the reports.")
_STEPS = typer.Option(20, "--steps", help="Measured training steps (after the warm-up).")
_WARMUP = typer.Option(3, "--warmup", help="Warm-up steps, run first and not timed.")
_PROFILE = typer.Option(3, "--profile-steps", help="Steps captured by the TF profiler.")
_TIMEOUT = typer.Option(600.0, "--timeout", help="Seconds before the script is killed.")
_FORMAT = typer.Option(
    None,
    "--format",
    help="Report format: html, json or md; repeat it or separate with commas. "
    "Default: html and json.",
)


@app.command(epilog=EXIT_CODES_HELP)
def check(
    script: Path = typer.Argument(..., help="The training script, run as `python SCRIPT`."),
    script_args: list[str] = typer.Argument(None, help="Arguments for the script, after --."),
    out: Path = _OUT,
    steps: int = _STEPS,
    warmup: int = _WARMUP,
    profile_steps: int = _PROFILE,
    timeout: float = _TIMEOUT,
    fail_on: FailOn = typer.Option(
        FailOn.error, "--fail-on", help="Exit 1 when a finding is at or above this severity."
    ),
    formats: list[str] = _FORMAT,
) -> None:
    """Run SCRIPT for a short diagnosis window and report why its RNN training is slow."""
    raise typer.Exit(
        run_check(script, list(script_args or []), out, steps, warmup, profile_steps, timeout,
                  fail_on, formats)
    )  # fmt: skip


def example_path(fixed: bool = False) -> Path:
    """The bundled example script (installed as package data with rnndoctor)."""
    name = "charlm_stdlib_fixed.py" if fixed else "charlm_stdlib.py"
    return Path(str(resources.files("rnndoctor.examples").joinpath(name)))


@app.command(epilog=EXIT_CODES_HELP)
def demo(
    fixed: bool = typer.Option(False, "--fixed", help="Run the variant with the fixes applied."),
    out: Path = _OUT,
    steps: int = _STEPS,
    timeout: float = _TIMEOUT,
    fail_on: FailOn = typer.Option(
        FailOn.never, "--fail-on", help="Exit 1 at or above this severity (demo: never)."
    ),
    formats: list[str] = _FORMAT,
) -> None:
    """Check the bundled example: a character-level LSTM trained on the standard library's
    source lines."""
    raise typer.Exit(
        run_check(example_path(fixed), [], out, steps, 3, 3, timeout, fail_on, formats)
    )  # fmt: skip


def main() -> None:
    """Console-script entry point."""
    app()
