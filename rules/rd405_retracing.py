"""RD405 retracing: a training ``tf.function`` is traced again and again.

What it detects:
    Keras' train function (``fit``) or a custom loop's ``tf.function`` step whose calls in the
    diagnosis window triggered tracing at least ``min_tracing_calls`` times (5: TensorFlow's
    own threshold for its "triggered tf.function retracing" warning).

Why it slows training:
    ``tf.function`` builds a new graph for each new input signature: a new shape (a sequence
    length that changes from batch to batch), a new Python value passed as an argument, or a new
    ``tf.function`` object created inside the loop. Each tracing runs the step's Python code
    symbolically and optimises the graph, typically hundreds of milliseconds to seconds for an
    RNN, against a few milliseconds for the step itself, and it repeats for every new shape.

Evidence:
    ``probes.traces[]``: ``traces`` (TensorFlow's ``experimental_get_tracing_count``, summed
    over ``instances``), ``traced_calls`` / ``calls``, the distinct ``shapes`` of the calls that
    traced, ``tracing_ms`` (the calls that traced minus a call that did not, summed),
    ``total_call_ms``, ``reduce_retracing``, ``has_input_signature`` and the per-argument
    ``arguments`` (the ``TensorSpec`` that accepts every shape seen).

Example:
    ``@tf.function`` on ``train_step(x, y)`` fed batches padded to each batch's own maximum
    length: shapes ``(32, 17, 8)``, ``(32, 23, 8)``, ... trace one graph each.

Use instead:
    ``@tf.function(input_signature=[tf.TensorSpec([None, None, 8], tf.float32), ...])`` (one
    graph for every length), or ``@tf.function(reduce_retracing=True)`` (TensorFlow generalises
    the shape after a few tracings), or pad batches to a few bucket lengths
    (``tf.data.Dataset.bucket_by_sequence_length(..., pad_to_bucket_boundary=True)``) so that
    only a few shapes exist. Python values: pass ``tf.constant(value)``. A ``tf.function``
    created in the loop: create it once, before the loop.

Fix safety:
    safe for ``input_signature`` / ``reduce_retracing`` (the same computation; the graph is
    shape-generic); display-only for the bucketing sketch.

Options:
    ``min_tracing_calls`` = 5 (calls): the calls that triggered tracing from which the rule
    reports. Source: tensorflow/python/eager/polymorphic_function/polymorphic_function.py,
    FREQUENT_TRACING_WARNING_THRESHOLD = 5 (TF 2.21).

    ``error_tracing_share`` = 0.5 (fraction of the call time): the share of the function's
    measured call time spent tracing from which the finding is an error. Source: rnndoctor's
    severity scale (rnndoctor/findings.py: Severity): the steps then run at least 2x slower than
    they need to.

References:
    keras/src/backend/tensorflow/trainer.py: TensorFlowTrainer._make_function (Keras' own train
    function is a ``tf.function(..., reduce_retracing=True)``);
    tensorflow/python/eager/polymorphic_function/polymorphic_function.py:
    FREQUENT_TRACING_WARNING_THRESHOLD (5) and _FrequentTracingDetector;
    https://www.tensorflow.org/guide/function#controlling_retracing.
"""

from __future__ import annotations

from rnndoctor.facts import Facts, TraceCount
from rnndoctor.findings import Evidence, Finding, Fix, FixSafety, Severity
from rnndoctor.rules import Option, OptionValues, finding, rule
from rnndoctor.rules import _host_hw as hh

# TensorFlow warns when this many calls of a tf.function triggered tracing (among its last
# calls).
_MIN_TRACING_CALLS = Option(
    name="min_tracing_calls",
    default=5,
    unit="calls",
    source="tensorflow/python/eager/polymorphic_function/polymorphic_function.py: "
    "FREQUENT_TRACING_WARNING_THRESHOLD = 5 (TF 2.21)",
    help="the calls that triggered tracing from which the rule reports",
)
_TRAINING_ROLES = ("train_function", "custom_step")
# Tracing that takes at least half of the function's measured call time: the steps run at least
# 2x slower than they need to.
_ERROR_TRACING_SHARE = Option(
    name="error_tracing_share",
    default=0.5,
    unit="fraction of the call time",
    source="rnndoctor's severity scale (rnndoctor/findings.py: Severity): the steps then run at "
    "least 2x slower than they need to",
    help="the share of the call time spent tracing from which the finding is an error",
)


def _gain(t: TraceCount) -> tuple[str, float | None]:
    """The gain text and the measured tracing share of the calls' time (None: no baseline)."""
    if t.tracing_ms is None or not t.total_call_ms:
        why = (
            "no call ran without tracing, so there is no baseline"
            if t.not_counted is None
            else t.not_counted
        )
        return f"not measured: {why}", None
    share = t.tracing_ms / t.total_call_ms
    rest = t.total_call_ms - t.tracing_ms
    baseline = (
        f" (a call without tracing: {t.median_call_ms:.2f} ms, measured on "
        f"{t.baseline_calls} extra calls with the last batch)"
        if t.baseline_calls and t.median_call_ms is not None
        else (
            f" (a call without tracing: {t.median_call_ms:.2f} ms)"
            if t.median_call_ms is not None
            else ""
        )
    )
    text = (
        f"measured: tracing took {t.tracing_ms:.0f} ms of the {t.total_call_ms:.0f} ms that "
        f"the {t.calls} calls of {t.name} took in this run ({share:.0%}){baseline}"
    )
    if rest <= 0:
        return text, share
    text += (
        f"; traced once, those calls would take about {rest:.0f} ms "
        f"({t.total_call_ms / rest:.1f}x less over these calls). Not carried into the job "
        "forecast: a long job retraces once per new shape, so its share depends on how many "
        "distinct shapes the whole dataset holds, which this run did not see"
    )
    return text, share


