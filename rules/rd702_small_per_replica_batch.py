"""RD702 small-per-replica-batch: the global batch split across replicas is too small.

What it detects:
    Under a strategy with several replicas, the per-replica batch (the global batch divided by
    ``num_replicas_in_sync``) is below the batch-size probe's efficient point: the smallest
    probed batch whose samples/s reach 90% (``efficient_share``) of the best probed point. The
    batch-size probe times the step at the user's batch and at 2x and 4x it, under the same
    strategy, so its points are global batches; the efficient per-replica batch is the
    efficient point over the replicas.

Why it slows training:
    Each replica pays a fixed cost per step (dispatch, the RNN's per-timestep loop, its share
    of the all-reduce) that a small per-replica batch does not amortise. Splitting a batch
    tuned for one device over N replicas divides each replica's batch by N.

Evidence:
    ``strategy.global_batch_size``, ``strategy.per_replica_batch_size``, ``strategy.replicas``;
    ``probes.batch_probe`` (samples/s per probed batch; see RD301). Not evaluated where the
    probe did not run (``--workers``: the workers run no probe, whose steps would be
    collectives the others do not join).

Example:
    ``GLOBAL_BATCH = 32`` over 8 replicas: 4 samples per replica.

Use instead:
    ``GLOBAL_BATCH = PER_REPLICA_BATCH * strategy.num_replicas_in_sync``, with the learning
    rate scaled with it.

Fix safety:
    display-only: the global batch changes the optimisation (learning rate, steps per epoch).

Options:
    ``efficient_share`` = 0.9 (fraction of the best samples/s): a probed batch at or above it
    is efficient. Source: rnndoctor's choice.

References:
    TensorFlow guide "Distributed training with Keras" (scale the batch with the replicas);
    Goyal et al. (2017) (linear learning-rate scaling).
"""

from __future__ import annotations

from rnndoctor.facts import Facts
from rnndoctor.findings import Evidence, Finding, Fix, FixSafety, Severity
from rnndoctor.rules import NotEvaluated, Option, OptionValues, finding, rule
from rnndoctor.rules import _distributed as dist
from rnndoctor.rules import _fastpath as fp

_EFFICIENT_SHARE = Option(
    name="efficient_share",
    default=0.9,
    unit="fraction of the best samples/s",
    source="rnndoctor's choice",
    help="a probed batch reaching this share of the best throughput is efficient",
)


@rule(
    "RD702",
    "small-per-replica-batch",
    "the per-replica batch is below the batch-size probe's efficient point",
    needs=("probes",),
    severity=Severity.WARNING,
    options=(_EFFICIENT_SHARE,),
)
def check(facts: Facts, options: OptionValues) -> list[Finding]:
    if dist.trained_without_strategy(facts):
        return []
    st = facts.strategy
    if st.replicas <= 1 or not st.per_replica_batch_size or not st.global_batch_size:
        return []
    points = [p for p in facts.probes.batch_probe if p.samples_per_s]
    if len(points) < 2 and st.workers > 1:
        raise NotEvaluated(
            "the workers of a multi-worker job run no batch-size probe (its steps would be "
            "collectives the other workers do not join): check the script under "
            "MirroredStrategy on one host for the probe"
        )
    if len(points) < 2:
        raise NotEvaluated(
            "the batch-size probe did not measure two points: "
            + (facts.probes.batch_probe_not_measured or "it did not run")
        )
    best = max(p.samples_per_s for p in points)
    efficient = min(p.value for p in points if p.samples_per_s >= options.efficient_share * best)
    if st.global_batch_size >= efficient:
        return []
    per_replica = efficient // st.replicas
    return [
        finding(
            message=(
                f"Per-replica batch {st.per_replica_batch_size} (global {st.global_batch_size} "
                f"over {st.replicas} replicas) is below the efficient point: the probe reaches "
                f"{options.efficient_share:.0%} of its best samples/s only from a global batch "
                f"of {efficient} ({per_replica} per replica)."
            ),
            location=fp.to_location(st.dataset_location),
            evidence=(
                Evidence("global batch", st.global_batch_size, "samples", "the dataset's batch"),
                Evidence("replicas", st.replicas, "", "num_replicas_in_sync"),
                *(
                    Evidence(
                        f"probe, global batch {p.value}",
                        p.samples_per_s,
                        "samples/s",
                        "compute-only, under the strategy",
                    )
                    for p in points
                ),
            ),  # fmt: skip
            fix=Fix(
                title=f"Scale the global batch with the replicas: {per_replica} per replica",
                code=(
                    f"PER_REPLICA_BATCH = {per_replica}\n"
                    "GLOBAL_BATCH = PER_REPLICA_BATCH * strategy.num_replicas_in_sync"
                ),
                safety=FixSafety.DISPLAY_ONLY,
            ),
            gain="not measured here: RD301 gives the probe's samples/s ratio",
        )
    ]
