"""RD501 padding-waste: a large share of the timesteps the RNN computes are padding.

What it detects:
    A sequence input whose measured padded fraction (padded timesteps / all timesteps of the
    sampled batches) is at least 30% (``min_padded_fraction``). The fix buckets by length:
    ``bucket_by_sequence_length`` boundaries computed exactly from the sampled length distribution
    (``rnndoctor/stats.py``: dynamic programming over the sorted distinct lengths, minimising
    the expected padded timesteps with each batch padded to its own longest sequence), with the
    padded fraction expected after bucketing.

Why it slows training:
    An RNN step costs the same on a padded timestep as on a valid one: the generic loop runs
    every step, and cuDNN reads the padded tensor (masks let it stop at each sequence's length,
    but the tensors, the layers around the RNN and the loss still span the padded length). The
    part of a step that grows with the padded length grows linearly with ``batch x padded
    length``, so bucketing shrinks that part by padded timesteps now / expected after
    bucketing; the rest (the optimizer's update, the layers after the RNN, dispatch) does not
    shrink. The share that grows is measured by the sequence length probe (the compute-only
    step at the sampled length and at half of it, paired: ``capture/probes.py:
    _length_probe``), and the estimated speedup is ``1 / (1 - share + share / padding ratio)``
    (Amdahl's law), never above ``1 / (1 - share)``. Where the probe did not measure it, the
    estimate is the padding ratio itself and the finding says it is an upper bound.
    rnndoctor's test compares the estimate with real bucketed and unbucketed compute-only
    steps on CPU. A bucketed dataset has no fixed length, so Keras traces the train function
    the fix runs for any length; where the window's runs for one length, the probe also times
    the halved batches on a function for any length (``probes.length_any``), and the
    compute-only part of the step after the fix is scaled by how much slower that function is
    (``rules/_sequences.py: StepEstimate``): ``1 / (1 - compute + slowdown (compute - share +
    share / padding ratio))``, below 1x where the slowdown takes back more than the padding
    saves. Where ``fit`` took arrays and no GPU runs the step, that arm feeds the function
    through a pipeline of the fix's kind, one sequence at a time
    (``probes.length_any_pipeline``; ``capture/probes.py: _fix_pipeline``), whose ops take
    the cores that run the step: the slowdown then holds the pipeline's cost, counted from 1x
    (a pipeline takes no work away); the window's input wait still counts as staying
    (tests/scripts/padded_lstm.py: 1.46-1.73x before, 1.31-1.62x with it). Each bucket ends in
    a partial batch, so an epoch takes more, smaller steps, each paying the part that does not
    shrink: where ``fit`` counted its batches (``fit.batches_per_epoch``, with no
    ``steps_per_epoch``) the estimate is the epoch's, a samples/s ratio
    (``rules/_sequences.py: bucketed_steps``; padded_lstm.py: 16 -> 20 steps, its bucketed step
    1.25x faster and its epoch 0.98-0.99x in ``--verify``, as if each partial batch's step cost
    a full one: so the estimate takes it, and its interval's high end the rows' part of one;
    1.06-1.38x from the same checks' facts).

    Severity: ``warning`` from ``min_padded_fraction``, an exact count of the sampled
    timesteps; ``error`` where the estimate's whole interval reaches 2x (``error_speedup``:
    "runs at least 2x slower than it needs to"; issue 11: decisions on intervals,
    ``rules/_sequences.py: StepEstimate.decision``: a median past 2x with its interval across
    it stays a warning) and the sequence length probe measured the share that shrinks (an upper
    bound never makes an error: ``StepEstimate.reaches_error``); ``info`` where the probe
    measured the estimate's whole interval below 1.05x (``rules/_sequences.py:
    NEGLIGIBLE_SPEEDUP``, RD502's default least gain): the padding is there, but costs no
    step time worth the change, or the function for any length takes it back (the message
    says which). Where the estimate's interval reaches below 1.05x while its
    top does not, the finding stays a warning (it rests on the padded fraction), and its gain
    says "inconclusive" and counts no speedup for the forecast.
    Under load the probe's interval widens (``rules/_measured.py: widen_ratio``), and with it
    the estimate's, so a loaded run's error becomes a warning, never a finding that vanishes.

Evidence:
    ``sequences.inputs[].padded_fraction``, ``length_values`` / ``length_counts``,
    ``padded_lengths`` / ``batch_sizes``, ``quantiles``, ``padding_location``,
    ``targets_per_step``, ``input_rank``, ``mask_used`` / ``pad_value`` / ``pad_index``;
    ``fit.location`` (the data's names); ``probes.length_probe`` (the sequence length probe:
    ``rules/_sequences.py: step_estimate``), ``probes.length_any`` /
    ``length_any_not_measured``. The estimate's interval combines the padding ratio's 90%
    bootstrap over the sampled batches and sequences
    (``rnndoctor.stats.padding_speedup_interval``, 200 resamples, fixed seed) with the probe's
    paired 90% intervals of the share and of the slowdown (like bounds: the estimate grows with
    the first two and falls with the third): the sampling error and the probe's noise, not the
    error of the linear model itself. The bucketing pipeline's own ops run beside the steps;
    with no GPU they run on the cores that run the step: over arrays the probe times them
    (``probes.length_any_pipeline``), and where it did not, the gain says they are not
    counted (``rules/_sequences.py: CPU_PIPELINE_CAVEAT``; ``--verify`` measures them).

Example:
    Text lines of 4 to 80 characters, all padded to ``maxlen=80`` with ``pad_sequences``.

Use instead:
    ``tf.data.Dataset.from_tensor_slices((x, y)).map(unpad).bucket_by_sequence_length(length,
    BOUNDARIES, BATCH_SIZES)`` with the boundaries the finding gives; where ``fit`` takes
    ``sample_weight=w``, the elements are ``(x, y, w)`` (``length`` reads ``x`` only; a weight
    per step loses the padded steps with the targets), since ``fit`` raises on
    ``sample_weight`` with a dataset. Without a mask (the pad
    step found in the data, ``pad_value``: a zero, ``-1``, another pad id, a one-hot vector),
    also a mask that keeps the cuDNN fast path of the installed Keras: ``Embedding(...,
    mask_zero=True)`` with the pad id remapped to 0 where it is not 0, or
    ``keras.layers.Masking(mask_value=...)`` (a pad vector that is not constant is zeroed first),
    with the padding at the end.

Fix safety:
    unsafe: batches then hold sequences of similar lengths and come in another order, which can
    change convergence a little; ``fit`` takes the dataset instead of arrays. The fix carries
    every argument of the user's ``fit`` or says in a comment what to do with it:
    ``sample_weight`` rides in the dataset, ``validation_data`` stays (with
    ``validation_batch_size`` set to the ``batch_size`` it was validated with),
    ``validation_split`` becomes the same last part of the arrays (weights included) as
    ``validation_data``. Where ``fit`` takes arrays of token ids under a mask, by name
    (``fit(x, y, batch_size=..., validation_split=..., shuffle=..., sample_weight=w,
    validation_data=...)``), the fix is a rewrite of that ``fit`` line (``rnndoctor check
    --verify`` measures it): the pipeline above it, and the call with ``x`` replaced by the
    bucketed dataset and every other argument kept. Otherwise it is the pipeline with comments,
    ``display-only`` where it must be adapted by hand: a ``tf.data`` pipeline; placeholder names
    ``x`` / ``y``, marked so (``fit`` takes a generator, a ``PyDataset``, an expression, or was
    not recorded); an argument it cannot carry exactly, each named with what to do:
    ``class_weight`` (Keras weighs a dataset's batches by it as it did arrays only where no
    label is above the dict's largest key), ``validation_split``, ``steps_per_epoch`` (Keras
    does not restart a dataset each epoch), ``**kwargs``. display-only too, its first lines
    saying what to change first, where the sequence length probe found the model does not train
    on a shorter length (``probes.length_rejected``: an ``Input`` that fixes the length, a
    ``Flatten`` after the RNN), or, trained at each length alone, not on both through one train
    function traced for any length, as the bucketed batches reach it
    (``probes.length_mixed_error``: a tagger's ``TimeDistributed(Dense)``, traced for an
    unknown length; ``rules/_sequences.py: one_length_fix``): batches of other lengths
    would fail. Where the probe does not run (a step over 100 ms), neither is tried, and
    ``--verify`` is what runs the rewrite.

Options:
    ``min_padded_fraction`` = 0.3 (fraction of the timesteps): the measured padded fraction of
    the sampled batches' timesteps from which the rule reports. Source: rnndoctor's choice.

    ``error_speedup`` = 2.0 (x (estimated speedup: of the step, or of an epoch in samples/s)): the
    speedup the estimate's whole interval must reach for an error (below it: warning). Source:
    rnndoctor's severity scale (rnndoctor/findings.py: Severity): error means the job runs at
    least 2x slower than it needs to.

References:
    tf.data.Dataset.bucket_by_sequence_length (tensorflow/python/data/ops/dataset_ops.py, TF 2.21);
    keras/src/utils/sequence_utils.py: pad_sequences (pads every row to one length);
    keras/src/layers/core/masking.py: Masking (a step is masked when every feature equals
    mask_value); keras/src/layers/core/embedding.py: Embedding(mask_zero=True);
    keras/src/backend/tensorflow/rnn.py: _assert_valid_mask (cuDNN takes right-padded masks);
    the TF guide "Better performance with the tf.data API"; Khomenko et al. (2016), "Accelerating
    recurrent neural network training using sequence bucketing and multi-GPU data
    parallelization".
"""

