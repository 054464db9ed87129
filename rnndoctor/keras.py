"""``rnndoctor.keras.DoctorCallback``: the diagnosis inside the user's own ``fit`` (notebooks).

Example::

    from rnndoctor.keras import DoctorCallback

    model.fit(train_ds, epochs=10, callbacks=[DoctorCallback(out="rnndoctor-report")])

On the first epoch the callback runs the diagnosis window (warm-up, measured and profiled steps:
the :class:`~rnndoctor.capture.step_window.StepWindow` that ``rnndoctor check`` runs, through
the fit callback adapter of :mod:`rnndoctor.capture.window`) in a
:class:`~rnndoctor.capture.session.CaptureSession` without a child process, as
:func:`rnndoctor.diagnose` does. When the window ends it runs the model inspection, the data
facts, the sequence sampling and the probes on the same model and dataset, writes the reports,
shows the report in the cell when it runs in IPython, and lets training go on (``stop_after``
ends ``fit`` instead). The per-batch hooks of the fit's other callbacks are timed during the
window (RD404, :func:`rnndoctor.capture.probes.time_callbacks`) and are the user's own again
after it.

Training is left as it would have been: the probes train the model further on their own fits, so
every variable they can touch is saved before them and put back after (:class:`_Snapshot`): the
model's weights (trainable and not, which hold the Keras 3 seed generators' states), its metric
variables (the running loss of the epoch under way), the optimizer's variables (slots,
``iterations``), tf_keras' step counters and ``steps_per_execution`` variable, Keras 3's global
seed generator, TensorFlow's global ``tf.random.Generator``, and NumPy's and Python's global
random states. What it cannot put back: the per-op state of stateful random ops that the probes
run again (a tf_keras ``Dropout`` draws from such ops), and the state of a ``shuffle`` in a
``tf.data`` pipeline, which reshuffles on every new iterator (the probes make some); a model
with either trains on other random draws after the diagnosis than without it.

The class is built on first use (``DoctorCallback`` is looked up lazily), so that importing this
module imports neither TensorFlow nor Keras; it derives from ``keras.callbacks.Callback`` and,
when tf_keras is installed, from ``tf_keras.callbacks.Callback`` as well, so one callback works
in a Keras 3 and in a tf_keras ``fit`` (tf_keras' ``CallbackList`` calls methods only its own base
class has, ``_implements_train_batch_hooks`` among them).
"""

from __future__ import annotations

import functools
import inspect
import os
import random
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rnndoctor.options import DEFAULTS

__all__ = ["DoctorCallback"]  # noqa: F822 - built on first use (module __getattr__)


def __getattr__(name: str) -> Any:
    if name == "DoctorCallback":
        return _doctor_callback_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# -- what the probes could change ------------------------------------------------------------
def _add(found: dict[int, Any], variables: Any) -> None:
    for variable in variables or []:
        if variable is not None and hasattr(variable, "assign"):
            found.setdefault(id(variable), variable)


def _state_variables(model: Any) -> list[Any]:
    """Every variable of ``model``'s training state (see the module doc), each once."""
    found: dict[int, Any] = {}
    _add(found, model.variables)
    _add(found, getattr(model, "metrics_variables", None))  # Keras 3
    for metric in getattr(model, "metrics", None) or []:
        _add(found, getattr(metric, "variables", None))
    optimizer = getattr(model, "optimizer", None)
    if optimizer is not None:
        variables = optimizer.variables
        _add(found, variables() if callable(variables) else variables)
        _add(found, [getattr(optimizer, "iterations", None)])
    # tf_keras/src/engine/training.py: the step counters fit resets, steps_per_execution
    counters = ("_train_counter", "_test_counter", "_predict_counter", "_steps_per_execution")
    _add(found, [getattr(model, name, None) for name in counters])
    try:  # keras/src/random/seed_generator.py: global_seed_generator()
        from keras.src.backend.common import global_state

        generator = global_state.get_global_attribute("global_seed_generator")
        _add(found, [getattr(generator, "state", None)])
    except ImportError:
        pass
    import tensorflow as tf

    _add(found, [tf.random.get_global_generator().state])
    return list(found.values())


def _value(variable: Any) -> Any:
    import numpy as np

    value = variable.numpy() if hasattr(variable, "numpy") else variable.value
    return np.array(value, copy=True)


@dataclass
class _Snapshot:
    """Values of a model's training state and the global random states, to put back."""

    values: list[tuple[Any, Any]] = field(default_factory=list)
    numpy_state: Any = None
    python_state: Any = None

    @classmethod
    def take(cls, model: Any) -> _Snapshot:
        import numpy as np

        values = [(v, _value(v)) for v in _state_variables(model)]
        return cls(values, np.random.get_state(), random.getstate())

    def restore(self) -> None:
        import numpy as np

        for variable, value in self.values:
            variable.assign(value)
        np.random.set_state(self.numpy_state)
        random.setstate(self.python_state)


