"""Custom training loops and ``tf.function`` tracing counts.

``install(session)`` runs before the user's script. It installs three hooks (class patches,
once per process; each ``install`` points them at its session):

- **tf.function calls**: a class-level wrapper of TensorFlow's ``Function.__call__``
  (``tensorflow/python/eager/polymorphic_function/polymorphic_function.py``). For every call made
  outside any other ``tf.function`` (not while one traces, nor inside one that
  ``run_functions_eagerly`` runs eagerly), it reads TensorFlow's own tracing count
  (``Function.experimental_get_tracing_count``) before and after the call, as
  ``Function.__call__`` itself does to decide whether the call traced, and keeps per Python
  function (TensorFlow's ``_key_for_call_stats``, the grouping its retracing warning uses): the
  calls, the calls that traced, their wall times and the argument shapes of the calls that
  traced (:mod:`rnndoctor.capture.traces`). ``traces.collect_traces`` turns them into
  ``ProbeFacts.traces`` and stops counting.
- **gradient application**: ``BaseOptimizer.apply`` (``keras/src/optimizers/base_optimizer.py``;
  ``apply_gradients`` calls it) and the ``apply`` overrides of ``LossScaleOptimizer`` and
  ``MultiOptimizer``. A gradient application outside ``fit`` is a custom training loop. If
  ``tf.executing_eagerly()`` holds at that moment and no ``tf.function`` is running, the loop runs
  eagerly and each application ends a step. If it happens while a ``tf.function`` traces, only
  the tracing sees it, so that function becomes the loop's step and each of its calls ends a
  step. A ``tf.function`` step that ``tf.config.run_functions_eagerly(True)`` makes run eagerly is
  a step too, and the loop counts as eager.
- **eager execution switches**: ``tf.config.run_functions_eagerly`` and ``keras.Model.compile``
  record the user's line that turned eager execution on.

The loop's steps go through the same :class:`~rnndoctor.capture.step_window.StepWindow` as
``fit``'s: warm-up steps, measured steps (time from the end of one step to the end of the next,
after reading the optimizer's iteration counter back so that GPU work has finished), then
``profile_steps`` profiled steps (a warm ``--verify`` arm: windows on the parent's command,
:class:`~rnndoctor.capture.control.WarmWindows`). Then, for an eager step function, a traced twin
(:func:`_measure_twin`; not in a window-only run); then ``diagnosis.finish(session, model, ...)``
with the ``keras.Model`` that owns the updated variables, and ``session.end_script()``, as the
``fit`` hook does. A script that ends first is finished with what was measured
(:func:`finish_pending`, called by ``rnndoctor.capture.__main__``).
"""

from __future__ import annotations

import functools
import gc
import inspect
import sys
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from rnndoctor.capture import diagnosis, flavour, pairs, sites, traces
from rnndoctor.capture.control import Control, WarmWindows
from rnndoctor.capture.step_window import LOOP_PHASES, StepWindow
from rnndoctor.facts import CustomLoopFacts, Phase, SourceLocation, StepArgument, StepTimes
from rnndoctor.paired import PairedTimingError, measure_paired

if TYPE_CHECKING:
    from rnndoctor.capture.session import CaptureSession

_TWIN_CALLS = 5  # timed calls of each twin, after one untimed call (tracing, or warm-up)
_TWIN_SHARE = 0.05  # share of --timeout for the traced twin (rnndoctor.capture.budget)
_HOOKS_ATTR = "_rnndoctor_loop_hooks"  # the _Hooks, on the patched tf.function class
_local = threading.local()  # per thread: the running tf.functions, inside an apply


def _stack() -> list[Any]:
    """The ``tf.function`` objects called (outside any tracing) and running on this thread."""
    stack = getattr(_local, "stack", None)
    if stack is None:
        stack = _local.stack = []
    return stack


