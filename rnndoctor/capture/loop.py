"""Custom training loops and ``tf.function`` tracing counts.

``install(capture)`` runs before the user's script. It installs three hooks:

- **tf.function calls**: a class-level wrapper of TensorFlow's ``Function.__call__``
  (``tensorflow/python/eager/polymorphic_function/polymorphic_function.py``). For every call made
  outside any other ``tf.function`` (not while one traces, nor inside one that
  ``run_functions_eagerly`` runs eagerly), it reads TensorFlow's own tracing count
  (``Function.experimental_get_tracing_count``) before and after the call, as
  ``Function.__call__`` itself does to decide whether the call traced, and keeps per Python
  function (TensorFlow's ``_key_for_call_stats``, the grouping its retracing warning uses): the
  calls, the calls that traced, their wall times and the argument shapes of the calls that
  traced. ``collect_traces`` turns them into ``ProbeFacts.traces`` and stops counting.
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

The loop's steps go through the same window as ``fit``'s (``WindowOptions``): warm-up steps,
measured steps (time from the end of one step to the end of the next, after reading the
optimizer's iteration counter back so that GPU work has finished), then ``profile_steps`` steps
inside ``tf.profiler.experimental`` with a ``Trace("train", step_num=..., _r=1)`` marker each.
Then, for an eager step function, a traced twin (:func:`_measure_twin`); then
``capture.finish(model, ...)`` with the ``keras.Model`` that owns the updated variables, and
``capture.end_script()``, as the ``fit`` hook does. A script that ends first is finished with
what was measured (:func:`finish_pending`, called by ``rnndoctor.capture.__main__``).
"""

from __future__ import annotations

import functools
import gc
import inspect
import statistics
import sys
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

from rnndoctor.capture import sites
from rnndoctor.facts import (
    CustomLoopFacts,
    ProbeFacts,
    SourceLocation,
    StepArgument,
    StepTimes,
    TraceCount,
)

_MAX_SHAPES = 8  # distinct call signatures kept per function (facts stay small)
_MAX_VALUES = 32  # distinct Python argument values counted per argument
_MAX_TIMES = 10_000  # call times kept per function
_MAX_TRACE_ROWS = 20  # tf.functions listed in the facts (training ones first)
_TWIN_CALLS = 5  # timed calls of each twin, after one untimed call (tracing, or warm-up)
_TWIN_SHARE = 0.05  # share of --timeout for the traced twin (rnndoctor.capture.budget)
_ROLE_ORDER = {"train_function": 0, "custom_step": 1, "other": 2}
_AUTOGRAPH_FILE = "__autograph_generated_file"  # autograph's converted code (a temp file)

_state: _State | None = None
_installed = False
_local = threading.local()


def _stack() -> list[Any]:
    """The ``tf.function`` objects called (outside any tracing) and running on this thread."""
    stack = getattr(_local, "stack", None)
    if stack is None:
        stack = _local.stack = []
    return stack


# -- describing arguments ------------------------------------------------------------------------
def _is_tensor_like(value: Any) -> bool:
    return hasattr(value, "shape") and hasattr(value, "dtype") and not isinstance(value, type)


def _dtype_name(value: Any) -> str:
    dtype = value.dtype
    return str(getattr(dtype, "name", dtype))


def _shape(value: Any) -> tuple[int | None, ...] | None:
    try:
        dims = list(value.shape)
    except (TypeError, ValueError):  # unknown rank
        return None
    return tuple(None if d is None else int(d) for d in dims)


def _flatten(value: Any, depth: int = 0) -> tuple[Any, list[Any]]:
    """``(template, leaves)``: tuples, lists and dicts (3 levels) become templates whose leaves
    are indices into ``leaves``; anything else is one leaf."""
    if depth < 3 and isinstance(value, (tuple, list)) and not hasattr(value, "_fields"):
        leaves: list[Any] = []
        parts = []
        for item in value:
            template, sub = _flatten(item, depth + 1)
            parts.append(_shift(template, len(leaves)))
            leaves.extend(sub)
        return (tuple(parts) if isinstance(value, tuple) else parts), leaves
    if depth < 3 and isinstance(value, dict):
        leaves = []
        parts_d = {}
        for key in sorted(value, key=repr):
            template, sub = _flatten(value[key], depth + 1)
            parts_d[key] = _shift(template, len(leaves))
            leaves.extend(sub)
        return parts_d, leaves
    return 0, [value]