# -- the fit that runs the callback ----------------------------------------------------------
def fit_arguments(model: Any) -> dict[str, Any]:
    """The arguments of the ``fit`` that runs now on ``model``, read from its frame on the stack
    (its parameters' current values; a callback is given none of them). Empty when no ``fit``
    frame of ``model`` is found."""
    from rnndoctor.capture import flavour

    fit = flavour.module_of(model).Model.fit
    fit = inspect.unwrap(getattr(fit, "__rnndoctor_original__", fit))
    names = list(inspect.signature(fit).parameters)[1:]
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_name == "fit" and frame.f_locals.get("self") is model:
            local = frame.f_locals
            arguments = {name: local[name] for name in names if name in local}
            arguments["callbacks"] = _user_callbacks(arguments.get("callbacks"))
            return arguments
        frame = frame.f_back
    return {}


def _user_callbacks(callbacks: Any) -> list[Any]:
    """The user's callbacks, from fit's ``callbacks`` local: by the time callbacks run, fit has
    made it a ``CallbackList`` holding Keras' own ``History`` / ``ProgbarLogger`` and this
    callback as well."""
    items = getattr(callbacks, "callbacks", callbacks) or []
    own = ("History", "ProgbarLogger", "DoctorCallback")
    return [c for c in items if type(c).__name__ not in own]


