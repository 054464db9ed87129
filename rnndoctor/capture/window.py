"""The diagnosis window: warm-up, measured and profiled steps inside the user's real ``fit``.

``Capture.install_fit_hook()`` wraps ``keras.Model.fit``. The first call runs the user's ``fit``
unchanged, with one extra callback (:class:`DiagnosisWindow`) that times each step, profiles a
few steps with ``tf.profiler.experimental``, and then ends ``fit`` by raising
:class:`_WindowDone`. The hook then gathers the model facts and the profile summary, and ends the
user's script by raising :class:`StopScript`. Both derive from ``BaseException``, so a user's
``except Exception`` cannot swallow them (the same reason ``KeyboardInterrupt`` does).
"""

from __future__ import annotations

import ast
import functools
import inspect
import linecache
import os
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import keras

from rnndoctor.capture import loop, neutralise, probes, sequences, sites
from rnndoctor.capture.budget import Budget, Budgets
from rnndoctor.capture.data import data_kind
from rnndoctor.capture.model import collect_model
from rnndoctor.capture.profile import summarize_profile
from rnndoctor.facts import CutShort, Facts, FitConfig, StepTimes
from rnndoctor.stats import percentile


class StopScript(BaseException):
    """Raised once the diagnosis is finished, to end the user's script (pre-flight mode)."""


class _WindowDone(BaseException):
    """Raised from the window callback to end the user's ``fit`` after the last profiled step."""


@dataclass
class WindowOptions:
    """How many steps of each kind the window runs.

    Attributes:
        warmup_steps: steps run first and not timed (tracing, graph building, allocator warm-up).
        measured_steps: timed steps, excluding the first step of each epoch (iterator start).
        profile_steps: steps captured by the TF profiler after the measured ones (0: no profile).
        profile_dir: the profiler logdir (``<out>/profile``).
        probe_fast_path: run the per-layer cuDNN fast-path probe.
        timeout_s: the parent's ``--timeout``; the phases after the window get budgets from it
            (:mod:`rnndoctor.capture.budget`). None: no overall limit.
        run_probes: run the input / compute / batch-size / steps_per_execution probes and the
            sequence sampling after the window.
    """

    warmup_steps: int = 3
    measured_steps: int = 20
    profile_steps: int = 3
    profile_dir: str | None = None
    probe_fast_path: bool = True
    timeout_s: float | None = None
    run_probes: bool = True


