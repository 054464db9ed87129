"""The ``rnndoctor`` command line (typer).

``rnndoctor check SCRIPT [-- ARGS...]`` runs SCRIPT in a child process
(``python -P -m rnndoctor.capture``) for a short diagnosis window, then runs the rules on the facts
the child saved and writes the reports. The CLI itself never imports TensorFlow.
"""

from __future__ import annotations

import enum
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

import typer
from typer.core import TyperCommand

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

  3  the script failed before the diagnosis finished (raised, exited, its process died,
     or never called Model.fit), or cannot be checked here (another Keras backend, no
     TensorFlow); a partial report is still written

  4  timeout (--timeout): every process of the script is killed; a partial report is
     still written

  5  internal error in rnndoctor (see <out>/script.log)

  130  interrupted (Ctrl-C); a partial report is still written
"""

_LOG_NAME = "script.log"
_RUN_ID_VAR = "RNNDOCTOR_RUN_ID"  # marks the child's environment: its descendants inherit it
_REAP_S = 5.0  # how long to wait for killed processes to disappear
_TAIL_LINES = 12  # script output lines shown after a failure
_DEBUG_TAIL_LINES = 200  # with --debug (tracebacks included)
_TAIL_BYTES = 256 * 1024  # read at most this much of the end of script.log for the tail


class FailOn(enum.StrEnum):
    error = "error"
    warning = "warning"
    info = "info"
    never = "never"


FORMATS = ("html", "json", "md", "sarif")


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


_scrub: Callable[[str], str] = str  # --redact replaces it: terminal output is redacted too
_debug = False  # check --debug: an internal error shows its traceback


def _redact_terminal(enabled: bool, cwd: str | None = None) -> None:
    global _scrub
    if enabled:
        from rnndoctor.redact import make_scrubber

        _scrub = make_scrubber(cwd)
    else:
        _scrub = str


def _say(message: str, err: bool = False) -> None:
    typer.echo(_scrub(message), err=err)


def _error(message: str) -> None:
    _say(f"rnndoctor: error: {message}", err=True)


def _kill_group(pgid: int) -> None:
    """SIGKILL to a process group (the capture child is its leader): no signal handler of the
    script runs, so a preemption handler cannot save a checkpoint over the user's on the way out.
    Facts are written atomically after each phase, so nothing of rnndoctor's is lost."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass  # the group is empty (everyone has exited)


def _marked_processes(run_id: str) -> list[int]:
    """Live processes whose environment carries this check's ``RNNDOCTOR_RUN_ID`` (Linux
    ``/proc``): the capture child and everything it started, even what left its process group
    (``setsid``, a double fork). Zombies have an empty environment and are not listed."""
    marker = f"{_RUN_ID_VAR}={run_id}".encode()
    found = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return found
    for entry in entries:
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                environ = f.read()
        except OSError:
            continue
        if marker in environ.split(b"\0"):
            found.append(int(entry))
    return found


def _end_process_tree(proc: subprocess.Popen, run_id: str) -> list[int]:
    """Ends the capture child and everything it started; returns the pids that outlived the
    process group (the escaped ones, killed by their environment marker).

    Called after every run, not only on a timeout: a script's worker processes (a
    ``multiprocessing.Pool``, a ``PyDataset`` with ``use_multiprocessing=True``) outlive the
    child, which ends with ``os._exit`` and does not wait for them.
    """
    _kill_group(proc.pid)
    try:
        proc.wait(timeout=_REAP_S)
    except subprocess.TimeoutExpired:  # a process in uninterruptible sleep: not ours to wait on
        pass
    _kill_group(proc.pid)  # what was forked while the first signal was delivered
    escaped: list[int] = []
    deadline = time.monotonic() + _REAP_S
    while True:
        left = _marked_processes(run_id)
        if not left or time.monotonic() > deadline:
            return escaped
        for pid in left:
            try:
                if os.getpgid(pid) == proc.pid:
                    continue  # in the group: already sent SIGKILL, still dying
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                continue
            if pid not in escaped:
                escaped.append(pid)
        time.sleep(0.05)