def _replica_caller() -> Any:
    """On a ``tf.distribute`` replica thread (``MirroredStrategy.run`` runs the step function
    on one thread per replica, ``tensorflow/python/distribute/mirrored_run.py``), the
    ``tf.function`` whose call started it: the outermost hooked ``Function.__call__`` frame
    (:func:`_wrap_call`) on another thread's stack; None when there is none or several."""
    if not hasattr(threading.current_thread(), "replica_id_in_sync_group"):
        return None
    me = threading.get_ident()
    found = []
    for ident, frame in sys._current_frames().items():
        outer = None
        while frame is not None and ident != me:
            code = frame.f_code
            if code.co_name == "__call__" and code.co_filename == __file__:
                outer = frame.f_locals.get("self")
            frame = frame.f_back
        if outer is not None:
            found.append(outer)
    return found[0] if len(found) == 1 else None


# -- locations -------------------------------------------------------------------------------
def _traced_user_location() -> SourceLocation | None:
    """The innermost user line on the stack, with autograph's generated code mapped back to the
    user's source by TensorFlow's own stack mapper (``tf_stack.extract_stack``, as TF does for
    op creation sites)."""
    try:
        from tensorflow.python.util import tf_stack

        frames = tf_stack.extract_stack()
    except Exception:
        return None
    for frame in reversed(list(frames)):
        if traces.is_user_code_file(frame.filename):
            return sites.source_location(frame.filename, frame.lineno, ("apply_gradients", "apply"))
    return None


def _user_frames() -> list[Any]:
    """The user's Python frames on this thread's stack, innermost first."""
    frames = []
    frame = sys._getframe(1)
    while frame is not None:
        if traces.is_user_code_file(frame.f_code.co_filename):
            frames.append(frame)
        frame = frame.f_back
    return frames


def _callable_for(frame: Any) -> Any:
    """The function object running in ``frame`` (looked up in its caller's and its own
    namespaces, or as a method of ``self``), or None."""
    code = frame.f_code
    candidates = []
    if "self" in frame.f_locals:
        candidates.append(getattr(frame.f_locals["self"], code.co_name, None))
    caller = frame.f_back
    for namespace in (caller.f_locals if caller else {}, frame.f_globals):
        candidates.append(namespace.get(code.co_name))
        candidates.extend(namespace.values())
    for candidate in candidates:
        target = getattr(candidate, "__func__", candidate)
        if getattr(target, "__code__", None) is code:
            return candidate
    return None


