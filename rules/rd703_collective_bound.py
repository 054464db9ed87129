"""RD703 collective-bound: the all-reduce takes a large share of the step.

What it detects:
    The collective ops (all-reduce and the others: ``CollectiveReduceV2``, ``NcclAllReduce``...)
    take 6% (``min_collective_share``) or more of all op self time in the chief's trace of all
    workers, summed over every worker's host (``strategy.collective_share``). The finding gives
    the gradient bytes one all-reduce moves per step.

Why it slows training:
    Every step ends with an all-reduce of every gradient. While it runs (and while a worker
    waits in it for the others) no worker computes. Its cost grows with the gradient bytes and
    with the number of workers, and shrinks with a larger per-replica batch (fewer steps, the
    same bytes each) and with an implementation that fits the network (NCCL on GPUs, RING
    across hosts).

Evidence:
    ``strategy.collective_share`` (from xprof's ``framework_op_stats`` of each host in the
    merged profile run, ``rnndoctor/capture/distribute.py``: ``traced_rows``);
    ``strategy.gradient_bytes``; ``strategy.communication``; ``strategy.per_replica_batch_size``.
    The collective time includes the time a worker waits there for the slowest one (see RD701).

Bounds:
    The denominator is not xprof's. xprof's ``kAllReduceBoundThresholdInPercent = 6`` is a
    percent of the step time ("the percentage of step time that spends on all-reduce", openxla/xprof
    ``xprof/convert/op_stats_to_input_pipeline_analysis.cc``); this rule applies the same 6% to
    the collectives' share of the traced op self time, summed over every host's threads. On
    CPU that sum exceeds the trace's wall time where ops run on several threads at once, and
    falls short of it where the threads are idle (Python, waiting for input), so the share is
    not xprof's percent of the step and can sit on either side of it. The op-time share is kept
    because it is a fraction by construction: the all-reduces of the gradient tensors run
    concurrently on CPU threads, so their summed self time over the step time is not a share of
    the step (it can exceed 1), and a CPU trace has no device step breakdown that would give
    xprof's figure.

Example:
    ``strategy = tf.distribute.MultiWorkerMirroredStrategy()`` with a small per-replica batch.

Use instead:
    A larger per-replica batch (fewer all-reduces per epoch), and an explicit implementation::

        tf.distribute.MultiWorkerMirroredStrategy(
            communication_options=tf.distribute.experimental.CommunicationOptions(
                implementation=tf.distribute.experimental.CommunicationImplementation.NCCL))

Fix safety:
    display-only: the batch changes the optimisation, and the implementation depends on the
    cluster's devices and network.

Options:
    ``min_collective_share`` = 0.06 (fraction of op time): the collective ops' share from
    which the rule reports. Source: openxla/xprof
    ``xprof/convert/op_stats_to_input_pipeline_analysis.cc``, ``kAllReduceBoundThresholdInPercent
    = 6`` (a percent of the step time there; over the op time here, see Bounds).

References:
    TensorFlow guide "Multi-worker training with Keras" (CommunicationOptions);
    ``tensorflow/python/distribute/collective_util.py`` (CommunicationImplementation).
"""

from __future__ import annotations

from rnndoctor.facts import Facts
from rnndoctor.findings import Evidence, Finding, Fix, FixSafety, Severity
from rnndoctor.rules import NotEvaluated, Option, OptionValues, finding, rule
from rnndoctor.rules import _distributed as dist

_MIN_SHARE = Option(
    name="min_collective_share",
    default=0.06,
    unit="fraction of op time",
    source=(
        "openxla/xprof xprof/convert/op_stats_to_input_pipeline_analysis.cc, "
        "kAllReduceBoundThresholdInPercent = 6 (% of step time there; of op time here)"
    ),
    help="the collective ops' share of the traced op time from which the rule reports",
)


@rule(
    "RD703",
    "collective-bound",
    "all-reduce and other collectives >= 6% of the traced op time (xprof's 6%, of step time)",
    needs=(),
    severity=Severity.WARNING,
    options=(_MIN_SHARE,),
)
def check(facts: Facts, options: OptionValues) -> list[Finding]:
    if dist.trained_without_strategy(facts):
        return []
    st = facts.strategy
    if st.collective_share is None:
        raise NotEvaluated(dist.NO_TRACE)
    if st.collective_share < options.min_collective_share:
        return []
    grad = st.gradient_bytes
    grad_text = f"{grad:,} gradient bytes per step" if grad else "gradient bytes not measured"
    return [
        finding(
            message=(
                f"The collectives take {st.collective_share:.0%} of the traced op time on "
                f"{st.workers} workers ({grad_text}, all-reduce {st.communication or 'AUTO'}); "
                "part of it is waiting for the slowest worker (RD701)."
            ),
            evidence=(
                Evidence("collective share", round(st.collective_share, 4), "", "xprof op stats"),
                Evidence("gradient bytes per step", grad, "bytes", "trainable variables"),
                Evidence("all-reduce implementation", st.communication or "—", "", "strategy"),
                Evidence("per-replica batch", st.per_replica_batch_size, "samples", "strategy"),
                *dist.worker_evidence([w for w in st.per_worker if w.collective_ms is not None]),
            ),
            fix=Fix(
                title="Fewer, cheaper all-reduces: a larger per-replica batch, and the "
                "implementation that fits the cluster",
                code=(
                    "strategy = tf.distribute.MultiWorkerMirroredStrategy(\n"
                    "    communication_options=tf.distribute.experimental.CommunicationOptions(\n"
                    "        implementation=tf.distribute.experimental."
                    "CommunicationImplementation.NCCL))  # GPUs; RING across CPU hosts"
                ),
                safety=FixSafety.DISPLAY_ONLY,
            ),
            gain="not measured: the collectives' share is the most the step can lose",
        )
    ]
