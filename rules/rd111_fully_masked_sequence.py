"""RD111 fully-masked-sequence: a sampled batch holds a sequence with every step masked.

What it detects:
    Sampled sequences whose mask has no valid step (an empty text padded to full length), in an
    input that reaches an ``LSTM`` / ``GRU``.

Why it slows training:
    On the cuDNN path it fails: Keras 3's ``_assert_valid_mask``
    (``keras/src/backend/tensorflow/rnn.py``) also asserts ``not _has_fully_masked_sequence``,
    so on a GPU the step raises ``InvalidArgumentError`` at the first batch holding an empty
    sequence (older stacks failed inside cuDNN with ``CUDNN_STATUS_BAD_PARAM``,
    tensorflow/tensorflow#43103). Off the cuDNN path the row only costs compute and teaches
    nothing. Keras 2 (tf_keras) does not fail: ``is_cudnn_supported_inputs``
    (``tf_keras/src/layers/rnn/gru_lstm_utils.py``: ``has_fully_masked_sequence``) sends such a
    batch to the generic kernel (``standard_lstm`` / ``standard_gru`` in
    ``tf_keras/src/layers/rnn/lstm.py`` / ``gru.py``), silently. Severity: when an LSTM/GRU it
    reaches takes cuDNN now or once its RD1xx findings are fixed (the probe's
    ``takes_fast_path`` / ``fixed_takes_fast_path``), ``error`` under Keras 3 (the job fails) and
    ``warning`` under Keras 2 (the job runs the slow kernel), read from
    ``environment.keras_flavour``; ``info`` otherwise.

Evidence:
    ``sequences.inputs[].fully_masked_rows``, ``sequences``, ``length_source``,
    ``padding_location``; ``model.rnn_layers[].fast_path``.

Example:
    A dataset of texts where some are empty after cleaning, padded with ``pad_sequences`` and
    fed through ``Embedding(mask_zero=True)``.

Use instead:
    Drop empty sequences before training: ``keep = np.count_nonzero(x, axis=1) > 0;
    x, y = x[keep], y[keep]``, or ``dataset.filter(lambda x, y: tf.math.count_nonzero(x) > 0)``
    before batching.

Fix safety:
    unsafe: the training set loses those rows (they carry no input; check that the labels of
    empty inputs do not matter to the task).

References:
    keras/src/backend/tensorflow/rnn.py: _assert_valid_mask, _has_fully_masked_sequence;
    tf_keras/src/layers/rnn/gru_lstm_utils.py: is_cudnn_supported_inputs,
    has_fully_masked_sequence;
    tensorflow/tensorflow#43103 ("cuDNN error when passing all-masked sequences to RNN layers").
"""

from __future__ import annotations

from rnndoctor.facts import Facts, SequenceInput
from rnndoctor.findings import Evidence, Finding, Fix, FixSafety, Severity
from rnndoctor.rules import _fastpath as fp
from rnndoctor.rules import _sequences as sq
from rnndoctor.rules import finding, rule


def _fix(facts: Facts, record: SequenceInput) -> Fix:
    x, y = sq.data_names(facts)
    value = record.mask_value if record.mask_value is not None else 0
    rank3 = record.input_rank is not None and record.input_rank >= 3
    kind = facts.fit.data_kind if facts.fit else None
    batched_in_tf_data = record.padding_function in ("padded_batch", "bucket_by_sequence_length")
    if kind == "tf.data" or batched_in_tf_data:
        valid = (
            f"tf.reduce_any(tf.not_equal(x, {value!r}))"
            if rank3
            else f"tf.math.count_nonzero(tf.not_equal(x, {value!r})) > 0"
        )
        code = "\n".join(
            [
                "# before padded_batch / bucket_by_sequence_length: drop empty sequences",
                f"dataset = dataset.filter(lambda x, y: {valid})",
            ]
        )
        return Fix("Filter out the empty sequences before batching", code, FixSafety.UNSAFE)
    keep = (
        f"np.any({x} != {value!r}, axis=tuple(range(1, {x}.ndim)))"
        if rank3
        else f"np.count_nonzero({x} != {value!r}, axis=1) > 0"
    )
    code = "\n".join(
        [
            f"keep = {keep}  # sequences with at least one valid step",
            f"{x}, {y} = {x}[keep], {y}[keep]",
        ]
    )
    return Fix("Drop the empty sequences after padding, before fit", code, FixSafety.UNSAFE)


@rule(
    "RD111",
    "fully-masked-sequence",
    "a sampled batch holds a sequence with every step masked; the cuDNN path rejects it",
    needs=("model", "sequences"),
    severity=Severity.ERROR,
)
def check(facts: Facts) -> list[Finding]:
    sq.require_sampled(facts)
    findings = []
    for record, layers in sq.iter_findable(facts):
        if not record.mask_used or not record.fully_masked_rows or not layers:
            continue
        eligible = [layer for layer in layers if sq.cudnn_verdict(layer).eligible]
        location, where = sq.padding_location(facts, record)
        share = record.fully_masked_rows / record.sequences
        if eligible:
            severity = fp.mask_check_severity(facts)
            consequence = (
                f"{sq.cudnn_sentence(eligible)}, whose mask check rejects a batch holding an "
                "empty sequence (Keras 3: _assert_valid_mask, InvalidArgumentError)."
            ) + fp.mask_fallback_sentence(facts)
        else:
            severity = Severity.INFO
            consequence = (
                "These layers run the generic kernel, which accepts them; the rows still cost "
                "compute and carry no input."
            )
        message = (
            f"{record.fully_masked_rows} of {record.sequences} sampled sequences "
            f"({share:.1%}) reaching {sq.layers_label(eligible or layers)} have every step "
            f"masked. {consequence}"
        )
        evidence = [
            *sq.common_evidence(record),
            Evidence("fully masked sequences", record.fully_masked_rows, "sequences",
                     source="sampled masks"),
            Evidence("share of sampled sequences", round(share, 4), source="sampled masks"),
            where,
            Evidence("mask check on the cuDNN path",
                     "falls back to the generic kernel" if fp.is_keras2(facts)
                     else "rejects empty sequences",
                     source=fp.TF_KERAS_MASK_CHECK if fp.is_keras2(facts)
                     else sq.KERAS_MASK_CHECK),
        ]  # fmt: skip
        evidence += sq.cudnn_evidence(eligible)
        findings.append(
            finding(
                severity=severity,
                message=message,
                layer=(eligible or layers)[0].path,
                location=location,
                evidence=tuple(evidence),
                fix=_fix(facts, record),
                gain="not measured: under Keras 2 the batch runs the generic kernel"
                if eligible and fp.is_keras2(facts)
                else "not a speed estimate: on the cuDNN path the step fails at the mask check"
                if eligible
                else f"not measured: {share:.1%} of the rows carry no input",
            )
        )
    return findings