# -- the custom loop -------------------------------------------------------------------------
class CustomLoop:
    """A custom training loop's window: the loop's side of :class:`StepWindow`.

    Args:
        session: the check's session.
        optimizer: the optimizer whose first gradient application outside ``fit`` was seen.
        eager: the loop runs eagerly (no ``tf.function`` step).
        location: the user's gradient-application line.
    """

    def __init__(
        self,
        session: CaptureSession,
        optimizer: Any,
        eager: bool,
        location: SourceLocation | None,
    ):
        self.session = session
        self.state = session.loop_state
        self.options = session.options
        self.optimizer = optimizer
        self.window = StepWindow(self.options, LOOP_PHASES, on_phase=session.set_phase)
        self.facts = CustomLoopFacts(
            eager=eager,
            optimizer=getattr(optimizer, "name", None) or type(optimizer).__name__,
            location=location,
        )
        self.variable_ids: set[int] = set()
        self.step_keys: set[Any] = set()
        self.step_code: Any = None
        self.step_callable: Any = None
        self.step_args: tuple[tuple, dict] | None = None
        self.arguments: dict[str, traces.Argument] = {}
        self.finished = False
        self.armed = False
        self.twin_blocker: str | None = None
        control = self.options.control  # a warm --verify arm's pipes
        self.warm = WarmWindows(Control(control)) if control else None

    # -- steps -------------------------------------------------------------------------------
    def sync(self) -> None:
        """Reads the optimizer's iteration counter back: the step's device work has finished."""
        try:
            self.optimizer.iterations.numpy()
        except Exception:
            pass

    def step_end(self) -> None:
        """One training step ended. May finish the diagnosis and end the script."""
        self.sync()
        window = self.window
        window.end_step()
        self.facts.steps_seen = window.steps_done
        if self.warm is not None:  # a warm --verify arm: the parent says when a window runs
            if self.warm.after_step(window, self.window_samples(), None) is False:
                self.finish(stop_script=True)
                return
        elif window.complete():
            self.finish(stop_script=True)
            return
        if window.profile_due():
            # The profiled step runs from here (the end of the previous one) to the end of the
            # next one.
            window.begin_profiled_step()
        window.announce()
        self.arm_argument_capture()
        # The next step starts now: rnndoctor's own bookkeeping above (saving the facts at a
        # phase change, starting the profiler) is not counted in any step's time.
        window.restart_clock()

    # -- the eager step function's arguments ---------------------------------------------------
    def arm_argument_capture(self) -> None:
        """Catches the arguments of the next call of the eager step function, at its entry (a
        one-shot ``sys.setprofile`` hook, removed as soon as the function is entered)."""
        if self.step_code is None or self.armed:
            return
        if sys.getprofile() is not None:  # the user's own profiler: leave it alone
            self.twin_blocker = "a Python profiler (sys.setprofile) was active in the script"
            return
        code = self.step_code
        loop = self

        def hook(frame, event, arg):
            if event == "call" and frame.f_code is code:
                sys.setprofile(None)
                loop.armed = False
                loop.on_step_entry(frame)

        self.armed = True
        sys.setprofile(hook)

    def disarm(self) -> None:
        if self.armed:
            sys.setprofile(None)
            self.armed = False

    def on_step_entry(self, frame: Any) -> None:
        """Records the arguments the step function was just called with (at its entry, before
        its body can reassign them)."""
        code = frame.f_code
        names = list(code.co_varnames[: code.co_argcount + code.co_kwonlyargcount])
        values = {n: frame.f_locals[n] for n in names if n in frame.f_locals}
        if inspect.ismethod(self.step_callable) and names and names[0] in ("self", "cls"):
            values.pop(names[0], None)
        self.record_arguments(list(values.items()))
        if code.co_flags & (inspect.CO_VARARGS | inspect.CO_VARKEYWORDS):
            self.twin_blocker = "the step function takes *args or **kwargs"
        else:
            self.step_args = ((), values)

    def record_arguments(self, items: list[tuple[str, Any]]) -> None:
        for name, value in items:
            self.arguments.setdefault(name, traces.Argument(name)).observe(value)

    # -- finishing ---------------------------------------------------------------------------
    def step_times(self) -> StepTimes:
        return self.window.step_times(self.batch_size(), source="custom loop")

    def window_samples(self) -> int | None:
        """The samples of the window's measured steps (None: none, or no batch size known)."""
        batch = self.batch_size() if self.window.step_ms else None
        return batch * len(self.window.step_ms) if batch else None

    def batch_size(self) -> int | None:
        """The leading dimension of the step's first tensor argument, when all agree."""
        sizes = set()
        sources = list(self.arguments.values())
        for key in self.step_keys:
            stats = self.state.functions.get(key)
            if stats is not None:
                sources.extend(stats.arguments.values())
        for argument in sources:
            for leaf_shapes in argument.leaf_shapes:
                for shape in leaf_shapes:
                    if shape:
                        sizes.add(shape[0])
                if leaf_shapes:
                    break
            if sizes:
                break
        return sizes.pop() if len(sizes) == 1 and None not in sizes else None

    def step_arguments(self) -> list[StepArgument]:
        if self.arguments:
            return [a.facts() for a in self.arguments.values()]
        for key in self.step_keys:
            stats = self.state.functions.get(key)
            if stats is not None and stats.arguments:
                return [a.facts() for a in stats.arguments.values()]
        return []

    def find_model(self) -> Any:
        """The ``keras.Model`` holding most of the variables the optimizer updated."""
        model_classes = tuple(m.Model for m in flavour.keras_modules(import_tf_keras=False))
        best, best_overlap = None, 0
        for obj in gc.get_objects():
            if not isinstance(obj, model_classes):
                continue
            try:
                variables = obj.trainable_variables
            except Exception:
                continue
            overlap = sum(
                1
                for v in variables
                if id(v) in self.variable_ids or id(getattr(v, "value", v)) in self.variable_ids
            )
            if overlap > best_overlap or (
                overlap == best_overlap
                and best is not None
                and overlap
                and len(variables)
                < len(best.trainable_variables)  # the tightest model with the same overlap
            ):
                best, best_overlap = obj, overlap
        if best is None:
            self.facts.model_not_found = "no keras.Model holds the variables the optimizer updated"
        else:
            self.facts.model = best.name
        return best

    def finish(self, stop_script: bool, note: str | None = None) -> None:
        """Records the loop's facts, runs the traced twin and :func:`diagnosis.finish`; then ends
        the script (``stop_script``) as the ``fit`` hook does."""
        if self.finished:
            return
        self.finished = True
        self.disarm()
        window = self.window
        window.stop_profiler()
        if self.warm is not None:  # the loop ended in a window that had its steps: send it
            self.warm.ended(window, self.window_samples(), None)
        session = self.session
        with session.progress_lock:
            session.facts.steps = self.step_times()
        self.facts.step_arguments = self.step_arguments()
        if note:
            session.facts.run.notes.append(note)
        elif len(window.step_ms) < self.options.measured_steps:
            session.facts.run.notes.append(
                f"the custom loop ran {window.steps_done} steps: only {len(window.step_ms)} of "
                f"{self.options.measured_steps} requested steps were measured (warm-up "
                "excluded)"
            )
        session.save()
        if self.options.window_only:
            pass  # a --verify arm: the window's step times are all it measures
        elif self.facts.eager:
            session.set_phase(Phase.LOOP_TWIN)
            _measure_twin(self)
            session.save()
        else:
            _untraced_baseline(self)
        model = self.find_model()
        if model is None:
            session.facts.run.notes.append(
                "model inspection skipped: " + (self.facts.model_not_found or "no model")
            )
        elif session.facts.environment is not None:  # the Keras of the model the loop trains
            session.facts.environment.keras_flavour = flavour.flavour_of(model)
        diagnosis.finish(session, model, window.profiled, window.profile_error, None)
        if stop_script:
            session.end_script()