def _shift(template: Any, offset: int) -> Any:
    if isinstance(template, int):
        return template + offset
    if isinstance(template, dict):
        return {k: _shift(v, offset) for k, v in template.items()}
    shifted = [_shift(t, offset) for t in template]
    return tuple(shifted) if isinstance(template, tuple) else shifted


def _leaf_text(leaf: Any) -> str:
    if _is_tensor_like(leaf):
        shape = _shape(leaf)
        dims = "?" if shape is None else ", ".join("None" if d is None else str(d) for d in shape)
        return f"{_dtype_name(leaf)}[{dims}]"
    spec = getattr(leaf, "element_spec", None)
    if spec is not None:  # a tf.data iterator (Keras' fit passes one to its train function)
        _, specs = _flatten(spec)
        return "iterator of (" + ", ".join(_leaf_text(s) for s in specs) + ")"
    text = repr(leaf)
    return f"{type(leaf).__name__} {text[:40]}"


def _relaxed_dims(shapes: list[tuple[int | None, ...] | None]) -> list[int | None] | None:
    """One shape accepting every shape in ``shapes``: ``None`` for the batch dimension (0) and
    for each dimension that varied; None when the rank varied or is unknown."""
    if not shapes or any(s is None for s in shapes) or len({len(s) for s in shapes}) != 1:
        return None
    dims: list[int | None] = []
    for i, values in enumerate(zip(*shapes, strict=True)):
        same = len(set(values)) == 1 and values[0] is not None
        dims.append(values[0] if same and i > 0 else None)
    return dims


class _Argument:
    """The values one argument took over the observed calls."""

    def __init__(self, name: str):
        self.name = name
        self.template: Any = None
        self.structure_changed = False
        self.leaf_dtypes: list[str | None] = []
        self.leaf_shapes: list[list[tuple[int | None, ...] | None]] = []
        self.python_values: set[str] = set()
        self.has_python = False
        self.has_other = False
        self.texts: list[str] = []

    def observe(self, value: Any) -> str:
        """Records one value; returns its short description (``int32[32, 17]``)."""
        template, leaves = _flatten(value)
        if self.template is None:
            self.template = template
            self.leaf_dtypes = [None] * len(leaves)
            self.leaf_shapes = [[] for _ in leaves]
        elif template != self.template or len(leaves) != len(self.leaf_shapes):
            self.structure_changed = True
        texts = []
        for i, leaf in enumerate(leaves):
            texts.append(_leaf_text(leaf))
            if _is_tensor_like(leaf):
                if not self.structure_changed:
                    self.leaf_dtypes[i] = _dtype_name(leaf)
                    shape = _shape(leaf)
                    if shape not in self.leaf_shapes[i] and len(self.leaf_shapes[i]) < _MAX_SHAPES:
                        self.leaf_shapes[i].append(shape)
            elif getattr(leaf, "element_spec", None) is not None:
                self.has_other = True
            else:
                self.has_python = True
                if len(self.python_values) < _MAX_VALUES:
                    self.python_values.add(repr(leaf)[:80])
        text = texts[0] if len(texts) == 1 else "(" + ", ".join(texts) + ")"
        if text not in self.texts and len(self.texts) < _MAX_SHAPES:
            self.texts.append(text)
        return text

    def _spec(self, template: Any) -> str | None:
        if isinstance(template, int):
            dims = _relaxed_dims(self.leaf_shapes[template])
            dtype = self.leaf_dtypes[template]
            if dtype is None:
                return None
            shape = "None" if dims is None else "[" + ", ".join(map(str, dims)) + "]"
            return f"tf.TensorSpec({shape}, tf.{dtype})"
        if isinstance(template, dict):
            items = [(k, self._spec(v)) for k, v in template.items()]
            if any(v is None for _, v in items):
                return None
            return "{" + ", ".join(f"{k!r}: {v}" for k, v in items) + "}"
        parts = [self._spec(t) for t in template]
        if any(p is None for p in parts):
            return None
        if isinstance(template, tuple):
            return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"  # type: ignore[arg-type]
        return "[" + ", ".join(parts) + "]"  # type: ignore[arg-type]

    def facts(self) -> StepArgument:
        kind = "python" if self.has_python else ("other" if self.has_other else "tensor")
        spec = None
        if kind == "tensor" and not self.structure_changed and self.template is not None:
            spec = self._spec(self.template)
        dtypes = {d for d in self.leaf_dtypes if d}
        return StepArgument(
            name=self.name,
            kind=kind,
            dtype=dtypes.pop() if len(dtypes) == 1 and isinstance(self.template, int) else None,
            spec=spec,
            shapes=list(self.texts),
            values_seen=len(self.python_values),
        )


