"""RD203 sequential-map: a ``map`` runs one element at a time while the step waits for input.

What it detects:
    A ``tf.data`` ``map`` that runs sequentially at run time, when the measured input share of
    the step is significant (5% or more). A ``map`` without ``num_parallel_calls`` is not
    always sequential: tf.data's ``map_parallelization`` rewrite (on by default with autotune)
    parallelises it when its function is stateless. It stays sequential when the function holds
    a stateful op (``py_function``, ``numpy_function``, ``tf.random.uniform``, ...), when the map
    was built with ``synchronous=True``, or when the rewrite is off; only those are reported.

Why it slows training:
    A sequential map runs its function on one element at a time on one thread, while the other
    cores idle and the train step waits for the batch.

Evidence:
    ``data.nodes[]`` of kind ``map``: ``num_parallel_calls``, ``attrs.stateful_ops``,
    ``attrs.force_synchronous``, ``attrs.auto_parallel``; ``data.map_parallelization``;
    ``probes.input_bound_share`` (or the input-only cross-check).

Example:
    ``ds.map(lambda x, y: (augment(x), y))`` where ``augment`` calls ``tf.random.uniform``

Use instead:
    ``ds.map(lambda x, y: (augment(x), y), num_parallel_calls=tf.data.AUTOTUNE)`` (``-1``,
    ``AUTOTUNE``'s value, where the file imports no tensorflow: as RD202's fix).

Fix safety:
    safe for stateless functions (``deterministic`` keeps the order); unsafe when the function is
    stateful (random ops draw in a different order; Python code must be thread-safe).

Options:
    ``min_input_share`` = 0.05 (fraction of the step): the measured input share of the step
    from which the rule reports. Source: openxla/xprof
    xprof/convert/op_stats_to_input_pipeline_analysis.cc, kModeratelyInfeedBoundThresholdInPercent
    = 5.

    ``warning_input_share`` = 0.2 (fraction of the step): from this share the finding is a
    warning (below it: info). Source: the same file, kHighlyInfeedBoundThresholdInPercent = 20.

References:
    TensorFlow guide "Better performance with the tf.data API", Parallelizing data
    transformation (https://www.tensorflow.org/guide/data_performance); ``Dataset.map``
    documentation (``num_parallel_calls``, ``synchronous``);
    tensorflow/core/grappler/optimizers/data/map_parallelization.cc.
"""

from __future__ import annotations

from rnndoctor.facts import Facts
from rnndoctor.findings import Evidence, Finding, Fix, FixSafety, Severity
from rnndoctor.rules import OptionValues, finding, rule
from rnndoctor.rules import _measured as m


@rule(
    "RD203",
    "sequential-map",
    "map without num_parallel_calls that runs sequentially, when input time is significant",
    needs=("data", "probes"),
    severity=Severity.INFO,
    options=(m.MIN_INPUT_SHARE, m.WARNING_INPUT_SHARE),
)
def check(facts: Facts, options: OptionValues) -> list[Finding]:
    data = facts.data
    if data.kind != "tf.data":
        return []
    share, basis = m.input_share(facts)
    if share is None or share < options.min_input_share:
        return []
    findings = []
    for node in m.nodes_of(facts, "map"):
        if node.num_parallel_calls is not None or node.attrs.get("auto_parallel"):
            continue
        stateful = list(node.attrs.get("stateful_ops") or [])
        if stateful:
            why = f"its function holds stateful ops ({', '.join(stateful[:4])})"
        elif node.attrs.get("force_synchronous"):
            why = "it was built with synchronous=True"
        else:
            why = "tf.data's map_parallelization rewrite is off for this dataset"
        call = node.location.call_source if node.location else None
        if node.attrs.get("built_by", "map") != "map":
            call = None  # a map a library call built (a Keras util): not the user's .map(...)
        autotune = m.autotune(facts, node.location.file if node.location else None)
        code = m.with_keyword(call, "num_parallel_calls", autotune)
        python = node.python
        findings.append(
            finding(
                severity=Severity.WARNING
                if share >= options.warning_input_share
                else Severity.INFO,
                message=(
                    f"A map ({node.op}) runs one element at a time because {why}, while "
                    f"{m.pct(share)} of the step waits for input."
                ),
                location=m.to_location(node.location) or m.to_location(data.location),
                evidence=(
                    Evidence("map op", node.op, "", "tf.data graph"),
                    Evidence("num_parallel_calls", None, "", "not set"),
                    Evidence("stateful ops in its function", ", ".join(stateful) or "none", ""),
                    Evidence("input share of the step", round(share * 100, 1), "%", basis),
                ),
                fix=Fix(
                    title="Run the map in parallel"
                    + (m.AUTOTUNE_NOTE if code and autotune == m.AUTOTUNE_VALUE else ""),
                    code=code or "ds = ds.map(f, num_parallel_calls=tf.data.AUTOTUNE)",
                    safety=(FixSafety.UNSAFE if stateful else FixSafety.SAFE)
                    if code
                    else FixSafety.DISPLAY_ONLY,
                    before=call if code else None,
                ),
                gain=(
                    f"part of the input share {m.pct(share)}; at most about "
                    f"{1 / max(1 - share, 1e-3):.1f}x faster steps if the whole input wait goes"
                    + (
                        " (the function runs Python: parallel calls still share the GIL; see RD204)"
                        if python
                        else ""
                    )
                ),
            )
        )
    return findings
