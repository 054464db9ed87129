"""``rnndoctor check``, step by step: validate, prepare the report folder, supervise the capture
child, settle the facts' outcome, render, and map the result to an :class:`ExitCode`."""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rnndoctor.cli import supervisor
from rnndoctor.cli.common import claim_out, failed, fails, load_options, render, say_config
from rnndoctor.cli.console import Console
from rnndoctor.cli.signals import cause_of
from rnndoctor.facts import CutShort, Facts, Outcome, save_leftovers
from rnndoctor.options import ExitCode, Options, OptionsError

if TYPE_CHECKING:
    from rnndoctor.engine import Report

LOG_NAME = "script.log"
_FACTS_NAME = "facts.json"
_FACTS_TMP = "facts.json.tmp"  # an older rnndoctor's Facts.save wrote here first
PROFILE_DIR = "profile"  # the TF profiler's logdir under --out
_PROCESS_ENDED = "ProcessEnded"  # RunInfo.error_type when the child ended without saying how


@dataclasses.dataclass(frozen=True)
class CheckPaths:
    """Where one check writes: the report folder, its facts and the script's output."""

    out: Path

    @property
    def facts(self) -> Path:
        return self.out / _FACTS_NAME

    @property
    def log(self) -> Path:
        return self.out / LOG_NAME


def run_check(
    script: Path, script_args: list[str], cli: Mapping[str, Any], console: Console
) -> ExitCode:
    """Runs the whole check and returns its exit code (:class:`ExitCode`; the help lists them).

    Args:
        script: the user's training script.
        script_args: its arguments (after ``--``).
        cli: option values from the command line, by :class:`Options` field (None: not given).
        console: where to print; redaction is turned on here when the options ask for it.
    """
    options = validate(script, cli, console)
    if options is None:
        return ExitCode.USAGE
    paths = prepare_out(options, console)
    if paths is None:
        return ExitCode.USAGE
    started = time.monotonic()
    child = supervise(script, script_args, options, paths, console)
    try:
        return _after_the_run(script, script_args, options, paths, child, started, console)
    except KeyboardInterrupt as exc:  # Ctrl-C or a stop signal once the script's run had ended
        console.error(
            f"interrupted ({cause_of(exc)}) after the script's run (its processes were already "
            f"ended): the reports in {paths.out} may be incomplete"
        )
        return ExitCode.INTERRUPTED


def _after_the_run(
    script: Path,
    script_args: list[str],
    options: Options,
    paths: CheckPaths,
    child: supervisor.ChildRun,
    started: float,
    console: Console,
) -> ExitCode:
    """The facts the child saved, settled and rendered, the exit code, and ``--verify``."""
    for tmp in _facts_tmp(paths.out):  # a save the kill cut short
        tmp.unlink(missing_ok=True)
    if options.redact:
        redact_log(paths.log, script, console)
    try:
        facts = Facts.load(paths.facts)
    except (OSError, ValueError) as exc:
        return _no_facts(exc, child, options, paths, console)
    settle(facts, child, options.timeout)
    facts.save(paths.facts)
    report = render_and_summarise(facts, options, paths, console)
    code = exit_code(facts, child, report, options, paths, console)
    if options.verify:
        code = _verify(script, script_args, options, paths, facts, report, code, started, console)
    return code


def _verify(
    script: Path,
    script_args: list[str],
    options: Options,
    paths: CheckPaths,
    facts: Facts,
    report: Report,
    code: ExitCode,
    started: float,
    console: Console,
) -> ExitCode:
    """``--verify`` after a plain check that measured its window (``facts``: as the child saved
    them, never redacted); the exit code stays the plain check's (Ctrl-C during the runs:
    interrupted)."""
    from rnndoctor.cli.verify import run_verify, verify_blocker

    blocker = verify_blocker(report.facts)
    if code not in (ExitCode.OK, ExitCode.FINDINGS) or blocker:
        console.note(f"--verify skipped: {blocker or 'the plain check did not finish'}")
        return code
    plain_s = time.monotonic() - started
    verdict = run_verify(script, script_args, options, paths.out, facts, report, plain_s, console)
    return verdict or code


def validate(script: Path, cli: Mapping[str, Any], console: Console) -> Options | None:
    """The script and the options; None after a usage error (already printed).

    Turns terminal redaction on when the options ask for it (paths relative to the working
    directory), and off while they are read.
    """
    if not script.exists():
        console.error(f"script not found: {script}")
        return None
    if not script.is_file():
        console.error(f"not a file: {script} (give the training script's .py file)")
        return None
    if script.suffix.lower() == ".ipynb":  # JSON, which Python would run as code (NameError)
        console.error(
            f"{script} is a notebook: rnndoctor check runs a Python script; in the notebook, "
            "add rnndoctor.keras.DoctorCallback to your fit (README: Notebooks), or export it "
            "with `jupyter nbconvert --to script` and check the .py"
        )
        return None
    console.redact(False)
    options = load_options(cli, script.resolve().parent, console)
    if options is None:
        return None
    console.redact(options.redact, os.getcwd(), script)  # paths: relative to where you are
    try:
        options.validate_window()
    except OptionsError as exc:
        console.error(str(exc))
        return None
    return options


