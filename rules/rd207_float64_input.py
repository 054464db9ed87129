"""RD207 float64-input: float64 inputs reach a float32 model, cast again on every step.

What it detects:
    A model input that the data delivers as ``float64`` (the dataset's ``element_spec``, or the
    arrays passed to ``fit``), while the model computes in ``float32`` (or a mixed ``float16`` /
    ``bfloat16`` policy). numpy and pandas make ``float64`` by default, so windows built from
    ``df.values`` or ``np.random.normal`` arrive in it unless cast.

Why it slows training:
    Every batch is produced, copied, cached and transferred at 8 bytes per value, then Keras
    casts it to the layer's compute dtype at the start of every step (``Layer.__call__`` casts
    floating inputs to ``compute_dtype``: keras/src/layers/layer.py, ``_maybe_convert_inputs``
    via ``backend.cast``). Casting once, where the data is built, halves the pipeline's bytes
    (and a ``cache()``'s memory) and removes the per-step cast.

Evidence:
    ``data.input_dtypes`` / ``data.input_shapes`` (the capture's reading of the data);
    the RNN layers' ``dtype_policy``; the batch size; the bytes per batch of the float64 inputs.

Example:
    ``series = df.values`` (float64) then
    ``ds = keras.utils.timeseries_dataset_from_array(series, targets, sequence_length=120)``

Use instead:
    ``ds = ds.map(lambda x, y: (tf.cast(x, tf.float32), y))`` after the statement that builds
    the dataset (its last line, ``SourceLocation.end_line``; with ``import tensorflow as tf``
    where the file imports no tensorflow), or ``x = x.astype("float32")`` where the array is
    assigned.

Fix safety:
    safe for the model's input: the model casts it to float32 anyway, so casting once earlier
    gives the model the same values (the same rounding, done once); a ``map`` after a tf.data
    dataset's line is safe. Unsafe where the cast goes on the assignment of an array, the
    ``x`` that ``fit`` receives (``fit.x_location``) or the array a tf.data source is built from
    (``x_train = df[cols].values``, ``DataFacts.array_location``): every later use of that
    array gets float32 too (``y = x.mean(axis=1)`` on the next line computes the targets in
    float32: a new user's trial).

References:
    keras/src/layers/layer.py (``Layer.__call__``: inputs cast to ``compute_dtype``);
    keras/src/dtype_policies/dtype_policy.py (``DTypePolicy.compute_dtype``); TensorFlow guide
    "Better performance with the tf.data API" (https://www.tensorflow.org/guide/data_performance).
"""

from __future__ import annotations

import ast
import math
import re

from rnndoctor import rewrite as rw
from rnndoctor.facts import Facts, SourceLocation
from rnndoctor.findings import Evidence, Finding, Fix, FixSafety, Severity
from rnndoctor.rules import _measured as m
from rnndoctor.rules import finding, rule


def _model_dtype(facts: Facts) -> str:
    """The model's compute dtype, from its RNN layers' policy (Keras' default: float32)."""
    for layer in facts.model.rnn_layers if facts.model else []:
        policy = layer.dtype_policy or ""
        for dtype in ("float64", "bfloat16", "float16", "float32"):
            if dtype in policy:
                return "float16" if policy.startswith("mixed_float16") else dtype
    return "float32"


def _batch_bytes(shape: list[int | None], batch: int | None) -> int | None:
    """Bytes of one float64 batch of an input of ``shape`` (first dimension: the batch)."""
    if not shape or any(d is None for d in shape[1:]):
        return None
    rows = shape[0] if shape[0] is not None else batch
    return rows * math.prod(shape[1:]) * 8 if rows else None


def _size(nbytes: int) -> str:
    return f"{nbytes / 2**20:.2f} MiB" if nbytes >= 2**20 else f"{nbytes / 2**10:.1f} KiB"


def _assigned(code: str | None) -> str | None:
    match = re.match(r"\s*([A-Za-z_]\w*)\s*=(?!=)", code or "")
    return match.group(1) if match else None


