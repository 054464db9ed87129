"""RD104 unroll: ``unroll=True`` rules out cuDNN and grows memory and compile time with length.

What it detects:
    An ``LSTM`` or ``GRU`` with ``unroll=True``.

Why it slows training:
    cudnn_ok requires ``not unroll``. An unrolled RNN copies the cell once per timestep into the
    graph: memory, graph size and compile time grow linearly with the sequence length, and the
    fused kernel is never used.

Evidence:
    ``model.rnn_layers[].args.unroll``; ``fast_path.blocking_args`` (the probe of the installed
    Keras); the layer's construction site.

Example:
    `keras.layers.LSTM(64, unroll=True)`

Use instead:
    `keras.layers.LSTM(64)`

Fix safety:
    safe: the same computation, rolled into a loop (or the fused kernel).

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


@rule("RD104", "unroll", "unroll=True rules out the cuDNN kernel", severity=Severity.WARNING)
def check(facts: Facts) -> list[Finding]:
    return fp.single_arg_check(
        facts,
        arg="unroll",
        static=bool,
        fix_title="Drop unroll=True",
        safety=FixSafety.SAFE,
        why="cuDNN needs a rolled loop (cudnn_ok requires not unroll).",
        why_keras2="cuDNN needs a rolled loop ({criterion} requires not unroll).",
    )
