"""RD704 dataset-not-sharded: every worker reads all the data.

What it detects:
    Under a strategy with several workers, the dataset's auto-shard policy resolves to OFF
    (every worker reads and trains on the whole dataset), or to DATA on a pipeline that reads
    files (every worker reads every file and keeps one shard of the elements). The finding
    points at the user's dataset line.

Why it slows training:
    With OFF, the workers train on the same batches: N workers do the work of one, and an
    epoch holds N times the samples it should. With DATA over files, each worker reads, decodes
    and discards (N-1)/N of the data: input work grows with the cluster. TensorFlow itself warns
    when AUTO falls back to DATA ("...auto-sharding with DATA..."); FILE sharding gives each
    worker its own files.

Evidence:
    ``strategy.auto_shard_policy`` (the dataset's ``options().experimental_distribute
    .auto_shard_policy``), ``strategy.auto_shard_resolved`` and ``auto_shard_reason``
    (``rnndoctor/capture/distribute.py``: ``resolve_auto_shard``, after
    ``tensorflow/python/distribute/input_ops.py``), ``strategy.workers``,
    ``data.source_kinds``, ``strategy.dataset_location``.

Example:
    ``options.experimental_distribute.auto_shard_policy = AutoShardPolicy.DATA`` on
    ``tf.data.TextLineDataset(files)``

Use instead:
    ``options.experimental_distribute.auto_shard_policy = AutoShardPolicy.FILE`` (at least as
    many files as workers), or ``ds.shard(num_workers, worker_index)`` before any shuffle.

Fix safety:
    display-only: FILE sharding needs at least one file per worker, and the split changes
    which samples each worker sees.

References:
    TensorFlow guide "Distributed input" (Sharding); ``tf.data.experimental.AutoShardPolicy``.
"""

from __future__ import annotations

from rnndoctor.facts import Facts
from rnndoctor.findings import Evidence, Finding, Fix, FixSafety, Severity
from rnndoctor.rules import NotEvaluated, finding, rule
from rnndoctor.rules import _distributed as dist
from rnndoctor.rules import _fastpath as fp

_FIX = {
    "OFF": "options.experimental_distribute.auto_shard_policy = "
    "tf.data.experimental.AutoShardPolicy.AUTO  # FILE on files, else DATA",
    "DATA": "options.experimental_distribute.auto_shard_policy = "
    "tf.data.experimental.AutoShardPolicy.FILE  # one file per worker at least",
}


@rule(
    "RD704",
    "dataset-not-sharded",
    "several workers, and auto-shard resolves to OFF, or to DATA over files",
    needs=(),
    severity=Severity.WARNING,
)
def check(facts: Facts) -> list[Finding]:
    if dist.trained_without_strategy(facts):
        return []
    st = facts.strategy
    if st.workers <= 1:
        return []
    if st.auto_shard_resolved is None:
        raise NotEvaluated(f"auto-shard not resolved: {st.auto_shard_reason or 'no dataset'}")
    files = "files" in (facts.data.source_kinds if facts.data else [])
    resolved = st.auto_shard_resolved
    if resolved == "OFF":
        what = f"every one of the {st.workers} workers reads and trains on the whole dataset"
    elif resolved == "DATA" and files:
        what = f"each of the {st.workers} workers reads every file and keeps 1/{st.workers}"
    else:
        return []
    return [
        finding(
            message=(f"The dataset is sharded {resolved} (policy {st.auto_shard_policy}): {what}."),
            location=fp.to_location(st.dataset_location),
            evidence=(
                Evidence("auto-shard policy", st.auto_shard_policy, "", "dataset options"),
                Evidence("resolves to", resolved, "", st.auto_shard_reason or ""),
                Evidence("workers", st.workers, "", "TF_CONFIG's cluster"),
                Evidence("reads files", files, "", "data.source_kinds"),
            ),
            fix=Fix(
                title="Shard by FILE (or shard the dataset yourself) so each worker reads "
                "its own part",
                code=_FIX[resolved],
                safety=FixSafety.DISPLAY_ONLY,
            ),
            gain=(
                f"not measured: the input work per worker falls by up to {st.workers}x"
                if resolved == "DATA"
                else "not measured: each epoch then holds the data once, not once per worker"
            ),
        )
    ]
