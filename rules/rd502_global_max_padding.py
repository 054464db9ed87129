"""RD502 global-max-padding: every batch is padded to one global maximum length.

What it detects:
    All sampled batches have the same padded length, the longest over the sample, while the
    longest sequence of some batches is shorter (``SequenceInput.global_max_padding``: arrays
    padded once with ``pad_sequences(maxlen=...)`` and then batched), and padding each batch to
    its own longest sequence (``padded_batch``) is expected to save at least 5% of the timesteps
    (``min_speedup``).

Why it slows training:
    Every batch pays for the longest sequence in the whole data set. With ``padded_batch`` on
    shuffled sequences a batch is padded to its own longest one, whose expected length is the
    expected maximum of ``batch_size`` draws from the sampled length distribution
    (``rnndoctor/stats.py``). The part of a step that grows with the padded length shrinks by
    padded timesteps now / expected with per-batch padding, and the estimated speedup scales
    that by the share of the step the sequence length probe measured to grow with the length
    (Amdahl's law, as RD501's; an upper bound where the probe did not measure it), and by the
    slowdown of the train function the fix runs: a dataset padded per batch has no fixed
    length, so Keras traces it for any length (``probes.length_any``, as RD501's; over arrays
    with no GPU, fed one sequence at a time through a bucketing pipeline,
    ``probes.length_any_pipeline``: ``padded_batch`` runs a part of its per-sequence ops, so
    that cost is counted in full or more). Bucketing (RD501) saves more; per-batch padding is
    the one-line change.

    Severity: ``warning`` where the estimate's whole interval reaches ``min_speedup``,
    ``error`` where it reaches ``error_speedup`` (2x) on a measured share (never on an upper
    bound: ``StepEstimate.reaches_error``); ``info``, "inconclusive", with no
    speedup for the forecast, where only the estimate (its median) reaches ``min_speedup``
    (under load, also where the widened interval's top does); no finding where the estimate
    does not (issue 11: decisions on intervals, ``rules/_sequences.py:
    StepEstimate.decision``). The trial's ``Bidirectional(GRU)`` text classifier sat on the
    cut-off, 1.049x in one run and 1.064x in the next, and flipped between no finding and a
    warning on the median; with its interval (1.03–1.08x) it goes between no finding and
    ``info``, never a warning.

Evidence:
    ``sequences.inputs[].global_max_padding``, ``padded_lengths``, ``batch_sizes``,
    ``length_values`` / ``length_counts``, ``per_batch_padded_fraction``,
    ``padding_location``; ``probes.length_probe``, ``probes.length_any`` /
    ``length_any_not_measured``. The estimate's interval combines the padding ratio's 90%
    bootstrap over the sampled batches and sequences
    (``rnndoctor.stats.padding_speedup_interval``) with the sequence length probe's, as RD501's.
    The rule decides on that interval (Severity above); where the padding interval cannot be
    formed, never above ``info``.

Example:
    ``x = pad_sequences(seqs, maxlen=200)`` where most batches' longest sequence has 120
    timesteps.

Use instead:
    ``tf.data.Dataset.from_tensor_slices((x, y)).map(unpad).shuffle(n).padded_batch(64)``;
    ``from_tensor_slices((x, y, w))`` where ``fit`` takes ``sample_weight=w`` (``fit`` raises
    on ``sample_weight`` with a dataset). In a ``tf.data`` pipeline: ``padded_batch`` in place
    of ``batch``; where its ``padded_batch`` pads to fixed shapes
    (``padded_batch(64, padded_shapes=([200], []))``), that call with ``padded_shapes=None``,
    every other argument as written (unsafe: the batches change shape, so the model's
    ``Input`` must take any length).

Fix safety:
    unsafe: ``fit`` takes a dataset instead of arrays; the batches themselves hold the same
    kind of random samples (no ``.shuffle`` where ``fit`` says ``shuffle=False``). The code
    carries every argument of the user's ``fit`` or says in a comment what to do with it
    (``rnndoctor.rules._sequences.fit_data``): ``sample_weight`` rides in the dataset,
    ``y``, ``batch_size`` and ``shuffle`` move into it, ``validation_data`` stays (with
    ``validation_batch_size`` set to the ``batch_size`` it was validated with).
    ``display-only`` where the code must be adapted by hand: a ``tf.data`` pipeline;
    placeholder names ``x`` / ``y``, marked so (``fit`` takes a generator, a ``PyDataset``, an
    expression, or was not recorded); an argument it cannot carry exactly, each named with what
    to do: ``class_weight`` (Keras weighs a dataset's batches by it as it did arrays only where
    no label is above the dict's largest key), ``validation_split`` (pass ``validation_data``:
    the same last part of the arrays), ``steps_per_epoch`` (Keras does not restart a dataset
    each epoch), ``**kwargs``. display-only too, its first lines saying what to change first,
    where the sequence length probe found the model does not train on a shorter length
    (``probes.length_rejected``: an ``Input`` that fixes the length, a ``Flatten`` after the
    RNN), or on both lengths through one train function traced for any length
    (``probes.length_mixed_error``; ``rules/_sequences.py: one_length_fix``): batches of other
    lengths would fail.

Options:
    ``min_speedup`` = 1.05 (x (estimated step-time speedup)): the speedup the estimate's whole
    interval must reach for a warning (only its median: ``info``, "inconclusive"; per-batch
    padding saves at least 5% of the step; of the timesteps where the sequence length probe
    did not measure the step's share). Source: rnndoctor's choice.

    ``error_speedup`` = 2.0 (x (estimated speedup: of the step, or of an epoch in samples/s)): the
    speedup the estimate's whole interval must reach for an error (below it: warning). Source:
    rnndoctor's severity scale (rnndoctor/findings.py: Severity): error means the job runs at
    least 2x slower than it needs to.

References:
    tf.data.Dataset.padded_batch (tensorflow/python/data/ops/dataset_ops.py, TF 2.21);
    keras/src/utils/sequence_utils.py: pad_sequences.
"""