def prepare_out(
    options: Options, console: Console, extra: tuple[str, ...] = ()
) -> CheckPaths | None:
    """Creates the report folder and removes what an earlier check left there (our files only,
    never the user's, and an earlier ``--verify``'s files: :func:`_stale_verification`); None
    after a usage error (already printed): the folder cannot be created, or it holds files with
    the names a check writes that rnndoctor did not write (:func:`rnndoctor.cli.common.claim_out`: a
    check would replace them; ``extra``: the names a multi-worker check writes besides,
    :func:`rnndoctor.cli.workers.out_names`). Marks the folder as a check's
    (``rnndoctor.outdir.MARKER``)."""
    from rnndoctor.reports import FILENAMES

    out = Path(options.out).resolve()
    if not claim_out(out, (*out_names(options), *extra), console):
        return None
    for stale in (_FACTS_NAME, *FILENAMES.values(), *_stale_verification(out)):
        (out / stale).unlink(missing_ok=True)
    for tmp in _facts_tmp(out):
        tmp.unlink(missing_ok=True)
    return CheckPaths(out)


def _facts_tmp(out: Path) -> list[Path]:
    """The temporary files of ``Facts.save`` in ``out``: an older rnndoctor's one name, and
    this one's (``rnndoctor.facts.save_leftovers``: a prefix no user's file bears)."""
    return [out / _FACTS_TMP, *save_leftovers(out)]


def out_names(options: Options) -> tuple[str, ...]:
    """What a check writes or replaces in ``--out``: its facts, the script's log, the reports in
    every format, the profile's folder, and with ``--verify`` its outputs."""
    from rnndoctor.reports import FILENAMES

    return (_FACTS_NAME, _FACTS_TMP, LOG_NAME, *FILENAMES.values(), PROFILE_DIR,
            *_verify_names(options))  # fmt: skip


def _verify_names(options: Options) -> tuple[str, ...]:
    """The files ``--verify`` writes into ``--out``, and the folder of its copies, whose
    entries it replaces (none without ``--verify``)."""
    from rnndoctor.verify.output import VERIFY_JSON, VERIFY_MD
    from rnndoctor.verify.session import PATCH_NAME, VERIFY_DIR

    return (VERIFY_JSON, VERIFY_MD, PATCH_NAME, VERIFY_DIR) if options.verify else ()


def _stale_verification(out: Path) -> tuple[str, ...]:
    """An earlier ``--verify``'s ``verify.json``, ``verify.md`` and ``fixes.patch`` in ``out``,
    which would otherwise sit beside the new report as if they were its own: only where
    ``verify.json`` is ours (a JSON object with a ``verified`` list), so a file of the user's
    with one of those names in a shared folder is never removed; else none."""
    from rnndoctor.verify.output import VERIFY_JSON, VERIFY_MD, read_own_json
    from rnndoctor.verify.session import PATCH_NAME

    if read_own_json(out / VERIFY_JSON) is None:
        return ()
    return VERIFY_JSON, VERIFY_MD, PATCH_NAME


def supervise(
    script: Path,
    script_args: list[str],
    options: Options,
    paths: CheckPaths,
    console: Console,
    env: Mapping[str, str] | None = None,
) -> supervisor.ChildRun:
    """Runs the capture child on the script under the supervisor (progress, timeout, kill);
    ``env``: variables added to its environment."""
    from rnndoctor.engine import batch_min_speedup, spe_share_cutoffs, unread_probes

    skip = unread_probes(options.select, options.ignore)
    child_options = dataclasses.replace(
        options, out=str(paths.out), skip_probes=skip,
        spe_share_cutoffs=spe_share_cutoffs(options.rule_options),
        batch_min_speedup=batch_min_speedup(options.rule_options),
    )  # fmt: skip
    command = supervisor.capture_command(script, script_args, child_options)
    console.say(f"rnndoctor: running {script} (script output: {paths.log})", err=True)
    say_config(options, console)
    timeout = options.timeout if options.timeout is not None else float("inf")
    return supervisor.Supervisor(command, paths.log, paths.facts, timeout, extra_env=env).run()


def redact_log(log_path: Path, script: Path, console: Console) -> None:
    """Redacts ``script.log`` in place (``--redact``), as the reports are redacted."""
    from rnndoctor.redact import redact_file

    try:
        redact_file(log_path, str(script.resolve().parent), os.getcwd(), script)
    except OSError as exc:
        console.error(f"could not redact {log_path}: {exc.strerror}")


def _no_facts(
    exc: Exception,
    child: supervisor.ChildRun,
    options: Options,
    paths: CheckPaths,
    console: Console,
) -> ExitCode:
    """The exit code, and its message, when the child saved no readable facts."""
    if child.interrupted:
        console.error(f"interrupted ({child.interrupted_by}) before any fact was saved")
        return ExitCode.INTERRUPTED
    show_log_tail(paths.log, console)
    if child.timed_out:
        console.error(
            f"timed out after {options.timeout:g} s before any fact was saved (log: {paths.log})"
        )
        return ExitCode.TIMEOUT
    console.error(
        f"the capture process failed ({supervisor.status_text(child.status)}) and saved no "
        f"facts: {exc}; see {paths.log}"
    )
    return ExitCode.INTERNAL


