"""RD106 gru-reset-before: a GRU with ``reset_after=False`` has no cuDNN kernel.

What it detects:
    A ``GRU`` with ``reset_after=False`` (the original Cho et al. formulation, and the
    Keras 2.0-era default).

Why it slows training:
    cuDNN implements the GRU variant that applies the reset gate after the recurrent matrix
    multiplication; _do_gru_arguments_support_cudnn requires ``reset_after``.

Evidence:
    ``model.rnn_layers[].args.reset_after``; ``fast_path.blocking_args`` (the probe of the installed
    Keras); the layer's construction site.

Example:
    `keras.layers.GRU(64, reset_after=False)`

Use instead:
    `keras.layers.GRU(64)` (reset_after=True is the default).

Fix safety:
    unsafe: a different GRU formulation with a different bias shape; retrain (old weights do not
    load).

References:
    keras/src/backend/tensorflow/rnn.py: _do_gru_arguments_support_cudnn;
    keras/src/layers/rnn/gru.py: GRU.inner_loop. Cho et al. (2014), arXiv:1406.1078 (both variants).
    Keras 2: tf_keras/src/layers/rnn/gru.py: ``_could_use_gpu_kernel`` (``reset_after``), set in
    ``GRU.__init__`` and read in ``call``.
"""

from __future__ import annotations

from rnndoctor.facts import Facts
from rnndoctor.findings import Finding, FixSafety, Severity
from rnndoctor.rules import _fastpath as fp
from rnndoctor.rules import rule


@rule(
    "RD106",
    "gru-reset-before",
    "GRU with reset_after=False has no cuDNN kernel",
    severity=Severity.WARNING,
)
def check(facts: Facts) -> list[Finding]:
    return fp.single_arg_check(
        facts,
        arg="reset_after",
        static=lambda v: v is False,
        fix_title="Drop reset_after=False (the default, reset_after=True, is cuDNN's GRU)",
        safety=FixSafety.UNSAFE,
        why="cuDNN's GRU applies the reset gate after the matrix multiplication "
        "(reset_after=True).",
    )