def _bind(python_function: Any, args: tuple, kwargs: dict) -> list[tuple[str, Any]]:
    """The call's arguments by parameter name (``arg0``... when the signature cannot bind)."""
    try:
        bound = inspect.signature(python_function).bind(*args, **kwargs)
        return list(bound.arguments.items())
    except (TypeError, ValueError):
        return [(f"arg{i}", a) for i, a in enumerate(args)] + list(kwargs.items())


# -- locations -------------------------------------------------------------------------------
def _user_file(filename: str) -> bool:
    return sites.is_user_file(filename) and _AUTOGRAPH_FILE not in filename


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
        if _user_file(frame.filename):
            return sites.source_location(frame.filename, frame.lineno, ("apply_gradients", "apply"))
    return None


def _user_frames() -> list[Any]:
    """The user's Python frames on this thread's stack, innermost first."""
    frames = []
    frame = sys._getframe(1)
    while frame is not None:
        if _user_file(frame.f_code.co_filename):
            frames.append(frame)
        frame = frame.f_back
    return frames


def _function_location(python_function: Any) -> SourceLocation | None:
    """The user's ``def`` line of a function (its first decorator's line), if it is user code."""
    target = inspect.unwrap(getattr(python_function, "__func__", python_function))
    target = getattr(target, "__func__", target)
    code = getattr(target, "__code__", None)
    if code is None or not _user_file(code.co_filename):
        return None
    return sites.source_location(code.co_filename, code.co_firstlineno)


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


# -- tf.function statistics ------------------------------------------------------------------
class _FunctionStats:
    """Calls of the ``tf.function`` objects that wrap one Python function."""

    def __init__(self, fn: Any):
        python_function = getattr(fn, "python_function", None)
        self.python_function = python_function
        self.name = getattr(python_function, "__qualname__", None) or getattr(fn, "name", "?")
        # Each tf.function object seen: [weak reference, its last tracing count]. A dead one
        # keeps its count; ``_index`` maps a live object's id to its entry (ids are reused).
        self.instances: list[list[Any]] = []
        self._index: dict[int, int] = {}
        self.calls = 0
        self.traced_calls = 0
        self.untraced_ms: list[float] = []
        self.traced_ms: list[float] = []
        self.total_ms = 0.0
        self.shapes: list[str] = []
        self.arguments: dict[str, _Argument] = {}
        self.reduce_retracing = getattr(fn, "_reduce_retracing", None)
        self.has_input_signature = getattr(fn, "input_signature", None) is not None
        self.last_args: tuple[tuple, dict] | None = None
        self.last_fn: Any = None  # a weak reference to the instance called last
        self.baseline_calls = 0

    def record(self, fn: Any, args: tuple, kwargs: dict, traced: bool, ms: float, count: int):
        index = self._index.get(id(fn))
        entry = self.instances[index] if index is not None else None
        if entry is None or entry[0] is None or entry[0]() is not fn:
            try:
                ref = weakref.ref(fn)
            except TypeError:
                ref = None
            entry = [ref, count]
            self._index[id(fn)] = len(self.instances)
            self.instances.append(entry)
        entry[1] = count
        self.calls += 1
        self.total_ms += ms
        times = self.traced_ms if traced else self.untraced_ms
        if len(times) < _MAX_TIMES:
            times.append(ms)
        if traced:
            self.traced_calls += 1
            self.observe(args, kwargs)

    def observe(self, args: tuple, kwargs: dict) -> None:
        parts = []
        for name, value in _bind(self.python_function, args, kwargs):
            argument = self.arguments.setdefault(name, _Argument(name))
            parts.append(f"{name}: {argument.observe(value)}")
        text = ", ".join(parts)[:300]
        if text not in self.shapes and len(self.shapes) < _MAX_SHAPES:
            self.shapes.append(text)

    def traces(self) -> int:
        total = 0
        for ref, count in self.instances:
            fn = ref() if ref is not None else None
            if fn is not None:
                try:
                    count = int(fn.experimental_get_tracing_count())
                except Exception:
                    pass
            total += count
        return total

    def facts(self, role: str, location: SourceLocation | None, name: str | None) -> TraceCount:
        median = statistics.median(self.untraced_ms) if self.untraced_ms else None
        tracing = (
            round(sum(max(0.0, t - median) for t in self.traced_ms), 3)
            if median is not None and self.traced_ms
            else None
        )
        return TraceCount(
            name=name or self.name,
            traces=self.traces(),
            calls=self.calls,
            role=role,
            location=location,
            shapes=list(self.shapes),
            instances=len(self.instances),
            traced_calls=self.traced_calls,
            total_call_ms=round(self.total_ms, 3),
            median_call_ms=round(median, 4) if median is not None else None,
            tracing_ms=tracing,
            reduce_retracing=self.reduce_retracing,
            has_input_signature=self.has_input_signature,
            arguments=[a.facts() for a in self.arguments.values()],
            baseline_calls=self.baseline_calls,
        )


