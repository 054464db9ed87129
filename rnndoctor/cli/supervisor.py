"""Runs the capture child: spawn, phase progress, the kill of its whole process tree, log tail.

The child runs in its own session (it leads a new process group), with its output in
``script.log`` and a marker in its environment (``RNNDOCTOR_RUN_ID``) that every process it starts
inherits. After the run, the group gets SIGKILL, and the processes that left the group (``setsid``,
a double fork) are found by that marker (:mod:`psutil`) and killed too.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from rnndoctor import cluster, machine
from rnndoctor.cli.signals import cause_of, deferred
from rnndoctor.options import Options

RUN_ID_VAR = cluster.RUN_ID_VAR  # marks the child's environment: its descendants inherit it
_REAP_S = 5.0  # how long to wait for killed processes to disappear
_POLL_S = 0.25  # how often the progress display reads the phases from facts.json
_KILL_POLL_S = 0.05  # how often the escaped processes are looked for again while they die
TAIL_LINES = 12  # script output lines shown after a failure
DEBUG_TAIL_LINES = 200  # with --debug (tracebacks included)
_TAIL_BYTES = 256 * 1024  # read at most this much of the end of script.log for the tail


@dataclass
class ChildRun:
    """How the capture child's run ended.

    Attributes:
        status: its exit status (negative: the signal that killed it; None: it was killed by
            the supervisor before it exited).
        timed_out: the timeout ran out and the tree was killed.
        interrupted: Ctrl-C (or SIGTERM, SIGHUP: :mod:`rnndoctor.cli.signals`) reached the
            supervisor and the tree was killed.
        interrupted_by: what interrupted it: ``"Ctrl-C"``, ``"SIGTERM"``, ``"SIGHUP"``.
        escaped: pids of processes that had left the child's process group, killed by their
            environment marker.
        started_s: ``time.monotonic()`` when the child was spawned (seconds).
    """

    status: int | None = None
    timed_out: bool = False
    interrupted: bool = False
    interrupted_by: str = "Ctrl-C"
    escaped: list[int] = field(default_factory=list)
    started_s: float = 0.0

    def interrupt(self, exc: BaseException) -> None:
        """Records an interruption (``exc``: a ``KeyboardInterrupt``, :func:`cause_of` names
        it); the first one's cause is kept."""
        if not self.interrupted:
            self.interrupted, self.interrupted_by = True, cause_of(exc)


class Supervisor:
    """Runs one command as the capture child, with a progress display and a time limit.

    Args:
        command: the child's argv.
        log_path: where its stdout and stderr go (``script.log``).
        facts_path: the ``facts.json`` it saves after each phase (read for the progress).
        timeout_s: seconds before the whole process tree is killed.
        quiet: no phase display (``--verify``'s A/B runs, many in a row).
        extra_env: variables added to the child's environment (a launched worker's, see
            :mod:`rnndoctor.cli.launched`).
    """

    def __init__(
        self,
        command: Sequence[str],
        log_path: Path,
        facts_path: Path,
        timeout_s: float,
        quiet: bool = False,
        extra_env: Mapping[str, str] | None = None,
    ) -> None:
        self.command = list(command)
        self.log_path = log_path
        self.facts_path = facts_path
        self.timeout_s = timeout_s
        self.quiet = quiet
        self.extra_env = dict(extra_env or {})
        self.run_id = uuid.uuid4().hex

    def environment(self) -> dict[str, str]:
        """The child's environment: ours, unbuffered, no bytecode caches, and the marker."""
        # No bytecode caches: the script's own modules would get __pycache__ folders in its tree.
        env = dict(os.environ, PYTHONUNBUFFERED="1", PYTHONDONTWRITEBYTECODE="1")
        env[RUN_ID_VAR] = self.run_id
        env.update(self.extra_env)
        return env

    def run(self) -> ChildRun:
        """Spawns the child in its own session, waits for it, then ends its whole tree.

        A timeout or a Ctrl-C is reported in the result, not raised.

        Raises:
            OSError: the log file cannot be opened, or the child cannot be spawned.
        """
        result = ChildRun(started_s=time.monotonic())
        with open(self.log_path, "wb") as log:
            proc = subprocess.Popen(
                self.command, stdin=child_stdin(), stdout=log, stderr=subprocess.STDOUT,
                env=self.environment(), start_new_session=True,
            )  # fmt: skip
            try:
                if self.quiet:
                    result.status = proc.wait(timeout=self.timeout_s)
                else:
                    result.status = self._wait_with_progress(proc)
            except subprocess.TimeoutExpired:
                result.timed_out = True
            except KeyboardInterrupt as exc:
                result.interrupt(exc)
            finally:
                try:
                    result.escaped = end_process_tree(proc, self.run_id)
                except KeyboardInterrupt as exc:  # a signal during the (finished) cleanup
                    result.interrupt(exc)
        return result

    def _wait_with_progress(self, proc: subprocess.Popen) -> int:
        """Waits for the child, showing its phases with their elapsed times on stderr.

        Raises:
            subprocess.TimeoutExpired: after ``timeout_s`` seconds (the display notes the cut).
        """
        from rnndoctor.reports.progress import PhaseDisplay

        start = time.monotonic()
        deadline = start + self.timeout_s
        phases: list[tuple[str, float]] = []
        with PhaseDisplay() as display:
            status = None
            try:
                while status is None:
                    try:
                        wait_s = min(_POLL_S, max(0.01, deadline - time.monotonic()))
                        status = proc.wait(timeout=wait_s)
                    except subprocess.TimeoutExpired:
                        if time.monotonic() >= deadline:
                            raise
                    phases = read_phases(self.facts_path) or phases
                    display.update(phases, time.monotonic() - start)
                return status
            finally:
                phases = read_phases(self.facts_path) or phases
                display.close(phases, time.monotonic() - start, status == 0)