def _untraced_baseline(loop: CustomLoop) -> None:
    """When every call of the ``tf.function`` step traced, calls it ``_TWIN_CALLS`` more times
    with its last call's arguments (a shape it has traced: no tracing) to time a call without
    tracing, the baseline of ``TraceCount.tracing_ms``."""
    state = loop.state
    budget = loop.session.budgets.budget("untraced baseline", share=_TWIN_SHARE)
    for key in loop.step_keys:
        stats = state.functions.get(key)
        if stats is None or stats.untraced_ms or stats.last_args is None:
            continue
        fn = stats.last_fn() if stats.last_fn is not None else None
        if fn is None:
            continue
        args, kwargs = stats.last_args
        loop.session.set_phase(Phase.LOOP_BASELINE)
        state.paused = True
        try:
            while stats.baseline_calls < _TWIN_CALLS and not budget.expired():
                before = fn.experimental_get_tracing_count()
                start = time.perf_counter()
                fn(*args, **kwargs)
                loop.sync()
                ms = (time.perf_counter() - start) * 1000.0
                if fn.experimental_get_tracing_count() != before:
                    break  # it traced after all (a Python argument, say): no baseline
                stats.untraced_ms.append(ms)
                stats.baseline_calls += 1
        except Exception as exc:
            loop.session.facts.run.notes.append(
                f"the untraced calls of {stats.name} failed: {type(exc).__name__}: {exc}"[:300]
            )
        finally:
            state.paused = False