def _fix(facts: Facts, dtype: str) -> tuple[Fix, SourceLocation | None]:
    """The cast to add: ``.astype`` on the assignment of the array a tf.data source was built
    from, else a ``map`` after the dataset's line (tf.data); ``.astype`` on the array's
    assignment (numpy); else a sketch."""
    data = facts.data
    title = f"Cast the input to {dtype} once, where the data is built"
    at_array = _cast_at_array(data.array_location, dtype) if len(data.input_dtypes) == 1 else None
    if data.kind == "tf.data" and at_array is not None:
        return at_array, data.array_location
    if data.kind == "tf.data":
        loc = data.location
        name = _assigned(loc.code if loc else None) or "ds"
        cast = f"tf.cast(x, tf.{dtype})"
        if len(data.input_dtypes) > 1:  # several inputs: cast the float64 ones only
            cast = (
                f"tf.nest.map_structure(lambda t: tf.cast(t, tf.{dtype}) "
                "if t.dtype == tf.float64 else t, x)"
            )
        tf = m.tensorflow_name(facts, loc.file if loc else None)
        if tf is not None and tf != "tf":
            cast = cast.replace("tf.", f"{tf}.")
        code = f"{name} = {name}.map(lambda x, y: ({cast}, y))"
        if tf is None:  # the file binds no name to tensorflow: the pasted line imports it
            code = f"import tensorflow as tf\n{code}"
        where = f": add after line {loc.end_line or loc.line}" if loc else ""
        return Fix(title=title + where, code=code, safety=FixSafety.SAFE), loc
    site = facts.fit.x_location if facts.fit and data.kind == "numpy" else None
    statement = site.call_source if site else None
    name = rw.assigned_name(statement)
    value = _value_source(statement)
    if name and value is not None:
        code = f'{name} = {_wrapped(value)}.astype("{dtype}")'
        title = f"{title} (unsafe: every later use of {name} gets {dtype} too)"
        return Fix(title=title, code=code, safety=FixSafety.UNSAFE, before=statement), site
    return (
        Fix(title=title, code=f'x = x.astype("{dtype}")', safety=FixSafety.DISPLAY_ONLY),
        site,
    )


def _cast_at_array(site: SourceLocation | None, dtype: str) -> Fix | None:
    """The cast on the assignment of the array a tf.data source was built from
    (``DataFacts.array_location``: ``x_train = df[cols].values``), or None when that is not
    one name assigned. Unsafe: every later use of the name gets ``dtype`` too."""
    statement = site.call_source if site else None
    name = rw.assigned_name(statement)
    value = _value_source(statement)
    if site is None or name is None or value is None:
        return None
    return Fix(
        title=(
            f"Cast the input to {dtype} once, where the array {name} is built, before the "
            f"dataset (unsafe: every later use of {name} gets {dtype} too)"
        ),
        code=f'{name} = {_wrapped(value)}.astype("{dtype}")',
        safety=FixSafety.UNSAFE,
        before=statement,
    )


def _value_source(statement: str | None) -> str | None:
    """The source of a one-name assignment's value, as written."""
    if rw.assigned_name(statement) is None:
        return None
    text = statement.strip()
    node = ast.parse(text).body[0]
    return ast.get_source_segment(text, node.value) if node.value is not None else None


def _wrapped(value: str) -> str:
    """``value`` ready for ``.astype``: parenthesised unless it is a call, name or subscript."""
    node = ast.parse(value, mode="eval").body
    simple = isinstance(node, (ast.Call, ast.Name, ast.Attribute, ast.Subscript))
    return value if simple else f"({value})"


@rule(
    "RD207",
    "float64-input",
    "float64 inputs reach a float32 model: cast once where the data is built",
    needs=("data",),
    severity=Severity.INFO,
)
def check(facts: Facts) -> list[Finding]:
    data = facts.data
    dtype = _model_dtype(facts)
    wide = [i for i, d in enumerate(data.input_dtypes) if d == "float64"]
    if not wide or dtype == "float64":
        return []
    batch = m.batch_size(facts)
    sizes = [_batch_bytes(data.input_shapes[i], batch) for i in wide if i < len(data.input_shapes)]
    total = sum(s for s in sizes if s) or None
    fix, loc = _fix(facts, dtype)
    if total:
        size_text = f"{_size(total)} per batch of {batch}, half of it saved by the cast"
    elif data.batch_bytes:
        size_text = (
            f"a sampled batch holds {_size(data.batch_bytes)}, all components; the "
            "cast halves its float64 part"
        )
    else:
        size_text = "its bytes per batch were not known"
    evidence = [
        Evidence("input dtypes", ", ".join(data.input_dtypes), "", "data (element_spec / arrays)"),
        Evidence("model compute dtype", dtype, "", "RNN layers' dtype_policy"),
    ]
    if total:
        evidence.append(Evidence("float64 bytes per batch", total, "bytes", "shape x batch x 8"))
    elif data.batch_bytes:
        evidence.append(Evidence("sampled batch size", data.batch_bytes, "bytes", "all components"))
    return [
        finding(
            message=(
                f"{len(wide)} of {len(data.input_dtypes)} model input(s) arrive as float64 "
                f"({data.kind}), and the model computes in {dtype}: every batch carries twice "
                f"the bytes it needs and is cast on every step ({size_text})."
            ),
            location=m.to_location(loc) or m.fit_location(facts),
            evidence=tuple(evidence),
            fix=fix,
            gain=(
                "not measured: the cast halves the float64 inputs' bytes through the pipeline, "
                "its cache and the host-to-device copy, and removes a cast per step"
            ),
        )
    ]
