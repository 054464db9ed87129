"""RD206 pydataset-single-worker: a ``keras.utils.PyDataset`` loads batches on one thread.

What it detects:
    A ``keras.utils.PyDataset`` passed to ``fit`` with ``workers <= 1`` and
    ``use_multiprocessing=False``, when the measured input share of the step is significant
    (5% or more).

Why it slows training:
    Keras starts its ``OrderedEnqueuer`` (a pool of threads or processes) only when ``workers >
    1`` or ``use_multiprocessing`` is set (``PyDatasetAdapter.__init__`` in
    keras/src/trainers/data_adapters/py_dataset_adapter.py). Otherwise every ``__getitem__``
    runs one after another in a tf.data ``from_generator`` thread, in Python, under the GIL.

Evidence:
    ``data.kind == "keras.PyDataset"``, ``data.workers``, ``data.use_multiprocessing``,
    ``data.max_queue_size``; ``probes.input_only_ms`` (one ``__getitem__``);
    ``probes.input_bound_share``; ``environment.cpu_count``.

Example:
    ``class Seqs(keras.utils.PyDataset): def __init__(self, x, y): super().__init__()``

Use instead:
    ``super().__init__(workers=4, use_multiprocessing=True, max_queue_size=10)`` (or pass them
    as keyword arguments when building it)

Fix safety:
    unsafe: with processes, the dataset is pickled to the workers and ``__getitem__`` must not
    rely on shared mutable state; ``on_epoch_end`` runs in the main process.

Options:
    ``min_input_share`` = 0.05 (fraction of the step): the measured input share of the step
    from which the rule reports. Source: openxla/xprof
    xprof/convert/op_stats_to_input_pipeline_analysis.cc, kModeratelyInfeedBoundThresholdInPercent
    = 5.

    ``warning_input_share`` = 0.2 (fraction of the step): from this share the finding is a
    warning (below it: info). Source: the same file, kHighlyInfeedBoundThresholdInPercent = 20.

    ``max_suggested_workers`` = 8 (worker processes): the most workers the fix suggests (it
    suggests the CPU cores, at least 2, at most this). Source: rnndoctor's choice: a starting
    point; more rarely helps a single training process.

References:
    keras/src/trainers/data_adapters/py_dataset_adapter.py (``PyDataset``,
    ``PyDatasetAdapter``, ``OrderedEnqueuer``); Keras ``PyDataset`` documentation.
"""

from __future__ import annotations

from rnndoctor.facts import Facts
from rnndoctor.findings import Evidence, Finding, Fix, FixSafety, Severity
from rnndoctor.rules import Option, OptionValues, finding, rule
from rnndoctor.rules import _measured as m

_MAX_SUGGESTED_WORKERS = Option(
    name="max_suggested_workers",
    default=8,
    unit="worker processes",
    source="rnndoctor's choice: a starting point; more rarely helps a single training process",
    help="the most PyDataset workers the fix suggests",
)


@rule(
    "RD206",
    "pydataset-single-worker",
    "a keras.utils.PyDataset with workers=1 and a significant input time",
    needs=("data", "probes"),
    severity=Severity.INFO,
    options=(m.MIN_INPUT_SHARE, m.WARNING_INPUT_SHARE, _MAX_SUGGESTED_WORKERS),
)
def check(facts: Facts, options: OptionValues) -> list[Finding]:
    data = facts.data
    if data.kind != "keras.PyDataset":
        return []
    workers = data.workers if data.workers is not None else 1
    if workers > 1 or (workers > 0 and data.use_multiprocessing):
        return []  # Keras' OrderedEnqueuer loads batches in parallel
    share, basis = m.input_share(facts)
    if share is None or share < options.min_input_share:
        return []
    cpus = facts.environment.cpu_count if facts.environment else None
    suggested = max(2, min(options.max_suggested_workers, cpus or 4))
    probes = facts.probes
    return [
        finding(
            severity=Severity.WARNING if share >= options.warning_input_share else Severity.INFO,
            message=(
                f"The PyDataset loads each batch on one thread (workers={workers}, "
                f"use_multiprocessing={bool(data.use_multiprocessing)}), while {m.pct(share)} "
                "of the step waits for input."
            ),
            location=m.to_location(data.location) or m.fit_location(facts),
            evidence=(
                Evidence("workers", workers, "", "PyDataset"),
                Evidence("use_multiprocessing", bool(data.use_multiprocessing), "", "PyDataset"),
                Evidence("__getitem__ time per batch", probes.input_only_ms, "ms", "indexed"),
                Evidence("input share of the step", round(share * 100, 1), "%", basis),
                Evidence("CPU cores", cpus, "", "environment"),
            ),
            fix=Fix(
                title="Load batches in parallel worker processes",
                code=(
                    f"super().__init__(workers={suggested}, use_multiprocessing=True, "
                    "max_queue_size=10, **kwargs)"
                ),
                safety=FixSafety.UNSAFE,
            ),
            gain=(
                f"part of the input share {m.pct(share)}: with {suggested} workers, up to "
                f"{suggested} batches load at once; at most about "
                f"{1 / max(1 - share, 1e-3):.1f}x faster steps if the whole input wait goes"
            ),
        )
    ]