def _child_stdin() -> int | Any:
    """The script's standard input: the user's when it is redirected (a file, a pipe), else an
    empty one. A terminal is never passed: the script's prompt would be in script.log, unseen,
    and the check would wait for input until --timeout."""
    try:
        fd = sys.stdin.fileno()
        if not os.isatty(fd):
            os.fstat(fd)  # a closed descriptor raises here
            return fd
    except (AttributeError, OSError, ValueError):
        pass
    return subprocess.DEVNULL


_TRACEBACK_START = "Traceback (most recent call last):"
_CHAINED = ("During handling of the above exception", "The above exception was the direct cause")
# TensorFlow's C++ INFO lines (absl format: I<mmdd> <time> <thread> <file>:<line>] ...)
_TF_INFO = re.compile(r"^I\d{4} \d\d:\d\d:\d+\.\d+\s+\d+ \S+:\d+\] ")
_ABSL_PREAMBLE = "WARNING: All log messages before absl::InitializeLog() is called are written"
# The second line of TensorFlow's cpu_feature_guard INFO message (the first is an _TF_INFO line).
_TF_CPU_FEATURES = "To enable the following instructions:"


def _log_tail(log_path: Path, lines: int, keep_tracebacks: bool) -> list[str]:
    """The last ``lines`` lines of the script's output, for the terminal after a failure.

    Without ``keep_tracebacks`` (no ``--debug``), Python traceback blocks are left out (the
    error's one-line message is already shown; script.log keeps them), as are blank lines and
    TensorFlow's C++ INFO lines.
    """
    try:
        with open(log_path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - _TAIL_BYTES))
            text = f.read().decode("utf-8", "replace")
    except OSError:
        return []
    raw = text.splitlines()
    if size > _TAIL_BYTES:
        raw = raw[1:]  # the first line is cut
    if keep_tracebacks:
        return raw[-lines:]
    kept, in_traceback = [], False
    for line in raw:
        if _TRACEBACK_START in line:
            in_traceback = True
            line = line[: line.index(_TRACEBACK_START)]  # a prompt or progress bar before it
            if line.strip():
                kept.append(line)
            continue
        if in_traceback:
            if line[:1].isspace() or not line.strip():
                continue
            in_traceback = False  # the exception line itself is kept
        if (
            not line.strip()
            or line.startswith(_CHAINED)
            or _TF_INFO.match(line)
            or line.startswith((_ABSL_PREAMBLE, _TF_CPU_FEATURES))
        ):
            continue
        kept.append(line)
    return kept[-lines:]


def _show_log_tail(log_path: Path, debug: bool) -> None:
    tail = _log_tail(log_path, _DEBUG_TAIL_LINES if debug else _TAIL_LINES, debug)
    if not tail:
        return
    _say(f"rnndoctor: last lines of the script's output ({log_path}):", err=True)
    for line in tail:
        _say(f"  | {line}", err=True)


def _redact_log(log_path: Path, script: Path) -> None:
    """Redacts ``script.log`` in place (``--redact``), as the reports are redacted."""
    from rnndoctor.redact import redact_file

    try:
        redact_file(log_path, str(script.resolve().parent), os.getcwd())
    except OSError as exc:
        _error(f"could not redact {log_path}: {exc.strerror}")


_FAILED_OUTCOMES = ("script_error", "no_fit", "capture_error")
_CHILD_INTERNAL = 70  # the capture child's own exit status for an error in rnndoctor


