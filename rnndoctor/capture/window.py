"""The ``fit`` hook: the diagnosis window inside the user's real ``fit``.

:func:`install_fit_hook` wraps ``keras.Model.fit``. The first call runs the user's ``fit``
unchanged, with one extra callback (:class:`DiagnosisWindow`, the ``fit`` side of
:class:`~rnndoctor.capture.step_window.StepWindow`) that times each step, profiles a few steps,
and then ends ``fit`` by raising :class:`WindowDone`. The hook then runs
:func:`rnndoctor.capture.diagnosis.finish` and ends the user's script (a ``fit`` inside a loop
first runs on until its next ``fit`` call: :mod:`rnndoctor.capture.after_window`, bounded) with
``CaptureSession.end_script`` (:class:`~rnndoctor.capture.session.StopScript`). Both exceptions
derive from ``BaseException``, so a user's ``except Exception`` cannot swallow them (the same
reason ``KeyboardInterrupt`` does).
"""

from __future__ import annotations

import ast
import functools
import inspect
import os
import sys
import time
from collections.abc import Callable
from types import FrameType
from typing import TYPE_CHECKING, Any

import keras

from rnndoctor.capture import (
    after_window,
    diagnosis,
    distribute,
    flavour,
    neutralise,
    passed,
    probes,
    sites,
)
from rnndoctor.capture.control import Control, SampleCounter, WarmWindows
from rnndoctor.capture.data import data_kind
from rnndoctor.capture.session import PROGRESS_NOTE
from rnndoctor.capture.step_window import (
    FIT_PHASES,
    BatchIndex,
    Profiler,
    StepWindow,
    WindowOptions,
    read_back,
)
from rnndoctor.facts import DataKind, FitConfig, Phase, SourceLocation, StepTimes

if TYPE_CHECKING:
    from rnndoctor.capture.session import CaptureSession


class WindowDone(BaseException):
    """Raised from the window callback to end the user's ``fit`` after the last profiled step."""