from __future__ import annotations

from rnndoctor import rewrite as rw
from rnndoctor import stats as bk
from rnndoctor.decide import Decision
from rnndoctor.facts import Facts, SequenceInput
from rnndoctor.findings import BucketPlan, Evidence, Finding, Fix, FixSafety, Severity
from rnndoctor.rules import Option, OptionValues, finding, rule
from rnndoctor.rules import _fastpath as fp
from rnndoctor.rules import _sequences as sq

MIN_PADDED_FRACTION = Option(
    name="min_padded_fraction",
    default=0.30,
    unit="fraction of the timesteps",
    source="rnndoctor's choice",
    help="the measured padded fraction of the timesteps from which the rule reports",
)


def plan(record: SequenceInput) -> bk.BucketPlan:
    """The bucketing plan for a sampled input (exact distribution, sampled batch size)."""
    dist = bk.LengthDistribution(tuple(record.length_values), tuple(record.length_counts))
    steps = bk.padded_steps(record.padded_lengths, record.batch_sizes)
    return bk.plan_buckets(dist, sq.batch_size(record), steps)


def bucket_code(
    facts: Facts, record: SequenceInput, result: bk.BucketPlan
) -> tuple[str, FixSafety]:
    """Ready-to-paste bucketing code and its safety (``unsafe``, or ``display-only`` where the
    pipeline cannot be written from the facts: a ``tf.data`` pipeline, placeholder names, an
    argument of ``fit`` the pipeline does not carry exactly; :func:`sq.fit_data`)."""
    data = sq.fit_data(facts)
    per_step = bool(record.targets_per_step)
    kind = facts.fit.data_kind if facts.fit else None
    bucket = "    .bucket_by_sequence_length(length, BOUNDARIES, BATCH_SIZES)"
    if kind == "tf.data":
        head = _head(record, result, sq.unpad_function(record, per_step), "x, y")
        body = [
            "# in your pipeline, on single (unbatched) sequences, in place of batch/padded_batch:",
            "dataset = (",
            "    dataset.map(unpad, num_parallel_calls=tf.data.AUTOTUNE)",
            bucket,
            "    .prefetch(tf.data.AUTOTUNE)",
            ")",
            sq.any_length_input(record),
        ]
        return "\n".join(head + body), FixSafety.DISPLAY_ONLY
    unpad = sq.unpad_function(record, per_step, weights=data.weights is not None)
    head = _head(record, result, unpad, data.parameters)
    body = [
        *data.head,
        "dataset = (",
        f"    tf.data.Dataset.from_tensor_slices(({', '.join(data.arrays)}))",
        "    .map(unpad, num_parallel_calls=tf.data.AUTOTUNE)",
        "    .cache()",
        *([f"    .shuffle(len({data.x}))"] if data.shuffled else []),
        bucket,
        "    .prefetch(tf.data.AUTOTUNE)",
        ")",
        *data.notes,
        sq.any_length_input(record),
    ]
    if not record.mask_used:
        advice, lines = sq.mask_advice(record, sq.embedding_call(facts))
        body += ["", f"# no mask is used: {advice[0].lower()}{advice[1:]}", *lines]
    rewritable = kind in (None, "numpy") and record.input_rank in (2, 3) and data.exact
    safety = FixSafety.UNSAFE if rewritable else FixSafety.DISPLAY_ONLY
    return "\n".join(head + body), safety