from __future__ import annotations

import ast

from rnndoctor import rewrite as rw
from rnndoctor import stats as bk
from rnndoctor.decide import Decision
from rnndoctor.facts import Facts, SequenceInput
from rnndoctor.findings import Evidence, Finding, Fix, FixSafety, Severity
from rnndoctor.rules import Option, OptionValues, finding, rule
from rnndoctor.rules import _measured as m
from rnndoctor.rules import _sequences as sq

MIN_SPEEDUP = Option(
    name="min_speedup",
    default=1.05,
    unit="x (estimated step-time speedup)",
    source="rnndoctor's choice: per-batch padding must save at least 5% of the step",
    help="the speedup the estimate's whole interval must reach for a warning (median: info)",
)


def _code(facts: Facts, record: SequenceInput, batch: int) -> tuple[str, FixSafety]:
    """The per-batch padding pipeline and its safety: ``unsafe`` on arrays fed to ``fit`` under
    their names with every argument carried (``sample_weight`` into the pipeline:
    :func:`sq.fit_data`), else ``display-only`` (a ``tf.data`` pipeline to change in place,
    placeholder names, an argument the comments say how to carry)."""
    kind = facts.fit.data_kind if facts.fit else None
    per_step = bool(record.targets_per_step)
    padded = f"    .padded_batch({batch})  # each batch padded to its own longest sequence"

    def head(weights: bool) -> list[str]:  # the import and the unpad function
        return ["import tensorflow as tf", "", "",
                *sq.unpad_function(record, per_step, weights=weights), "", ""]  # fmt: skip

    if kind == "tf.data":
        lines = [
            *head(False),
            "# in your pipeline, on single (unbatched) sequences, in place of batch:",
            "dataset = (",
            "    dataset.map(unpad, num_parallel_calls=tf.data.AUTOTUNE)",
            padded,
            "    .prefetch(tf.data.AUTOTUNE)",
            ")",
            sq.any_length_input(record),
        ]
        return "\n".join(lines), FixSafety.DISPLAY_ONLY
    data = sq.fit_data(facts)
    lines = [
        *head(data.weights is not None),
        *data.head,
        "dataset = (",
        f"    tf.data.Dataset.from_tensor_slices(({', '.join(data.arrays)}))",
        "    .map(unpad, num_parallel_calls=tf.data.AUTOTUNE)",
        "    .cache()",
        *([f"    .shuffle(len({data.x}))"] if data.shuffled else []),
        padded,
        "    .prefetch(tf.data.AUTOTUNE)",
        ")",
        *data.notes,
        sq.any_length_input(record),
    ]
    rewritable = kind in (None, "numpy") and record.input_rank in (2, 3) and data.exact
    safety = FixSafety.UNSAFE if rewritable else FixSafety.DISPLAY_ONLY
    return "\n".join(lines), safety


