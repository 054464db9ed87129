"""The diagnosis window: warm-up, measured and profiled steps, written once for both drivers.

:class:`StepWindow` keeps the window's state and decides, step by step, what comes next: the
warm-up steps (not timed: tracing, graph building, allocator warm-up), then the measured steps
(wall time from the end of one step to the end of the next, divided by the steps that interval
covered), then ``profile_steps`` steps inside the profiler, each with a step marker that xprof's
step-time and input-pipeline analysis recognise. It announces each phase once, as it starts.

Two thin adapters drive it: the ``fit`` callback (:class:`rnndoctor.capture.window.DiagnosisWindow`,
``begin_step`` at ``on_train_batch_begin`` and ``end_step`` at ``on_train_batch_end``) and the
custom-loop hook (:mod:`rnndoctor.capture.loop`, ``end_step`` at each gradient application or
step-function call). The clock and the profiler are injected, so this module imports no
TensorFlow: :class:`TFProfiler` imports it when it first starts.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol

from rnndoctor.facts import Phase, StepTimes
from rnndoctor.machine import drift
from rnndoctor.options import DEFAULTS
from rnndoctor.paired import VERIFY_PAIRS
from rnndoctor.stats import percentile

# The most step times (executions) a window records to reach WindowOptions.min_measured_s.
MAX_MEASURED_STEPS = 2000
FIT_PHASES = (Phase.WARMUP, Phase.MEASURED, Phase.PROFILED)
LOOP_PHASES = (Phase.LOOP_WARMUP, Phase.LOOP_MEASURED, Phase.LOOP_PROFILED)
_ERROR_CHARS = 300  # a profiler error is kept to this many characters


@dataclass
class WindowOptions:
    """How many steps of each kind the window runs, and what follows it.

    Attributes:
        warmup_steps: steps run first and not timed (tracing, graph building, allocator warm-up).
        measured_steps: timed steps, excluding the first step of each epoch (iterator start).
        profile_steps: steps captured by the TF profiler after the measured ones (0: no profile).
        profile_dir: the profiler logdir (``<out>/profile``); None: no profile.
        min_measured_s: past ``measured_steps``, the window goes on measuring until its timed
            steps add up to this many seconds (at most :data:`MAX_MEASURED_STEPS` steps, and only
            while the fit has steps left for them and the profiled ones:
            :attr:`StepWindow.steps_available`; where that is not known, only in a
            ``window_only`` window, whose end of data ends it as it is); 0: exactly
            ``measured_steps``.
        probe_fast_path: run the per-layer cuDNN fast-path probe.
        timeout_s: the parent's ``--timeout`` in seconds; the phases after the window get budgets
            from it (:mod:`rnndoctor.capture.budget`). None: no overall limit.
        run_probes: run the input / compute / batch-size / steps_per_execution probes and the
            sequence sampling after the window.
        skip_probes: of those, the ones not to run (``Options.skip_probes``: no rule that
            reads them runs).
        spe_share_cutoffs: RD403's dispatch-share cut-offs (``Options.spe_share_cutoffs``),
            for the steps_per_execution probe's second stage; empty: none.
        batch_min_speedup: RD301's samples/s cut-off (``Options.batch_min_speedup``), for the
            batch-size probe's one early look; None: no look.
        window_only: measure the window and nothing after it (``Options.window_only``).
        control: the parent's pipes, ``"R,W"`` (``Options.control``; None: one window).
        profile_keeper: in the user's own process, the owner of a temporary ``profile_dir``
            (``rnndoctor.api.TemporaryFolder``): a conversion thread holds it while xprof reads
            the folder and calls its ``read_done()`` once xprof returns
            (:func:`rnndoctor.capture.conversion.convert_bounded`). None: the folder is the
            user's (``out``) or the capture child's.
    """

    warmup_steps: int = DEFAULTS.warmup
    measured_steps: int = DEFAULTS.steps
    min_measured_s: float = 0.0
    profile_steps: int = DEFAULTS.profile_steps
    profile_dir: str | None = None
    probe_fast_path: bool = DEFAULTS.probe_fast_path
    timeout_s: float | None = None
    run_probes: bool = not DEFAULTS.no_probes
    skip_probes: tuple[str, ...] = ()
    spe_share_cutoffs: tuple[float, ...] = ()
    batch_min_speedup: float | None = None
    window_only: bool = DEFAULTS.window_only
    control: str | None = DEFAULTS.control
    profile_keeper: Any = None


class Profiler(Protocol):
    """What the window needs of a profiler (:class:`TFProfiler`, or a fake in tests)."""

    def start(self, logdir: str) -> None:
        """Starts a profiling session writing to ``logdir``.

        Raises:
            Exception: the session could not start (another one is running, say).
        """

    def stop(self) -> None:
        """Stops the session and writes the profile.

        Raises:
            Exception: stopping failed.
        """

    def step_marker(self, step: int) -> AbstractContextManager[Any]:
        """A context manager marking one training step (number ``step``) in the profile."""


class TFProfiler:
    """``tf.profiler.experimental``, with ``Trace("train", step_num=..., _r=1)`` step markers."""

    def start(self, logdir: str) -> None:
        import tensorflow as tf

        tf.profiler.experimental.start(logdir)

    def stop(self) -> None:
        import tensorflow as tf

        tf.profiler.experimental.stop()
        from rnndoctor.capture import heap

        heap.release_freed()  # the profiler's freed buffers, back to the system

    def step_marker(self, step: int) -> AbstractContextManager[Any]:
        import tensorflow as tf

        return tf.profiler.experimental.Trace("train", step_num=step, _r=1)


@dataclass(frozen=True)
class BatchIndex:
    """How a Keras numbers one execution of ``steps_per_execution`` steps in its batch hooks,
    so that an execution's steps are counted right in every version.

    - Keras >= 3.11 (``for begin_step, end_step, iterator in epoch_iterator``:
      ``on_train_batch_end(end_step)``) and tf_keras (``step + step_increment``) pass the
      execution's first step to ``on_train_batch_begin`` and its last to
      ``on_train_batch_end``.
    - Keras 3.0-3.10 pass one index to both (``for step, iterator in ...``:
      ``on_train_batch_end(step)``, keras/src/backend/tensorflow/trainer.py): the
      execution's first step, except in Keras 3.0-3.6 where the epoch's length is unknown
      (``enumerate_epoch``'s unbounded branch, ``step += steps_per_execution`` from -1), its
      last. Counting ``end - begin + 1`` there gave every execution 1 step: a
      ``steps_per_execution=8`` window under Keras 3.6 measured 343.6 ms a step where the real
      step was 41 ms (tests/scripts/clean_control.py, one check each, Keras 3.6.0 on TF 2.21).

    Attributes:
        shared: both hooks get one index (Keras 3.0-3.10).
        last_when_unbounded: with ``shared``, that index is the execution's last step where the
            epoch's length is unknown (Keras 3.0-3.6). Keras learns the length at the end of the
            first epoch (``catch_stop_iteration``: ``_num_batches = _steps_seen``) and numbers
            later epochs by their first step, while ``params["steps"]`` stays None: the window
            reads the numbering of each epoch from its first index (:meth:`for_epoch`).
    """

    shared: bool = False
    last_when_unbounded: bool = False

    @classmethod
    def of(cls, version: str | None, tf_keras: bool = False) -> BatchIndex:
        """The numbering of Keras ``version`` (``keras.__version__``; ``tf_keras``: tf_keras,
        which numbers like Keras >= 3.11). An unreadable version is taken as the newest."""
        if tf_keras or not version:
            return cls()
        try:
            major, minor = (int(part) for part in version.split(".")[:2])
        except ValueError:
            return cls()
        if major != 3 or minor >= 11:
            return cls()
        return cls(shared=True, last_when_unbounded=minor <= 6)

    def for_epoch(self, first_index: int, per_execution: int) -> BatchIndex:
        """This numbering in an epoch whose first execution Keras numbered ``first_index``: a
        3.0-3.6 epoch of unknown length that starts at 0 is numbered by first steps (Keras
        learnt the length in an earlier epoch), one that starts at ``per_execution - 1`` by
        last steps."""
        if not self.last_when_unbounded or per_execution <= 1:
            return self
        return BatchIndex(shared=True, last_when_unbounded=first_index == per_execution - 1)

    def steps(self, begin: int, end: int, per_execution: int = 1, epoch_steps: int | None = None
              ) -> int:  # fmt: skip
        """The steps of the execution that ``on_train_batch_begin(begin)`` and
        ``on_train_batch_end(end)`` framed (``per_execution``: the model's
        ``steps_per_execution``; ``epoch_steps``: the epoch's steps, ``params["steps"]``, when
        Keras knows them): at least 1.

        An epoch's last execution may hold fewer steps than ``per_execution``: Keras >= 3.11
        still passes ``begin + steps_per_execution - 1`` for it (``epoch_iterator.py``:
        ``yield step, step + self.steps_per_execution - 1, ...``), so the end is capped at the
        epoch's last step where the epoch's length is known. Where it is not, a partial
        execution counts in full (nothing in the hooks says how many batches it ran)."""
        if epoch_steps:
            end = min(end, epoch_steps - 1)
        if not self.shared or per_execution <= 1:
            return max(1, end - begin + 1)
        if epoch_steps:  # the index is the execution's first step; the last may be partial
            return max(1, min(per_execution, epoch_steps - begin))
        return per_execution

    def last_step(self, begin: int, end: int, per_execution: int = 1,
                  epoch_steps: int | None = None) -> int:  # fmt: skip
        """The 1-based step of its epoch at which the execution ended (the step whose loss
        Keras logged last)."""
        if self.shared and self.last_when_unbounded and not epoch_steps:
            return end + 1
        if self.shared:
            return begin + self.steps(begin, end, per_execution, epoch_steps)
        return (min(end, epoch_steps - 1) if epoch_steps else end) + 1


def read_back(logs: dict[str, Any] | None) -> None:
    """Reads one value of a step's Keras ``logs`` back to the host (the first that converts to
    a float), so that the step's device work has finished before its end is timed. Every step
    timer's ``on_train_batch_end`` calls it first."""
    for value in (logs or {}).values():
        try:
            float(value)
            return
        except (TypeError, ValueError):
            continue