def _options(cli: dict[str, Any], start: Path) -> dict[str, Any] | None:
    """Resolves options (command line > [tool.rnndoctor] > defaults); None after a usage error."""
    from rnndoctor import config

    try:
        table, source = config.load(start)
    except config.ConfigError as exc:
        _error(str(exc))
        return None
    opts = config.resolve(cli, table)
    opts["config_file"] = source
    if source is not None and "out" in opts["from_config"]:
        opts["out"] = str(source.parent / opts["out"])  # relative to the pyproject's folder
    unknown = sorted(set(opts["format"]) - set(FORMATS))
    if unknown or not opts["format"]:
        _error(f"unknown {_label(opts, 'format')} {', '.join(unknown)}: "
               f"choose from {', '.join(FORMATS)}")  # fmt: skip
        return None
    if opts["fail_on"] not in {f.value for f in FailOn}:
        _error(f"unknown {_label(opts, 'fail_on')} {opts['fail_on']!r}: "
               "choose from error, warning, info, never")  # fmt: skip
        return None
    from rnndoctor.rules import get_rule

    for key in ("select", "ignore"):
        for name in opts[key]:
            try:
                get_rule(name)
            except KeyError:
                _error(f"unknown rule {name!r} in {_label(opts, key)} (see `rnndoctor rules`)")
                return None
    return opts


def _label(opts: dict[str, Any], key: str) -> str:
    """How to name an option in an error: ``--fail-on`` or ``fail-on in /p/pyproject.toml``."""
    name = key.replace("_", "-")
    if key in opts.get("from_config", ()):
        return f"{name} in {opts['config_file']} [tool.rnndoctor]"
    return f"--{name}"


def _render(facts, opts: dict[str, Any], out: Path) -> tuple[Any, dict[str, Path]]:
    """Runs the rules and writes the reports; returns the Report and the written paths."""
    from rnndoctor.engine import evaluate
    from rnndoctor.reports import write_reports

    report = evaluate(facts, select=opts["select"] or None, ignore=opts["ignore"] or None)
    if opts["redact"]:
        from rnndoctor.redact import redact_report

        report = redact_report(report)
    return report, write_reports(report, out, opts["format"])


def _fails(report, fail_on: str) -> bool:
    from rnndoctor.findings import Severity

    return report.fails(None if fail_on == FailOn.never.value else Severity.parse(fail_on))


def _phases(facts_path: Path) -> list[tuple[str, float]] | None:
    try:
        run = json.loads(facts_path.read_text())["run"]
        return [(p["name"], float(p["started_s"])) for p in run.get("phases", [])]
    except (OSError, ValueError, KeyError, TypeError):
        return None  # not written yet, or being replaced


def _wait_with_progress(proc: subprocess.Popen, facts_path: Path, timeout: float) -> int:
    """Waits for the child, showing its phases with their elapsed times on stderr.

    Raises:
        subprocess.TimeoutExpired: after ``timeout`` seconds (the display notes the phase cut).
    """
    from rnndoctor.reports.terminal import PhaseDisplay

    start = time.monotonic()
    deadline = start + timeout
    phases: list[tuple[str, float]] = []
    with PhaseDisplay() as display:
        status = None
        try:
            while status is None:
                try:
                    status = proc.wait(timeout=min(0.25, max(0.01, deadline - time.monotonic())))
                except subprocess.TimeoutExpired:
                    if time.monotonic() >= deadline:
                        raise
                phases = _phases(facts_path) or phases
                display.update(phases, time.monotonic() - start)
            return status
        finally:
            display.close(_phases(facts_path) or phases, time.monotonic() - start, status == 0)