def _recorded(fraction: float | None, valid_steps: int, padded_steps: float) -> float:
    """``fraction`` as capture recorded it, or ``1 - valid / padded`` where it recorded none."""
    return fraction if fraction is not None else bk.padded_fraction(valid_steps, padded_steps)


def _evidence(
    record: SequenceInput, padded: int, expected: float, now: float, after: float
) -> tuple[Evidence, ...]:
    """The padding now and with per-batch padding, as the evidence table shows them."""
    return (
        *sq.common_evidence(record),
        Evidence("padded length of every batch", padded, "timesteps", source="sampled batches"),
        Evidence("expected padded length per batch with padded_batch", round(expected, 2),
                 "timesteps", source="rnndoctor/stats.py (expected max of the batch)"),
        Evidence("longest sampled sequence", max(record.length_values), "timesteps",
                 source="sampled batches"),
        Evidence("padded fraction now / with per-batch padding", f"{now:.4f} / {after:.4f}",
                 source="sampled batches"),
    )  # fmt: skip


@rule(
    "RD502",
    "global-max-padding",
    "every batch is padded to one global maximum, where per-batch padding would be shorter",
    needs=("sequences",),
    severity=Severity.WARNING,
    options=(MIN_SPEEDUP, sq.ERROR_SPEEDUP),
)
def check(facts: Facts, options: OptionValues) -> list[Finding]:
    sq.require_sampled(facts)
    findings = []
    for record in sq.records(facts):
        if record.ragged or not record.global_max_padding or not record.length_values:
            continue
        dist = bk.LengthDistribution(tuple(record.length_values), tuple(record.length_counts))
        batch = sq.batch_size(record)
        now = bk.padded_steps(record.padded_lengths, record.batch_sizes)
        after = bk.expected_padded_steps(dist, (), batch)
        probes = facts.probes
        estimate = sq.step_estimate(
            facts, record, now / after if after else 0.0, None,
            probes.length_probe if probes else [],
            probes.length_probe_not_measured if probes else None,
            probes.length_any if probes else None,
            probes.length_any_not_measured if probes else None,
        )  # fmt: skip
        decision = estimate.decision(options.min_speedup)
        if decision is Decision.BELOW:
            continue
        inconclusive = decision is Decision.INCONCLUSIVE
        doubt = estimate.inconclusive(options.min_speedup)
        severity = (
            Severity.INFO if inconclusive
            else Severity.ERROR if estimate.reaches_error(options.error_speedup)
            else Severity.WARNING
        )  # fmt: skip
        # the recorded facts (round 6), as the report's sequences table shows them
        fraction_now = _recorded(record.padded_fraction, dist.valid_steps, now)
        fraction_after = _recorded(record.per_batch_padded_fraction, dist.valid_steps, after)
        padded = record.padded_lengths[0]
        expected_length = after / dist.sequences
        location, where = sq.padding_location(facts, record)
        layers = sq.fed_layers(facts, record)
        code, safety = _code(facts, record, batch)
        findings.append(
            finding(
                severity=severity,
                message=(
                    f"Every sampled batch of input '{record.input}' is padded to {padded} "
                    f"timesteps, the global maximum; padded per batch (batches of {batch}), a "
                    f"batch would span {expected_length:.1f} timesteps on average: padding "
                    f"{fraction_now:.1%} -> {fraction_after:.1%}, {estimate.step_phrase()}"
                    + (f" ({doubt}; no speedup is counted for it)." if inconclusive else ".")
                ),
                layer=layers[0].path if layers else (record.rnn_layers or [None])[0],
                location=location,
                evidence=(
                    *_evidence(record, padded, expected_length, fraction_now, fraction_after),
                    where,
                    *estimate.evidence,
                ),
                fix=_fix(facts, record, code, safety),
                gain=(
                    ("inconclusive: " if inconclusive else "")
                    + f"{estimate.gain_head()} from {now} -> {after:.0f} timesteps computed "
                    f"(padding included) on the sampled sequences: {estimate.basis()}; bucketing "
                    "(RD501) saves more"
                ),
                speedup=None if inconclusive else round(estimate.speedup, 3),
                speedup_interval=estimate.interval_words(),
            )
        )
    return findings