def _closure_names(fn: Any, depth: int = 0, seen: set[int] | None = None) -> set[str]:
    """Names of the bound methods reachable through ``fn``'s closures (tf.functions unwrapped)."""
    seen = set() if seen is None else seen
    if fn is None or depth > 10 or id(fn) in seen:
        return set()
    seen.add(id(fn))
    names: set[str] = set()
    inner = getattr(fn, "python_function", None)
    if inner is not None:
        return _closure_names(inner, depth + 1, seen)
    if inspect.ismethod(fn):
        names.add(fn.__func__.__name__)
        return names
    for cell in getattr(fn, "__closure__", None) or ():
        try:
            value = cell.cell_contents
        except ValueError:
            continue
        if callable(value):
            names |= _closure_names(value, depth + 1, seen)
    wrapped = getattr(fn, "__wrapped__", None)
    if wrapped is not None:
        names |= _closure_names(wrapped, depth + 1, seen)
    return names


def _is_keras_train_function(python_function: Any) -> bool:
    """Keras' ``fit`` step: the ``tf.function`` that ``TensorFlowTrainer._make_function`` builds
    (``keras/src/backend/tensorflow/trainer.py``) around ``train_step``."""
    module = getattr(python_function, "__module__", "") or ""
    qualname = getattr(python_function, "__qualname__", "") or ""
    return (
        module.startswith("keras.")
        and "_make_function.<locals>" in qualname
        and "train_step" in _closure_names(python_function)
    )


