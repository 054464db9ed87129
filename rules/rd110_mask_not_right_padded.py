"""RD110 mask-not-right-padded: a left-padded mask, or one with holes, reaches a cuDNN LSTM/GRU.

What it detects:
    The mask an ``LSTM`` / ``GRU`` receives, measured on sampled batches, is left-padded (the
    valid steps come last: ``pad_sequences``' default ``padding="pre"``) or has holes (masked
    steps between valid ones: id 0 used as a real token under ``mask_zero=True``), and the layer
    runs the cuDNN kernel on a GPU, either now or once its RD1xx findings are fixed (the fast-path
    probe's ``takes_fast_path`` or ``fixed_takes_fast_path``). The second case counts because
    following rnndoctor's own RD1xx fix would otherwise make the job fail.

Why it slows training:
    It does worse: on a GPU, Keras 3 fails. Before the fused kernel, ``_cudnn_lstm`` /
    ``_cudnn_gru`` call ``_assert_valid_mask`` (``keras/src/backend/tensorflow/rnn.py``), a
    ``tf.Assert`` that every mask equals ``tf.sequence_mask`` of its own count
    (``_is_sequence_right_padded``). Inside ``fit``'s compiled step the assertion runs as a graph
    op, after the ``try``/``except`` that would fall back to the generic kernel, so the step
    raises ``InvalidArgumentError`` ("You are passing a RNN mask that does not correspond to
    right-padded sequences...") at the first batch holding such a row, possibly hours into a job.
    Keras 2 (tf_keras, ``TF_USE_LEGACY_KERAS=1``) instead checks the mask at run time
    (``is_cudnn_supported_inputs`` in ``tf_keras/src/layers/rnn/gru_lstm_utils.py``:
    ``is_sequence_right_padded``, read by ``lstm_with_backend_selection`` /
    ``gru_with_backend_selection`` in ``tf_keras/src/layers/rnn/lstm.py`` / ``gru.py``) and
    silently runs the slow generic kernel (``standard_lstm`` / ``standard_gru``) for every such
    batch. On CPU the generic kernel handles any mask, so a CPU run trains normally. Severity, on
    every machine (the check is a pre-flight for the GPU job): ``error`` under Keras 3 (the job
    fails), ``warning`` under Keras 2 (the job runs the slow kernel), read from
    ``environment.keras_flavour``.

Evidence:
    ``sequences.inputs[].left_padded_rows`` / ``holed_rows`` / ``pad_side`` / ``mask_used`` /
    ``length_source``, ``padding_location`` / ``padding_argument`` (the hooked
    ``pad_sequences`` call) and ``target_padding_location``; ``model.rnn_layers[].fast_path``.

Example:
    ``x = keras.utils.pad_sequences(seqs, maxlen=80)`` (``padding="pre"`` by default) feeding
    ``Embedding(vocab, 64, mask_zero=True)`` and ``LSTM(256)``.

Use instead:
    ``x = keras.utils.pad_sequences(seqs, maxlen=80, padding="post")`` (and the same for
    per-step targets), or ``dataset.padded_batch(batch_size)`` / ``bucket_by_sequence_length``,
    which pad at the end. Holes under ``mask_zero=True``: reserve id 0 for padding (shift the
    vocabulary by one).

Fix safety:
    unsafe: each sequence moves to the start of its row. Where every layer before the RNN honours
    the mask, the RNN sees the same steps in the same order; a position-dependent layer (a
    convolution, a position embedding) sees different positions. Move per-step targets with the
    inputs. Display-only where the ``pad_sequences`` call reads ``padding`` from a name or an
    option (``padding=pad_mode``): the fix says to set that to ``'post'`` where it is set.

References:
    keras/src/backend/tensorflow/rnn.py: _assert_valid_mask, _is_sequence_right_padded,
    _cudnn_lstm, _cudnn_gru; tf_keras/src/layers/rnn/gru_lstm_utils.py:
    is_cudnn_supported_inputs, is_sequence_right_padded;
    keras/src/utils/sequence_utils.py: pad_sequences (padding="pre");
    the Keras LSTM/GRU docs: cuDNN needs "Inputs, if use masking, are strictly right-padded".
"""

