"""RD204 python-generator-source: the input runs Python code per element, under the GIL.

What it detects:
    Python code in the input path: ``Dataset.from_generator``, ``tf.py_function`` or
    ``tf.numpy_function`` in the tf.data graph (``PyFunc`` / ``EagerPyFunc`` ops in the
    pipeline's functions), or a Python generator passed to ``fit``, when the measured input
    share of the step is significant (5% or more).

Why it slows training:
    Python code holds the global interpreter lock: tf.data cannot run it on several cores, and
    it competes with the training loop's own Python thread. Per-element Python work (decoding,
    feature extraction, padding) becomes the step's bottleneck as soon as the model is fast.

Evidence:
    ``data.python_ops`` and ``data.source_kinds`` (tf.data) or ``data.kind ==
    "python_generator"``; ``probes.input_bound_share`` (or the input-only cross-check),
    ``probes.input_only_ms``. When a ``cache()`` follows the Python work, only epoch 1 pays it:
    the severity then follows the job-wide share (``rules/_measured.py: paid_epochs``).

Example:
    ``tf.data.Dataset.from_generator(read_examples, output_signature=...)`` where
    ``read_examples`` does the feature work in Python

Use instead:
    Arrays (or files) as the source and the per-element work in TensorFlow ops:
    ``tf.data.Dataset.from_tensor_slices(arrays).map(featurize,
    num_parallel_calls=tf.data.AUTOTUNE)``; or do the Python work once, offline, and save the
    result (``Dataset.save`` / TFRecord); or, if it must stay Python, a
    ``keras.utils.PyDataset`` with ``workers`` and ``use_multiprocessing=True`` (processes
    escape the GIL).

Fix safety:
    display-only: the rewrite depends on what the Python code does.

Options:
    ``min_input_share`` = 0.05 (fraction of the step): the measured input share of the step
    from which the rule reports. Source: openxla/xprof
    xprof/convert/op_stats_to_input_pipeline_analysis.cc, kModeratelyInfeedBoundThresholdInPercent
    = 5.

    ``warning_input_share`` = 0.2 (fraction of the step): from this share the finding is a
    warning (below it: info). Source: the same file, kHighlyInfeedBoundThresholdInPercent = 20.

References:
    ``tf.data.Dataset.from_generator`` documentation ("limited portability and scalability ...
    must run in the same process that created the generator, and is still subject to the
    Python GIL"); TensorFlow guide "Better performance with the tf.data API".
"""

from __future__ import annotations

from rnndoctor.facts import Facts
from rnndoctor.findings import Evidence, Finding, Fix, FixSafety, Severity
from rnndoctor.rules import OptionValues, finding, rule
from rnndoctor.rules import _measured as m


@rule(
    "RD204",
    "python-generator-source",
    "from_generator / py_function / numpy_function in the input (GIL-bound), when input time "
    "is significant",
    needs=("data", "probes"),
    severity=Severity.INFO,
    options=(m.MIN_INPUT_SHARE, m.WARNING_INPUT_SHARE),
)
def check(facts: Facts, options: OptionValues) -> list[Finding]:
    data = facts.data
    share, basis = m.input_share(facts)
    if share is None or share < options.min_input_share:
        return []
    places = []  # (what, location)
    if data.kind == "python_generator":
        places.append(("a Python generator passed to fit", data.location))
    elif data.kind == "tf.data":
        for node in data.nodes:
            if not node.python:
                continue
            what = (
                "Dataset.from_generator"
                if node.source_kind == "generator"
                else f"a {node.kind} calling Python (py_function / numpy_function)"
            )
            places.append((what, node.location or data.location))
    size = m.batch_size(facts) or 32
    probes = facts.probes
    paid = m.paid_epochs(facts)
    job_share = share * paid.fraction if paid else share
    only = (
        f" Epoch 1 only: a cache() after it serves {m.later_epochs(paid.epochs)}, about "
        f"{m.pct(job_share)} of the {paid.epochs}-epoch job."
        if paid
        else ""
    )
    findings = []
    for what, location in places:
        findings.append(
            finding(
                severity=Severity.WARNING
                if job_share >= options.warning_input_share
                else Severity.INFO,
                message=(
                    f"The input runs Python code per element ({what}), under the GIL, while "
                    f"{m.pct(share)} of the step waits for input.{only}"
                ),
                location=m.to_location(location) or m.fit_location(facts),
                evidence=(
                    Evidence("Python in the input path", what, "", "tf.data graph / fit input"),
                    Evidence("input share of the step", round(share * 100, 1), "%", basis),
                    Evidence(
                        "input-only time per batch",
                        probes.input_only_ms,
                        "ms",
                        probes.input_only_method or "",
                    ),
                ),
                fix=Fix(
                    title="Do the per-element work in TensorFlow ops, from arrays or files",
                    code=(
                        "ds = (tf.data.Dataset.from_tensor_slices((features, labels))\n"
                        "      .map(featurize, num_parallel_calls=tf.data.AUTOTUNE)  # tf ops\n"
                        f"      .batch({size})\n"
                        "      .prefetch(tf.data.AUTOTUNE))"
                    ),
                    safety=FixSafety.DISPLAY_ONLY,
                ),
                gain=(
                    f"part of the input share {m.pct(share)}; at most about "
                    f"{1 / max(1 - share, 1e-3):.1f}x faster steps if the whole input wait goes"
                ),
            )
        )
    return findings