def _error_text(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:_ERROR_CHARS]


class StepWindow:
    """The window's state: steps done, step times, the profiler, the current phase.

    Args:
        options: the step counts and the profile logdir.
        phases: the names announced for the warm-up, measured and profiled steps
            (:data:`FIT_PHASES` or :data:`LOOP_PHASES`).
        on_phase: called with each phase's name as it starts (``CaptureSession.set_phase``).
        clock: seconds, monotonic (``time.perf_counter``).
        profiler: the profiler (:class:`TFProfiler` when None).

    Attributes:
        steps_done: training steps seen, warm-up included.
        step_ms: measured step times, ms per step.
        train_function_ms: per measured step, ms from :meth:`begin_step` to :meth:`end_step`
            (``fit`` only: Keras' train function without the input wait before it).
        profiled: steps the profiler captured.
        profile_error: why the profiler did not start or stop, or None.
    """

    def __init__(
        self,
        options: WindowOptions,
        phases: tuple[Phase, Phase, Phase] = FIT_PHASES,
        on_phase: Callable[[Phase], None] | None = None,
        clock: Callable[[], float] = time.perf_counter,
        profiler: Profiler | None = None,
    ):
        self.options = options
        self.phases = phases
        self.on_phase = on_phase
        self.clock = clock
        self.profiler: Profiler = profiler if profiler is not None else TFProfiler()
        self.phase: Phase | None = None
        self.steps_done = 0
        # training steps the fit runs in all (epochs x steps per epoch) when known, set by the
        # fit's window; None (a custom loop, an epoch of unknown length): no measuring past
        # ``measured_steps``
        self.steps_available: int | None = None
        self.measured_s = 0.0  # the timed seconds of the measured steps
        self._covered = 1  # steps the last execution covered (steps_per_execution)
        self.step_ms: list[float] = []
        self.train_function_ms: list[float] = []
        self.profiled = 0
        self.profile_error: str | None = None
        self._profiling = False
        self._marker: AbstractContextManager[Any] | None = None
        self._begin_t: float | None = None
        self._last_end: float | None = None

    # -- where the window is -------------------------------------------------------------------
    def warming_up(self) -> bool:
        return self.steps_done < self.options.warmup_steps

    def measuring(self) -> bool:
        """Whether the next step's time is recorded (warm-up over, measured steps to go, or the
        measured time still under ``min_measured_s``: :meth:`_short`)."""
        if self.warming_up():
            return False
        return len(self.step_ms) < self.options.measured_steps or self._short()

    def _short(self) -> bool:
        """Past ``measured_steps``: whether the measured steps still time less than
        ``min_measured_s`` and the fit has steps left for one more and the profiled ones.

        Why: every probe is checked against the window's median step (issue 11), and 20 steps of
        2.5 ms (tests/scripts/tiny_lstm.py) time 50 ms in all; that median moved from 2.3 to
        4.0 ms across runs, so a probe of 2.8 ms was "inconsistent" in one run and not in the
        next. The floor is the probes' own (``rnndoctor.paired.MIN_SECONDS``); a ``--verify``
        arm's window has its own (``rnndoctor.paired.ARM_WINDOW_S``)."""
        if not self.options.min_measured_s:
            return False
        if self.measured_s >= self.options.min_measured_s:
            return False
        if len(self.step_ms) >= MAX_MEASURED_STEPS:
            return False
        if self.steps_available is None:
            # a --verify arm's window (window_only) is taken as it is where the data ends first
            # (WarmWindows.ended); a plain check's has its profiled steps still to run
            return self.options.window_only
        # after one more measured execution of N steps, the profiled steps (whole executions)
        # and one spare execution must still fit in what the fit runs; and a --verify arm's
        # windows to come, VERIFY_PAIRS of measured_steps: verify_lstm.py's copy at batch 32
        # (32 steps in all) ran out after one window of the time floor, and its warm child was
        # started again for each pair (the e2e test's setup 19 -> 41 s)
        n, profile = self._covered, self.options.profile_steps
        left = self.steps_available - self.steps_done - n
        reserve = VERIFY_PAIRS * self.options.measured_steps if self.options.window_only else 0
        return left >= (math.ceil(profile / n) + 1) * n + reserve

    def profile_wanted(self) -> bool:
        """Whether profiled steps remain (a profile asked for, and no profiler error)."""
        return bool(
            self.options.profile_steps > 0
            and self.options.profile_dir
            and self.profile_error is None
            and self.profiled < self.options.profile_steps
        )

    def profile_due(self) -> bool:
        """Whether the next step is a profiled one."""
        return not self.warming_up() and not self.measuring() and self.profile_wanted()

    def complete(self) -> bool:
        """Whether the window has run every step it wants."""
        return not self.warming_up() and not self.measuring() and not self.profile_wanted()

    def announce(self) -> None:
        """Calls ``on_phase`` when the phase of the next step differs from the last one's."""
        warmup, measured, profiled = self.phases
        phase = warmup if self.warming_up() else measured if self.measuring() else profiled
        if phase != self.phase:
            self.phase = phase
            if self.on_phase is not None:
                self.on_phase(phase)

    # -- steps ---------------------------------------------------------------------------------
    def epoch_begin(self) -> None:
        """A new epoch: its first step also starts the iterator, so it is not measured."""
        self._last_end = None

    def begin_step(self) -> None:
        """A step begins (``fit``): announces its phase, opens its profile marker when due."""
        self.announce()
        if self.profile_due():
            self.begin_profiled_step()
        self._begin_t = self.clock()

    def end_step(self, steps: int = 1) -> None:
        """A step (or ``steps`` steps of one execution) ended; its device work has finished.

        Args:
            steps: training steps the interval covered (``steps_per_execution``), at least 1.
        """
        now = self.clock()
        self._covered = max(1, steps)
        if self.measuring() and self._last_end is not None:
            self.measured_s += now - self._last_end
            self.step_ms.append((now - self._last_end) * 1000.0 / steps)
            if self._begin_t is not None:
                self.train_function_ms.append((now - self._begin_t) * 1000.0 / steps)
        self._last_end = now
        self.steps_done += steps
        if self._marker is not None:
            self._marker.__exit__(None, None, None)
            self._marker = None
            self.profiled += steps

    def new_window(self) -> None:
        """A warm ``--verify`` arm's next window begins now: no measured step yet, its time
        floor (``min_measured_s``) counted afresh."""
        self.step_ms.clear()
        self.train_function_ms.clear()
        self.measured_s = 0.0
        self.restart_clock()

    def restart_clock(self) -> None:
        """The next step starts now (the custom loop's own bookkeeping is not in any step)."""
        self._last_end = self.clock()

    # -- the profiler --------------------------------------------------------------------------
    def begin_profiled_step(self) -> None:
        """Starts the profiler (once) and opens the next step's marker; a profiler that cannot
        start is recorded in ``profile_error`` and no marker opens."""
        if not self._profiling:
            try:
                self.profiler.start(self.options.profile_dir or "")
                self._profiling = True
            except Exception as exc:  # another profiler session running, say
                self.profile_error = _error_text(exc)
                return
        self._marker = self.profiler.step_marker(self.steps_done)
        self._marker.__enter__()

    def stop_profiler(self) -> None:
        """Closes an open marker and stops the profiler (idempotent)."""
        if self._marker is not None:
            self._marker.__exit__(None, None, None)
            self._marker = None
        if self._profiling:
            self._profiling = False
            try:
                self.profiler.stop()
            except Exception as exc:
                self.profile_error = _error_text(exc)

    # -- the result ----------------------------------------------------------------------------
    def step_times(self, batch_size: int | None, source: str = "fit") -> StepTimes:
        """The measured steps as :class:`StepTimes` (ms, rounded to 4 places; samples/s), from
        one copy of each list: the child's watchdog reads them while the window appends."""
        step_ms, function_ms = list(self.step_ms), list(self.train_function_ms)
        times = StepTimes(
            warmup_steps=self.options.warmup_steps,
            measured_steps=len(step_ms),
            requested_steps=self.options.measured_steps,
            step_time_ms=[round(v, 4) for v in step_ms],
            train_function_ms=[round(v, 4) for v in function_ms],
            batch_size=batch_size,
            source=source,
        )
        if step_ms:
            times.median_step_time_ms = round(statistics.median(step_ms), 4)
            times.p90_step_time_ms = round(percentile(step_ms, 0.9), 4)
            if function_ms:
                times.median_train_function_ms = round(statistics.median(function_ms), 4)
            if batch_size:
                times.samples_per_s = round(batch_size * 1000.0 / times.median_step_time_ms, 2)
            if min(step_ms) > 0.0:
                found = drift(step_ms)
                times.drifted, times.drift = found.drifted, found.description
        return times