from __future__ import annotations

from rnndoctor import rewrite as rw
from rnndoctor.facts import Facts, SequenceInput
from rnndoctor.findings import Evidence, Finding, Fix, FixSafety, Severity
from rnndoctor.rules import _fastpath as fp
from rnndoctor.rules import _sequences as sq
from rnndoctor.rules import finding, rule

_PAD_SEQUENCES_PARAMS = ("sequences", "maxlen", "dtype", "padding", "truncating", "value")


def _rewritten_line(loc, call_source: str | None) -> str | None:
    """The user's padding line with ``padding="post"`` set in its ``pad_sequences`` call."""
    code = fp.rewrite_call(
        call_source, set_args={"padding": "post"}, positional_names=_PAD_SEQUENCES_PARAMS
    )
    if code is None:
        return None
    if loc.code and call_source and call_source in loc.code:
        return loc.code.replace(call_source, code)
    return code


def _read_fix(read: list[str], lines: list[str]) -> Fix:
    """The display-only fix where ``pad_sequences`` calls read their padding (``read``: what
    they pass, ``padding=pad_mode``), with the other call's rewritten ``lines``, so that the
    inputs and the per-step targets move together."""
    names = " and ".join(read)
    where = "where they are set" if len(read) > 1 else "where it is set"
    notes = [
        f"# your pad_sequences call passes padding={text}: set {text} to 'post' where it is "
        "set (a literal in the call would make it do nothing)"
        for text in read
    ]
    other = ["# and your other pad_sequences call, padded at the end:"] if lines else []
    return Fix(
        f"Pad at the end: set {names} to 'post' {where}"
        + (", and pad the other call at the end too" if lines else ""),
        "\n".join([*notes, *other, *lines]),
        FixSafety.DISPLAY_ONLY,
    )


def _fix(facts: Facts, record: SequenceInput) -> Fix:
    x, y = sq.data_names(facts)
    if record.left_padded_rows and record.padding_function == "pad_sequences":
        # each call's padding read from a name (padding=pad_mode: a note), else rewritten
        lines, before, read = [], [], []
        for loc in (record.padding_location, record.target_padding_location):
            if loc is None:
                continue
            text = rw.read_values(loc.call_source, ("padding",), _PAD_SEQUENCES_PARAMS)
            if text:
                read += [t for t in text.values() if t not in read]
                continue
            line = _rewritten_line(loc, loc.call_source)
            if line is not None and line not in lines:
                lines.append(line)
                before.append(loc.code or loc.call_source or "")
        if read:  # the inputs and the targets move together: every call is in the note
            return _read_fix(read, lines)
        if lines:
            title = "Pad at the end: pad_sequences(..., padding='post')" + (
                ", for the inputs and the per-step targets alike" if len(lines) > 1 else ""
            )
            return Fix(title, "\n".join(lines), FixSafety.UNSAFE, before="\n".join(before))
    if record.left_padded_rows:
        seen = record.padding_location is not None
        code = "\n".join(
            [
                *(
                    []
                    if seen
                    else [
                        "# no pad_sequences call was seen: your own code pads at the start",
                        "# (e.g. out[-len(ids):] = ids); put the valid steps first there, or:",
                    ]
                ),
                f"{x} = keras.utils.pad_sequences(sequences, padding='post')  # pads at the end",
                "# or, in a tf.data pipeline, pad per batch at the end:",
                "dataset = dataset.padded_batch(batch_size)",
            ]
        )
        return Fix("Pad at the end instead of the start", code, FixSafety.DISPLAY_ONLY)
    if record.length_source == "mask_zero":
        code = "\n".join(
            [
                "# id 0 appears inside sequences, where mask_zero=True masks it: reserve 0 for",
                "# padding by shifting every real id up by one",
                f"{x} = np.where({x} != PAD, {x} + 1, 0)  # PAD: the id your padding uses",
                "layers.Embedding(vocab_size + 1, dim, mask_zero=True)",
            ]
        )
        return Fix("Keep id 0 for padding only", code, FixSafety.DISPLAY_ONLY)
    code = "\n".join(
        [
            "# real steps equal the mask value, so the mask has holes: pick a mask value that",
            "# real data never takes, and pad with it at the end",
            "layers.Masking(mask_value=PAD_VALUE)",
        ]
    )
    return Fix("Mask only the padding, at the end of each sequence", code, FixSafety.DISPLAY_ONLY)