class _WindowCallback:
    """The ``fit`` side of the window: the callback methods over a :class:`StepWindow`, mixed
    into each Keras' ``Callback`` class (:class:`DiagnosisWindow` for Keras 3,
    :func:`tf_keras_window_class` for tf_keras, whose ``CallbackList`` needs its own base class:
    ``tf_keras/src/callbacks.py`` calls ``_implements_train_batch_hooks`` on every callback).

    Step time is measured between consecutive ``on_train_batch_end`` calls in one epoch and
    divided by the steps that call covered (``steps_per_execution``); the logged loss is read
    back first, so asynchronous GPU work has finished.

    Args:
        options: the window options.
        clock: seconds, monotonic.
        on_phase: called with each phase as it starts.
        profiler: the profiler (``tf.profiler.experimental`` when None).
    """

    def __init__(
        self,
        options: WindowOptions,
        clock: Callable[[], float] = time.perf_counter,
        on_phase: Callable[[Phase], None] | None = None,
        profiler: Profiler | None = None,
    ):
        super().__init__()  # the Keras Callback's own __init__
        self.options = options
        self.steps = StepWindow(options, FIT_PHASES, on_phase, clock, profiler)
        self._begin_step = 0
        self._last_loss: float | None = None
        # the last step's logs and its epoch, for the History fit returns (fill_history)
        self.last_logs: dict[str, Any] = {}
        self.epoch = 0
        self._loss_step: int | None = None  # the step of its epoch (1-based) that logged it
        # called after the last step, before fit ends (capture.distribute.window_ended)
        self.before_done: Callable[[], None] | None = None
        self.control: WarmWindows | None = None  # a warm --verify arm's (set by run_window)
        self.counter: SampleCounter | None = None  # samples per step of a tf.data input
        self.batch_size: int | None = None  # fit's constant batch size, when it has one
        self.initial_epoch = 0  # fit's initial_epoch (set by run_window)
        self._samples = 0.0  # samples of the measured steps of the current window (per step)
        self._count_at: int | None = None
        # how the Keras that runs the fit numbers an execution (set by make_window), and in
        # the current epoch (BatchIndex.for_epoch; None until its first execution ends)
        self.batch_index = BatchIndex()
        self._epoch_index: BatchIndex | None = None

    @property
    def steps_done(self) -> int:
        return self.steps.steps_done

    @property
    def profiled(self) -> int:
        return self.steps.profiled

    @property
    def profile_error(self) -> str | None:
        return self.steps.profile_error

    def on_train_begin(self, logs=None):
        """The fit's steps in all (``params``: epochs x steps per epoch, when Keras knows them),
        so that a window of tiny steps measures past ``measured_steps`` only while the fit has
        steps left (``StepWindow.steps_available``); a warm ``--verify`` arm's windows each
        count from the steps done before them."""
        params = self.params or {}
        steps, epochs = params.get("steps"), params.get("epochs")
        if steps and epochs:
            # fit runs epochs initial_epoch .. epochs - 1 (Keras 3 trainer.py and tf_keras)
            self.steps.steps_available = int(steps) * max(0, int(epochs) - self.initial_epoch)

    def on_train_end(self, logs=None):
        """A warm ``--verify`` arm's data ran out in a window that had its steps and went on
        for its time floor: that window is sent as it is (``WarmWindows.ended``)."""
        if self.control is not None:
            self.control.ended(self.steps, self._window_samples(), self._last_loss, self._loss_step)

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch = int(epoch)
        self.steps.epoch_begin()  # the first step of an epoch also starts the iterator
        self._epoch_index = None

    def on_train_batch_begin(self, batch, logs=None):
        self._begin_step = batch
        self.steps.begin_step()

    def on_train_batch_end(self, batch, logs=None):
        read_back(logs)  # GPU work has finished
        # the execution's steps, however this Keras numbers them (BatchIndex)
        index = self._epoch_index or self.batch_index
        epoch_steps = (getattr(self, "params", None) or {}).get("steps")
        spe = 1
        if index.shared:  # Keras 3.0-3.10: one index for both hooks, so the count is read
            spe = _int_or_none(getattr(self.model, "steps_per_execution", 1)) or 1
            if self._epoch_index is None:  # the epoch's first execution: its numbering
                index = self._epoch_index = index.for_epoch(self._begin_step, spe)
        self.last_logs = dict(logs or {})
        try:  # the training loss Keras logged for this step (its running mean over the epoch)
            self._last_loss = float((logs or {})["loss"])
            self._loss_step = index.last_step(self._begin_step, int(batch), spe, epoch_steps)
        except (KeyError, TypeError, ValueError):
            pass
        measured = len(self.steps.step_ms)
        covered = index.steps(self._begin_step, int(batch), spe, epoch_steps)
        self.steps.end_step(covered)
        self._count(len(self.steps.step_ms) > measured, covered)
        if self.control is not None:
            self._next_window()
        elif self.steps.complete():
            self.steps.stop_profiler()
            if self.before_done is not None:  # while fit's iterator is alive
                self.before_done()
            raise WindowDone

    def _count(self, step_measured: bool, steps: int = 1) -> None:
        """Adds the samples of one step to the window's when its time was measured.

        ``StepWindow.end_step`` records an execution of ``steps`` steps as one step time (its
        time over ``steps``), so the window adds one step's samples for it too: the batch size,
        or the counted samples of the execution's ``steps`` batches over ``steps`` (their mean).
        Samples over the summed step times is then the execution's samples over its time.
        """
        if self.counter is None:
            if step_measured and self.batch_size:
                self._samples += self.batch_size
            return
        now = self.counter.read()
        if step_measured and self._count_at is not None:
            self._samples += (now - self._count_at) / steps
        self._count_at = now

    def _next_window(self) -> None:
        """A warm arm: after the warm-up and after each window, reports to the parent and
        waits for its next command (:class:`~rnndoctor.capture.control.WarmWindows`).

        Raises:
            WindowDone: the parent said ``stop`` or closed its pipe.
        """
        assert self.control is not None
        began = self.control.after_step(
            self.steps, self._window_samples(), self._last_loss, self._loss_step
        )
        if began is False:
            raise WindowDone
        if began:
            self._samples = 0.0
            if self.counter is not None:
                self._count_at = self.counter.read()

    def _window_samples(self) -> int | None:
        """The samples of the window's measured steps, whole (None: none counted)."""
        return round(self._samples) or None

    def stop_profiler(self) -> None:
        self.steps.stop_profiler()

    def step_times(self, batch_size: int | None) -> StepTimes:
        times = self.steps.step_times(batch_size)
        times.final_loss = self._last_loss
        times.final_loss_step = self._loss_step
        if self.counter is not None and times.samples_per_s is None and self._samples:
            seconds = sum(self.steps.step_ms) / 1000.0  # counted samples over the steps' time
            times.samples_per_s = round(self._samples / seconds, 2) if seconds > 0 else None
        return times