# -- the callback ----------------------------------------------------------------------------
class _Doctor:
    """The callback's behaviour, mixed into the Keras ``Callback`` classes (see the module doc).

    Args:
        out: folder for ``report.html``, ``report.json``, ``facts.json`` and the profile; None
            keeps the facts in memory (the report is still shown in a notebook) and profiles
            into a temporary folder, removed once both the callback and its ``report`` are
            garbage collected, or Python exits (:class:`rnndoctor.api.TemporaryFolder`).
        stop_after: end ``fit`` once the diagnosis is done (``model.stop_training``; Keras stops
            after the step under way). False: training goes on.
        steps, warmup_steps, profile_steps: the window, as in :func:`rnndoctor.diagnose`.
        probe_fast_path: run the cuDNN fast-path probe on each LSTM/GRU.
        run_probes: run the probes and the sequence sampling when the window ends (not for a
            Python generator, whose batches belong to the ``fit`` under way).
        select, ignore: rule IDs or names to run / skip.
        display: show the report in IPython (None: when ``get_ipython()`` is not None; with
            ``out=None`` outside IPython, its terminal summary is printed on stdout instead,
            as nothing else would show it); False: neither.

    Attributes:
        report: the :class:`rnndoctor.engine.Report`, once the diagnosis is done.

    Raises:
        rnndoctor.outdir.ForeignFiles: ``out`` holds files of the user's named as the
            diagnosis's (``rnndoctor.api.OUT_FILES``; a ``ValueError``), which it would
            replace: raised here, before ``fit``.
    """

    def __init__(
        self,
        out: str | os.PathLike | None = "rnndoctor-report",
        *,
        stop_after: bool = False,
        steps: int = DEFAULTS.steps,
        warmup_steps: int = DEFAULTS.warmup,
        profile_steps: int = DEFAULTS.profile_steps,
        probe_fast_path: bool = DEFAULTS.probe_fast_path,
        run_probes: bool = not DEFAULTS.no_probes,
        select: list[str] | None = None,
        ignore: list[str] | None = None,
        display: bool | None = None,
    ):
        super().__init__()  # Keras 3's Callback.__init__, which does not call tf_keras' own:
        self.validation_data = None  # what tf_keras' Callback.__init__ sets, but its `model`
        self._chief_worker_only = None  # (a read-only property in Keras 3)
        self._supports_tf_logs = False
        if out is not None:  # before fit starts: the user's own report files are never replaced
            from rnndoctor import outdir
            from rnndoctor.api import OUT_FILES

            outdir.refuse_foreign(Path(out), OUT_FILES, option="out=")
        self.out = out
        self.stop_after = stop_after
        from rnndoctor.engine import batch_min_speedup, spe_share_cutoffs, unread_probes

        self.window_args = dict(
            warmup_steps=warmup_steps, measured_steps=steps, profile_steps=profile_steps,
            probe_fast_path=probe_fast_path, run_probes=run_probes,
            skip_probes=unread_probes(select, ignore), spe_share_cutoffs=spe_share_cutoffs(),
            batch_min_speedup=batch_min_speedup(),
        )  # fmt: skip
        self.select, self.ignore, self.display = select, ignore, display
        self.report = None
        self._session = None
        self._window = None
        self._arguments: dict[str, Any] = {}
        self._temporary: Any = None  # api.TemporaryFolder, without out

    # -- Keras hooks -----------------------------------------------------------------------------
    def on_train_begin(self, logs=None):
        if self.report is not None or self._session is not None:
            return  # diagnosed in an earlier fit: this one runs untouched
        self._start()

    def on_epoch_begin(self, epoch, logs=None):
        if self._window is not None:
            self._window.on_epoch_begin(epoch, logs)

    def on_train_batch_begin(self, batch, logs=None):
        if self._window is not None:
            self._window.on_train_batch_begin(batch, logs)

    def on_train_batch_end(self, batch, logs=None):
        if self._window is None:
            return
        from rnndoctor.capture import window

        try:
            self._window.on_train_batch_end(batch, logs)
        except window.WindowDone:
            self._finish()

    def on_train_end(self, logs=None):
        if self._window is not None:  # fit ended before the window was complete
            self._finish()

    # -- the diagnosis ---------------------------------------------------------------------------
    def _start(self) -> None:
        from rnndoctor import api
        from rnndoctor.capture import probes, sites, window
        from rnndoctor.capture.step_window import WindowOptions
        from rnndoctor.facts import DataKind

        model = self.model
        location = sites.user_frame_location(skip=1, call_names=("fit",))
        arguments = fit_arguments(model)
        if self.out is None:  # a temporary folder: it lives as long as this callback or its report
            self._temporary = api.TemporaryFolder()
        profile_dir = self._temporary.path if self._temporary else api._profile_dir(self.out)
        options = WindowOptions(
            profile_dir=profile_dir, profile_keeper=self._temporary, **self.window_args
        )
        session = api._session(location, options, self.out)
        session.fit_called = True
        window.note_flavour(session, model)
        session.facts.fit = window.fit_config(model, arguments, location)
        if session.facts.fit.data_kind == DataKind.PYTHON_GENERATOR or "x" not in arguments:
            options.run_probes = False  # its batches are the running fit's: never take them
            session.facts.run.notes.append(
                "DoctorCallback: the probes and the sequence sampling did not run (the data is "
                "a Python generator that the running fit consumes, or fit's data was not found)"
            )
        probes.time_callbacks(session, arguments.get("callbacks") or [])  # RD404, until _finish
        self._session, self._arguments = session, arguments
        self._window = window.make_window(model, options, on_phase=session.set_phase)
        self._window.set_model(model)
        self._window.set_params(self.params)
        session.window = self._window

    def _finish(self) -> None:
        """Ends the window, runs the rest of the diagnosis with the training state kept, and
        writes and shows the report."""
        from rnndoctor.capture import diagnosis, probes
        from rnndoctor.engine import evaluate

        session, window, model = self._session, self._window, self.model
        self._window = None
        window.stop_profiler()
        facts = session.facts
        facts.steps = window.step_times(facts.fit.batch_size)
        steps = (self.params or {}).get("steps")
        facts.fit.batches_per_epoch = int(steps) if steps else None
        measured, requested = facts.steps.measured_steps, session.options.measured_steps
        if measured < requested:
            facts.run.notes.append(
                f"fit ended after {window.steps_done} steps: only {measured} of {requested} "
                "requested steps were measured (first step of each epoch and warm-up excluded)"
            )
        stop_training = getattr(model, "stop_training", False)
        snapshot = _Snapshot.take(model)
        try:
            diagnosis.finish(session, model, window.profiled, window.profile_error, self._arguments)
        finally:
            probes.untime_callbacks(session)  # the user's callbacks run on as they wrote them
            snapshot.restore()
            model.stop_training = stop_training or self.stop_after
        self.report = evaluate(facts, select=self.select, ignore=self.ignore)
        if self._temporary is not None:
            self._temporary.keep_with(self.report)
        if self.out is not None:
            from rnndoctor.reports import write_reports

            write_reports(self.report, self.out, ["html", "json"])
        if self.display is not False:
            from rnndoctor.api import show_in_ipython

            if not show_in_ipython(self.report) and self.out is None:
                _print_summary(self.report)


def _print_summary(report: Any) -> None:
    """The terminal summary of a report kept in memory only (``out=None`` outside a notebook),
    on stdout: with the usual inline ``callbacks=[DoctorCallback(out=None)]`` nothing else
    holds the callback once ``fit`` returns, so its ``report`` would be lost unseen."""
    from rnndoctor.reports.terminal import summary_lines

    print("rnndoctor: the diagnosis (DoctorCallback(out=None): not saved; keep the callback for "
          "its .report, or pass out=... for report.html)")  # fmt: skip
    for line in summary_lines(report):
        print(f"  {line}")


@functools.cache
def _doctor_callback_class() -> type:
    """``DoctorCallback``: :class:`_Doctor` on the Callback class of every installed Keras."""
    from rnndoctor import api  # noqa: F401 - registers Report._repr_html_'s renderer
    from rnndoctor.capture import flavour

    bases = tuple(module.callbacks.Callback for module in flavour.keras_modules())
    cls = type("DoctorCallback", (_Doctor, *bases), {"__doc__": _Doctor.__doc__})
    cls.__module__ = __name__
    return cls