def _head(
    record: SequenceInput, result: bk.BucketPlan, unpad: list[str], parameters: str
) -> list[str]:
    """The sketch's definitions: the boundaries, ``unpad`` and ``length`` (which reads ``x``
    only, whatever else the elements hold)."""
    return [
        "import tensorflow as tf",
        "",
        f"BOUNDARIES = {list(result.boundaries)}  # from {record.sequences} sampled lengths",
        f"BATCH_SIZES = [{result.batch_sizes[0]}] * (len(BOUNDARIES) + 1)",
        "",
        "",
        *unpad,
        "",
        "",
        f"def length({parameters}):",
        "    return tf.shape(x)[0]",
        "",
        "",
    ]


def fit_rewrite(facts: Facts, record: SequenceInput, result: bk.BucketPlan) -> Fix | None:
    """The rewrite of the user's ``fit(x, y, batch_size=..., validation_split=...)`` line into
    the same job on a bucketed ``tf.data`` pipeline, or None where it cannot be written losslessly.

    Written for arrays of token ids (``input_rank`` 2) under a mask that drops the padding
    (``Embedding(mask_zero=True)`` / ``Masking``): each sequence is unpadded and the buckets pad
    per batch, so the model sees the same valid steps. ``batch_size`` (Keras' default 32 when
    not written) becomes every bucket's batch size, ``validation_split`` the same last part of
    the arrays (``keras/src/trainers/data_adapters/array_slicing.py``:
    ``train_validation_split``) as ``validation_data``, ``shuffle`` (default True) a
    ``Dataset.shuffle`` of the whole training set; every other argument keeps the user's text
    (:func:`rnndoctor.rewrite.move_fit_data`). ``sample_weight`` (a plain name or
    attribute) becomes each element's third part, split with the arrays by ``validation_split``
    as Keras splits it; the user's own ``validation_data`` stays, with ``validation_batch_size``
    set to the written ``batch_size`` it was validated with (Keras: ``validation_batch_size or
    batch_size``), and makes ``validation_split`` void, as in Keras. ``class_weight`` and
    ``steps_per_epoch`` keep the sketch (:func:`rnndoctor.rewrite.fit_data_arguments`).
    The statement is replaced from its line's start (``history = model.fit(...)`` keeps
    ``history = ``), the definitions above it.
    """
    fit = facts.fit
    loc = fit.location if fit else None
    kind = fit.data_kind if fit else None
    if loc is None or not loc.call_source or kind not in (None, "numpy"):
        return None
    if fit.y_kind != "array":  # several targets (a list or dict): y[:n] would slice the list
        return None
    if not record.mask_used or record.input_rank != 2:
        return None
    given = rw.fit_data_arguments(loc.call_source)
    if given is None:
        return None
    first = loc.call_source.split("\n", 1)[0]
    code_line = loc.code or first
    prefix = code_line[: code_line.index(first)] if first in code_line else ""
    arrays = [given["x"], given["y"]]
    if "sample_weight" in given:  # per-sample (or per-step) weights: each element's third part
        arrays.append(given["sample_weight"])
    block = _bucketed_block(record, result, given.get("batch_size", "32"), len(arrays) == 3)
    shuffle = given.get("shuffle", "True")
    train, validation = f"rd501_bucketed({', '.join(arrays)}, {shuffle})", None
    # beside validation_data, Keras ignores validation_split (and move_fit_data drops it)
    if "validation_split" in given and "validation_data" not in given:
        block.append(f"rd501_split = int(len({arrays[0]}) * (1 - {given['validation_split']}))  "
                     "# fit's validation_split: the last part")  # fmt: skip
        head = ", ".join(f"{a}[:rd501_split]" for a in arrays)
        tail = ", ".join(f"{a}[rd501_split:]" for a in arrays)
        train = f"rd501_bucketed({head}, {shuffle})"
        validation = f"rd501_bucketed({tail}, False)"
    call = rw.move_fit_data(loc.call_source, train, validation)
    if call is None:
        return None
    return Fix(
        f"Bucket by length: {len(result.boundaries)} boundaries, padding "
        f"{record.padded_fraction:.0%} -> {result.padded_fraction_after:.0%}, fit on a "
        f"bucketed tf.data pipeline ({_changes(len(result.boundaries) + 1, shuffle)})",
        "\n".join([*block, prefix + call]),
        FixSafety.UNSAFE,
        before=prefix + loc.call_source,
        location=fp.to_location(loc),
    )