def run_check(
    script: Path,
    script_args: list[str],
    cli: dict[str, Any],
    debug: bool = False,
    no_probes: bool = False,
) -> int:
    """Runs the whole check and returns the exit code (see ``EXIT_CODES_HELP``).

    Args:
        script: the user's training script.
        script_args: its arguments (after ``--``).
        cli: option values from the command line (None where not given).
        debug: after a failure, show the script's output with its tracebacks (the last
            ``_DEBUG_TAIL_LINES`` lines), not only the filtered last lines.
        no_probes: skip the input / compute / batch-size / steps_per_execution probes and the
            sequence sampling (faster; the findings that need them are "not evaluated").
    """
    from rnndoctor.facts import CutShort, Facts
    from rnndoctor.reports.terminal import PhaseDisplay, summary_lines

    if not script.exists():
        _error(f"script not found: {script}")
        return EXIT_USAGE
    if not script.is_file():
        _error(f"not a file: {script} (give the training script's .py file)")
        return EXIT_USAGE
    _redact_terminal(False)
    opts = _options(cli, script.resolve().parent)
    if opts is None:
        return EXIT_USAGE
    _redact_terminal(opts["redact"], os.getcwd())  # terminal paths: relative to where you are
    steps, warmup, profile_steps, timeout = (
        opts["steps"], opts["warmup"], opts["profile_steps"], float(opts["timeout"])
    )  # fmt: skip
    for bad, message in (
        (steps < 1, f"{_label(opts, 'steps')} must be at least 1 (got {steps})"),
        (warmup < 0, f"{_label(opts, 'warmup')} must be 0 or more (got {warmup})"),
        (profile_steps < 0, f"{_label(opts, 'profile_steps')} must be 0 or more "
                            f"(got {profile_steps})"),
        (timeout <= 0, f"{_label(opts, 'timeout')} must be more than 0 seconds "
                       f"(got {timeout:g})"),
    ):  # fmt: skip
        if bad:
            _error(message)
            return EXIT_USAGE
    out = Path(opts["out"]).resolve()
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        _error(f"cannot create the output directory {out}: {exc.strerror}")
        return EXIT_USAGE
    facts_path = out / "facts.json"
    from rnndoctor.reports import FILENAMES

    for stale in ("facts.json", "facts.json.tmp", *FILENAMES.values()):  # ours, never the user's
        (out / stale).unlink(missing_ok=True)

    command = [
        sys.executable, "-P", "-m", "rnndoctor.capture",
        "--out", str(out), "--steps", str(steps), "--warmup", str(warmup),
        "--profile-steps", str(profile_steps), "--timeout", str(timeout),
        *(["--no-probes"] if no_probes else []),
        str(script.resolve()), *script_args,
    ]  # fmt: skip
    import uuid

    run_id = uuid.uuid4().hex
    # No bytecode caches: the script's own modules would get __pycache__ folders in its tree.
    env = dict(os.environ, PYTHONUNBUFFERED="1", PYTHONDONTWRITEBYTECODE="1")
    env[_RUN_ID_VAR] = run_id
    log_path = out / _LOG_NAME
    _say(f"rnndoctor: running {script} (script output: {log_path})", err=True)
    if opts["config_file"]:
        _say(f"rnndoctor: options from {opts['config_file']} [tool.rnndoctor]", err=True)
    started = time.monotonic()
    timed_out = interrupted = False
    child_status: int | None = None
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            command, stdin=_child_stdin(), stdout=log, stderr=subprocess.STDOUT, env=env,
            start_new_session=True,
        )  # fmt: skip
        try:
            child_status = _wait_with_progress(proc, facts_path, timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
        except KeyboardInterrupt:
            interrupted = True
        finally:
            escaped = _end_process_tree(proc, run_id)
    (out / "facts.json.tmp").unlink(missing_ok=True)  # a save the kill cut short
    if opts["redact"]:
        _redact_log(log_path, script)

    try:
        facts = Facts.load(facts_path)
    except (OSError, ValueError) as exc:
        if interrupted:
            _error("interrupted before any fact was saved")
            return EXIT_INTERRUPTED
        _show_log_tail(log_path, debug)
        if timed_out:
            _error(f"timed out after {timeout:g} s before any fact was saved (log: {log_path})")
            return EXIT_TIMEOUT
        _error(
            f"the capture process failed ({_status_text(child_status)}) and saved no facts: "
            f"{exc}; see {log_path}"
        )
        return EXIT_INTERNAL
    run = facts.run
    if escaped:
        run.notes.append(
            f"{len(escaped)} process(es) the script started had left its process group and were "
            "killed after the check"
        )
    if timed_out or interrupted:
        run.outcome = "timeout" if timed_out else "interrupted"
        reason = (
            f"--timeout {timeout:g} s reached: the script's processes were killed"
            if timed_out
            else "interrupted (Ctrl-C): the script's processes were killed"
        )
        run.cut_short.append(CutShort(phase=run.phase, reason=reason, budget_s=None))
        run.message = (
            f"--timeout {timeout:g} s reached during phase '{run.phase}'; the script was stopped"
            if timed_out
            else f"interrupted (Ctrl-C) during phase '{run.phase}'"
        )
        run.wall_time_s = round(time.monotonic() - started, 3)
    elif run.outcome == "running" and child_status != _CHILD_INTERNAL:
        # The child ended without saying how: the script called os._exit, or the process died
        # of a signal (a crash in native code, the out-of-memory killer).
        window_done = facts.steps is not None
        run.outcome = "capture_error" if window_done else "script_error"
        run.error_type = "ProcessEnded"
        run.message = (
            f"the process ended ({_status_text(child_status)}) during phase '{run.phase}'"
            + ("" if window_done else ": the script called os._exit, or crashed in native code")
        )
        run.cut_short.append(CutShort(phase=run.phase, reason=run.message, budget_s=None))
        run.wall_time_s = round(time.monotonic() - started, 3)
    facts.save(facts_path)

    render_started = time.monotonic()
    report, written = _render(facts, opts, out)
    if opts["redact"]:
        report.facts.save(facts_path)  # the folder gets attached to tickets: redact it too
    PhaseDisplay().line("rendering the reports", time.monotonic() - render_started)
    for line in summary_lines(report, written):
        _say(line)

    if timed_out or interrupted:
        if timed_out:
            _show_log_tail(log_path, debug)
        _error(run.message or "stopped")
        return EXIT_TIMEOUT if timed_out else EXIT_INTERRUPTED
    if run.outcome == "capture_error" and run.error_type == "ProcessEnded":
        _show_log_tail(log_path, debug)
        _error(f"{run.message} (partial report written; see {log_path})")
        return EXIT_INTERNAL
    if run.outcome in _FAILED_OUTCOMES:
        _show_log_tail(log_path, debug)
        where = ""
        if run.error_location:
            where = f" at {run.error_location.file}:{run.error_location.line}"
        _error(f"{run.message}{where} (partial report written; script output: {log_path})")
        return EXIT_SCRIPT_FAILED
    if child_status != 0 or run.outcome != "completed":
        _show_log_tail(log_path, debug)
        _error(
            f"the capture process failed ({_status_text(child_status)}) during phase "
            f"'{run.phase}'; see {log_path}"
        )
        return EXIT_INTERNAL
    return EXIT_FINDINGS if _fails(report, opts["fail_on"]) else EXIT_OK


def _status_text(status: int | None) -> str:
    """``status 70`` / ``killed by SIGKILL (the out-of-memory killer sends it)``."""
    if status is None:
        return "no status"
    if status >= 0:
        return f"status {status}"
    try:
        name = signal.Signals(-status).name
    except ValueError:
        name = f"signal {-status}"
    hint = " (the system's out-of-memory killer sends it)" if -status == signal.SIGKILL else ""
    return f"killed by {name}{hint}"


_OUT = typer.Option(None, "--out", help="Directory for the reports [default: rnndoctor-report].")
_STEPS = typer.Option(None, "--steps", help="Measured training steps, after the warm-up [20].")
_WARMUP = typer.Option(None, "--warmup", help="Warm-up steps, run first and not timed [3].")
_PROFILE = typer.Option(None, "--profile-steps", help="Steps captured by the TF profiler [3].")
_TIMEOUT = typer.Option(None, "--timeout", help="Seconds before the script is killed [600].")
_FAIL_ON = typer.Option(
    None, "--fail-on", help="Exit 1 at or above this severity: error, warning, info, never [error]."
)
_FORMAT = typer.Option(
    None,
    "--format",
    help="Report format: html, json, md or sarif; repeat it or separate with commas [html,json].",
)
_SELECT = typer.Option(None, "--select", help="Run only these rules (IDs or names).")
_IGNORE = typer.Option(None, "--ignore", help="Skip these rules (IDs or names).")
_REDACT = typer.Option(
    None,
    "--redact/--no-redact",
    help="Remove home paths, user and host names and secret values from every report.",
)


_DEBUG = typer.Option(
    False,
    "--debug",
    help="On failure, show the script's output with its tracebacks (and rnndoctor's own).",
)
_NO_PROBES = typer.Option(
    False,
    "--no-probes",
    help="Skip the input/compute/batch-size probes and sequence sampling (faster, fewer "
    "findings: the rules that need them are not evaluated).",
)


class _CheckCommand(TyperCommand):
    """``check``: an unknown option was most likely meant for the user's script."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, args)
        except Exception as exc:
            # click's NoSuchOption (typer 0.12+ uses click, later versions a vendored copy)
            if type(exc).__name__ == "NoSuchOption" and getattr(exc, "option_name", None):
                exc.message += (  # type: ignore[attr-defined]
                    f". Arguments for your script go after `--`: rnndoctor check SCRIPT -- "
                    f"{exc.option_name} ..."  # type: ignore[attr-defined]
                )
            raise


@app.command(epilog=EXIT_CODES_HELP, cls=_CheckCommand)
def check(
    script: Path = typer.Argument(..., help="The training script, run as `python SCRIPT`."),
    script_args: list[str] = typer.Argument(None, help="Arguments for the script, after --."),
    out: str = _OUT,
    steps: int = _STEPS,
    warmup: int = _WARMUP,
    profile_steps: int = _PROFILE,
    timeout: float = _TIMEOUT,
    fail_on: str = _FAIL_ON,
    formats: list[str] = _FORMAT,
    select: list[str] = _SELECT,
    ignore: list[str] = _IGNORE,
    redact: bool = _REDACT,
    debug: bool = _DEBUG,
    no_probes: bool = _NO_PROBES,
) -> None:
    """Run SCRIPT for a short diagnosis window and report why its RNN training is slow.

    Defaults can be set in a [tool.rnndoctor] table of the pyproject.toml at or above the
    script's folder.
    """
    global _debug
    _debug = debug
    cli = dict(
        out=out, steps=steps, warmup=warmup, profile_steps=profile_steps, timeout=timeout,
        fail_on=fail_on, format=formats, select=select, ignore=ignore, redact=redact,
    )  # fmt: skip
    code = run_check(script, list(script_args or []), cli, debug=debug, no_probes=no_probes)
    raise typer.Exit(code)


def example_path(fixed: bool = False) -> Path:
    """The bundled example script (installed as package data with rnndoctor)."""
    name = "charlm_stdlib_fixed.py" if fixed else "charlm_stdlib.py"
    return Path(str(resources.files("rnndoctor.examples").joinpath(name)))


@app.command(epilog=EXIT_CODES_HELP)
def demo(
    fixed: bool = typer.Option(False, "--fixed", help="Run the variant with the fixes applied."),
    out: str = _OUT,
    steps: int = _STEPS,
    timeout: float = _TIMEOUT,
    fail_on: str = typer.Option(
        "never", "--fail-on", help="Exit 1 at or above this severity [never, for the demo]."
    ),
    formats: list[str] = _FORMAT,
    redact: bool = _REDACT,
    debug: bool = _DEBUG,
) -> None:
    """Check the bundled example: a character-level LSTM trained on the standard library's
    source lines."""
    global _debug
    _debug = debug
    cli = dict(out=out, steps=steps, timeout=timeout, fail_on=fail_on, format=formats,
               redact=redact)  # fmt: skip
    raise typer.Exit(run_check(example_path(fixed), [], cli, debug=debug))


def _load_report_facts(path: Path):
    """Facts from a ``facts.json`` or a ``report.json`` (its ``facts``). Raises ValueError."""
    from rnndoctor.facts import Facts

    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"cannot read {path}: {exc}") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path} is not JSON: {exc}") from None
    if isinstance(data, dict) and "facts" in data and "run" not in data:
        data = data["facts"]
    return Facts.from_dict(data)


@app.command(epilog=EXIT_CODES_HELP)
def report(
    facts_file: Path = typer.Argument(..., help="A facts.json (or report.json) from a check."),
    out: str = typer.Option(None, "--out", help="Output directory [the facts file's folder]."),
    fail_on: str = _FAIL_ON,
    formats: list[str] = _FORMAT,
    select: list[str] = _SELECT,
    ignore: list[str] = _IGNORE,
    redact: bool = _REDACT,
) -> None:
    """Re-run the rules on saved facts and render the reports again, offline.

    Imports no TensorFlow: works on any machine with rnndoctor installed. The reports go next to
    the facts file unless --out says otherwise.
    """
    from rnndoctor.reports.terminal import summary_lines

    _redact_terminal(False)
    try:
        facts = _load_report_facts(facts_file)
    except ValueError as exc:
        _error(str(exc))
        raise typer.Exit(EXIT_USAGE) from None
    cli = dict(out=out or str(facts_file.resolve().parent), fail_on=fail_on, format=formats,
               select=select, ignore=ignore, redact=redact)  # fmt: skip
    opts = _options(cli, facts_file.resolve().parent)
    if opts is None:
        raise typer.Exit(EXIT_USAGE)
    _redact_terminal(opts["redact"], os.getcwd())
    report_, written = _render(facts, opts, Path(opts["out"]))
    for line in summary_lines(report_, written):
        _say(line)
    if facts.run.outcome in _FAILED_OUTCOMES:
        raise typer.Exit(EXIT_SCRIPT_FAILED)
    if facts.run.outcome == "timeout":
        raise typer.Exit(EXIT_TIMEOUT)
    raise typer.Exit(EXIT_FINDINGS if _fails(report_, opts["fail_on"]) else EXIT_OK)


@app.command()
def compare(
    before: Path = typer.Argument(..., help="report.json or facts.json of the first run."),
    after: Path = typer.Argument(..., help="report.json or facts.json of the second run."),
    html: Path = typer.Option(
        Path("rnndoctor-compare.html"), "--html", help="Where to write the HTML comparison."
    ),
    select: list[str] = _SELECT,
    ignore: list[str] = _IGNORE,
) -> None:
    """Compare two runs: the measured step-time ratio, the findings fixed and the findings new.

    The current rules run on both runs' facts, with the same --select / --ignore.
    """
    from rnndoctor.compare import compare_facts
    from rnndoctor.reports.compare import print_comparison, render_comparison_html

    try:
        before_facts, after_facts = _load_report_facts(before), _load_report_facts(after)
    except ValueError as exc:
        _error(str(exc))
        raise typer.Exit(EXIT_USAGE) from None
    opts = _options(dict(select=select, ignore=ignore), before.resolve().parent)
    if opts is None:
        raise typer.Exit(EXIT_USAGE)
    comparison = compare_facts(
        before_facts, after_facts, opts["select"] or None, opts["ignore"] or None
    )
    print_comparison(comparison, str(before), str(after))
    html.write_text(render_comparison_html(comparison, str(before), str(after)), encoding="utf-8")
    typer.echo(f"html comparison: {html}")


@app.command()
def rules(
    rule_id: str = typer.Argument(None, help="A rule ID or name: print its documentation."),
) -> None:
    """List the rules, or print one rule's documentation."""
    from rnndoctor.rules import all_rules, get_rule

    if rule_id is None:
        for rule in all_rules():
            typer.echo(f"{rule.id}  {rule.name:<34} {rule.summary}")
        return
    try:
        rule = get_rule(rule_id)
    except KeyError:
        _error(f"no rule {rule_id!r} (see `rnndoctor rules`)")
        raise typer.Exit(EXIT_USAGE) from None
    typer.echo(rule.doc)


def main() -> None:
    """Console-script entry point.

    An unexpected error in rnndoctor itself exits 5 with one line (``check --debug`` or
    ``RNNDOCTOR_DEBUG=1`` show the traceback), never 1, which CI gates read as "findings".
    """
    try:
        app()
    except Exception as exc:
        if _debug or os.environ.get("RNNDOCTOR_DEBUG"):
            raise
        _error(
            f"internal error: {type(exc).__name__}: {exc} (--debug or RNNDOCTOR_DEBUG=1 shows "
            "the traceback)"
        )
        sys.exit(EXIT_INTERNAL)