class DiagnosisWindow(_WindowCallback, keras.callbacks.Callback):
    """The window callback for Keras 3 models (see :class:`_WindowCallback`)."""


@functools.cache
def tf_keras_window_class() -> type:
    """The window callback class for tf_keras (Keras 2) models, built once on first use."""
    import tf_keras

    return type(
        "DiagnosisWindowTFKeras",
        (_WindowCallback, tf_keras.callbacks.Callback),
        {"__doc__": "The window callback for tf_keras models (see :class:`_WindowCallback`)."},
    )


def make_window(model: Any, options: WindowOptions, **kwargs: Any) -> _WindowCallback:
    """The window callback of the Keras that ``model`` belongs to (Keras 3 or tf_keras)."""
    cls = tf_keras_window_class() if flavour.is_tf_keras(model) else DiagnosisWindow
    window = cls(options, **kwargs)
    window.batch_index = flavour.batch_index(model)
    return window


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


def _int_or_none(value: Any) -> int | None:
    """``value`` as an int: tf_keras keeps ``steps_per_execution`` in a ``tf.Variable``
    (``tf_keras/src/engine/training.py``: ``_configure_steps_per_execution``)."""
    if value is None:
        return None
    try:
        return int(value.numpy() if hasattr(value, "numpy") else value)
    except (TypeError, ValueError):
        return None


def fit_config(model: Any, arguments: dict[str, Any], location: SourceLocation | None) -> FitConfig:
    """Describes the ``fit`` call from its bound arguments and the model's compile state."""
    x = arguments.get("x")
    kind = data_kind(x)
    batch_size = arguments.get("batch_size")
    if kind == DataKind.TF_DATA:
        batch_size = _dataset_batch_size(x)
    elif DataKind.is_array(kind):
        batch_size = batch_size or 32  # Keras' default for array inputs
    elif kind in (DataKind.PY_DATASET, DataKind.TF_KERAS_SEQUENCE):
        batch_size = getattr(x, "batch_size", None)  # a common attribute, not Keras
    callbacks = arguments.get("callbacks") or []
    return FitConfig(
        data_kind=kind,
        batch_size=batch_size,
        epochs=arguments.get("epochs"),
        steps_per_epoch=arguments.get("steps_per_epoch"),
        steps_per_execution=_int_or_none(getattr(model, "steps_per_execution", None)),
        run_eagerly=getattr(model, "run_eagerly", None),
        jit_compile=getattr(model, "jit_compile", None),
        optimizer=_name(getattr(model, "optimizer", None)),
        loss=_name(getattr(model, "loss", None)),
        callbacks=[type(c).__name__ for c in callbacks],
        has_validation=bool(arguments.get("validation_data") or arguments.get("validation_split")),
        location=location,
        compile_location=sites.lookup("compiles", model),
        **_batch_size_sites(location, arguments.get("batch_size")),
        x_location=_name_site(location, "x", 0),
        y_kind=_y_kind(arguments.get("y")),
    )


def _y_kind(y: Any) -> str:
    """``FitConfig.y_kind``: ``array`` for one array or tensor (it has a ``shape``),
    ``list`` / ``tuple`` / ``dict`` for a structure of targets, ``none``, else the type's name."""
    if y is None:
        return "none"
    for kind in (dict, list, tuple):
        if isinstance(y, kind):
            return kind.__name__
    return "array" if getattr(y, "shape", None) is not None else type(y).__name__


def _script_argv() -> list[str]:
    """The script's arguments as they are now and as the process was started with
    (``sys.orig_argv``: a script that hands ``sys.argv`` on after ``parse_known_args`` has
    removed the ones it parsed), for :func:`rnndoctor.capture.sites.argparse_default_site`,
    which errs towards "given" on any token that may set the option."""
    return [*sys.argv[1:], *getattr(sys, "orig_argv", [])[1:]]


def _argument_node(
    location: SourceLocation | None, keyword: str, position: int | None
) -> ast.expr | None:
    """The expression the ``fit`` call at ``location`` (its ``call_source``) passes as
    ``keyword`` or as positional argument ``position``; None when it passes neither or the
    source is not one call."""
    if location is None or not location.call_source:
        return None
    try:
        call = ast.parse(location.call_source.strip(), mode="eval").body
    except SyntaxError:
        return None
    if not isinstance(call, ast.Call):
        return None
    value = next((k.value for k in call.keywords if k.arg == keyword), None)
    if value is None and position is not None and len(call.args) > position:
        value = call.args[position]
    return value