def _fix(t: TraceCount) -> Fix:
    python_args = [a for a in t.arguments if a.kind == "python" and a.values_seen > 1]
    tensor_args = [a for a in t.arguments if a.kind == "tensor"]
    varying = [a for a in tensor_args if len(a.shapes) > 1]
    if t.role == "train_function":
        return Fix(
            title="Give fit batches of a few fixed shapes: pad each batch to a bucket boundary",
            code=(
                "dataset = dataset.bucket_by_sequence_length(\n"
                "    element_length_func=lambda x, y: tf.shape(x)[0],\n"
                "    bucket_boundaries=[32, 64, 128],\n"
                "    bucket_batch_sizes=[BATCH] * 4,\n"
                "    pad_to_bucket_boundary=True,\n"
                ")"
            ),
            safety=FixSafety.DISPLAY_ONLY,
        )
    if python_args:
        names = ", ".join(a.name for a in python_args)
        return Fix(
            title=f"Pass tensors, not Python values, for {names}: each new Python value traces "
            "a new graph",
            code=f"{t.name}(..., "
            + ", ".join(f"{a.name}=tf.constant({a.name})" for a in python_args)
            + ")",
            safety=FixSafety.SAFE,
        )
    if t.instances > 1 and t.traced_calls <= t.instances:
        return Fix(
            title="Create the tf.function once, before the loop (each new tf.function object "
            "traces again)",
            code=f"{t.name} = tf.function({t.name})  # once, outside the training loop",
            safety=FixSafety.DISPLAY_ONLY,
        )
    if tensor_args and all(a.spec for a in tensor_args) and len(tensor_args) == len(t.arguments):
        specs = "".join(f"    {a.spec},  # {a.name}\n" for a in tensor_args)
        changed = ", ".join(a.name for a in varying) or "the inputs"
        line = t.location.code if t.location and t.location.code else None
        if line is None or not line.startswith(("def ", "@")):
            line = f"def {t.name.split('.')[-1]}(...):"
        decorator = f"@tf.function(input_signature=[\n{specs}])"
        return Fix(
            title=f"One graph for every shape of {changed}: an input_signature with None for "
            "the dimensions that varied (or @tf.function(reduce_retracing=True))",
            code=decorator if line.startswith("@") else f"{decorator}\n{line}",
            safety=FixSafety.SAFE,
            before=line,
        )
    return Fix(
        title="Let TensorFlow generalise the shapes after a few tracings",
        code="@tf.function(reduce_retracing=True)",
        safety=FixSafety.SAFE,
        before=t.location.code if t.location else None,
    )


@rule(
    "RD405",
    "retracing",
    "a training tf.function is traced more than a few times (varying shapes)",
    needs=("probes",),
    severity=Severity.WARNING,
    options=(_MIN_TRACING_CALLS, _ERROR_TRACING_SHARE),
)
def check(facts: Facts, options: OptionValues) -> list[Finding]:
    findings = []
    for t in facts.probes.traces:
        if t.role not in _TRAINING_ROLES:
            continue
        tracing_calls = t.traced_calls if t.not_counted is None and t.calls else t.traces
        if tracing_calls < options.min_tracing_calls:
            continue
        gain, share = _gain(t)
        evidence = [
            Evidence("tracing count", t.traces, "traces",
                     "probes.traces[].traces (Function.experimental_get_tracing_count)"),
            Evidence("calls that traced", f"{t.traced_calls} of {t.calls}", "calls",
                     "probes.traces[].traced_calls / calls"),
            Evidence("TensorFlow's retracing warning threshold", options.min_tracing_calls, "calls",
                     "polymorphic_function.py: FREQUENT_TRACING_WARNING_THRESHOLD"),
        ]  # fmt: skip
        if t.shapes:
            evidence.append(Evidence("shapes of the calls that traced", "; ".join(t.shapes), "",
                                     "probes.traces[].shapes"))  # fmt: skip
        if t.instances > 1:
            evidence.append(Evidence("tf.function objects", t.instances, "",
                                     "probes.traces[].instances"))  # fmt: skip
        if t.tracing_ms is not None:
            evidence.append(Evidence("time spent tracing", t.tracing_ms, "ms",
                                     "probes.traces[].tracing_ms"))  # fmt: skip
        if t.median_call_ms is not None:
            evidence.append(Evidence("call without tracing", t.median_call_ms, "ms",
                                     "probes.traces[].median_call_ms"))  # fmt: skip
        evidence.append(Evidence("reduce_retracing / input_signature",
                                 f"{t.reduce_retracing} / {t.has_input_signature}", "",
                                 "probes.traces[]"))  # fmt: skip
        severity = (
            Severity.ERROR
            if share is not None and share >= options.error_tracing_share
            else Severity.WARNING
        )
        loop = facts.loop
        location = hh.first_location(
            t.location,
            loop.step_location if loop and t.role == "custom_step" else None,
            facts.fit.location if facts.fit and t.role == "train_function" else None,
        )
        findings.append(
            finding(
                severity=severity,
                message=(
                    f"The training tf.function {t.name} traced on {t.traced_calls} of its "
                    f"{t.calls} calls ({t.traces} traces): each new input shape or Python value "
                    "builds a new graph."
                ),
                location=location,
                evidence=tuple(evidence),
                fix=_fix(t),
                gain=gain,
            )
        )
    return findings