def settle(facts: Facts, child: supervisor.ChildRun, timeout: float | None) -> None:
    """Writes into ``facts.run`` what only the parent knows: the child's exit status, escaped
    processes, a timeout, a Ctrl-C, or a child that ended without saying how (``os._exit``, a
    signal)."""
    run = facts.run
    run.exit_status = child.status
    if child.escaped:
        run.notes.append(
            f"{len(child.escaped)} process(es) the script started had left its process group and "
            "were killed after the check"
        )
    if child.timed_out or child.interrupted:
        run.outcome = Outcome.TIMEOUT if child.timed_out else Outcome.INTERRUPTED
        reason = (
            f"--timeout {timeout:g} s reached: the script's processes were killed"
            if child.timed_out
            else f"interrupted ({child.interrupted_by}): the script's processes were killed"
        )
        run.cut_short.append(CutShort(phase=run.phase, reason=reason, budget_s=None))
        run.message = (
            f"--timeout {timeout:g} s reached during phase '{run.phase}'; the script was stopped"
            if child.timed_out
            else f"interrupted ({child.interrupted_by}) during phase '{run.phase}'"
        )
        run.wall_time_s = round(time.monotonic() - child.started_s, 3)
    elif run.outcome == Outcome.RUNNING and child.status != ExitCode.CHILD_INTERNAL:
        # The child ended without saying how: the script called os._exit, or the process died
        # of a signal (a crash in native code, the out-of-memory killer).
        window_done = facts.steps is not None
        run.outcome = Outcome.CAPTURE_ERROR if window_done else Outcome.SCRIPT_ERROR
        run.error_type = _PROCESS_ENDED
        run.message = (
            f"the process ended ({supervisor.status_text(child.status)}) during phase "
            f"'{run.phase}'"
            + ("" if window_done else ": the script called os._exit, or crashed in native code")
        )
        run.cut_short.append(CutShort(phase=run.phase, reason=run.message, budget_s=None))
        run.wall_time_s = round(time.monotonic() - child.started_s, 3)


def render_and_summarise(
    facts: Facts, options: Options, paths: CheckPaths, console: Console
) -> Report:
    """Renders the reports (redacting the saved facts too with ``--redact``) and prints the
    terminal summary."""
    from rnndoctor.reports.progress import PhaseDisplay
    from rnndoctor.reports.terminal import summary_lines

    render_started = time.monotonic()
    report, written = render(facts, options, paths.out)
    if options.redact:
        report.facts.save(paths.facts)  # the folder gets attached to tickets: redact it too
    PhaseDisplay().line("rendering the reports", time.monotonic() - render_started)
    for line in summary_lines(report, written):
        console.say(line)
    return report


def exit_code(
    facts: Facts,
    child: supervisor.ChildRun,
    report: Report | None,
    options: Options,
    paths: CheckPaths,
    console: Console,
) -> ExitCode:
    """The check's exit code, with the one-line error (and the log's tail) for a failure
    (``report``: None for a run whose findings another report gives: never ``FINDINGS``)."""
    run = facts.run
    if child.timed_out or child.interrupted:
        if child.timed_out:
            show_log_tail(paths.log, console)
        console.error(run.message or "stopped")
        return ExitCode.TIMEOUT if child.timed_out else ExitCode.INTERRUPTED
    if run.outcome == Outcome.CAPTURE_ERROR and run.error_type == _PROCESS_ENDED:
        show_log_tail(paths.log, console)
        console.error(f"{run.message} (partial report written; see {paths.log})")
        return ExitCode.INTERNAL
    if failed(run.outcome):
        show_log_tail(paths.log, console)
        where = ""
        if run.error_location:
            where = f" at {run.error_location.file}:{run.error_location.line}"
        console.error(f"{run.message}{where} (partial report written; script output: {paths.log})")
        return ExitCode.SCRIPT_FAILED
    if child.status != 0 or run.outcome != Outcome.COMPLETED:
        show_log_tail(paths.log, console)
        console.error(
            f"the capture process failed ({supervisor.status_text(child.status)}) during phase "
            f"'{run.phase}'; see {paths.log}"
        )
        return ExitCode.INTERNAL
    if report is None:
        return ExitCode.OK
    return ExitCode.FINDINGS if fails(report, options.fail_on) else ExitCode.OK


def show_log_tail(log_path: Path, console: Console) -> None:
    """Prints the last lines of the script's output (more, tracebacks kept, with ``--debug``)."""
    lines = supervisor.DEBUG_TAIL_LINES if console.debug else supervisor.TAIL_LINES
    tail = supervisor.log_tail(log_path, lines, console.debug)
    if not tail:
        return
    console.say(f"rnndoctor: last lines of the script's output ({log_path}):", err=True)
    for line in tail:
        console.say(f"  | {line}", err=True)