def _fix(facts: Facts, record: SequenceInput, code: str, safety: FixSafety) -> Fix:
    """The per-batch padding fix: where the pipeline's ``padded_batch`` pads to fixed
    ``padded_shapes``, that call with ``padded_shapes=None`` (:func:`_padded_shapes_fix`),
    else ``code``; a display-only sketch under a note where the length probe found the model
    does not train on a shorter length (``rules/_sequences.py: one_length_fix``)."""
    fix = _padded_shapes_fix(facts, record) or Fix(
        "Pad each batch to its own longest sequence (padded_batch)", code, safety
    )
    probes = facts.probes
    if probes is None:
        return fix
    return sq.one_length_fix(
        fix, probes.length_rejected, probes.length_probe_not_measured,
        probes.length_mixed_error, probes.length_mixed_not_tried,
    )  # fmt: skip


def _padded_shapes_fix(facts: Facts, record: SequenceInput) -> Fix | None:
    """A ``tf.data`` pipeline whose last ``padded_batch`` pads to fixed shapes
    (``padded_batch(64, padded_shapes=([200], []))``: every batch to the global maximum): that
    call with ``padded_shapes=None``, which pads each component to the batch's own longest
    (``tf.data.Dataset.padded_batch``: "If unset, all dimensions of all components are padded to
    the maximum size in the batch"), every other argument as written; unsafe, as the
    pipeline's batches then change shape (the model's ``Input`` must take any length). None
    where the pipeline has no such call, or passes the shapes from a name (a literal there
    would make the name do nothing: the sketch's comments say what to change), where it pads
    already to each batch's longest (``padded_shapes=None``), or where the input's padding is
    not that call's (``record.padding_function``: elements ``pad_sequences`` padded before
    keep their length through it, and the sketch's ``map(unpad)`` is what helps)."""
    if record.padding_function != "padded_batch":
        return None  # elements padded before (pad_sequences): padded_batch has nothing to cut
    nodes = [n for n in m.nodes_of(facts, "padded_batch") if n.location is not None]
    call = nodes[-1].location.call_source if nodes else None
    shapes = rw.argument(call, 1, "padded_shapes")
    if shapes is None or not rw.is_literal(shapes) or ast.literal_eval(shapes) is None:
        return None  # no shapes (already per batch), or shapes from a name
    code = rw.set_argument(call, 1, "padded_shapes", "None")
    if code is None:
        return None
    return Fix(
        "Pad each batch to its own longest sequence: padded_shapes=None (the model's Input "
        "must take any length: keras.Input(shape=(None, ...)))",
        code,
        FixSafety.UNSAFE,
        before=call,
        location=m.to_location(nodes[-1].location),
    )