# -- the custom loop -------------------------------------------------------------------------
class _Loop:
    """A custom training loop's window: warm-up, measured and profiled steps."""

    def __init__(self, state: _State, optimizer: Any, eager: bool, location):
        self.state = state
        self.capture = state.capture
        self.options = state.capture.options
        self.optimizer = optimizer
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
        self.arguments: dict[str, _Argument] = {}
        self.steps_done = 0
        self.step_ms: list[float] = []
        self.last_end: float | None = None
        self.phase: str | None = None
        self.profiling = False
        self.trace: Any = None
        self.profiled = 0
        self.profile_error: str | None = None
        self.finished = False
        self.armed = False
        self.twin_blocker: str | None = None

    # -- steps -------------------------------------------------------------------------------
    def measuring(self) -> bool:
        return (
            self.steps_done >= self.options.warmup_steps
            and len(self.step_ms) < self.options.measured_steps
        )

    def profile_wanted(self) -> bool:
        return bool(
            self.options.profile_steps > 0
            and self.options.profile_dir
            and self.profile_error is None
            and self.profiled < self.options.profile_steps
        )

    def announce(self) -> None:
        if self.steps_done < self.options.warmup_steps:
            phase = "custom loop: warm-up steps"
        elif self.measuring():
            phase = "custom loop: measured steps"
        else:
            phase = "custom loop: profiled steps"
        if phase != self.phase:
            self.phase = phase
            self.capture.set_phase(phase)

    def sync(self) -> None:
        """Reads the optimizer's iteration counter back: the step's device work has finished."""
        try:
            self.optimizer.iterations.numpy()
        except Exception:
            pass

    def step_end(self) -> None:
        """One training step ended. May finish the diagnosis and end the script."""
        self.sync()
        now = time.perf_counter()
        if self.measuring() and self.last_end is not None:
            self.step_ms.append((now - self.last_end) * 1000.0)
        self.steps_done += 1
        self.facts.steps_seen = self.steps_done
        if self.trace is not None:
            self.trace.__exit__(None, None, None)
            self.trace = None
            self.profiled += 1
        if not self.measuring() and self.steps_done >= self.options.warmup_steps:
            if self.profile_wanted():
                self.begin_profiled_step()
            else:
                self.finish(stop_script=True)
                return
        self.announce()
        self.arm_argument_capture()
        # The next step starts now: rnndoctor's own bookkeeping above (saving the facts at a
        # phase change, starting the profiler) is not counted in any step's time.
        self.last_end = time.perf_counter()

    def begin_profiled_step(self) -> None:
        import tensorflow as tf

        if not self.profiling:
            try:
                tf.profiler.experimental.start(self.options.profile_dir)
                self.profiling = True
            except Exception as exc:  # another profiler session running, say
                self.profile_error = f"{type(exc).__name__}: {exc}"[:300]
                return
        # A step marker that xprof's step-time and input-pipeline analysis recognise; the step
        # runs from here (the end of the previous one) to the end of the next one.
        self.trace = tf.profiler.experimental.Trace("train", step_num=self.steps_done, _r=1)
        self.trace.__enter__()

    def stop_profiler(self) -> None:
        if self.trace is not None:
            self.trace.__exit__(None, None, None)
            self.trace = None
        if self.profiling:
            import tensorflow as tf

            self.profiling = False
            try:
                tf.profiler.experimental.stop()
            except Exception as exc:
                self.profile_error = f"{type(exc).__name__}: {exc}"[:300]

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
            self.arguments.setdefault(name, _Argument(name)).observe(value)

    # -- finishing ---------------------------------------------------------------------------
    def step_times(self) -> StepTimes:
        times = StepTimes(
            warmup_steps=self.options.warmup_steps,
            measured_steps=len(self.step_ms),
            requested_steps=self.options.measured_steps,
            step_time_ms=[round(v, 4) for v in self.step_ms],
            batch_size=self.batch_size(),
            source="custom loop",
        )
        if self.step_ms:
            from rnndoctor.stats import percentile

            times.median_step_time_ms = round(statistics.median(self.step_ms), 4)
            times.p90_step_time_ms = round(percentile(self.step_ms, 0.9), 4)
            if times.batch_size:
                times.samples_per_s = round(
                    times.batch_size * 1000.0 / times.median_step_time_ms, 2
                )
        return times

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
        import keras

        best, best_overlap = None, 0
        for obj in gc.get_objects():
            if not isinstance(obj, keras.Model):
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
        """Records the loop's facts, runs the traced twin and ``capture.finish``; then ends the
        script (``stop_script``) as the ``fit`` hook does."""
        if self.finished:
            return
        self.finished = True
        self.disarm()
        self.stop_profiler()
        capture = self.capture
        capture.facts.steps = self.step_times()
        self.facts.step_arguments = self.step_arguments()
        if note:
            capture.facts.run.notes.append(note)
        elif len(self.step_ms) < self.options.measured_steps:
            capture.facts.run.notes.append(
                f"the custom loop ran {self.steps_done} steps: only {len(self.step_ms)} of "
                f"{self.options.measured_steps} requested steps were measured (warm-up "
                "excluded)"
            )
        capture.save()
        if self.facts.eager:
            capture.set_phase("custom loop: traced twin of the eager step")
            _measure_twin(self)
            capture.save()
        else:
            _untraced_baseline(self)
        model = self.find_model()
        if model is None:
            capture.facts.run.notes.append(
                "model inspection skipped: " + (self.facts.model_not_found or "no model")
            )
        capture.finish(model, self.profiled, self.profile_error, None)
        if stop_script:
            capture.end_script()


def _untraced_baseline(loop: _Loop) -> None:
    """When every call of the ``tf.function`` step traced, calls it ``_TWIN_CALLS`` more times
    with its last call's arguments (a shape it has traced: no tracing) to time a call without
    tracing, the baseline of ``TraceCount.tracing_ms``."""
    state = loop.state
    budget = loop.capture.budgets.budget("untraced baseline", share=_TWIN_SHARE)
    for key in loop.step_keys:
        stats = state.functions.get(key)
        if stats is None or stats.untraced_ms or stats.last_args is None:
            continue
        fn = stats.last_fn() if stats.last_fn is not None else None
        if fn is None:
            continue
        args, kwargs = stats.last_args
        loop.capture.set_phase("custom loop: tracing baseline")
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
            loop.capture.facts.run.notes.append(
                f"the untraced calls of {stats.name} failed: {type(exc).__name__}: {exc}"[:300]
            )
        finally:
            state.paused = False