def capture_command(script: Path, script_args: Sequence[str], options: Options) -> list[str]:
    """The capture child's command line: ``python -P -m rnndoctor.capture`` with the window
    options (``options.out`` is the child's report folder), the script and its arguments. The
    plain check and each ``--verify`` run use it alike."""
    return [
        sys.executable, "-P", "-m", "rnndoctor.capture", *options.child_argv(),
        str(script.resolve()), *script_args,
    ]  # fmt: skip


def read_phases(facts_path: Path) -> list[tuple[str, float]] | None:
    """The phases the child has recorded so far: (name, started_s); None while unreadable."""
    try:
        run = json.loads(facts_path.read_text())["run"]
        return [(p["name"], float(p["started_s"])) for p in run.get("phases", [])]
    except (OSError, ValueError, KeyError, TypeError):
        return None  # not written yet, or being replaced


def child_stdin() -> int | Any:
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


def _kill_group(pgid: int) -> None:
    """SIGKILL to a process group (the capture child is its leader): no signal handler of the
    script runs, so a preemption handler cannot save a checkpoint over the user's on the way out.
    Facts are written atomically after each phase, so nothing of rnndoctor's is lost."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass  # the group is empty (everyone has exited)


def marked_processes(run_id: str) -> list[int]:
    """Pids of the live processes whose environment carries this ``RNNDOCTOR_RUN_ID``: the
    capture child and everything it started, even what left its process group. Zombies and
    processes whose environment we may not read are not listed."""
    return [proc.pid for proc in machine.marked_processes(RUN_ID_VAR, run_id)]


def _in_group(pid: int, pgid: int) -> bool:
    try:
        return os.getpgid(pid) == pgid
    except OSError:  # already gone
        return True


def end_process_tree(proc: subprocess.Popen, run_id: str) -> list[int]:
    """Ends the capture child and everything it started; returns the pids that outlived the
    process group (the escaped ones, killed by their environment marker).

    Called after every run, not only on a timeout: a script's worker processes (a
    ``multiprocessing.Pool``, a ``PyDataset`` with ``use_multiprocessing=True``) outlive the
    child, which ends with ``os._exit`` and does not wait for them.

    Raises:
        KeyboardInterrupt: Ctrl-C or a stop signal (:class:`rnndoctor.cli.signals.Stopped`)
            that arrived meanwhile, once the tree is ended (:func:`rnndoctor.cli.signals.deferred`).
    """
    with deferred():
        return _end_process_tree(proc, run_id)


def _end_process_tree(proc: subprocess.Popen, run_id: str) -> list[int]:
    _kill_group(proc.pid)
    try:
        proc.wait(timeout=_REAP_S)
    except subprocess.TimeoutExpired:  # a process in uninterruptible sleep: not ours to wait on
        pass
    _kill_group(proc.pid)  # what was forked while the first signal was delivered
    escaped: list[int] = []
    deadline = time.monotonic() + _REAP_S
    while True:
        left = marked_processes(run_id)
        if not left or time.monotonic() > deadline:
            return escaped
        for pid in left:
            if _in_group(pid, proc.pid):
                continue  # in the group: already sent SIGKILL, still dying
            try:
                psutil.Process(pid).kill()
            except psutil.Error:
                continue
            if pid not in escaped:
                escaped.append(pid)
        time.sleep(_KILL_POLL_S)


def status_text(status: int | None) -> str:
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


_TRACEBACK_START = "Traceback (most recent call last):"
_CHAINED = ("During handling of the above exception", "The above exception was the direct cause")
# TensorFlow's C++ INFO lines (absl format: I<mmdd> <time> <thread> <file>:<line>] ...)
_TF_INFO = re.compile(r"^I\d{4} \d\d:\d\d:\d+\.\d+\s+\d+ \S+:\d+\] ")
_ABSL_PREAMBLE = "WARNING: All log messages before absl::InitializeLog() is called are written"
# The second line of TensorFlow's cpu_feature_guard INFO message (the first is an _TF_INFO line).
_TF_CPU_FEATURES = "To enable the following instructions:"


def _read_end(log_path: Path) -> list[str] | None:
    """The lines of the last ``_TAIL_BYTES`` of the log (a cut first line dropped); None: unread."""
    try:
        with open(log_path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - _TAIL_BYTES))
            text = f.read().decode("utf-8", "replace")
    except OSError:
        return None
    raw = text.splitlines()
    return raw[1:] if size > _TAIL_BYTES else raw


def _is_noise(line: str) -> bool:
    """Blank lines, chained-exception headers and TensorFlow's start-up INFO lines."""
    return (
        not line.strip()
        or line.startswith(_CHAINED)
        or bool(_TF_INFO.match(line))
        or line.startswith((_ABSL_PREAMBLE, _TF_CPU_FEATURES))
    )


def log_tail(log_path: Path, lines: int, keep_tracebacks: bool) -> list[str]:
    """The last ``lines`` lines of the script's output, for the terminal after a failure.

    Without ``keep_tracebacks`` (no ``--debug``), Python traceback blocks are left out (the
    error's one-line message is already shown; script.log keeps them), as are blank lines and
    TensorFlow's C++ INFO lines. A missing or unreadable log gives no lines.
    """
    raw = _read_end(log_path)
    if raw is None:
        return []
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
        if not _is_noise(line):
            kept.append(line)
    return kept[-lines:]
