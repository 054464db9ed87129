"""RD114 ragged-input: an LSTM/GRU receives a ``tf.RaggedTensor``.

What it detects:
    An ``LSTM`` / ``GRU`` whose input sequences arrive as a ``tf.RaggedTensor`` (ragged data
    from ``tf.ragged.constant``, a ragged ``tf.data`` pipeline or a ragged ``keras.Input``). The
    capture hooks ``keras.layers.RNN.call`` during the user's ``fit``, so it sees the ragged
    tensor even when ``fit`` then fails, and also measures row lengths of ragged sampled batches.

Why it slows training:
    Keras 3 does not run RNNs on ragged input at all: ``RNN.call``
    (``keras/src/layers/rnn/rnn.py``) indexes ``sequences[:, 0, :]`` to set up dropout masks,
    which raises ``ValueError: Cannot index into an inner ragged dimension`` while ``fit``
    traces its step (checked on Keras 3.15 with ``LSTM`` and ``GRU``). So with Keras 3 the
    finding is ``error``: the job cannot start. Keras 2 (tf_keras, or a ``keras`` 2.x) has no
    such problem and no finding: ``LSTM.call`` / ``GRU.call``
    (``tf_keras/src/layers/rnn/lstm.py``, ``gru.py``) pad the ragged batch
    (``backend.convert_inputs_if_ragged``) and hand its row lengths to the cuDNN-capable path as
    ``sequence_lengths`` when the layer may take the kernel (``_could_use_gpu_kernel``). (Before
    this was read in the installed tf_keras 2.21, the rule warned there that Keras 2 never fed
    ragged input to cuDNN, and it judged Keras 2 by ``environment.keras``, which holds the
    installed Keras 3 even when tf_keras ran: an ``error`` under tf_keras.)

Evidence:
    ``sequences.inputs[].ragged`` and ``rnn_layers`` (recorded by the ``RNN.call`` hook or from
    ragged sampled batches); ``environment.keras_flavour`` (tf_keras) and ``environment.keras``
    (a ``keras`` 2.x); the layer's construction site.

Example:
    ``ds = tf.data.Dataset.from_tensor_slices((tf.ragged.constant(seqs), y)).batch(32)`` feeding
    ``keras.Input((None, 1))`` and ``LSTM(64)``.

Use instead:
    Dense, right-padded batches with a mask: ``x.to_tensor()`` (pads at the end with 0) and
    ``Masking(mask_value=0.0)`` or ``Embedding(..., mask_zero=True)`` before the RNN; or
    ``padded_batch`` / ``bucket_by_sequence_length`` on the unbatched sequences.

Fix safety:
    display-only: where the ragged tensor comes from depends on the pipeline.

References:
    keras/src/layers/rnn/rnn.py: RNN.call; keras/src/backend/tensorflow/rnn.py:
    _cudnn_lstm (sequence lengths come from a right-padded mask);
    tf_keras/src/layers/rnn/lstm.py and gru.py: ``call`` (``convert_inputs_if_ragged``,
    ``sequence_lengths=row_lengths``); tf.RaggedTensor.to_tensor.
"""

from __future__ import annotations

from rnndoctor.facts import Facts
from rnndoctor.findings import Evidence, Finding, Fix, FixSafety, Severity
from rnndoctor.rules import _fastpath as fp
from rnndoctor.rules import _sequences as sq
from rnndoctor.rules import finding, rule

_FIX = """\
# Dense, right-padded batches with a mask instead of a RaggedTensor:
dataset = dataset.map(lambda x, y: (x.to_tensor(), y))  # pads each batch at the end with 0
# ...and let the model mask the padding before the RNN:
#   layers.Embedding(vocab_size, dim, mask_zero=True)   (token ids), or
#   layers.Masking(mask_value=0.0)                      (float features)"""


def _keras_major(facts: Facts) -> int | None:
    version = facts.environment.keras if facts.environment else None
    try:
        return int(str(version).split(".")[0])
    except (TypeError, ValueError):
        return None


@rule(
    "RD114",
    "ragged-input",
    "an LSTM/GRU receives a RaggedTensor: Keras 3 cannot run it",
    needs=("model", "sequences"),
    severity=Severity.ERROR,
)
def check(facts: Facts) -> list[Finding]:
    sq.require_sampled(facts)
    if fp.is_keras2(facts) or (_keras_major(facts) or 3) < 3:
        return []  # Keras 2 pads ragged batches and gives cuDNN their row lengths (the doc)
    findings = []
    done: set[str] = set()
    for record in sq.records(facts):
        if not record.ragged:
            continue
        for name in record.rnn_layers:
            layer = sq.rnn_layer(facts, name)
            if layer is None or layer.kind not in fp.FUSED_KINDS or layer.path in done:
                continue
            done.add(layer.path)
            consequence = (
                "Keras 3 cannot run an RNN on ragged input: RNN.call indexes sequences[:, 0, :], "
                "which raises 'Cannot index into an inner ragged dimension' when fit traces the "
                "step."
            )
            evidence = [
                Evidence("input", "tf.RaggedTensor", source=record.input),
                Evidence("keras", facts.environment.keras if facts.environment else "unknown",
                         source="environment"),
                Evidence("where Keras 3 fails", "RNN.call: sequences[:, 0, :]",
                         source="keras/src/layers/rnn/rnn.py"),
            ]  # fmt: skip
            if record.sequences:
                evidence.append(
                    Evidence("sampled row lengths", f"{record.sequences} sequences",
                             source="RaggedTensor.row_lengths")
                )  # fmt: skip
            if facts.run.outcome == "script_error" and facts.run.message:
                evidence.append(Evidence("the script's error", facts.run.message, source="run"))
            findings.append(
                finding(
                    severity=Severity.ERROR,
                    message=f"{fp.layer_label(layer)} receives a tf.RaggedTensor. {consequence}",
                    layer=layer.path,
                    location=fp.location(layer),
                    evidence=tuple(evidence),
                    fix=Fix(
                        "Feed dense, right-padded batches with a mask",
                        _FIX,
                        FixSafety.DISPLAY_ONLY,
                    ),
                    gain="not a speed estimate: with Keras 3 the job fails before its first step",
                )
            )
    return findings
