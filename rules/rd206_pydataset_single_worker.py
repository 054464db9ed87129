"""RD206 pydataset-single-worker: a ``keras.utils.PyDataset`` loads batches on one thread.

What it detects:
    A ``keras.utils.PyDataset`` passed to ``fit`` with ``workers <= 1`` and
    ``use_multiprocessing=False``, when the measured input share of the step is significant
    (5% or more). Keras 2's ``tf_keras.utils.Sequence`` too, where ``workers`` and
    ``use_multiprocessing`` are ``fit``'s own arguments (defaults 1 and False).

Why it slows training:
    Keras starts its ``OrderedEnqueuer`` (a pool of threads or processes) only when ``workers >
    1`` or ``use_multiprocessing`` is set (``PyDatasetAdapter.__init__`` in
    keras/src/trainers/data_adapters/py_dataset_adapter.py). Otherwise every ``__getitem__``
    runs one after another in a tf.data ``from_generator`` thread, in Python, under the GIL.
    Keras 2 does the same for a ``Sequence`` (``KerasSequenceAdapter._handle_multiprocessing``
    in tf_keras/src/engine/data_adapter.py: ``workers > 1 or (workers > 0 and
    use_multiprocessing)`` starts the enqueuer).

Evidence:
    ``data.kind`` (``keras.PyDataset`` or ``tf_keras.Sequence``), ``data.workers``,
    ``data.use_multiprocessing``, ``data.max_queue_size``; ``probes.input_only_ms`` (one
    ``__getitem__``); ``probes.input_bound_share``; ``environment.cpu_count``.

Example:
    ``class Seqs(keras.utils.PyDataset): def __init__(self, x, y): super().__init__()``

Use instead:
    ``super().__init__(workers=4, use_multiprocessing=True)`` (or pass them as keyword
    arguments when building it); for a tf_keras ``Sequence``, in the ``fit`` call:
    ``model.fit(seqs, epochs=10, workers=4, use_multiprocessing=True)``.

Fix safety:
    unsafe: with processes, the dataset is pickled to the workers and ``__getitem__`` must not
    rely on shared mutable state; ``on_epoch_end`` runs in the main process. The rewrite is
    made where the user's code sets the values, every other argument as written
    (``rules/_pydataset.py``): the call to ``PyDataset.__init__`` in the class's ``__init__``
    (``data.init_location``; a positional value replaced where it passes one), else the call
    that builds the dataset where keywords given there reach ``PyDataset.__init__`` (the
    class has no ``__init__``, or passes its own ``**kwargs`` on: ``data.built_with_keywords``);
    a tf_keras ``Sequence``'s ``fit`` call. display-only, as a note, where the call passes
    ``workers``/``use_multiprocessing`` from a name (a literal would make it do nothing), or
    passes ``**kwargs`` that do not come from where the dataset is built, or was not found.
    The suggested workers: the CPU cores, at least 2, at most ``max_suggested_workers``;
    RD201's fix for the same dataset is this one.

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
    ``PyDatasetAdapter``, ``OrderedEnqueuer``); Keras ``PyDataset`` documentation;
    tf_keras/src/engine/data_adapter.py (``KerasSequenceAdapter``) and
    tf_keras/src/utils/data_utils.py (``Sequence``, ``OrderedEnqueuer``) for Keras 2.
"""

from __future__ import annotations

from rnndoctor.facts import Facts
from rnndoctor.findings import Evidence, Finding, Severity
from rnndoctor.rules import Option, OptionValues, finding, rule
from rnndoctor.rules import _measured as m
from rnndoctor.rules import _pydataset as pd

_MAX_SUGGESTED_WORKERS = Option(
    name="max_suggested_workers",
    default=pd.MAX_SUGGESTED_WORKERS,
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
    if data.kind not in (pd.PY_DATASET, pd.TF_KERAS_SEQUENCE):
        return []
    if not pd.single_worker(facts):
        return []  # Keras' OrderedEnqueuer loads batches in parallel
    share, basis = m.input_share(facts)
    if share is None or share < options.min_input_share:
        return []
    workers = data.workers if data.workers is not None else 1
    cpus = facts.environment.cpu_count if facts.environment else None
    suggested = pd.suggested_workers(facts, options.max_suggested_workers)
    fix, location, held_by = pd.parallel_fix(facts, suggested)
    what = "PyDataset" if data.kind == pd.PY_DATASET else "tf_keras Sequence"
    return [
        finding(
            severity=Severity.WARNING if share >= options.warning_input_share else Severity.INFO,
            message=(
                f"The {what} loads each batch on one thread (workers={workers}, "
                f"use_multiprocessing={bool(data.use_multiprocessing)}), while {m.pct(share)} "
                "of the step waits for input."
            ),
            location=location,
            evidence=(
                Evidence("workers", workers, "", held_by),
                Evidence("use_multiprocessing", bool(data.use_multiprocessing), "", held_by),
                Evidence("__getitem__ time per batch", facts.probes.input_only_ms, "ms", "indexed"),
                Evidence("input share of the step", round(share * 100, 1), "%", basis),
                Evidence("CPU cores", cpus, "", "environment"),
            ),
            fix=fix,
            gain=(
                f"part of the input share {m.pct(share)}: with {suggested} workers, up to "
                f"{suggested} batches load at once; at most about "
                f"{1 / max(1 - share, 1e-3):.1f}x faster steps if the whole input wait goes"
            ),
        )
    ]
