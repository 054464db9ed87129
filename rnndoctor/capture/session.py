"""One check's capture: the facts being gathered, where they are saved, and every hook's state.

A :class:`CaptureSession` is made once per check (by the capture child, or by
:func:`rnndoctor.diagnose`) and passed explicitly to every hook and probe. It holds the state each
hook keeps for that check, typed, so that no capture module keeps check state in a module global:

- the ``fit`` hook (:mod:`rnndoctor.capture.window`): ``fit_called``, ``window``, the original
  ``Model.fit``;
- the custom-loop and ``tf.function`` hooks (:mod:`rnndoctor.capture.loop`): :class:`LoopState`;
- the probes (:mod:`rnndoctor.capture.probes`): :class:`ProbeState`;
- the sequence sampling (:mod:`rnndoctor.capture.sequences`): :class:`SequenceState`;
- the neutralisation of saving calls (:mod:`rnndoctor.capture.neutralise`):
  :class:`NeutraliseState`;
- the run-on after the window (:mod:`rnndoctor.capture.after_window`): :class:`AfterWindowState`;
- the construction sites (:mod:`rnndoctor.capture.sites`): the :class:`~rnndoctor.capture.sites.
  SiteBook` the site hooks record into.

This module sits below the hook modules: they import it (for typing), it imports none of them.
"""

from __future__ import annotations

import ast
import functools
import linecache
import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn, Protocol

from rnndoctor import cluster
from rnndoctor.capture import ending, heap, sites
from rnndoctor.capture.budget import Budget, Budgets
from rnndoctor.capture.sites import SiteBook
from rnndoctor.capture.step_window import WindowOptions
from rnndoctor.facts import CutShort, Facts, MachinePhase, Phase, SourceLocation, StepTimes
from rnndoctor.machine import LoadSampler, MachineLoad, job_cpu_s, own_cpu_s


def job_cpu_reader() -> Callable[[], float]:
    """The load sampler's reader of the checked job's own CPU seconds: in a worker of
    ``rnndoctor check --workers`` (launched with the job's marker and a profiler port:
    :mod:`rnndoctor.cluster`), every process of the job, the sibling workers included
    (:func:`rnndoctor.machine.job_cpu_s`); else this process tree (``own_cpu_s``)."""
    marker = os.environ.get(cluster.RUN_ID_VAR)
    if marker and os.environ.get(cluster.PROFILER_PORT_VAR):
        return functools.partial(job_cpu_s, cluster.RUN_ID_VAR, marker)
    return own_cpu_s


class RunningWindow(Protocol):
    """What the child's watchdog reads of the running ``fit`` window
    (:class:`rnndoctor.capture.window.DiagnosisWindow`)."""

    model: Any  # the model ``fit`` set on the callback (None before fit sets it)

    @property
    def steps_done(self) -> int:
        """Training steps run so far, warm-up included."""

    def step_times(self, batch_size: int | None) -> StepTimes:
        """The step times measured so far."""


# How the child's watchdog's note on a window it saved unfinished starts (__main__
# ._save_window_progress); the window takes it out where it finished after all.
PROGRESS_NOTE = "the diagnosis window had not finished "


class StopScript(BaseException):
    """Raised once the diagnosis is finished, to end the user's script (pre-flight mode).

    It derives from ``BaseException``, so a user's ``except Exception`` cannot swallow it (the
    same reason ``KeyboardInterrupt`` does).
    """


@dataclass
class ProbeState:
    """What the probes keep between ``prepare_fit_data`` and ``run_probes``.

    Attributes:
        original_x: ``fit``'s ``x`` as the user passed it (before a generator is teed).
        tee: the ``sampling.Tee`` around a Python generator passed to ``fit``, or None.
        timers: the ``probes._CallbackTimer`` of each user callback with per-batch hooks.
        rss_before_fit_mib: the process's resident memory before ``fit``, MiB.
        compute_skipped: the compute-only probe was not run because the input-only probe
            bounds the input wait (``probes._compute_skip``), not because it failed: the probes
            on the cached batches still run, and the batch-size probe may run it as referee.
    """

    original_x: Any = None
    tee: Any = None
    timers: list[Any] = field(default_factory=list)
    rss_before_fit_mib: float | None = None
    compute_skipped: bool = False


@dataclass
class SequenceState:
    """What the padding and RNN-call hooks saw (:mod:`rnndoctor.capture.sequences`).

    Attributes:
        calls: the latest ``sequences.PadCall`` per call site ``(file, line)``, oldest first.
        ragged: name of each RNN layer that received a ``tf.RaggedTensor`` -> its site.
        session: the session whose facts receive ragged inputs at once (None: record only).
    """

    calls: dict[tuple[str, int], Any] = field(default_factory=dict)
    ragged: dict[str, SourceLocation | None] = field(default_factory=dict)
    session: CaptureSession | None = None