class DiagnosisWindow(keras.callbacks.Callback):
    """Times the user's training steps, then profiles a few, then ends ``fit``.

    Step time is measured between consecutive ``on_train_batch_end`` calls in one epoch and
    divided by the steps that call covered (``steps_per_execution``); the logged loss is read
    back first, so asynchronous GPU work has finished.
    """

    def __init__(
        self,
        options: WindowOptions,
        clock: Callable[[], float] = time.perf_counter,
        on_phase: Callable[[str], None] | None = None,
    ):
        super().__init__()
        self.options = options
        self.clock = clock
        self.on_phase = on_phase
        self._phase: str | None = None
        self.steps_done = 0
        self.step_ms: list[float] = []
        self.train_function_ms: list[float] = []
        self.profiled = 0
        self.profile_error: str | None = None
        self._profiling = False
        self._trace: Any = None
        self._begin_step = 0
        self._begin_t = 0.0
        self._last_end: float | None = None

    # -- phases ------------------------------------------------------------------------------
    def _measuring(self) -> bool:
        return (
            self.steps_done >= self.options.warmup_steps
            and len(self.step_ms) < self.options.measured_steps
        )

    def _profile_due(self) -> bool:
        return (
            not self._measuring()
            and self.steps_done >= self.options.warmup_steps
            and self.options.profile_steps > 0
            and self.profile_error is None
        )

    # -- keras hooks -------------------------------------------------------------------------
    def on_epoch_begin(self, epoch, logs=None):
        self._last_end = None  # the first step of an epoch also starts the iterator

    def _announce(self) -> None:
        if self.steps_done < self.options.warmup_steps:
            phase = "warm-up steps"
        elif self._measuring():
            phase = "measured steps"
        else:
            phase = "profiled steps"
        if phase != self._phase:
            self._phase = phase
            if self.on_phase is not None:
                self.on_phase(phase)

    def on_train_batch_begin(self, batch, logs=None):
        self._begin_step = batch
        self._announce()
        if self._profile_due():
            import tensorflow as tf

            if not self._profiling:
                try:
                    tf.profiler.experimental.start(self.options.profile_dir)
                    self._profiling = True
                except Exception as exc:  # another profiler session running, say
                    self.profile_error = f"{type(exc).__name__}: {exc}"[:300]
            if self._profiling:
                # A step marker that xprof's step-time and input-pipeline analysis recognise.
                self._trace = tf.profiler.experimental.Trace(
                    "train", step_num=self.steps_done, _r=1
                )
                self._trace.__enter__()
        self._begin_t = self.clock()

    def on_train_batch_end(self, batch, logs=None):
        for value in (logs or {}).values():  # read back one value: GPU work has finished
            try:
                float(value)
                break
            except (TypeError, ValueError):
                continue
        now = self.clock()
        n = max(1, batch - self._begin_step + 1)
        if self._measuring() and self._last_end is not None:
            self.step_ms.append((now - self._last_end) * 1000.0 / n)
            self.train_function_ms.append((now - self._begin_t) * 1000.0 / n)
        self._last_end = now
        self.steps_done += n
        if self._trace is not None:
            self._trace.__exit__(None, None, None)
            self._trace = None
            self.profiled += n
            if self.profiled >= self.options.profile_steps:
                self.stop_profiler()
                raise _WindowDone
        elif not self._measuring() and not self._profile_due() and self.step_ms:
            raise _WindowDone

    def stop_profiler(self) -> None:
        if self._trace is not None:
            self._trace.__exit__(None, None, None)
            self._trace = None
        if self._profiling:
            import tensorflow as tf

            self._profiling = False
            try:
                tf.profiler.experimental.stop()
            except Exception as exc:
                self.profile_error = f"{type(exc).__name__}: {exc}"[:300]

    def step_times(self, batch_size: int | None) -> StepTimes:
        times = StepTimes(
            warmup_steps=self.options.warmup_steps,
            measured_steps=len(self.step_ms),
            requested_steps=self.options.measured_steps,
            step_time_ms=[round(v, 4) for v in self.step_ms],
            train_function_ms=[round(v, 4) for v in self.train_function_ms],
            batch_size=batch_size,
        )
        if self.step_ms:
            times.median_step_time_ms = round(statistics.median(self.step_ms), 4)
            times.p90_step_time_ms = round(percentile(self.step_ms, 0.9), 4)
            times.median_train_function_ms = round(statistics.median(self.train_function_ms), 4)
            if batch_size:
                times.samples_per_s = round(batch_size * 1000.0 / times.median_step_time_ms, 2)
        return times


def _dataset_batch_size(x: Any) -> int | None:
    """The batch size a tf.data pipeline's last batch op sets, when it is a constant."""
    for attr in ("_batch_size",):
        value = getattr(x, attr, None)
        if value is not None:
            try:
                return int(value)
            except (TypeError, ValueError):
                return None
    inner = getattr(x, "_input_dataset", None)
    return _dataset_batch_size(inner) if inner is not None else None


def _name(obj: Any) -> str | None:
    if obj is None:
        return None
    if isinstance(obj, str):
        return obj
    return getattr(obj, "name", None) or type(obj).__name__


def fit_config(model: Any, arguments: dict[str, Any], location) -> FitConfig:
    """Describes the ``fit`` call from its bound arguments and the model's compile state."""
    x = arguments.get("x")
    kind = data_kind(x)
    batch_size = arguments.get("batch_size")
    if kind == "tf.data":
        batch_size = _dataset_batch_size(x)
    elif kind.startswith("numpy") or kind == "tensor":
        batch_size = batch_size or 32  # Keras' default for array inputs
    elif kind == "keras.PyDataset":
        batch_size = getattr(x, "batch_size", None)
    callbacks = arguments.get("callbacks") or []
    return FitConfig(
        data_kind=kind,
        batch_size=batch_size,
        epochs=arguments.get("epochs"),
        steps_per_epoch=arguments.get("steps_per_epoch"),
        steps_per_execution=getattr(model, "steps_per_execution", None),
        run_eagerly=getattr(model, "run_eagerly", None),
        jit_compile=getattr(model, "jit_compile", None),
        optimizer=_name(getattr(model, "optimizer", None)),
        loss=_name(getattr(model, "loss", None)),
        callbacks=[type(c).__name__ for c in callbacks],
        has_validation=bool(arguments.get("validation_data") or arguments.get("validation_split")),
        location=location,
    )