def _measure_twin(loop: CustomLoop) -> None:
    """Times the eager step function as the loop ran it and wrapped in ``tf.function``.

    Both run on the arguments of one real step, kept in memory, each after one untimed call
    (warm-up; for the traced twin, its tracing, timed apart); then the paired timer
    (:func:`rnndoctor.paired.measure_paired`) alternates bursts of eager and traced calls until
    each has 10 calls and 1 s (``loop.twin_paired``). Each burst reads the optimizer's
    iteration counter back. The whole probe is bounded by its budget.
    """
    import tensorflow as tf

    facts = loop.facts
    fn = loop.step_callable
    if fn is None:
        facts.twin_not_measured = (
            "the gradients are applied in the loop body itself (no step function to trace)"
            if loop.step_code is None
            else "the step function object could not be found from its frame"
        )
        return
    if loop.step_args is None:
        facts.twin_not_measured = loop.twin_blocker or (
            "no step's arguments were captured (the loop ended first)"
        )
        return
    args, kwargs = loop.step_args
    budget = loop.session.budgets.budget("traced twin", share=_TWIN_SHARE)
    eagerly = bool(tf.config.functions_run_eagerly())
    state = loop.state
    state.paused = True

    def timed(call: Callable[[], Any]) -> float:
        start = time.perf_counter()
        call()
        loop.sync()
        return (time.perf_counter() - start) * 1000.0

    def arm(call: Callable[[], Any], run_eagerly: bool) -> Callable[[int], None]:
        def run(n_steps: int) -> None:
            tf.config.run_functions_eagerly(run_eagerly)
            for _ in range(n_steps):
                call()
            loop.sync()

        return run

    try:
        timed(lambda: fn(*args, **kwargs))  # warm-up of the eager arm
        target = getattr(fn, "python_function", fn)
        traced = tf.function(target)
        tf.config.run_functions_eagerly(False)
        facts.twin_tracing_ms = round(timed(lambda: traced(*args, **kwargs)), 3)
        # A = the step as the loop ran it, B = its traced twin, interleaved (rnndoctor.paired).
        result = measure_paired(
            arm(lambda: fn(*args, **kwargs), eagerly),
            arm(lambda: traced(*args, **kwargs), False),
            warmup=0,
            budget_s=max(0.1, budget.left()),
        )
        facts.twin_paired = pairs.to_ratio(result, phase=Phase.LOOP_TWIN, a="eager", b="traced")
        facts.eager_call_ms = round(result.median_a, 4)
        facts.traced_call_ms = round(result.median_b, 4)
        facts.twin_calls = min(sum(result.a_steps), sum(result.b_steps))
    except PairedTimingError:
        facts.twin_not_measured = f"the twin ran out of its {budget.seconds:g} s budget"
    except Exception as exc:
        first = (str(exc).strip().splitlines() or [""])[0]
        facts.twin_not_measured = (
            f"the step function could not run as a tf.function: {type(exc).__name__}: {first}"
        )[:300]
    finally:
        tf.config.run_functions_eagerly(eagerly)
        state.paused = False