@dataclass
class NeutraliseState:
    """The plain file writes the script made during the check (:mod:`.neutralise`).

    Attributes:
        skip_dirs: folders whose writes are not recorded (``--out``, ``/dev``...), each ending
            with the path separator.
        writes: real path -> ``(how, user's line)``, the first ``_MAX_WRITES_LISTED``.
        writes_more: writes past those, counted.
        writes_note: the index of the note in ``facts.run.notes`` that lists them, or None.
        python_writes: every path the script's Python code wrote (bounded), so that a child
            command is not credited with them.
        tree_roots: the user's tree compared around child commands (the script's folder, the
            working directory).
        snapshot: path -> ``(mtime_ns, size)`` of the tree when the last child command started.
        snapshot_truncated: the tree had more entries than the bound.
        pending_command: the ``facts.ChildCommand`` whose writes are not attributed yet.
        snapshots: child-command starts seen (the tree is snapshotted for the first 50 only).
    """

    skip_dirs: tuple[str, ...] = ()
    writes: dict[str, tuple[str, SourceLocation | None]] = field(default_factory=dict)
    writes_more: int = 0
    writes_note: int | None = None
    python_writes: set[str] = field(default_factory=set)
    tree_roots: tuple[str, ...] = ()
    snapshot: dict[str, tuple[int, int]] | None = None
    snapshot_truncated: bool = False
    pending_command: Any = None
    snapshots: int = 0


@dataclass
class AfterWindowState:
    """The script's run-on after the window (:mod:`.after_window`).

    Attributes:
        running: the run-on is being measured (the model-call hooks count).
        started: ``time.perf_counter()`` when it began.
        budget: its ``after the window`` budget.
        model: the model ``fit`` trained.
        facts: the ``facts.OutsideWindowFacts`` it fills.
        timer: the ``threading.Timer`` that ends it when the budget is spent.
        lock: guards the counts against the timer thread.
        durations: seconds of each outermost call, per method.
        sizes: the distinct batch sizes per method; single: calls on one sample, per method.
        locations: the user's line of the first call, per method.
        depth: model calls in progress (nested calls are not counted).
        own: rnndoctor itself is calling the model (not counted); own_s: the time it took.
        timed: the per-call alternatives were timed (or skipped).
        expired: the budget ran out (the stop signal's handler ends the script only then).
    """

    running: bool = False
    started: float = 0.0
    budget: Budget | None = None
    model: Any = None
    facts: Any = None
    timer: Any = None
    lock: Any = field(default_factory=threading.RLock)
    durations: dict[str, list[float]] = field(default_factory=dict)
    sizes: dict[str, set[int]] = field(default_factory=dict)
    single: dict[str, int] = field(default_factory=dict)
    locations: dict[str, SourceLocation | None] = field(default_factory=dict)
    depth: int = 0
    own: bool = False
    own_s: float = 0.0
    timed: bool = False
    expired: bool = False


@dataclass
class LoopState:
    """What the ``tf.function`` and gradient-application hooks gather (:mod:`.loop`).

    Attributes:
        functions: ``tf.function`` call statistics (``traces.FunctionStats``) by TensorFlow's
            call-stats key.
        loop: the custom loop's window (``loop.CustomLoop``), once a gradient application
            outside ``fit`` was seen.
        hooked: the hooks point at this session (``loop.install``; ``loop.uninstall`` clears it).
        frozen: counting stopped for good (``traces.collect_traces`` ran).
        paused: counting stopped while rnndoctor itself calls the step (the traced twin).
    """

    functions: dict[Any, Any] = field(default_factory=dict)
    loop: Any = None
    hooked: bool = False
    frozen: bool = False
    paused: bool = False


