"""RD109 cudnn-disabled: ``use_cudnn=False`` turns the fused kernel off explicitly.

What it detects:
    An ``LSTM`` or ``GRU`` constructed with ``use_cudnn=False``.

Why it slows training:
    LSTM/GRU.inner_loop try the fused kernel only when ``use_cudnn`` is ``"auto"`` or True.
    Often a leftover from working around cuDNN's mask assertion (left-padded masks): pad on the
    right instead, and keep the fused kernel.

Evidence:
    ``model.rnn_layers[].args.use_cudnn``; ``fast_path.blocking_args`` (the probe of the installed
    Keras); the layer's construction site.

Example:
    `keras.layers.LSTM(64, use_cudnn=False)`

Use instead:
    `keras.layers.LSTM(64)` (use_cudnn="auto").

Fix safety:
    safe: the same computation; "auto" still falls back when cuDNN cannot run.

References:
    keras/src/layers/rnn/lstm.py: LSTM.inner_loop; keras/src/layers/rnn/gru.py: GRU.inner_loop.
"""

from __future__ import annotations

from rnndoctor.facts import Facts
from rnndoctor.findings import Finding, FixSafety, Severity
from rnndoctor.rules import _fastpath as fp
from rnndoctor.rules import rule


@rule(
    "RD109",
    "cudnn-disabled",
    "use_cudnn=False disables the fused kernel",
    severity=Severity.WARNING,
)
def check(facts: Facts) -> list[Finding]:
    return fp.single_arg_check(
        facts,
        arg="use_cudnn",
        static=lambda v: v is False,
        fix_title='Drop use_cudnn=False (the default "auto" uses cuDNN when it can)',
        safety=FixSafety.SAFE,
        why='Keras only tries cuDNN when use_cudnn is "auto" or True (LSTM/GRU.inner_loop).',
    )