def _argparse_options(location: SourceLocation | None) -> list[str] | None:
    """For ``fit(..., batch_size=args.batch_size)`` (keyword, or third positional argument), the
    option strings of the ``add_argument`` call that sets it
    (:func:`rnndoctor.capture.sites.argparse_options`), given on the command line or not; None
    for any other argument, or when the source shows no single such call."""
    value = _argument_node(location, "batch_size", 2)
    if location is None or not (
        isinstance(value, ast.Attribute) and isinstance(value.value, ast.Name)
    ):
        return None
    try:
        return sites.argparse_options(location.file, value.value.id, value.attr, location.line)
    except Exception:  # a site is a nicety: never break the fit
        return None


def _batch_size_sites(location: SourceLocation | None, used: Any) -> dict[str, Any]:
    """``FitConfig``'s ``batch_size_location``, ``batch_size_options`` and
    ``batch_size_argument`` for the ``fit`` call at ``location``, which received ``used`` as
    its batch size: from the ``fit`` call's own argument (:func:`_name_site`,
    :func:`_argparse_options`); where that is a parameter of the function that calls ``fit``
    (or an attribute of one: ``def main(args)``), from what its callers passed, followed on the
    live stack (:func:`_passed_sites`). An assignment of another literal than ``used``
    (``if bs is None: bs = 32``, a branch that did not run) is no site (:func:`_agrees`)."""
    site = _name_site(location, "batch_size", None, used)
    found = {
        "batch_size_location": site if _agrees(site, used) else None,
        "batch_size_options": _argparse_options(location),
    }
    if found["batch_size_location"] is None and found["batch_size_options"] is None:
        try:
            found.update(_passed_sites(location, used))
        except Exception:  # a site is a nicety: never break the fit
            pass
    return found


def _agrees(site: SourceLocation | None, used: Any) -> bool:
    """False where ``site`` is an assignment of an integer literal other than ``used``, the
    value ``fit`` received: that line did not set it (a branch not taken, a loop variable that
    rebinds the name after it); True for any other site, which the source alone decides."""
    statement = sites.parse_statement(site.call_source if site is not None else None)
    value = getattr(statement, "value", None)
    if site is None or not isinstance(statement, (ast.Assign, ast.AnnAssign)):
        return site is not None
    return not _int_literal(value) or _int_literal(value, used)


def _passed_sites(location: SourceLocation | None, used: Any) -> dict[str, Any]:
    """Where ``fit(..., batch_size=NAME)`` or ``batch_size=NAME.ATTR`` got ``NAME`` from when
    ``NAME`` is a parameter of the function calling ``fit`` (:mod:`rnndoctor.capture.passed`):
    the argument its outermost caller wrote (``batch_size_argument``: ``args.batch_size``,
    ``bs``, ``64``), and that argument's site as :func:`_name_site` finds one for the ``fit``
    call's own: the last assignment to a name (none where the caller is a comprehension or a
    lambda, or the name is a closure's: the source's scopes would point elsewhere); the
    ``add_argument`` call whose default gave an argparse attribute (``batch_size_options``:
    its option strings), the namespace itself followed where it is a parameter too (``def
    main(args)``: :func:`_namespace_sites`); or, for an integer literal equal to ``used`` and
    the only such literal among the call's arguments, the call itself (``train(64)``: RD301
    rewrites that literal). Empty when ``NAME`` is not such a parameter or no caller can be
    read."""
    value = _argument_node(location, "batch_size", 2)
    if location is None or value is None:
        return {}
    frame = passed.frame_at(location.file, location.line)
    if frame is None:
        return {}
    if isinstance(value, ast.Attribute) and isinstance(value.value, ast.Name):
        return _namespace_sites(location.file, frame, value.value.id, value.attr, used)
    if not isinstance(value, ast.Name):
        return {}
    chain = passed.follow(frame, value.id)
    if not chain:
        return {}
    last = chain[-1]
    origin = last.value
    found: dict[str, Any] = {"batch_size_argument": ast.unparse(origin)}
    if isinstance(origin, ast.Name) and passed.plain_scope(last.frame, origin.id):
        site = sites.assignment_site(last.file, origin.id, last.line)
        found["batch_size_location"] = site if _agrees(site, used) else None
    elif isinstance(origin, ast.Attribute) and isinstance(origin.value, ast.Name):
        namespace = origin.value.id
        if passed.is_parameter(last.frame, namespace):  # main(args) -> train(args.batch_size)
            return _namespace_sites(last.file, last.frame, namespace, origin.attr, used) or found
        found.update(_argparse_sites(last.file, namespace, origin.attr, last.line, used))
    elif _the_literal(last, used):
        site = sites.source_location(last.file, last.line, (sites._call_name(last.call),))
        site.call_source = last.call_source()
        found["batch_size_location"] = site
    return found