def _measure_twin(loop: _Loop) -> None:
    """Times the eager step function as the loop ran it and wrapped in ``tf.function``.

    Both run on the arguments of one real step, kept in memory, ``_TWIN_CALLS`` timed calls
    each after one untimed call (warm-up; for the traced twin, its tracing, timed apart). Each
    call reads the optimizer's iteration counter back. The whole probe is bounded by its budget.
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
    budget = loop.capture.budgets.budget("traced twin", share=_TWIN_SHARE)
    eagerly = bool(tf.config.functions_run_eagerly())
    state = loop.state
    state.paused = True

    def timed(call: Callable[[], Any]) -> float:
        start = time.perf_counter()
        call()
        loop.sync()
        return (time.perf_counter() - start) * 1000.0

    try:
        eager_ms = []
        timed(lambda: fn(*args, **kwargs))
        while len(eager_ms) < _TWIN_CALLS and not budget.expired():
            eager_ms.append(timed(lambda: fn(*args, **kwargs)))
        target = getattr(fn, "python_function", fn)
        traced = tf.function(target)
        tf.config.run_functions_eagerly(False)
        facts.twin_tracing_ms = round(timed(lambda: traced(*args, **kwargs)), 3)
        traced_ms = []
        while len(traced_ms) < _TWIN_CALLS and not budget.expired():
            traced_ms.append(timed(lambda: traced(*args, **kwargs)))
        if not eager_ms or not traced_ms:
            facts.twin_not_measured = f"the twin ran out of its {budget.seconds:g} s budget"
            return
        facts.eager_call_ms = round(statistics.median(eager_ms), 4)
        facts.traced_call_ms = round(statistics.median(traced_ms), 4)
        facts.twin_calls = min(len(eager_ms), len(traced_ms))
    except Exception as exc:
        first = (str(exc).strip().splitlines() or [""])[0]
        facts.twin_not_measured = (
            f"the step function could not run as a tf.function: {type(exc).__name__}: {first}"
        )[:300]
    finally:
        tf.config.run_functions_eagerly(eagerly)
        state.paused = False


# -- the hooks -------------------------------------------------------------------------------
class _State:
    """What the hooks gather in one capture."""

    def __init__(self, capture: Any):
        self.capture = capture
        self.functions: dict[Any, _FunctionStats] = {}
        self.frozen = False
        self.paused = False
        self.loop: _Loop | None = None

    def recording(self) -> bool:
        """Whether tf.function calls count: during the script and its diagnosis window only.
        The window is over once its step times are recorded (``facts.steps``): the probes that
        follow build and call fresh train functions, which must not add to the counts."""
        return not (self.frozen or self.paused or self.capture.facts.steps is not None)

    def loop_open(self) -> bool:
        """Gradient applications count as a custom loop's (not inside fit, not finished)."""
        return (
            self.recording()
            and not self.capture.fit_called
            and not (self.loop is not None and self.loop.finished)
        )

    # -- tf.function calls -------------------------------------------------------------------
    def on_call(self, original: Callable[..., Any], fn: Any, args: tuple, kwargs: dict) -> Any:
        stack = _stack()
        if stack:  # called by a tf.function that runs eagerly: part of that one's call
            stack.append(fn)
            try:
                return original(fn, *args, **kwargs)
            finally:
                stack.pop()
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
        stats = self.functions.get(key)
        if stats is None:
            stats = self.functions[key] = _FunctionStats(fn)
        stats.record(fn, args, kwargs, after > before, ms, after)
        loop = self.loop
        if loop is not None and key in loop.step_keys:
            stats.last_args = (args, kwargs)
            stats.last_fn = stats.instances[stats._index[id(fn)]][0]
            if self.loop_open():
                if loop.facts.functions_run_eagerly:
                    loop.step_args = (args, kwargs)
                    loop.record_arguments(_bind(stats.python_function, args, kwargs))
                loop.step_end()
        return result

    # -- gradient application ----------------------------------------------------------------
    def on_apply(self, optimizer: Any, grads: Any, variables: Any) -> Callable[[], None] | None:
        """Called before a gradient application; returns what to run after it (or None)."""
        import tensorflow as tf

        eager = tf.executing_eagerly()
        stack = _stack()
        container = stack[0] if stack else None
        if not eager and container is None:
            return None  # inside a graph rnndoctor does not see (tf.compat.v1, say)
        loop = self.loop
        if loop is None:
            location = (
                sites.user_frame_location(skip=2, call_names=("apply_gradients", "apply"))
                if eager
                else _traced_user_location()
            )
            loop = self.loop = _Loop(self, optimizer, eager, location)
            self.capture.facts.loop = loop.facts
            if variables is None:
                variables = getattr(optimizer, "_trainable_variables", None) or []
            for v in variables:
                loop.variable_ids.add(id(v))
                loop.variable_ids.add(id(getattr(v, "value", v)))
            loop.facts.variables_updated = len(variables)
            self._describe_step(loop, eager, container)
            loop.announce()
        if container is not None:
            key = getattr(container, "_key_for_call_stats", None) or id(container)
            if key not in loop.step_keys:
                loop.step_keys.add(key)
            return None  # the step ends with the container's call
        return loop.step_end

    def _describe_step(self, loop: _Loop, eager: bool, container: Any) -> None:
        facts = loop.facts
        if container is not None:
            python_function = getattr(container, "python_function", None)
            facts.step_function = (
                "train_function (Keras' train step, through train_on_batch)"
                if _is_keras_train_function(python_function)
                else getattr(python_function, "__qualname__", None)
            )
            facts.step_is_tf_function = True
            facts.step_location = _function_location(python_function)
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


