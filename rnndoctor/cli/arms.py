"""The warm arms of ``check --verify``: one window-only capture child per script, kept running
between its windows (:mod:`rnndoctor.capture.control`).

:class:`WarmRunner` is the verification's :data:`rnndoctor.verify.Runner`: each call measures one
window of the script. The first call for a script starts its child (``--window-only --control``)
and waits until its warm-up is done; later calls send ``go`` to the same child and read its
window. The A/B schedule (:mod:`rnndoctor.verify.run`) is unchanged, A B A B, but a run then
costs its window, not a process start, TensorFlow's import, the script's data loading and the
train function's tracing. Between windows a child is blocked on its pipe: no step runs while the
other arm measures.

Each call leaves ``out/facts.json`` as a capture child would: the window's step times,
throughput and loss, or (the child ended with an error) the child's own facts. A child whose
``fit`` ran out of data is started again, once per call.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import select
import shutil
import statistics
import subprocess
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from rnndoctor.cli import supervisor
from rnndoctor.cli.signals import deferred
from rnndoctor.facts import Facts, Outcome, RunInfo, StepTimes
from rnndoctor.options import Options
from rnndoctor.verify import RunEnd

WINDOW_STEPS = 5  # measured steps per A/B window (rnndoctor's choice: on the demo, 5 fixes x 5
# pairs of 5-step windows fit the default budget, 3x the plain check, with the arms' starts);
# a window of shorter steps goes on until they time rnndoctor.paired.ARM_WINDOW_S
PARALLEL_ARMS = 2  # children warming up at once in prepare (rnndoctor's choice: two overlap
# their starts; more share the cores and the accelerator with the others' tracing)
_WAIT_S = 0.5  # how often a wait for a child's line checks that the child still lives


@dataclass
class _Arm:
    """One warm child: its process, pipes and folder."""

    proc: subprocess.Popen
    run_id: str
    commands: IO[str]
    results: IO[str]
    folder: Path
    ready: bool = False
    ended_early: bool = False  # it ended (or was ended) before its warm-up was done
    windows: int = 0
    closed: bool = field(default=False)


class WarmRunner:
    """Measures windows of scripts in warm window-only children (see the module's doc).

    Args:
        script_args: the script's arguments, as the plain check passed them.
        options: the plain check's options (its warm-up; the window is ``WINDOW_STEPS`` steps
            or the check's ``steps`` when fewer).
        folder: where each child's ``facts.json`` and ``script.log`` go.
    """

    def __init__(self, script_args: list[str], options: Options, folder: Path):
        self.script_args = list(script_args)
        self.options = options
        self.folder = folder
        self.arms: dict[Path, _Arm] = {}
        self.started = 0
        self.deadline = math.inf  # time.monotonic() past which no arm is waited for (--timeout)

    def __call__(self, script: Path, out: Path, timeout_s: float) -> RunEnd:
        """One window of ``script``; ``out/facts.json`` holds it (see the module's doc)."""
        began = time.monotonic()
        deadline = min(began + timeout_s, self.deadline)
        if began >= self.deadline:  # --timeout is spent: no child is started or waited for
            return RunEnd(None, timed_out=True, wall_s=0.0)
        try:
            for _attempt in range(2):
                arm = self._arm(script)
                window = self._window(arm, deadline)
                if window is not None:
                    _save_window(out, script, self.options.warmup, window)
                    return RunEnd(0, wall_s=time.monotonic() - began)
                status = self._end(arm)
                if _arm_outcome(arm) != Outcome.COMPLETED:
                    _copy_facts(arm, out)  # it failed: its facts tell how
                    return RunEnd(status, wall_s=time.monotonic() - began)
            _save_ran_out(out, script, self.options.steps)
            return RunEnd(status, wall_s=time.monotonic() - began)
        except TimeoutError:
            self._end(self.arms.get(script.resolve()))
            return RunEnd(None, timed_out=True, wall_s=time.monotonic() - began)
        except KeyboardInterrupt:
            try:
                self.close()
            except KeyboardInterrupt:  # a second one while the children were ended
                pass
            return RunEnd(None, interrupted=True, wall_s=time.monotonic() - began)

    def prepare(self, scripts: list[Path], timeout_s: float) -> None:
        """Starts the children of ``scripts``, at most :data:`PARALLEL_ARMS` at a time, and
        waits until each has warmed up (or ended): their starts overlap, before any window is
        measured, instead of each adding its start to the schedule. Each child has its own
        ``timeout_s`` seconds from its start (a slow one does not use up the others' time), and
        none waits past ``self.deadline``; one not ready by then is ended (its first window then
        starts a fresh one)."""
        pending = list(dict.fromkeys(s.resolve() for s in scripts))
        running: list[tuple[_Arm, float]] = []
        while pending or running:
            if time.monotonic() >= self.deadline:  # --timeout is spent: start no more
                pending.clear()
            while pending and len(running) < PARALLEL_ARMS:
                deadline = min(time.monotonic() + timeout_s, self.deadline)
                running.append((self._arm(pending.pop(0)), deadline))
            arm, deadline = running.pop(0)
            try:
                arm.ready = _read(arm, deadline) is not None
            except TimeoutError:
                self._end(arm)
            if not arm.ready:
                arm.ended_early = True

    def _arm(self, script: Path) -> _Arm:
        """The live child of ``script``, started when there is none."""
        key = script.resolve()
        arm = self.arms.get(key)
        if arm is not None and not arm.closed:
            return arm
        self.started += 1
        folder = self.folder / f"{self.started:02d}-{script.stem}"
        folder.mkdir(parents=True, exist_ok=True)
        command_r, command_w = os.pipe()
        result_r, result_w = os.pipe()
        child = dataclasses.replace(
            self.options, out=str(folder), timeout=None, no_probes=True, profile_steps=0,
            probe_fast_path=False, window_only=True, control=f"{command_r},{result_w}",
            steps=min(self.options.steps, WINDOW_STEPS),
        )  # fmt: skip
        run_id = uuid.uuid4().hex
        env = arm_environment(os.environ)
        env[supervisor.RUN_ID_VAR] = run_id
        with open(folder / "script.log", "wb") as log:
            proc = subprocess.Popen(
                supervisor.capture_command(script, self.script_args, child),
                stdin=supervisor.child_stdin(), stdout=log, stderr=subprocess.STDOUT, env=env,
                start_new_session=True, pass_fds=(command_r, result_w),
            )  # fmt: skip
        os.close(command_r)
        os.close(result_w)
        arm = _Arm(proc, run_id, os.fdopen(command_w, "w"), os.fdopen(result_r, "r"), folder)
        self.arms[key] = arm
        return arm

    def _window(self, arm: _Arm, deadline: float) -> dict[str, Any] | None:
        """The child's next window (None: it ended first).

        Raises:
            TimeoutError: ``deadline`` passed first.
        """
        if arm.ended_early:
            return None
        if not arm.ready:
            if _read(arm, deadline) is None:
                return None
            arm.ready = True
        try:
            arm.commands.write("go\n")
            arm.commands.flush()
        except OSError:  # the child is gone
            return None
        window = _read(arm, deadline)
        if window is not None:
            arm.windows += 1
        return window

    def _end(self, arm: _Arm | None) -> int | None:
        """Ends a child and all it started; its exit status (None: it was killed)."""
        if arm is None or arm.closed:
            return None if arm is None else arm.proc.returncode
        with deferred():  # a signal meanwhile raises once this child's tree is ended
            for pipe in (arm.commands, arm.results):
                try:
                    pipe.close()
                except OSError:
                    pass
            try:
                arm.proc.wait(timeout=_WAIT_S)  # a child that ran out of data exits by itself
            except subprocess.TimeoutExpired:
                pass
            supervisor.end_process_tree(arm.proc, arm.run_id)
            arm.closed = True
        return arm.proc.returncode

    def close(self) -> None:
        """Ends every child, whatever arrives meanwhile; then raises the first Ctrl-C or stop
        signal that did.

        Raises:
            KeyboardInterrupt: as :func:`rnndoctor.cli.signals.deferred`.
        """
        first: KeyboardInterrupt | None = None
        for arm in self.arms.values():
            try:
                self._end(arm)
            except KeyboardInterrupt as exc:
                first = first or exc
        if first is not None:
            raise first


def arm_environment(base: Mapping[str, str]) -> dict[str, str]:
    """A warm child's environment: ``base`` with unbuffered output and, unless the user set it,
    ``TF_FORCE_GPU_ALLOW_GROWTH=true``, so the arms share a GPU: by default TensorFlow maps
    nearly all of a GPU's memory in the first process that uses it, and the other arms then
    fail to allocate (the TF guide "Use a GPU", section "Limiting GPU memory growth")."""
    env = dict(base, PYTHONUNBUFFERED="1", PYTHONDONTWRITEBYTECODE="1")
    env.setdefault("TF_FORCE_GPU_ALLOW_GROWTH", "true")
    return env


def _read(arm: _Arm, deadline: float) -> dict[str, Any] | None:
    """The child's next JSON line; None when it ended (end of pipe, or its process exited).

    Raises:
        TimeoutError: ``deadline`` passed first.
    """
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError
        ready, _, _ = select.select([arm.results], [], [], min(left, _WAIT_S))
        if ready:
            line = arm.results.readline()
            if not line:
                return None
            try:
                return json.loads(line)
            except ValueError:
                return None
        if arm.proc.poll() is not None:  # exited; a worker it forked may hold the pipe open
            return None


def _arm_outcome(arm: _Arm) -> str | None:
    """The outcome the child saved in its own ``facts.json`` (None: unreadable)."""
    try:
        return Facts.load(arm.folder / "facts.json").run.outcome
    except (OSError, ValueError):
        return None


def _copy_facts(arm: _Arm, out: Path) -> None:
    """The ended child's own facts as the run's (its error and line, for the report)."""
    out.mkdir(parents=True, exist_ok=True)
    source = arm.folder / "facts.json"
    if source.exists():
        shutil.copyfile(source, out / "facts.json")


def _save_ran_out(out: Path, script: Path, steps: int) -> None:
    """``out/facts.json`` when the script's ``fit`` ended before a window, in a fresh child too."""
    facts = Facts(run=RunInfo(script=str(script), argv=[str(script)], cwd=os.getcwd()))
    facts.run.outcome = Outcome.COMPLETED  # no error of the script's: a window too long for it
    facts.run.message = (
        f"fit ended before a window of {min(steps, WINDOW_STEPS)} measured steps, in a fresh "
        "process too (its data holds too few steps)"
    )
    out.mkdir(parents=True, exist_ok=True)
    facts.save(out / "facts.json")


def _save_window(out: Path, script: Path, warmup: int, window: dict[str, Any]) -> None:
    """``out/facts.json`` of one window: a completed run with its steps, throughput and loss."""
    facts = Facts(run=RunInfo(script=str(script), argv=[str(script)], cwd=os.getcwd()))
    facts.run.outcome = Outcome.COMPLETED
    step_ms = [float(v) for v in window.get("step_time_ms") or []]
    facts.steps = StepTimes(
        warmup_steps=warmup, measured_steps=len(step_ms), step_time_ms=step_ms,
        samples_per_s=window.get("samples_per_s"), final_loss=window.get("final_loss"),
        final_loss_step=window.get("loss_step"),
        requested_steps=len(step_ms), source="fit",
    )  # fmt: skip
    if step_ms:
        facts.steps.median_step_time_ms = round(statistics.median(step_ms), 4)
    facts.run.notes.append(f"window {window.get('window')} of a warm --verify arm")
    out.mkdir(parents=True, exist_ok=True)
    facts.save(out / "facts.json")
