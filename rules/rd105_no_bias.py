"""RD105 no-bias: ``use_bias=False`` rules out the cuDNN kernel.

What it detects:
    An ``LSTM`` or ``GRU`` with ``use_bias=False``.

Why it slows training:
    cudnn_ok requires ``use_bias`` (the kernel's parameter layout includes biases).

Evidence:
    ``model.rnn_layers[].args.use_bias``; ``fast_path.blocking_args`` (the probe of the installed
    Keras); the layer's construction site.

Example:
    `keras.layers.GRU(64, use_bias=False)`

Use instead:
    `keras.layers.GRU(64)`

Fix safety:
    unsafe: adds trainable bias parameters, so the model learns differently, and from its first
    step for an LSTM, whose forget-gate biases start at 1 (``unit_forget_bias=True``, Keras'
    default: keras/src/layers/rnn/lstm.py, ``LSTMCell.build``); the others start at
    ``bias_initializer`` (zeros by default). Saved weights no longer load as they are.

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


@rule("RD105", "no-bias", "use_bias=False rules out the cuDNN kernel", severity=Severity.WARNING)
def check(facts: Facts) -> list[Finding]:
    return fp.single_arg_check(
        facts,
        arg="use_bias",
        static=lambda v: not v,
        fix_title=(
            "Drop use_bias=False: this adds trainable biases, so the model learns differently "
            "(an LSTM's forget-gate biases start at 1 with unit_forget_bias=True, Keras' "
            "default; the others at bias_initializer, zeros by default)"
        ),
        safety=FixSafety.UNSAFE,
        why="cuDNN needs biases (cudnn_ok requires use_bias).",
        why_keras2="cuDNN needs biases ({criterion} requires use_bias).",
    )