# -- the hooks -------------------------------------------------------------------------------
class _Hooks:
    """The class patches' link to the session they record into.

    One per process, kept on the patched ``Function`` class (``_HOOKS_ATTR``): the patches are
    installed once and :func:`install` points them at each new session. What they gather lives
    in that session's :class:`~rnndoctor.capture.session.LoopState`.
    """

    def __init__(self) -> None:
        self.session: CaptureSession | None = None

    def recording(self) -> bool:
        """Whether tf.function calls count: during the script and its diagnosis window only.
        The window is over once its step times are recorded (``facts.steps``): the probes that
        follow build and call fresh train functions, which must not add to the counts."""
        session = self.session
        if session is None:
            return False
        state = session.loop_state
        return not (state.frozen or state.paused or session.facts.steps is not None)

    def loop_open(self) -> bool:
        """Gradient applications count as a custom loop's (not inside fit, not finished)."""
        if not self.recording():
            return False
        session = self.session
        assert session is not None
        loop = session.loop_state.loop
        return not session.fit_called and not (loop is not None and loop.finished)

    # -- tf.function calls -------------------------------------------------------------------
    def on_call(self, original: Callable[..., Any], fn: Any, args: tuple, kwargs: dict) -> Any:
        stack = _stack()
        if stack:  # called by a tf.function that runs eagerly: part of that one's call
            stack.append(fn)
            try:
                return original(fn, *args, **kwargs)
            finally:
                stack.pop()
        session = self.session
        assert session is not None
        state = session.loop_state
        key = getattr(fn, "_key_for_call_stats", None) or id(fn)
        before = fn.experimental_get_tracing_count()
        stack.append(fn)
        start = time.perf_counter()
        try:
            result = original(fn, *args, **kwargs)
        finally:
            stack.pop()
        ms = (time.perf_counter() - start) * 1000.0
        after = fn.experimental_get_tracing_count()
        stats = state.functions.get(key)
        if stats is None:
            stats = state.functions[key] = traces.FunctionStats(fn)
        stats.record(fn, args, kwargs, after > before, ms, after)
        loop = state.loop
        if loop is not None and key in loop.step_keys:
            stats.last_args = (args, kwargs)
            stats.last_fn = stats.instances[stats._index[id(fn)]][0]
            if self.loop_open():
                if loop.facts.functions_run_eagerly:
                    loop.step_args = (args, kwargs)
                    loop.record_arguments(
                        traces.bind_arguments(stats.python_function, args, kwargs)
                    )
                loop.step_end()
        return result

    # -- gradient application ----------------------------------------------------------------
    def on_apply(self, optimizer: Any, grads: Any, variables: Any) -> Callable[[], None] | None:
        """Called before a gradient application; returns what to run after it (or None)."""
        import tensorflow as tf

        eager = tf.executing_eagerly()
        stack = _stack()
        container = stack[0] if stack else None
        if not eager and container is None:  # strategy.run's replica thread: its caller's
            container = _replica_caller()
        if not eager and container is None:
            return None  # inside a graph rnndoctor does not see (tf.compat.v1, say)
        session = self.session
        assert session is not None
        loop = session.loop_state.loop
        if loop is None:
            location = (
                sites.user_frame_location(skip=2, call_names=("apply_gradients", "apply"))
                if eager
                else _traced_user_location()
            )
            loop = session.loop_state.loop = CustomLoop(session, optimizer, eager, location)
            session.facts.loop = loop.facts
            if variables is None:
                variables = getattr(optimizer, "_trainable_variables", None) or []
            for v in variables:
                loop.variable_ids.add(id(v))
                loop.variable_ids.add(id(getattr(v, "value", v)))
            loop.facts.variables_updated = len(variables)
            _describe_step(loop, eager, container)
            loop.window.announce()
        if container is not None:
            key = getattr(container, "_key_for_call_stats", None) or id(container)
            if key not in loop.step_keys:
                loop.step_keys.add(key)
            return None  # the step ends with the container's call
        return loop.step_end

    def on_eager_switch(self, value: Any) -> None:
        """Records the user's line that turned eager execution on."""
        session = self.session
        if session is None or session.loop_state.paused or not value:
            return
        environment = session.facts.environment
        if environment is not None:
            environment.run_eagerly_location = sites.user_frame_location(
                skip=2, call_names=("run_functions_eagerly", "compile")
            )


def _describe_step(loop: CustomLoop, eager: bool, container: Any) -> None:
    facts = loop.facts
    if container is not None:
        python_function = getattr(container, "python_function", None)
        facts.step_function = (
            "train_function (Keras' train step, through train_on_batch)"
            if traces.is_keras_train_function(python_function)
            else getattr(python_function, "__qualname__", None)
        )
        facts.step_is_tf_function = True
        facts.step_location = traces.function_location(python_function)
        facts.functions_run_eagerly = eager
        if eager:
            loop.step_callable = container
        return
    frames = [f for f in _user_frames() if f.f_code.co_name != "<module>"]
    if not frames:
        return
    # The step: the innermost user function that opens the GradientTape, else the
    # innermost user function on the stack.
    frame = next((f for f in frames if "GradientTape" in f.f_code.co_names), frames[0])
    code = frame.f_code
    loop.step_code = code
    loop.step_callable = _callable_for(frame)
    facts.step_function = code.co_qualname
    facts.step_location = sites.source_location(code.co_filename, code.co_firstlineno)


