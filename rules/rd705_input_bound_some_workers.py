"""RD705 input-bound-some-workers: the input-bound share differs across workers.

What it detects:
    The input-bound share of at least one worker (its tf.data op time over all its traced op
    time, ``input_bound_share``) reaches 20% (``min_input_share``) while another worker's is at
    least 10 points (``min_spread``) lower: some workers are input-bound, others are not.
    ``info``: one trace gives one figure per worker and no interval (RD701 carries the warning
    when the difference makes a straggler).

Why it slows training:
    The workers that wait for their input hold back the synchronous step of all of them (see
    RD701); a fix on those workers' pipeline (or their data) speeds up the whole job, a fix
    everywhere else does nothing.

Evidence:
    ``strategy.per_worker``: ``input_bound_share``, ``input_ms``, ``compute_ms``,
    ``collective_ms`` per worker, from the chief's trace of all workers.

Bounds:
    The denominator is not xprof's. xprof's "highly input-bound" cut-off,
    ``kHighlyInfeedBoundThresholdInPercent = 20`` (openxla/xprof
    ``xprof/convert/op_stats_to_input_pipeline_analysis.cc``), is over the step time: the time
    a step waits for its input (``host_wait_input_ms + host_to_device_ms``) over
    ``step_time_ms``. This rule applies the same 20% to the worker's tf.data op self time over
    all its traced op self time (summed over its threads): the work its input pipeline does,
    not the time its steps wait for it. A pipeline that prefetches on its own threads can have
    a large share with no wait, and the share is not xprof's percent of the step. It is kept
    because the chief's one trace gives each worker's op time by host, but no per-worker step
    breakdown on CPU; the rule is ``info`` for that reason too, and it compares the workers'
    shares with each other (``min_spread``), which the common denominator keeps comparable.

Example:
    One worker's shard holds larger files, or its host has fewer cores for ``map``.

Use instead:
    Parallelise and prefetch that worker's pipeline (``num_parallel_calls=tf.data.AUTOTUNE``,
    ``prefetch(tf.data.AUTOTUNE)``), or balance the shards across workers.

Fix safety:
    display-only: the cause is in those workers' data or hosts.

Options:
    ``min_input_share`` = 0.2 (fraction of the worker's op time): the share from which a worker
    counts as input-bound. Source: openxla/xprof
    ``xprof/convert/op_stats_to_input_pipeline_analysis.cc``,
    ``kHighlyInfeedBoundThresholdInPercent = 20`` (a percent of the step time there; of the op
    time here, see Bounds).

    ``min_spread`` = 0.1 (fraction): how much lower another worker's share must be. Source:
    rnndoctor's choice.

References:
    TensorFlow guide "Better performance with the tf.data API"; "Distributed input".
"""

from __future__ import annotations

from rnndoctor.facts import Facts
from rnndoctor.findings import Evidence, Finding, Fix, FixSafety, Severity
from rnndoctor.rules import Option, OptionValues, finding, rule
from rnndoctor.rules import _distributed as dist
from rnndoctor.rules import _fastpath as fp

_MIN_SHARE = Option(
    name="min_input_share",
    default=0.2,
    unit="fraction of the worker's op time",
    source=(
        "openxla/xprof xprof/convert/op_stats_to_input_pipeline_analysis.cc, "
        "kHighlyInfeedBoundThresholdInPercent = 20 (% of step time there; of op time here)"
    ),
    help="the input-bound share from which a worker counts as input-bound",
)
_MIN_SPREAD = Option(
    name="min_spread",
    default=0.1,
    unit="fraction",
    source="rnndoctor's choice",
    help="how much lower another worker's input-bound share must be",
)


@rule(
    "RD705",
    "input-bound-some-workers",
    "some workers input-bound (>= 20% of their op time), others not (>= 10 points lower)",
    needs=(),
    severity=Severity.INFO,
    options=(_MIN_SHARE, _MIN_SPREAD),
)
def check(facts: Facts, options: OptionValues) -> list[Finding]:
    if dist.trained_without_strategy(facts):
        return []
    rows = [w for w in dist.traced_workers(facts) if w.input_bound_share is not None]
    bound = [w for w in rows if w.input_bound_share >= options.min_input_share]
    low = min((w.input_bound_share for w in rows), default=None)
    if not bound or low is None:
        return []
    bound = [w for w in bound if w.input_bound_share - low >= options.min_spread]
    if not bound:
        return []
    names = ", ".join(f"{dist.worker_name(w)} {w.input_bound_share:.0%}" for w in bound)
    return [
        finding(
            message=(
                f"Input-bound on some workers only: {names}, against {low:.0%} on the least "
                "input-bound worker."
            ),
            location=fp.to_location(facts.strategy.dataset_location),
            evidence=tuple(
                Evidence(
                    f"{dist.worker_name(w)} input-bound share",
                    w.input_bound_share,
                    "",
                    f"input {w.input_ms} ms of the traced op time",
                )
                for w in rows
            ),  # fmt: skip
            fix=Fix(
                title="Speed up the input of those workers (parallel map, prefetch), or "
                "balance their shards",
                code="ds = ds.map(fn, num_parallel_calls=tf.data.AUTOTUNE)"
                ".prefetch(tf.data.AUTOTUNE)",
                safety=FixSafety.DISPLAY_ONLY,
            ),
            gain="not measured: see RD701 for what the others wait",
        )
    ]