def _bucketed_block(
    record: SequenceInput, result: bk.BucketPlan, batch_size: str, weights: bool
) -> list[str]:
    """The definitions above the rewritten ``fit``: the boundaries, ``rd501_unpad`` and
    ``rd501_bucketed`` over ``(x, y)`` elements, or ``(x, y, w)`` with ``fit``'s
    ``sample_weight``; the bucket length reads ``x`` only."""
    names = "x, y, w" if weights else "x, y"
    unpad = [line.replace("def unpad(", "def rd501_unpad(") for line in
             sq.unpad_function(record, bool(record.targets_per_step), weights)]  # fmt: skip
    return [
        "import tensorflow as tf",
        "",
        f"RD501_BOUNDARIES = {list(result.boundaries)}  # from {record.sequences} sampled lengths",
        "",
        "",
        *unpad,
        "",
        "",
        f"def rd501_bucketed({names}, shuffle):",
        f"    dataset = tf.data.Dataset.from_tensor_slices(({names}))",
        "    dataset = dataset.map(rd501_unpad, num_parallel_calls=tf.data.AUTOTUNE).cache()",
        "    if shuffle:",
        "        dataset = dataset.shuffle(len(x))",
        "    return dataset.bucket_by_sequence_length(",
        f"        lambda {names}: tf.shape(x)[0],",
        "        RD501_BOUNDARIES,",
        f"        [{batch_size}] * (len(RD501_BOUNDARIES) + 1),",
        "    ).prefetch(tf.data.AUTOTUNE)",
        "",
        "",
    ]


