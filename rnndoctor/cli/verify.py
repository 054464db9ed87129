"""``check --verify``: after the plain check, measure each fix A/B (:mod:`rnndoctor.verify`).

This module gives the verification its runner (warm window-only capture children with the plain
check's command line and warm-up: :mod:`rnndoctor.cli.arms`) and prints its table; the exit code
stays the plain check's (Ctrl-C during the runs: :attr:`ExitCode.INTERRUPTED`).
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from rnndoctor.cli.console import Console
from rnndoctor.facts import Facts, Phase
from rnndoctor.options import ExitCode, Options
from rnndoctor.paired import ARM_WINDOW_S
from rnndoctor.reports.verified import terminal_lines
from rnndoctor.verify.output import summarise
from rnndoctor.verify.session import PATCH_NAME

if TYPE_CHECKING:
    from rnndoctor.cli.arms import WarmRunner
    from rnndoctor.engine import Report
    from rnndoctor.findings import Finding
    from rnndoctor.verify.summary import VerifySummary

_MIN_RUN_TIMEOUT_S = 60.0  # a verification run's time limit is at least this
_RUN_TIMEOUT_FACTOR = 3.0  # ... and this many times the plain check's wall time
_RUN_OVERHEAD_S = 1.0  # a run's overhead beyond its steps: pipes, facts, process exit (seconds)
_WRITE_RESERVE_S = 5.0  # of --timeout, kept for writing the reports after the runs (rnndoctor's
# choice: the demo's verify.json, verify.md and reports take well under a second)


def verify_limits(options: Options, plain_s: float) -> tuple[float, float, float | None]:
    """The verification's budget, one run's time limit and the runner's deadline, all bounded
    by what ``--timeout`` leaves after the plain check (so ``--timeout`` bounds the whole
    command, the reports' writing included: ``_WRITE_RESERVE_S``).

    Args:
        options: the check's options (``timeout``, ``verify_budget``; seconds).
        plain_s: the plain check's wall time (seconds).

    Returns:
        ``(budget_s, run_timeout_s, left_s)``: ``budget_s`` is ``--verify-budget`` (default 3x
        ``plain_s``), ``run_timeout_s`` is ``max(60, 3x plain_s)``, each at most ``left_s``,
        the seconds ``--timeout`` leaves (None: no ``--timeout``).
    """
    from rnndoctor.verify.run import default_budget

    budget = options.verify_budget or default_budget(plain_s)
    run_timeout = max(_MIN_RUN_TIMEOUT_S, _RUN_TIMEOUT_FACTOR * plain_s)
    if options.timeout is None:
        return budget, run_timeout, None
    left = max(0.0, options.timeout - plain_s - _WRITE_RESERVE_S)
    return min(budget, left), min(run_timeout, left), left


def make_runner(script_args: list[str], options: Options, out: Path) -> WarmRunner:
    """The verification's runner: warm window-only capture children in the current working
    directory (the user's, as for the plain check), with the plain check's arguments and warm-up
    and a short window (:mod:`rnndoctor.cli.arms`); the probes, the profiler, the fast-path probe
    and every inspection after the window are off. Call its ``close()`` when done."""
    from rnndoctor.cli.arms import WarmRunner

    return WarmRunner(script_args, options, out / "verify" / "arms")


def run_estimate_s(facts: Facts, plain_s: float) -> float:
    """A verification run's expected wall time before one was timed. The runs are windows of
    warm arms (:mod:`rnndoctor.cli.arms`, started before the first run): the window's steps (at
    the plain check's median step time), or its time floor ``ARM_WINDOW_S`` where that is longer,
    and one step more, plus ``_RUN_OVERHEAD_S`` for the pipes and the window's facts. Without a
    measured step: the plain check's time to the end of its measured steps (a whole run, start
    included), else ``plain_s``."""
    from rnndoctor.cli.arms import WINDOW_STEPS

    steps = facts.steps
    if steps is not None and steps.median_step_time_ms:
        step_s = steps.median_step_time_ms / 1000.0
        window_steps = min(WINDOW_STEPS, steps.requested_steps or WINDOW_STEPS)
        return max(window_steps * step_s, ARM_WINDOW_S) + step_s + _RUN_OVERHEAD_S
    phases = facts.run.phases
    ends = (Phase.MEASURED, Phase.LOOP_MEASURED)
    for phase, after in zip(phases, phases[1:], strict=False):
        if phase.name in ends:
            return after.started_s + _RUN_OVERHEAD_S
    return plain_s


def run_verify(
    script: Path,
    script_args: list[str],
    options: Options,
    out: Path,
    facts: Facts,
    report: Report,
    plain_s: float,
    console: Console,
) -> ExitCode | None:
    """Verifies the report's fixes and writes ``verify.json``, ``verify.md``, ``fixes.patch`` and
    ``report.json``'s ``verified`` list; prints the table.

    Args:
        script: the user's script.
        script_args: its arguments.
        options: the check's options.
        out: the report folder.
        facts: the plain check's facts as the child saved them (not redacted).
        report: the plain check's report (redacted with ``--redact``: its fixes are then taken
            from the rules run again on ``facts``, since a redacted ``before`` text would not
            match the user's source).
        plain_s: the plain check's wall time (seconds).
        console: the terminal.

    Returns:
        ``ExitCode.INTERRUPTED`` after a Ctrl-C during the runs, else None (the plain check's
        exit code stands).
    """
    from rnndoctor.verify import Job, verify
    from rnndoctor.verify.run import default_budget

    budget, run_timeout, left = verify_limits(options, plain_s)
    estimate = run_estimate_s(facts, plain_s)
    if left is not None and left < 2 * estimate:  # not even one A/B pair (two windows) fits
        console.note(f"--verify skipped: --timeout leaves {left:.0f} s after the plain check")
        return None
    runner = make_runner(script_args, options, out)
    if left is not None:
        runner.deadline = time.monotonic() + left  # no arm waits past --timeout
    requested = options.verify_budget or default_budget(plain_s)
    job = Job(
        script=script, out=out, runner=runner, budget_s=budget, run_timeout_s=run_timeout,
        estimate_s=estimate, budget_option="--timeout" if budget < requested else "--verify-budget",
    )  # fmt: skip
    bound = ", what --timeout leaves" if job.budget_option == "--timeout" else ""
    console.say(f"rnndoctor: verifying the fixes A/B (budget {budget:.0f} s{bound})", err=True)
    scrub = _scrubber(script, options)
    written: dict[str, Path] | None = None
    kept = UserFiles.keep(facts.run.written_files)
    try:
        verification = verify(_findings(facts, report, options), facts, job)
        summary = summarise(verification, scrub)
        summary.notes.extend(scrub(n) for n in kept.put_back())
        written = write_verified(summary, report, options, out)
    except (OSError, ValueError) as exc:  # a copy or a report file that cannot be written
        console.error(f"--verify stopped: {exc}")
        return None
    finally:
        if written is None:  # a patch with no verify.json beside it: the next check keeps it
            (out / PATCH_NAME).unlink(missing_ok=True)
        runner.close()
        for note in kept.put_back():  # what an arm wrote as it was stopped
            console.note(scrub(note))
    for line, bad in terminal_lines(summary):
        console.say(typer.style(line, fg="red") if bad else line)
    console.say(f"verify report: {written['verify.md']} and {written['verify.json']}")
    return ExitCode.INTERRUPTED if verification.interrupted else None


@dataclasses.dataclass
class UserFiles:
    """The user's files the plain check saw the script write (``facts.run.written_files``: a
    config dump, a vocabulary, before ``fit``), as they were before ``--verify``'s runs, so
    that they are put back after them: the arms run the script, and each fix's copy, in the
    user's working directory, and a copy writes those files with its own values (a new user's
    ``json.dump(vars(args), f)`` held RD301's batch size, 32, after ``--verify``, where the
    user ran 8). ``saved``: each path's bytes, or None where it did not exist. Files past
    :data:`_KEEP_MAX_BYTES` in all, or unreadable, are not kept, and a file the script had not
    written in the plain check is not known here."""

    saved: dict[str, bytes | None]

    @classmethod
    def keep(cls, paths: list[str]) -> UserFiles:
        saved: dict[str, bytes | None] = {}
        total = 0
        for path in paths:
            try:
                data = Path(path).read_bytes() if os.path.isfile(path) else None
            except OSError:
                continue
            total += len(data or b"")
            if total <= _KEEP_MAX_BYTES:
                saved[path] = data
        return cls(saved)

    def put_back(self) -> list[str]:
        """Writes back each kept file a run changed (or removes one a run made); returns a note
        for each."""
        notes = []
        for path, data in self.saved.items():
            try:
                now = Path(path).read_bytes() if os.path.isfile(path) else None
            except OSError:
                now = b""  # unreadable now: write it back
            if now == data:
                continue
            try:
                if data is None:
                    os.unlink(path)
                else:
                    Path(path).write_bytes(data)
            except OSError as exc:
                notes.append(f"{path} was changed by a --verify run and is not put back: {exc}")
                continue
            notes.append(
                f"{path} was written by a --verify run (the runs work in your working directory, "
                "each fix's copy with its own values) and is put back as the plain check left it"
            )
        return notes


# The most bytes of the user's written files --verify keeps to put back (Source: rnndoctor's
# choice: a config, a vocabulary, a small log; not a dataset).
_KEEP_MAX_BYTES = 64 * 2**20


def write_verified(
    summary: VerifySummary, report: Report, options: Options, out: Path
) -> dict[str, Path]:
    """Writes ``verify.json`` and ``verify.md``, and renders the check's reports again (each
    of ``options.format``) with the verification in them; returns the paths by format
    (``verify.json``, ``verify.md``, then the report formats).

    Raises:
        OSError: ``out`` cannot be written.
    """
    from rnndoctor.reports import write_reports
    from rnndoctor.reports.markdown import render_verify_markdown
    from rnndoctor.verify.output import VERIFY_MD, write_json

    written = {"verify.json": write_json(summary, out), "verify.md": out / VERIFY_MD}
    written["verify.md"].write_text(render_verify_markdown(summary), encoding="utf-8")
    verified = dataclasses.replace(report, verification=summary)
    return written | write_reports(verified, out, options.format)


def _findings(facts: Facts, report: Report, options: Options) -> list[Finding]:
    """The findings to verify: the report's, or with ``--redact`` the rules' on unredacted
    facts."""
    if not options.redact:
        return report.findings
    from rnndoctor.engine import evaluate

    raw = evaluate(facts, select=options.select or None, ignore=options.ignore or None,
                   rule_options=options.rule_options)  # fmt: skip
    return raw.findings


def _scrubber(script: Path, options: Options) -> Callable[[str], str]:
    """The reports' scrubber with ``--redact``, else the identity."""
    if not options.redact:
        return str
    from rnndoctor.redact import make_scrubber

    return make_scrubber(str(script.resolve().parent), os.getcwd(), script)


def verify_blocker(facts: Facts) -> str | None:
    """Why ``--verify`` cannot run after this plain check, or None: the window was not measured,
    or its samples per second, the quantity every A/B pair compares, are not known (``fit``
    was given no batch size and the input is not a ``tf.data`` dataset whose samples a
    window can count: a Python generator or a ``PyDataset`` makes its batches itself)."""
    steps = facts.steps
    if steps is None or not steps.median_step_time_ms:
        return "the plain check did not measure its window"
    if not steps.samples_per_s:
        kind = facts.fit.data_kind if facts.fit is not None else None
        if kind == "tf.data":
            why = "this tf.data input's batches have no constant size"
        else:
            why = f"fit has no batch size for {f'a {kind} input' if kind else 'this input'}"
        return (
            f"the window's samples per second are not known ({why}), and the A/B pairs compare "
            "samples per second"
        )
    return None