def _wrap_call(original: Callable[..., Any], hooks: _Hooks) -> Callable[..., Any]:
    @functools.wraps(original)
    def __call__(self, *args, **kwargs):  # noqa: N807 - it replaces Function.__call__
        if not hooks.recording():
            return original(self, *args, **kwargs)
        from tensorflow.python.eager import context

        if not context.executing_eagerly():  # called while another function traces
            return original(self, *args, **kwargs)
        return hooks.on_call(original, self, args, kwargs)

    __call__._rnndoctor_original = original  # type: ignore[attr-defined]
    return __call__


def _wrap_apply(original: Callable[..., Any], hooks: _Hooks) -> Callable[..., Any]:
    @functools.wraps(original)
    def apply(self, grads, trainable_variables=None):
        if getattr(_local, "in_apply", False) or not hooks.loop_open():
            return original(self, grads, trainable_variables)
        if trainable_variables is not None and not isinstance(trainable_variables, (list, tuple)):
            trainable_variables = list(trainable_variables)  # a generator: read it once
        _local.in_apply = True
        try:
            after = hooks.on_apply(self, grads, trainable_variables)
            result = original(self, grads, trainable_variables)
        finally:
            _local.in_apply = False
        if after is not None:
            after()
        return result

    apply._rnndoctor_original = original  # type: ignore[attr-defined]
    return apply


def _optimizer_classes() -> list[type]:
    """``BaseOptimizer`` and the optimizers that override its ``apply``."""
    from keras.src.optimizers import base_optimizer

    classes: list[type] = [base_optimizer.BaseOptimizer]
    for module, name in (
        ("keras.src.optimizers.loss_scale_optimizer", "LossScaleOptimizer"),
        ("keras.src.optimizers.multi_optimizer", "MultiOptimizer"),
    ):
        try:
            cls = getattr(__import__(module, fromlist=[name]), name)
        except (ImportError, AttributeError):
            continue
        if "apply" in cls.__dict__:
            classes.append(cls)
    return classes


def _patch(hooks: _Hooks) -> None:
    """Installs the class patches (once per process), all calling into ``hooks``."""
    import keras
    import tensorflow as tf
    from tensorflow.python.eager.polymorphic_function import polymorphic_function

    function_cls = polymorphic_function.Function
    function_cls.__call__ = _wrap_call(function_cls.__call__, hooks)
    for cls in _optimizer_classes():
        cls.apply = _wrap_apply(cls.__dict__["apply"], hooks)

    original_switch = tf.config.run_functions_eagerly

    @functools.wraps(original_switch)
    def run_functions_eagerly(run_eagerly):
        hooks.on_eager_switch(run_eagerly)
        return original_switch(run_eagerly)

    tf.config.run_functions_eagerly = run_functions_eagerly

    keras.Model.compile = _wrap_compile(keras.Model.compile, hooks)
    _patch_tf_keras(hooks)


def _wrap_compile(original_compile: Callable[..., Any], hooks: _Hooks) -> Callable[..., Any]:
    """``Model.compile`` reporting its ``run_eagerly`` argument to ``hooks``."""

    @functools.wraps(original_compile)
    def compile(model, *args, **kwargs):  # noqa: A001 - it replaces Model.compile
        try:
            bound = inspect.signature(original_compile).bind(model, *args, **kwargs)
            hooks.on_eager_switch(bound.arguments.get("run_eagerly"))
        except TypeError:
            pass
        try:  # the call a compile fix rewrites (RD401, RD403): the user's own compile call
            if sites.is_user_file(sys._getframe(1).f_code.co_filename):
                site = sites.user_frame_location(skip=1, call_names=("compile",))
                sites.record_latest("compiles", model, site)
        except Exception:  # recording a site must never break the user's compile
            pass
        return original_compile(model, *args, **kwargs)

    return compile