class CaptureSession:
    """One check's capture: the facts, where they are saved, and the hooks' state.

    Args:
        facts: the facts to fill (``run`` already set).
        options: the window options.
        facts_path: where to save partial facts after each phase (None: keep in memory).
        started: ``time.monotonic()`` when the capture started (phase times count from it).
        site_book: the construction sites (``sites.install()``); None: an empty book.
        child: the session runs in the capture child (``python -m rnndoctor.capture``), which
            ends with ``os._exit``; False in the user's own process (``rnndoctor.diagnose``,
            ``DoctorCallback``). The child leaves the window's objects frozen after the
            diagnosis (``heap.frozen(thaw=False)``).

    Attributes:
        fit_called: the ``fit`` hook ran the window (a later ``fit`` runs as Keras defines it).
        window_finished: the window and every phase after it finished.
        window: the running ``fit`` window (read by the child's watchdog), or None.
        budgets: the time budgets of the bounded phases.
        after_window: the script's run-on after the window (:mod:`.after_window`), once begun.
        end_now: ends the check from another thread where the script's main thread does not
            stop at its run-on's end (called with a run note; the child's ``__main__`` sets
            it), or None.
        end_lock: taken by the main thread once the script has returned, and by the run-on's
            backstop, whichever comes first: the other leaves the ending to it (the
            ``end_script`` tracer and the ``os._exit`` guard end the process without it; each
            save is atomic, and the last one wins).
        stopping: ``end_script`` has begun stopping the script (the stop signal's handler then
            does nothing).
        stop_signal: the signal whose handler ends the script at its run-on's end
            (:func:`rnndoctor.capture.after_window.install_stop_signal`), or None.
        script_over: the user's script has returned or raised: the stop signal is ignored.
        progress_lock: taken by the window as it saves its step times, by the child's
            watchdog as it saves those measured so far (``__main__._save_window_progress``),
            so that the watchdog never replaces the window's own, and by every save, so that
            no save serialised before the watchdog's lands after it.
        watchdog_from_step: the measured steps the watchdog's first save held (None: it saved
            none): the later ones were timed beside its saves.
    """

    def __init__(
        self,
        facts: Facts,
        options: WindowOptions,
        facts_path: str | Path | None,
        started: float | None = None,
        site_book: SiteBook | None = None,
        child: bool = False,
    ):
        self.facts = facts
        self.child = child
        self.started = time.monotonic() if started is None else started
        self.options = options
        self.facts_path = facts_path
        self.budgets = Budgets(options.timeout_s, self.started)
        self.fit_called = False
        self.window_finished = False
        self.window: RunningWindow | None = None
        self.original_fit_function: Callable[..., Any] | None = None
        # ``Model.fit`` of each hooked Keras, by package name ("keras", "tf_keras")
        self.original_fit_functions: dict[str, Callable[..., Any]] = {}
        self.site_book = site_book if site_book is not None else SiteBook()
        self.probe_state = ProbeState()
        self.sequence_state = SequenceState(session=self)
        self.neutralise_state = NeutraliseState()
        self.loop_state = LoopState()
        self.after_window: AfterWindowState | None = None
        self.end_now: Callable[[str], None] | None = None
        self.end_lock = threading.Lock()
        self.progress_lock = threading.RLock()
        self.watchdog_from_step: int | None = None
        self.stop_signal: int | None = None
        self.script_over = False
        self.stopping = False
        self.load_sampler: LoadSampler | None = None
        # the dataset-distribution hooks' record (capture.distribute.DistributeState)
        self.distribute_state: Any = None
        # called with each phase as it starts (capture.distribute: the workers' trace)
        self.phase_listeners: list[Callable[[Phase], None]] = []

    # -- facts and phases ------------------------------------------------------------------------
    def save(self) -> None:
        """Writes the facts to ``facts_path`` (nothing when it is None), under
        ``progress_lock``."""
        if self.facts_path is not None:
            with self.progress_lock:
                self.facts.save(self.facts_path)

    def set_phase(self, phase: Phase) -> None:
        """Enters ``phase`` (seconds since the capture started) and saves the facts.

        The machine's load over the phase that ends here is recorded in ``facts.run.machine``
        (:meth:`sample_load`), and sampling starts again for ``phase``.
        """
        self.sample_load()
        rss = heap.resident_mib()
        self.facts.run.enter_phase(phase, time.monotonic() - self.started, rss)
        for listener in self.phase_listeners:
            listener(phase)
        if phase != Phase.DONE:
            try:
                self.load_sampler = LoadSampler(own=job_cpu_reader()).start()
            except Exception:  # /proc unreadable: no load figures, never a failed check
                self.load_sampler = None
        self.save()

    def sample_load(self) -> MachinePhase | None:
        """Ends the running load sample (if any) and records it for the current phase."""
        sampler, self.load_sampler = self.load_sampler, None
        if sampler is None:
            return None
        try:
            load = sampler.stop()
        except Exception:  # a clock that did not advance, /proc gone: nothing to record
            return None
        record = MachinePhase(
            phase=str(self.facts.run.phase),
            foreign_cpu_share=round(load.foreign_cpu_share, 4),
            foreign_cores=round(load.foreign_cores, 3),
            load_avg_1m=round(load.load_avg_1m, 2),
            cpus=load.cpus,
            wall_s=round(load.wall_s, 3),
            noisy=load.noisy,
            widen_factor=round(load.widen_factor, 3),
            description=load.describe(),
        )
        self.facts.run.machine.append(record)
        return record

    def load_so_far(self) -> MachineLoad | None:
        """The running phase's machine load so far (``LoadSampler.peek``), or None where it is
        not sampled or cannot be read."""
        sampler = self.load_sampler
        if sampler is None:
            return None
        try:
            return sampler.peek()
        except Exception:  # a clock that did not advance, /proc gone
            return None

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
        """``Model.fit`` as Keras defines it (probes call it without the window hook), of the
        Keras that ran the diagnosed model (``Environment.keras_flavour``).

        For a tf_keras model it is wrapped by :func:`_tf_keras_fit`, which adapts the Keras 3
        callbacks the probes pass to tf_keras' ``CallbackList``.
        """
        environment = self.facts.environment
        flavour = environment.keras_flavour if environment is not None else None
        if flavour and flavour.split()[0] == "tf_keras":
            original = self.original_fit_functions.get("tf_keras")
            if original is None:
                import tf_keras

                original = getattr(tf_keras.Model.fit, "__wrapped__", tf_keras.Model.fit)
            return _tf_keras_fit(original)
        if self.original_fit_function is not None:
            return self.original_fit_function
        import keras

        return keras.Model.fit

    # -- ending the script -----------------------------------------------------------------------
    def end_script(self) -> NoReturn:
        """Raises :class:`StopScript` to end the user's script after the window.

        A bare ``except:`` or ``except BaseException`` can still catch it, and ``finally``
        clauses run while it unwinds. So that no user code runs after the window (a
        ``model.save`` over the user's checkpoint, say), a trace function watches the user's
        frames while the exception unwinds: the first line of user code it would run, other
        than an ``except`` test or a ``with`` exit, ends the process there (the facts are saved).

        Raises:
            StopScript: always.
        """
        session = self
        self.stopping = True

        def tracer(frame, event, arg):
            filename = frame.f_code.co_filename
            if (
                event == "line"
                and sites.is_user_file(filename)
                and frame.f_lineno not in _unwinding_lines(filename)
            ):
                sys.settrace(None)
                code = linecache.getline(filename, frame.f_lineno).strip()
                session.facts.run.notes.append(
                    f"the script's own code was about to run after rnndoctor's stop, at "
                    f"{filename}:{frame.f_lineno} ({code}), in an except or finally clause; "
                    "rnndoctor ended the process there so that nothing after fit runs"
                )
                session.save()
                ending.end_process(0)
            return tracer

        frame = sys._getframe(1)
        while frame is not None:
            if sites.is_user_file(frame.f_code.co_filename):
                frame.f_trace = tracer
            frame = frame.f_back
        sys.settrace(tracer)
        raise StopScript