def _changes(buckets: int, shuffle: str) -> str:
    """Every way the bucketed ``fit`` trains differently, for the fix's title: the order of
    examples, the batches per epoch (``bucket_by_sequence_length`` keeps each bucket's last,
    partial batch: ``tensorflow/python/data/experimental/ops/grouping.py``) and, where
    ``shuffle`` may be ``"batch"`` (Keras then shuffles within batch-sized chunks:
    ``keras/src/trainers/data_adapters/array_data_adapter.py``), a full shuffle."""
    said = [
        "the order of examples changes, each batch holds similar lengths",
        f"more, smaller batches per epoch: up to {buckets} partial batches (one per bucket) "
        "instead of one, so more steps",
    ]
    if shuffle.strip() not in ("True", "False"):
        what = "it is" if shuffle.strip().strip("'\"") == "batch" else "if it is"
        said.append(
            f'shuffle={shuffle} becomes a full shuffle of the training set ({what} "batch")'
        )
    return "unsafe: " + "; ".join(said)


def _no_mask_sentence(record: SequenceInput) -> str:
    """Only where there is padding and no mask: the model computes on it; the mask to add."""
    if record.mask_used or not record.padded_fraction:
        return ""
    advice, _ = sq.mask_advice(record)
    return (
        " No mask is used, so the model also computes on the padding and sees it as data. "
        f"{advice}, then bucket as below."
    )


def _pad_evidence(record: SequenceInput) -> list[Evidence]:
    if record.pad_value is None:
        return []
    end = "start" if record.pad_side == "left" else "end"
    return [
        Evidence("pad step (no mask)", f"{record.pad_value}, at the {end}",
                 source="sampled batches: runs of one step at one end"),
    ]  # fmt: skip


def _evidence(record: SequenceInput, result: bk.BucketPlan) -> list[Evidence]:
    """The padding now and after bucketing at ``result``, as the evidence table shows them."""
    return [
        *sq.common_evidence(record),
        Evidence("padded fraction now", round(record.padded_fraction, 4),
                 source="sampled batches"),
        Evidence("padded fraction after bucketing (expected)",
                 round(result.padded_fraction_after, 4), source="rnndoctor/stats.py"),
        Evidence("suggested bucket boundaries", list(result.boundaries), "timesteps",
                 source="exact: least expected padded timesteps over the sampled lengths"),
        Evidence("bucket batch size", result.batch_sizes[0], "sequences",
                 source="sampled batches"),
        Evidence("sampled sequences per bucket", list(result.bucket_sequences), "sequences",
                 source="sampled lengths"),
        Evidence("timesteps computed now / after (padding included)",
                 f"{result.padded_steps_now} / {result.padded_steps_after:.0f}", "timesteps",
                 source="sampled batches"),
        Evidence("padded length per batch (median)", sq.median(record.padded_lengths),
                 "timesteps", source="sampled batches"),
        Evidence("valid length p50 / p90 / max",
                 f"{record.quantiles.get('p50', 0):g} / {record.quantiles.get('p90', 0):g}"
                 f" / {record.quantiles.get('max', 0):g}", "timesteps",
                 source="sampled batches"),
    ]  # fmt: skip