def _mask_check_evidence(facts: Facts) -> Evidence:
    """What the cuDNN path's mask check does in the Keras that ran (see the module doc)."""
    if fp.is_keras2(facts):
        return Evidence(
            "mask check on the cuDNN path", "falls back to the generic kernel",
            source=fp.TF_KERAS_MASK_CHECK,
        )  # fmt: skip
    return Evidence("mask check on the cuDNN path", "fails", source=sq.KERAS_MASK_CHECK)


def _gain(facts: Facts) -> str:
    if fp.is_keras2(facts):
        return (
            "not measured: under Keras 2 the GPU job runs the generic kernel instead of cuDNN; "
            "with the fix, the layer keeps the cuDNN kernel with its masks"
        )
    return (
        "not a speed estimate: the GPU job fails at the mask check; with the fix, "
        "the layer keeps the cuDNN kernel with its masks"
    )


@rule(
    "RD110",
    "mask-not-right-padded",
    "sampled masks are left-padded or have holes; the cuDNN path rejects them",
    needs=("model", "sequences"),
    severity=Severity.ERROR,
)
def check(facts: Facts) -> list[Finding]:
    sq.require_sampled(facts)
    findings = []
    for record, layers in sq.iter_findable(facts):
        bad = record.left_padded_rows + record.holed_rows
        if not record.mask_used or not bad:
            continue
        eligible = [layer for layer in layers if sq.cudnn_verdict(layer).eligible]
        if not eligible:
            continue
        location, where = sq.padding_location(facts, record)
        parts = []
        if record.left_padded_rows:
            parts.append(f"{record.left_padded_rows} are left-padded")
        if record.holed_rows:
            parts.append(f"{record.holed_rows} have masked steps between valid ones")
        pads = (
            f" ({record.padding_function}(padding={record.padding_argument!r}) at line "
            f"{record.padding_location.line})"
            if record.padding_location is not None and record.padding_function == "pad_sequences"
            else ""
        )
        message = (
            f"The mask reaching {sq.layers_label(eligible)} is not right-padded: of "
            f"{record.sequences} sampled sequences, {' and '.join(parts)}{pads}. "
            f"{sq.cudnn_sentence(eligible)}, whose mask check fails the training step with "
            "InvalidArgumentError at the first such batch (Keras 3: _assert_valid_mask)."
        )
        message += fp.mask_fallback_sentence(facts)
        if not (facts.environment and facts.environment.gpu_count):
            message += " This CPU run is unaffected: the generic kernel accepts any mask."
        evidence = [
            *sq.common_evidence(record),
            Evidence("left-padded sequences", record.left_padded_rows, "sequences",
                     source="sampled masks"),
            Evidence("sequences with holes", record.holed_rows, "sequences",
                     source="sampled masks"),
            Evidence("pad side", record.pad_side, source="sampled masks"),
            where,
            _mask_check_evidence(facts),
        ]  # fmt: skip
        evidence += sq.cudnn_evidence(eligible)
        findings.append(
            finding(
                severity=fp.mask_check_severity(facts),
                message=message,
                layer=eligible[0].path,
                location=location,
                evidence=tuple(evidence),
                fix=_fix(facts, record),
                gain=_gain(facts),
            )
        )
    return findings