def _wrap_apply_gradients(original: Callable[..., Any], hooks: _Hooks) -> Callable[..., Any]:
    """A tf_keras optimizer's ``apply_gradients(grads_and_vars, ...)``
    (``tf_keras/src/optimizers/optimizer.py``), seen by ``hooks`` as Keras 3's
    ``apply(grads, trainable_variables)`` is."""

    @functools.wraps(original)
    def apply_gradients(self, grads_and_vars, *args, **kwargs):
        if getattr(_local, "in_apply", False) or not hooks.loop_open():
            return original(self, grads_and_vars, *args, **kwargs)
        pairs = list(grads_and_vars)  # a zip or generator: read it once
        _local.in_apply = True
        try:
            after = hooks.on_apply(self, [g for g, _ in pairs], [v for _, v in pairs])
            result = original(self, pairs, *args, **kwargs)
        finally:
            _local.in_apply = False
        if after is not None:
            after()
        return result

    apply_gradients._rnndoctor_original = original  # type: ignore[attr-defined]
    return apply_gradients


def _patch_tf_keras(hooks: _Hooks) -> None:
    """The tf_keras (Keras 2) classes, when installed: ``Model.compile``
    (``tf_keras/src/engine/training.py``) and ``Optimizer.apply_gradients`` of its optimizers
    (``tf_keras/src/optimizers/optimizer.py``; the ``legacy`` optimizers are not hooked)."""
    module = flavour.tf_keras()
    if module is None:
        return
    module.Model.compile = _wrap_compile(module.Model.compile, hooks)
    optimizer_cls = module.optimizers.Optimizer
    optimizer_cls.apply_gradients = _wrap_apply_gradients(optimizer_cls.apply_gradients, hooks)


def _installed_hooks() -> _Hooks | None:
    from tensorflow.python.eager.polymorphic_function import polymorphic_function

    return polymorphic_function.Function.__dict__.get(_HOOKS_ATTR)


def install(session: CaptureSession) -> None:
    """Installs the ``tf.function``, gradient-application and eager-switch hooks (once per
    process) and points them at ``session``, whose ``loop_state`` receives what they see.

    Args:
        session: the check's session.
    """
    from tensorflow.python.eager.polymorphic_function import polymorphic_function

    hooks = _installed_hooks()
    if hooks is None:
        hooks = _Hooks()
        _patch(hooks)
        setattr(polymorphic_function.Function, _HOOKS_ATTR, hooks)
    uninstall()
    hooks.session = session
    session.loop_state.hooked = True


def uninstall() -> None:
    """Detaches the hooks from their session: they pass every call straight through (the class
    patches stay, inert). For tests and for a process that runs several captures."""
    hooks = _installed_hooks()
    session = hooks.session if hooks is not None else None
    if hooks is None or session is None:
        return
    if session.loop_state.loop is not None:
        session.loop_state.loop.disarm()
    session.loop_state.hooked = False
    hooks.session = None


def finish_pending(session: CaptureSession) -> bool:
    """Finishes a custom loop that the script left before its window was complete (it ran fewer
    steps than asked for, or ended inside the profiled steps). Never raises.

    Returns:
        True when a loop was finished here.
    """
    state = session.loop_state
    if not state.hooked or state.loop is None:
        return False
    loop = state.loop
    if loop.finished or session.fit_called or session.window_finished:
        return False
    try:
        loop.finish(
            stop_script=False,
            note=(
                f"the script ended after {loop.window.steps_done} custom-loop steps: "
                f"{len(loop.window.step_ms)} of {loop.options.measured_steps} requested steps "
                "were measured (warm-up excluded)"
            ),
        )
    except Exception as exc:  # report what was gathered; never crash the capture
        session.facts.run.notes.append(
            f"finishing the custom loop failed: {type(exc).__name__}: {exc}"[:300]
        )
        session.save()
        return False
    return True