def _the_literal(step: passed.Passed, used: Any) -> bool:
    """Whether ``step``'s argument is the integer literal ``used`` and no other argument of its
    call is an integer literal of that value (so that a rewrite by value changes this one)."""
    arguments = [*step.call.args, *(k.value for k in step.call.keywords)]
    return _int_literal(step.value, used) and sum(_int_literal(a, used) for a in arguments) == 1


def _int_literal(node: ast.AST | None, value: Any = None) -> bool:
    """Whether ``node`` is an integer literal (not a bool), equal to ``value`` where given (the
    capture's copy of ``rnndoctor.rewrite.is_int_literal``: it imports no fix code)."""
    if not (isinstance(node, ast.Constant) and type(node.value) is int):
        return False
    return value is None or node.value == value


def _argparse_sites(
    filename: str,
    namespace: str | None,
    attribute: str,
    line: int,
    used: Any,
    aliases: tuple[str, ...] = (),
    parsed_call: bool = False,
) -> dict[str, Any]:
    """``batch_size_location`` and ``batch_size_options`` for ``NAMESPACE.ATTRIBUTE`` read at
    ``line`` of ``filename``: the ``add_argument`` call whose default gave ``used``, and its
    option strings (``sites.argparse_default_site``, ``sites.argparse_options``, with the
    namespace's ``aliases`` and ``parsed_call``)."""
    return {
        "batch_size_location": sites.argparse_default_site(
            filename, namespace, attribute, line, used, _script_argv(), aliases, parsed_call
        ),
        "batch_size_options": sites.argparse_options(
            filename, namespace, attribute, line, aliases, parsed_call
        ),
    }


def _namespace_sites(
    filename: str, frame: FrameType, name: str, attribute: str, used: Any
) -> dict[str, Any]:
    """:func:`_passed_sites` for ``NAME.ATTR`` where ``NAME``, a parameter of ``frame``'s
    function in ``filename``, holds an argparse namespace handed down by its callers
    (:func:`rnndoctor.capture.passed.follow`): the ``add_argument`` call and option strings as
    for a module's own ``args.batch_size``, read with every parameter name on the way as the
    namespace's aliases (:func:`_argparse_sites`). ``batch_size_argument`` is the attribute of
    the name the namespace was assigned to, or, passed straight from a parsing call
    (``main(parser.parse_args())``), of the outermost parameter. Only where every call of the
    chain is in ``filename``, which holds the parser; empty otherwise."""
    chain = passed.follow(frame, name)
    if not chain or any(step.file != os.path.abspath(filename) for step in chain):
        return {}
    aliases = (name, *(ast.unparse(step.value) for step in chain[:-1]))
    last = chain[-1]
    origin = last.value
    parsed_call = isinstance(origin, ast.Call) and sites._call_name(origin) in sites._PARSE_CALLS
    if parsed_call:
        namespace = None
    elif isinstance(origin, ast.Name):
        namespace = origin.id
    else:
        return {}
    return {
        "batch_size_argument": f"{namespace or aliases[-1]}.{attribute}",
        **_argparse_sites(last.file, namespace, attribute, last.line, used, aliases, parsed_call),
    }


