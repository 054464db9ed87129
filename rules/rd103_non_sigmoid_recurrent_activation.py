"""RD103 non-sigmoid-recurrent-activation: non-sigmoid gates run without cuDNN.

What it detects:
    An ``LSTM`` or ``GRU`` whose gate activation (``recurrent_activation``) is not sigmoid,
    typically ``hard_sigmoid``, the Keras 1/2-era default kept in old code.

Why it slows training:
    cuDNN's fused RNN hard-codes sigmoid gates; cudnn_ok accepts only ``activations.sigmoid``,
    ``tf.sigmoid`` or ``ops.sigmoid``. Anything else runs the generic while-loop.

Evidence:
    ``model.rnn_layers[].args.recurrent_activation``; ``fast_path.blocking_args`` (the probe of
    the installed Keras); the layer's construction site.

Example:
    `keras.layers.LSTM(64, recurrent_activation="hard_sigmoid")`

Use instead:
    `keras.layers.LSTM(64)` (sigmoid is the default).

Fix safety:
    unsafe: the gates change numerically; retrain and compare (weights stay compatible).

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
    "RD103",
    "non-sigmoid-recurrent-activation",
    "recurrent_activation is not sigmoid, so cuDNN is skipped",
    severity=Severity.WARNING,
)
def check(facts: Facts) -> list[Finding]:
    return fp.single_arg_check(
        facts,
        arg="recurrent_activation",
        static=lambda v: v != "sigmoid",
        fix_title="Drop recurrent_activation: the default sigmoid is what cuDNN computes",
        safety=FixSafety.UNSAFE,
        why="cuDNN's fused kernel computes sigmoid gates only "
        "(cudnn_ok in keras/src/backend/tensorflow/rnn.py).",
        why_keras2="cuDNN's fused kernel computes sigmoid gates only ({criterion}).",
    )