def _tf_keras_fit(original: Callable[..., Any]) -> Callable[..., Any]:
    """``original`` (``tf_keras.Model.fit``) taking Keras 3 callbacks too: each is wrapped in a
    tf_keras callback that forwards the hooks (``tf_keras/src/callbacks.py``'s ``CallbackList``
    calls methods a Keras 3 callback lacks, ``_implements_train_batch_hooks`` among them)."""

    @functools.wraps(original)
    def fit(model, *args, callbacks=None, **kwargs):
        adapted = [_as_tf_keras_callback(c) for c in callbacks or []]
        return original(model, *args, callbacks=adapted or None, **kwargs)

    return fit


def _as_tf_keras_callback(callback: Any) -> Any:
    """``callback`` itself when tf_keras can run it, else a tf_keras forwarder around it."""
    import tf_keras

    if isinstance(callback, tf_keras.callbacks.Callback):
        return callback

    class Forwarder(tf_keras.callbacks.Callback):
        def set_model(self, model):
            super().set_model(model)
            callback.set_model(model)

        def set_params(self, params):
            super().set_params(params)
            callback.set_params(params)

    for hook in (
        "on_epoch_begin", "on_epoch_end", "on_train_batch_begin", "on_train_batch_end",
        "on_train_begin", "on_train_end",
    ):  # fmt: skip
        setattr(Forwarder, hook, lambda self, *a, _h=hook, **k: getattr(callback, _h)(*a, **k))
    return Forwarder()


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
    """The profiler logdir under the report folder ``out``: ``<out>/profile``, absolute."""
    return os.path.join(os.path.abspath(out), "profile")