def _wrap_call(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def __call__(self, *args, **kwargs):  # noqa: N807 - it replaces Function.__call__
        state = _state
        if state is None or not state.recording():
            return original(self, *args, **kwargs)
        from tensorflow.python.eager import context

        if not context.executing_eagerly():  # called while another function traces
            return original(self, *args, **kwargs)
        return state.on_call(original, self, args, kwargs)

    __call__._rnndoctor_original = original  # type: ignore[attr-defined]
    return __call__


def _wrap_apply(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def apply(self, grads, trainable_variables=None):
        state = _state
        if state is None or getattr(_local, "in_apply", False) or not state.loop_open():
            return original(self, grads, trainable_variables)
        if trainable_variables is not None and not isinstance(trainable_variables, (list, tuple)):
            trainable_variables = list(trainable_variables)  # a generator: read it once
        _local.in_apply = True
        try:
            after = state.on_apply(self, grads, trainable_variables)
            result = original(self, grads, trainable_variables)
        finally:
            _local.in_apply = False
        if after is not None:
            after()
        return result

    apply._rnndoctor_original = original  # type: ignore[attr-defined]
    return apply


def _record_eager_switch(value: Any) -> None:
    state = _state
    if state is None or state.paused or not value:
        return
    environment = state.capture.facts.environment
    if environment is not None:
        environment.run_eagerly_location = sites.user_frame_location(
            skip=2, call_names=("run_functions_eagerly", "compile")
        )


def install(capture: Any) -> None:
    """Installs the ``tf.function``, gradient-application and eager-switch hooks (idempotent).

    Args:
        capture: the ``rnndoctor.capture.window.Capture`` of this run.
    """
    global _state
    import keras
    import tensorflow as tf
    from keras.src.optimizers import base_optimizer
    from tensorflow.python.eager.polymorphic_function import polymorphic_function

    global _installed
    _state = _State(capture)
    if _installed:
        return
    _installed = True
    function_cls = polymorphic_function.Function
    function_cls.__call__ = _wrap_call(function_cls.__call__)
    classes = [base_optimizer.BaseOptimizer]
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
    for cls in classes:
        cls.apply = _wrap_apply(cls.__dict__["apply"])

    original_switch = tf.config.run_functions_eagerly

    @functools.wraps(original_switch)
    def run_functions_eagerly(run_eagerly):
        _record_eager_switch(run_eagerly)
        return original_switch(run_eagerly)

    tf.config.run_functions_eagerly = run_functions_eagerly

    original_compile = keras.Model.compile

    @functools.wraps(original_compile)
    def compile(model, *args, **kwargs):  # noqa: A001 - it replaces Model.compile
        try:
            bound = inspect.signature(original_compile).bind(model, *args, **kwargs)
            _record_eager_switch(bound.arguments.get("run_eagerly"))
        except TypeError:
            pass
        return original_compile(model, *args, **kwargs)

    keras.Model.compile = compile


def uninstall() -> None:
    """Detaches the hooks from their capture: they pass every call straight through (the class
    patches stay, inert). For tests and for a process that runs several captures."""
    global _state
    if _state is not None and _state.loop is not None:
        _state.loop.disarm()
    _state = None


def collect_traces(capture: Any, model: Any = None) -> None:
    """Fills ``capture.facts.probes.traces`` with every ``tf.function`` called during the script
    and its diagnosis window (counting stopped when the window's step times were recorded), and
    stops counting for good.

    Also reads ``tf.config.functions_run_eagerly()`` again into the environment. Creates
    ``ProbeFacts`` when there are none; never replaces existing ones.

    Args:
        capture: the ``Capture``.
        model: the user's model (its Keras train function is found through it when the hooks
            were not installed, as under the Python API).
    """
    from rnndoctor.capture import env

    if capture.facts.environment is not None:
        env.refresh_execution_mode(capture.facts.environment)
    if capture.facts.probes is None:
        capture.facts.probes = ProbeFacts()
    state = _state if (_state is not None and _state.capture is capture) else None
    rows: list[TraceCount] = []
    if state is None:
        rows = _uninstrumented_train_function(model)
    else:
        state.frozen = True
        loop = state.loop
        fit_location = capture.facts.fit.location if capture.facts.fit else None
        for key, stats in state.functions.items():
            if stats.calls == 0:
                continue
            location = _function_location(stats.python_function)
            role, name = "other", None
            if _is_keras_train_function(stats.python_function):  # fit, or train_on_batch
                role, location, name = "train_function", fit_location, "train_function"
            elif loop is not None and key in loop.step_keys:
                role = "custom_step"
            rows.append(stats.facts(role, location, name))
        rows.sort(key=lambda r: (_ROLE_ORDER.get(r.role, 3), -r.traces, r.name))
        rows = rows[:_MAX_TRACE_ROWS]
    capture.facts.probes.traces = rows
    capture.save()


def _uninstrumented_train_function(model: Any) -> list[TraceCount]:
    """TensorFlow's tracing count of ``model``'s train function, without the call hook."""
    train = getattr(model, "train_function", None) if model is not None else None
    found: list[Any] = []
    seen: set[int] = set()

    def walk(fn: Any, depth: int) -> None:
        if fn is None or depth > 4 or id(fn) in seen:
            return
        seen.add(id(fn))
        if hasattr(fn, "experimental_get_tracing_count"):
            found.append(fn)
            return
        for cell in getattr(fn, "__closure__", None) or ():
            try:
                walk(cell.cell_contents, depth + 1)
            except ValueError:
                continue

    walk(train, 0)
    outer = [f for f in found if _is_keras_train_function(getattr(f, "python_function", None))]
    return [
        TraceCount(
            name="train_function",
            traces=int(fn.experimental_get_tracing_count()),
            role="train_function",
            reduce_retracing=getattr(fn, "_reduce_retracing", None),
            has_input_signature=getattr(fn, "input_signature", None) is not None,
            not_counted=(
                "rnndoctor's tf.function hook was not installed (Python API): TensorFlow's "
                "tracing count only, no calls or times"
            ),
        )
        for fn in outer[:1]
    ]


def finish_pending(capture: Any) -> bool:
    """Finishes a custom loop that the script left before its window was complete (it ran fewer
    steps than asked for, or ended inside the profiled steps). Never raises.

    Returns:
        True when a loop was finished here.
    """
    state = _state
    if state is None or state.capture is not capture or state.loop is None:
        return False
    loop = state.loop
    if loop.finished or capture.fit_called or capture.window_finished:
        return False
    try:
        loop.finish(
            stop_script=False,
            note=(
                f"the script ended after {loop.steps_done} custom-loop steps: "
                f"{len(loop.step_ms)} of {loop.options.measured_steps} requested steps were "
                "measured (warm-up excluded)"
            ),
        )
    except Exception as exc:  # report what was gathered; never crash the capture
        capture.facts.run.notes.append(
            f"finishing the custom loop failed: {type(exc).__name__}: {exc}"[:300]
        )
        capture.save()
        return False
    return True
