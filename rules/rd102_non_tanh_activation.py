"""RD102 non-tanh-activation: an LSTM/GRU whose ``activation`` is not tanh runs without cuDNN.

What it detects:
    An ``LSTM`` or ``GRU`` whose ``activation`` is not Keras' own tanh (``relu``, a lambda, a
    custom function).

Why it slows training:
    cuDNN's fused RNN hard-codes tanh for the cell/candidate activation. The backend's cudnn_ok
    accepts only ``activations.tanh``, ``tf.tanh`` or ``ops.tanh`` (an identity check, so
    ``lambda x: tf.tanh(x)`` fails it too); otherwise Keras runs the generic while-loop.

Evidence:
    ``model.rnn_layers[].args.activation``; ``fast_path.blocking_args`` (the probe of the installed
    Keras); the layer's construction site.

Example:
    `keras.layers.GRU(128, activation="relu")`

Use instead:
    `keras.layers.GRU(128)` (tanh is the default).

Fix safety:
    unsafe: a different activation changes the model; retrain and compare.

References:
    keras/src/backend/tensorflow/rnn.py: cudnn_ok, _do_lstm_arguments_support_cudnn,
    _do_gru_arguments_support_cudnn; keras/src/layers/rnn/lstm.py: LSTM.inner_loop.
    Keras 2: tf_keras/src/layers/rnn/lstm.py and gru.py: ``_could_use_gpu_kernel``, set in
    ``LSTM.__init__`` / ``GRU.__init__`` and read in ``call`` (the probe's verdict for a
    tf_keras model).
"""

from __future__ import annotations

from rnndoctor.facts import Facts
from rnndoctor.findings import Finding, FixSafety, Severity
from rnndoctor.rules import _fastpath as fp
from rnndoctor.rules import rule


@rule(
    "RD102",
    "non-tanh-activation",
    "LSTM/GRU activation is not tanh, so cuDNN is skipped",
    severity=Severity.WARNING,
)
def check(facts: Facts) -> list[Finding]:
    return fp.single_arg_check(
        facts,
        arg="activation",
        static=lambda v: v != "tanh",
        fix_title="Drop the activation argument: the default tanh is what cuDNN computes",
        safety=FixSafety.UNSAFE,
        why="cuDNN's fused kernel computes tanh only "
        "(cudnn_ok in keras/src/backend/tensorflow/rnn.py).",
        why_keras2="cuDNN's fused kernel computes tanh only ({criterion}).",
    )