def _name_site(
    location: SourceLocation | None, keyword: str, position: int | None, used: Any = None
) -> SourceLocation | None:
    """Where the name that the ``fit`` call passes as ``keyword`` (or as positional argument
    ``position``) was last assigned before the call; for an attribute (``args.batch_size``)
    with the value ``used`` that ``fit`` received, the ``add_argument`` call whose default
    gave it (:func:`rnndoctor.capture.sites.argparse_default_site`); None when it passes
    neither, or no such site is found."""
    value = _argument_node(location, keyword, position)
    if location is None or value is None:
        return None
    try:
        if isinstance(value, ast.Name):
            return sites.assignment_site(location.file, value.id, location.line)
        if (
            used is not None
            and isinstance(value, ast.Attribute)
            and isinstance(value.value, ast.Name)
        ):  # args.batch_size
            return sites.argparse_default_site(
                location.file, value.value.id, value.attr, location.line, used, _script_argv()
            )
    except Exception:  # a site is a nicety: never break the fit
        return None
    return None


def install_fit_hook(session: CaptureSession) -> None:
    """Wraps ``Model.fit`` of every installed Keras (Keras 3, and tf_keras when installed:
    :func:`rnndoctor.capture.flavour.keras_modules`); the first call runs the window, then ends
    the script, or, for a ``fit`` inside a loop, lets it run on (:mod:`.after_window`) until its
    next ``fit`` call, which ends it."""
    for module in flavour.keras_modules():
        _hook_fit(session, module.Model)


def _hook_fit(session: CaptureSession, model_cls: type) -> None:
    """Wraps ``model_cls.fit`` (``keras.Model`` or ``tf_keras.Model``) for ``session``."""
    original = model_cls.fit
    session.original_fit_functions[model_cls.__module__.split(".")[0]] = original
    if session.original_fit_function is None:
        session.original_fit_function = original  # Keras 3's, hooked first

    @functools.wraps(original)
    def fit(model, *args, **kwargs):
        if after_window.running(session):  # the script's next fit: the run-on ends here
            after_window.stop(session, "next fit call")
            session.end_script()
        if session.fit_called:
            return original(model, *args, **kwargs)
        location = sites.user_frame_location(skip=1, call_names=("fit",))
        neutralise.attribute_child_writes(session)  # what the commands before fit wrote
        run_window(session, original, model, args, kwargs, location)
        if session.options.window_only or not after_window.start(session, model):
            session.end_script()
        return getattr(model, "history", None)  # what fit returns: its History callback

    model_cls.fit = fit


def fill_history(session: CaptureSession, model: Any, window: Any, arguments: dict) -> None:
    """Records the window's epoch in the ``History`` that ``fit`` returns, as Keras would have
    at the epoch's end. Keras' ``History`` appends an epoch's logs in ``on_epoch_end``
    (keras/src/callbacks/history.py; tf_keras/src/callbacks.py), which the window's stop
    (``WindowDone``, mid-epoch) skips: a script reading ``model.fit(...).history["loss"]``
    after the window (a fit loop's run-on) raised ``KeyError`` where its own run would not (a
    new user's trial). The training logs are the window's last step's (Keras' running means
    over the epoch so far, what ``on_epoch_end`` would have logged for them); where ``fit``
    validates (``validation_data``, ``validation_split``), each ``val_`` key is NaN, since
    validation did not run, and a run note says so. Nothing where ``History`` already holds
    the window's epoch (``fit`` ended on its own), or there are no logs; a window that ended
    in a later epoch adds that epoch after the ones ``History`` holds, every key's list kept as
    long as the epochs (NaN where the window's logs lack a key the epochs logged, such as a
    scheduler's ``learning_rate``: ``pd.DataFrame(history.history)`` needs equal lengths)."""
    history = getattr(model, "history", None)
    records = getattr(history, "history", None)
    epochs = getattr(history, "epoch", None)
    if not isinstance(records, dict) or not isinstance(epochs, list) or not window.last_logs:
        return
    if window.epoch in epochs or (records and not epochs):
        return
    logs = {name: _plain(value) for name, value in window.last_logs.items()}
    if arguments.get("validation_data") is not None or arguments.get("validation_split"):
        logs.update({f"val_{name}": float("nan") for name in list(logs)})
        session.facts.run.notes.append(
            "the History fit returned after the window holds the window's last training logs "
            "as its epoch, and NaN for the val_ metrics: validation did not run"
        )
    for name in records.keys() - logs.keys():  # an epoch-end key (learning_rate): not logged
        logs[name] = float("nan")
    for name, value in logs.items():  # a key new to this epoch: NaN for the earlier ones
        records.setdefault(name, [float("nan")] * len(epochs)).append(value)
    epochs.append(window.epoch)


def _plain(value: Any) -> Any:
    """A logged metric as ``History`` holds it: a Python float where it converts to one."""
    try:
        return float(value)
    except (TypeError, ValueError):
        return value