def _severity(estimate: sq.StepEstimate, options: OptionValues) -> tuple[Severity, bool, str]:
    """The finding's severity (Severity in the module doc), whether its gain is uncertain
    (counted for no speedup), and the sentence that says why. ``info`` where the probe measured
    the whole interval under 1.05x: the step does not grow with the length, or the function for
    any length the fix runs takes the gain back (``StepEstimate.negligible_reason`` says which);
    the warning rests on the padded fraction, and the forecast only on a gain whose interval
    clears 1.05x."""
    if estimate.negligible():
        return Severity.INFO, False, estimate.negligible_reason()
    uncertain = estimate.decision(sq.NEGLIGIBLE_SPEEDUP) is not Decision.CLEARS
    said = (
        f" The gain is {estimate.inconclusive(sq.NEGLIGIBLE_SPEEDUP)}; no speedup is counted "
        "for it."
        if uncertain
        else ""
    )
    error = estimate.reaches_error(options.error_speedup)
    return Severity.ERROR if error else Severity.WARNING, uncertain, said


@rule(
    "RD501",
    "padding-waste",
    "measured padded fraction >= 30%: bucket by length (boundaries from the observed lengths)",
    needs=("sequences",),
    severity=Severity.WARNING,
    options=(MIN_PADDED_FRACTION, sq.ERROR_SPEEDUP),
)
def check(facts: Facts, options: OptionValues) -> list[Finding]:
    sq.require_sampled(facts)
    findings = []
    for record in sq.records(facts):
        if record.ragged or not record.length_values or record.padded_fraction is None:
            continue
        if record.padded_fraction < options.min_padded_fraction:
            continue
        result = plan(record)
        code, safety = bucket_code(facts, record, result)
        fix = fit_rewrite(facts, record, result) or Fix(
            f"Bucket by length: {len(result.boundaries)} boundaries, padding "
            f"{record.padded_fraction:.0%} -> {result.padded_fraction_after:.0%} "
            "(this changes the order of examples: each batch holds similar lengths)",
            code,
            safety,
        )
        probes = facts.probes
        if probes is not None:
            fix = sq.one_length_fix(
                fix, probes.length_rejected, probes.length_probe_not_measured,
                probes.length_mixed_error, probes.length_mixed_not_tried,
            )  # fmt: skip
        location, where = sq.padding_location(facts, record)
        layers = sq.fed_layers(facts, record)
        no_mask = _no_mask_sentence(record)
        estimate = sq.step_estimate(
            facts, record, result.speedup, tuple(result.boundaries),
            probes.length_probe if probes else [],
            probes.length_probe_not_measured if probes else None,
            probes.length_any if probes else None,
            probes.length_any_not_measured if probes else None,
        )  # fmt: skip
        message = (
            f"{record.padded_fraction:.1%} of the timesteps computed for input "
            f"'{record.input}' are padding (median padded length "
            f"{sq.median(record.padded_lengths):g}, median valid length "
            f"{record.quantiles.get('p50', 0):g}). Bucketing by length at "
            f"{list(result.boundaries)} is expected to cut padding to "
            f"{result.padded_fraction_after:.1%}: {estimate.step_phrase()}.{no_mask}"
        )
        evidence = [*_evidence(record, result), where, *_pad_evidence(record)]
        evidence += estimate.evidence
        severity, uncertain, said = _severity(estimate, options)
        negligible = severity is Severity.INFO
        message += said
        findings.append(
            finding(
                severity=severity,
                message=message,
                layer=layers[0].path if layers else (record.rnn_layers or [None])[0],
                location=location,
                evidence=tuple(evidence),
                fix=fix,
                gain=(
                    ("inconclusive: " if uncertain else "")
                    + f"{estimate.gain_head()} from {result.padded_steps_now} -> "
                    f"{result.padded_steps_after:.0f} timesteps computed (padding included) on "
                    "the sampled sequences (each batch "
                    "padded to its own longest sequence, lengths drawn from the sampled "
                    f"distribution): {estimate.basis()}"
                ),
                speedup=None if negligible or uncertain else round(estimate.speedup, 3),
                speedup_interval=estimate.interval_words(),
                bucket_plan=BucketPlan(
                    boundaries=tuple(result.boundaries), batch_sizes=tuple(result.batch_sizes)
                ),
            )
        )
    return findings
