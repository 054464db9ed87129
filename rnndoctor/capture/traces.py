"""``tf.function`` tracing counts: per Python function, its calls, the calls that traced, their
wall times and the argument shapes of the calls that traced.

:mod:`rnndoctor.capture.loop`'s ``tf.function`` call hook records each call into a
:class:`FunctionStats` (in ``CaptureSession.loop_state.functions``, keyed by TensorFlow's
``_key_for_call_stats``, the grouping its retracing warning uses); :func:`collect_traces` turns
them into ``ProbeFacts.traces`` after the window. :class:`Argument` describes the values one
argument of a step function took (shapes, dtypes, Python values), for the facts and for a
suggested ``input_signature``.
"""

from __future__ import annotations

import inspect
import statistics
import weakref
from typing import TYPE_CHECKING, Any

from rnndoctor.capture import sites
from rnndoctor.facts import ProbeFacts, SourceLocation, StepArgument, TraceCount

if TYPE_CHECKING:
    from rnndoctor.capture.session import CaptureSession

_MAX_SHAPES = 8  # distinct call signatures kept per function (facts stay small)
_MAX_VALUES = 32  # distinct Python argument values counted per argument
_MAX_TIMES = 10_000  # call times kept per function
_MAX_TRACE_ROWS = 20  # tf.functions listed in the facts (training ones first)
_ROLE_ORDER = {"train_function": 0, "custom_step": 1, "other": 2}
_AUTOGRAPH_FILE = "__autograph_generated_file"  # autograph's converted code (a temp file)


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


class Argument:
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


def bind_arguments(python_function: Any, args: tuple, kwargs: dict) -> list[tuple[str, Any]]:
    """The call's arguments by parameter name (``arg0``... when the signature cannot bind)."""
    try:
        bound = inspect.signature(python_function).bind(*args, **kwargs)
        return list(bound.arguments.items())
    except (TypeError, ValueError):
        return [(f"arg{i}", a) for i, a in enumerate(args)] + list(kwargs.items())


def is_user_code_file(filename: str) -> bool:
    """The user's own file, not autograph's converted copy of it."""
    return sites.is_user_file(filename) and _AUTOGRAPH_FILE not in filename


def function_location(python_function: Any) -> SourceLocation | None:
    """The user's ``def`` line of a function (its first decorator's line), if it is user code."""
    target = inspect.unwrap(getattr(python_function, "__func__", python_function))
    target = getattr(target, "__func__", target)
    code = getattr(target, "__code__", None)
    if code is None or not is_user_code_file(code.co_filename):
        return None
    return sites.source_location(code.co_filename, code.co_firstlineno)


# -- tf.function statistics ------------------------------------------------------------------
class FunctionStats:
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
        self.arguments: dict[str, Argument] = {}
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
        for name, value in bind_arguments(self.python_function, args, kwargs):
            argument = self.arguments.setdefault(name, Argument(name))
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


def is_keras_train_function(python_function: Any) -> bool:
    """Keras' ``fit`` step: the ``tf.function`` that ``TensorFlowTrainer._make_function`` builds
    (``keras/src/backend/tensorflow/trainer.py``) around ``train_step``."""
    module = getattr(python_function, "__module__", "") or ""
    qualname = getattr(python_function, "__qualname__", "") or ""
    return (
        module.startswith("keras.")
        and "_make_function.<locals>" in qualname
        and "train_step" in _closure_names(python_function)
    )


def collect_traces(session: CaptureSession, model: Any = None) -> None:
    """Fills ``session.facts.probes.traces`` with every ``tf.function`` called during the script
    and its diagnosis window (counting stopped when the window's step times were recorded), and
    stops counting for good.

    Also reads ``tf.config.functions_run_eagerly()`` again into the environment. Creates
    ``ProbeFacts`` when there are none; never replaces existing ones.

    Args:
        session: the check's session.
        model: the user's model (its Keras train function is found through it when the hooks
            were not installed, as under the Python API).
    """
    from rnndoctor.capture import env

    if session.facts.environment is not None:
        env.refresh_execution_mode(session.facts.environment)
    if session.facts.probes is None:
        session.facts.probes = ProbeFacts()
    state = session.loop_state if session.loop_state.hooked else None
    rows: list[TraceCount] = []
    if state is None:
        rows = _uninstrumented_train_function(model)
    else:
        state.frozen = True
        loop = state.loop
        fit_location = session.facts.fit.location if session.facts.fit else None
        for key, stats in state.functions.items():
            if stats.calls == 0:
                continue
            location = function_location(stats.python_function)
            role, name = "other", None
            if is_keras_train_function(stats.python_function):  # fit, or train_on_batch
                role, location, name = "train_function", fit_location, "train_function"
            elif loop is not None and key in loop.step_keys:
                role = "custom_step"
            rows.append(stats.facts(role, location, name))
        rows.sort(key=lambda r: (_ROLE_ORDER.get(r.role, 3), -r.traces, r.name))
        rows = rows[:_MAX_TRACE_ROWS]
    session.facts.probes.traces = rows
    session.save()


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
    outer = [f for f in found if is_keras_train_function(getattr(f, "python_function", None))]
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