def note_flavour(session: CaptureSession, model: Any) -> None:
    """Records which Keras runs ``model`` (``Environment.keras_flavour``)."""
    if session.facts.environment is not None:
        session.facts.environment.keras_flavour = flavour.flavour_of(model)


def _bind_fit(
    fit: Callable[..., Any], model: Any, args: tuple, kwargs: dict[str, Any]
) -> tuple[inspect.BoundArguments, dict[str, Any]]:
    """``fit``'s bound arguments, and the same with its defaults filled in."""
    signature = inspect.signature(fit)
    bound = signature.bind(model, *args, **kwargs)
    defaults = {
        name: p.default
        for name, p in signature.parameters.items()
        if p.default is not inspect.Parameter.empty
    }
    return bound, {**defaults, **bound.arguments}


def _window_only(session: CaptureSession, window: _WindowCallback, arguments: dict) -> None:
    """A ``--verify`` arm's window: its pipes to the parent, its batch size, and a sample counter
    on a ``tf.data`` input whose batch size is not a constant (``arguments["x"]`` replaced)."""
    fit = session.facts.fit
    window.batch_size = fit.batch_size if fit else None
    x = arguments.get("x")
    if window.batch_size is None and data_kind(x) == DataKind.TF_DATA:
        window.counter = SampleCounter(x)
        arguments["x"] = window.counter.dataset
    if session.options.control is not None:
        window.control = WarmWindows(Control(session.options.control))


def run_window(
    session: CaptureSession,
    fit: Callable[..., Any],
    model: Any,
    args: tuple,
    kwargs: dict[str, Any],
    location: SourceLocation | None = None,
) -> None:
    """Runs the user's ``fit`` with the window callback, then :func:`diagnosis.finish`.

    Raises:
        BaseException: whatever the user's ``fit`` raised (after saving partial facts).
    """
    session.fit_called = True
    note_flavour(session, model)
    bound, with_defaults = _bind_fit(fit, model, args, kwargs)
    arguments = bound.arguments
    session.facts.fit = fit_config(model, with_defaults, location)
    session.facts.fit.fit_in_loop = after_window.fit_loop(location)
    probes.prepare_fit_data(session, arguments)  # tee a Python generator's batches, say
    window = make_window(model, session.options, on_phase=session.set_phase)
    window.initial_epoch = int(with_defaults.get("initial_epoch") or 0)
    session.window = window
    window.before_done = functools.partial(distribute.window_ended, session)
    user_callbacks = neutralise.filter_callbacks(session, list(arguments.get("callbacks") or []))
    if session.options.window_only:
        _window_only(session, window, arguments)
    else:
        user_callbacks = probes.time_callbacks(session, user_callbacks)
    arguments["callbacks"] = [*user_callbacks, window]
    session.set_phase(Phase.STARTING_FIT)
    finished = False
    try:
        fit(*bound.args, **bound.kwargs)
        finished = True  # fit ended on its own: the data held fewer steps than asked for
    except WindowDone:
        finished = True
    finally:
        window.stop_profiler()
        with session.progress_lock:  # the watchdog's saves of the steps so far end here
            session.facts.steps = window.step_times(session.facts.fit.batch_size)
            if finished:  # a watchdog's note from before, on a window that ended after all
                notes = session.facts.run.notes
                notes[:] = [n for n in notes if not n.startswith(PROGRESS_NOTE)]
                first = session.watchdog_from_step
                if first is not None:
                    notes.append(
                        f"measured steps {first + 1} on were timed while the check saved them, "
                        "3 s before --timeout (a few ms of writing beside each step)"
                    )
        steps = (window.params or {}).get("steps")
        session.facts.fit.batches_per_epoch = int(steps) if steps else None
        if not finished:
            diagnosis.collect_model_into(session, model)  # partial facts for the report
            session.save()
    try:
        fill_history(session, model, window, arguments)
    except Exception:  # a History of the user's own making: leave it as fit left it
        pass
    measured, requested = session.facts.steps.measured_steps, session.options.measured_steps
    if measured < requested:
        session.facts.run.notes.append(
            f"fit ended after {window.steps_done} steps: only {measured} of {requested} "
            "requested steps were measured (first step of each epoch and warm-up excluded)"
        )
    diagnosis.finish(session, model, window.profiled, window.profile_error, arguments)