class Capture:
    """One capture session: the facts being gathered and where they are saved.

    Args:
        facts: the facts to fill (``run`` already set).
        options: the window options.
        facts_path: where to save partial facts after each phase (None: keep in memory).
        started: ``time.monotonic()`` when the capture started (phase times count from it).
    """

    def __init__(
        self,
        facts: Facts,
        options: WindowOptions,
        facts_path: str | Path | None,
        started: float | None = None,
    ):
        self.facts = facts
        self.started = time.monotonic() if started is None else started
        self.options = options
        self.facts_path = facts_path
        self.fit_called = False
        self.window_finished = False
        self._original_fit: Callable[..., Any] | None = None
        self.budgets = Budgets(options.timeout_s, self.started)
        self.window: DiagnosisWindow | None = None  # the running window (read by the watchdog)

    def budget(self, phase: str) -> Budget:
        """The time budget of a bounded phase (see :mod:`rnndoctor.capture.budget`)."""
        return self.budgets.budget(phase)

    def cut_short(self, budget: Budget | str, reason: str) -> None:
        """Records that a phase stopped early (out of budget, out of memory, failed)."""
        phase, seconds = (
            (budget.phase, budget.seconds) if isinstance(budget, Budget) else (budget, None)
        )
        self.facts.run.cut_short.append(CutShort(phase=phase, reason=reason, budget_s=seconds))
        self.save()

    def original_fit(self) -> Callable[..., Any]:
        """``keras.Model.fit`` as Keras defines it (probes call it without the window hook)."""
        return self._original_fit or keras.Model.fit

    def save(self) -> None:
        if self.facts_path is not None:
            self.facts.save(self.facts_path)

    def set_phase(self, phase: str) -> None:
        self.facts.run.enter_phase(phase, time.monotonic() - self.started)
        self.save()

    def install_fit_hook(self) -> None:
        """Wraps ``keras.Model.fit``; the first call runs the window, then raises StopScript."""
        original = keras.Model.fit
        self._original_fit = original
        capture = self

        @functools.wraps(original)
        def fit(model, *args, **kwargs):
            if capture.fit_called:
                return original(model, *args, **kwargs)
            location = sites.user_frame_location(skip=1, call_names=("fit",))
            capture.run_window(original, model, args, kwargs, location)
            capture.end_script()

        keras.Model.fit = fit

    def run_window(
        self,
        fit: Callable[..., Any],
        model: Any,
        args: tuple,
        kwargs: dict[str, Any],
        location=None,
    ) -> None:
        """Runs the user's ``fit`` with the window callback, then collects model and profile.

        Raises:
            BaseException: whatever the user's ``fit`` raised (after saving partial facts).
        """
        self.fit_called = True
        signature = inspect.signature(fit)
        bound = signature.bind(model, *args, **kwargs)
        arguments = bound.arguments
        defaults = {
            name: p.default
            for name, p in signature.parameters.items()
            if p.default is not inspect.Parameter.empty
        }
        self.facts.fit = fit_config(model, {**defaults, **arguments}, location)
        probes.prepare_fit_data(self, arguments)  # tee a Python generator's batches, say
        window = DiagnosisWindow(self.options, on_phase=self.set_phase)
        self.window = window
        user_callbacks = neutralise.filter_callbacks(self, list(arguments.get("callbacks") or []))
        user_callbacks = probes.time_callbacks(self, user_callbacks)
        arguments["callbacks"] = [*user_callbacks, window]
        self.set_phase("starting fit (data adapter, model build)")
        finished = False
        try:
            fit(*bound.args, **bound.kwargs)
            finished = True  # fit ended on its own: the data held fewer steps than asked for
        except _WindowDone:
            finished = True
        finally:
            window.stop_profiler()
            self.facts.steps = window.step_times(self.facts.fit.batch_size)
            steps = (window.params or {}).get("steps")
            self.facts.fit.batches_per_epoch = int(steps) if steps else None
            if not finished:
                self._collect_model(model)  # partial facts for the report
                self.save()
        if self.facts.steps.measured_steps < self.options.measured_steps:
            self.facts.run.notes.append(
                f"fit ended after {window.steps_done} steps: only "
                f"{self.facts.steps.measured_steps} of {self.options.measured_steps} requested "
                "steps were measured (first step of each epoch and warm-up excluded)"
            )
        self.finish(model, window.profiled, window.profile_error, arguments)

    def finish(
        self,
        model: Any,
        profiled_steps: int,
        profile_error: str | None,
        arguments: dict[str, Any] | None = None,
    ) -> None:
        """Everything after the measured steps: model inspection, data facts, sequence sampling,
        the probes, and the profile conversion; each bounded by its own budget.

        Args:
            model: the user's model.
            profiled_steps: steps the profiler captured.
            profile_error: why the profiler did not capture, or None.
            arguments: the bound ``fit`` arguments (None for a custom loop).
        """
        self.set_phase("model inspection and cuDNN fast-path probe")
        self._collect_model(model)
        if arguments is not None:
            self.set_phase("data pipeline inspection")
            probes.collect_data(self, arguments)
            if self.options.run_probes:
                batches = probes.sample_batches(self, arguments)  # each sets its own phase
                sequences.sample_sequences(self, model, batches)
                self.save()
                probes.run_probes(self, model, arguments, batches)
        if self.options.profile_steps and self.options.profile_dir:
            self.set_phase("profile conversion (xprof)")
            if profile_error:
                self.facts.run.notes.append(f"profiler not captured: {profile_error}")
            gpus = self.facts.environment.gpu_count if self.facts.environment else 0
            self.facts.profile = summarize_profile(self.options.profile_dir, profiled_steps, gpus)
        loop.collect_traces(self, model)  # tf.function tracing counts of the window
        self.window_finished = True
        self.facts.run.outcome = "completed"
        self.set_phase("done")

    def end_script(self) -> NoReturn:
        """Raises :class:`StopScript` to end the user's script after the window.

        A bare ``except:`` or ``except BaseException`` can still catch it, and ``finally``
        clauses run while it unwinds. So that no user code runs after the window (a
        ``model.save`` over the user's checkpoint, say), a trace function watches the user's
        frames while the exception unwinds: the first line of user code it would run, other
        than an ``except`` test or a ``with`` exit, ends the process there (the facts are saved).
        """
        capture = self

        def tracer(frame, event, arg):
            filename = frame.f_code.co_filename
            if (
                event == "line"
                and sites.is_user_file(filename)
                and frame.f_lineno not in _unwinding_lines(filename)
            ):
                sys.settrace(None)
                code = linecache.getline(filename, frame.f_lineno).strip()
                capture.facts.run.notes.append(
                    f"the script's own code was about to run after rnndoctor's stop, at "
                    f"{filename}:{frame.f_lineno} ({code}), in an except or finally clause; "
                    "rnndoctor ended the process there so that nothing after fit runs"
                )
                capture.save()
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(0)
            return tracer

        frame = sys._getframe(1)
        while frame is not None:
            if sites.is_user_file(frame.f_code.co_filename):
                frame.f_trace = tracer
            frame = frame.f_back
        sys.settrace(tracer)
        raise StopScript

    def _collect_model(self, model: Any) -> None:
        if model is None:  # a custom loop whose variables belong to no keras.Model
            self.facts.run.notes.append(
                "model not inspected: no keras.Model holds the variables the optimizer updated"
            )
            return
        try:
            self.facts.model = collect_model(model, probe=self.options.probe_fast_path)
        except Exception as exc:
            self.facts.run.notes.append(f"model inspection failed: {type(exc).__name__}: {exc}")


@functools.lru_cache(maxsize=32)
def _unwinding_lines(filename: str) -> frozenset[int]:
    """Lines where Python reports a line event while an exception merely passes through: the
    headers of ``except`` clauses (their test runs) and of ``with`` statements (``__exit__``)."""
    try:
        tree = ast.parse("".join(linecache.getlines(filename)))
    except (SyntaxError, ValueError):
        return frozenset()
    return frozenset(
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, (ast.ExceptHandler, ast.With, ast.AsyncWith))
    )


def default_profile_dir(out: str | Path) -> str:
    return os.path.join(os.path.abspath(out), "profile")
