"""RD101 recurrent-dropout: ``recurrent_dropout > 0`` makes Keras skip the cuDNN kernel.

What it detects:
    An ``LSTM`` or ``GRU`` layer with ``recurrent_dropout > 0``. It also covers ``dropout > 0``
    on the Keras versions whose fast path rejects input dropout; which versions those are is
    decided by the capture's probe of the installed Keras, not from memory (Keras 3 applies input
    dropout outside the kernel and keeps the fast path).

Why it slows training:
    ``LSTM.inner_loop`` / ``GRU.inner_loop`` (``keras/src/layers/rnn/lstm.py``, ``gru.py``) only
    try the fused kernel ``if not self.recurrent_dropout``: a per-timestep mask on the recurrent
    state cannot be expressed in cuDNN's fused RNN. With it, Keras runs the generic
    ``backend.rnn`` while-loop, one small kernel launch per op per timestep, forward and backward.

Evidence:
    ``model.rnn_layers[].args.recurrent_dropout`` / ``dropout``; ``fast_path.blocking_args`` and
    ``fast_path.dropout_keeps_fast_path`` from the probe; the layer's construction site.

Example:
    ``keras.layers.LSTM(256, return_sequences=True, recurrent_dropout=0.2)``

Use instead:
    ``keras.layers.LSTM(256, return_sequences=True, dropout=0.2)`` (input dropout, applied outside
    the fused kernel where the probe says so), or a ``keras.layers.Dropout`` layer between layers.

Fix safety:
    unsafe: recurrent dropout and input dropout regularise differently; re-check validation loss.

References:
    keras/src/layers/rnn/lstm.py: LSTM.inner_loop; keras/src/layers/rnn/gru.py: GRU.inner_loop;
    keras/src/backend/tensorflow/rnn.py: cudnn_ok. Gal & Ghahramani (2016), "A Theoretically
    Grounded Application of Dropout in Recurrent Neural Networks".
    Keras 2: tf_keras/src/layers/rnn/lstm.py and gru.py: ``_could_use_gpu_kernel``, set in
    ``LSTM.__init__`` / ``GRU.__init__`` and read in ``call`` (``recurrent_dropout == 0``;
    ``dropout`` is not checked there).
"""

from __future__ import annotations

from rnndoctor.facts import Facts
from rnndoctor.findings import Finding, FixSafety, Severity
from rnndoctor.rules import _fastpath as fp
from rnndoctor.rules import rule


@rule(
    "RD101",
    "recurrent-dropout",
    "LSTM/GRU with recurrent_dropout > 0 skips the cuDNN kernel",
    severity=Severity.WARNING,
)
def check(facts: Facts) -> list[Finding]:
    findings = []
    for layer in fp.rnn_layers(facts):
        rec, basis = fp.blocks(layer, "recurrent_dropout", lambda v: float(v or 0) > 0)
        drop, _ = fp.blocks(layer, "dropout", lambda v: False)  # Keras 3: dropout keeps cuDNN
        if not (rec or drop):
            continue
        args = tuple(a for a, hit in (("recurrent_dropout", rec), ("dropout", drop)) if hit)
        set_args = fp.input_dropout_kept(layer, rec, drop)
        keep_input_dropout = set_args is not None
        rate = layer.args.get("recurrent_dropout")
        title = (
            f"Remove recurrent_dropout; keep regularisation with dropout={rate!r} on the inputs, "
            "which the installed Keras applies outside the cuDNN kernel (probed)"
            if keep_input_dropout
            else "Remove the dropout arguments that block the fast path, and re-check the "
            "validation loss: the code below only removes them; to keep the regularisation, add "
            "a keras.layers.Dropout layer before or after the RNN yourself"
        )
        findings.append(
            fp.arg_finding(
                facts,
                layer,
                args=args,
                basis=basis,
                set_args=set_args,
                fix_title=title,
                safety=FixSafety.UNSAFE,
                why="Keras only tries the cuDNN kernel when recurrent_dropout is 0 "
                "(LSTM/GRU.inner_loop).",
                why_keras2="Keras only tries the cuDNN kernel when recurrent_dropout is 0 "
                "({criterion}).",
            )
        )
    return findings
