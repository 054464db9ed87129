"""RD113 custom-cell: an RNN around a user-defined cell has no fused kernel (info).

What it detects:
    A ``keras.layers.RNN`` (or an RNN subclass outside Keras) whose cell class is not one of
    Keras' own (``LSTMCell``, ``GRUCell``, ``SimpleRNNCell``, ``StackedRNNCells``).

Why it slows training:
    ``RNN.inner_loop`` runs the cell op by op for every timestep inside a while-loop; only Keras'
    ``LSTM``/``GRU`` layers can hand the whole sequence to cuDNN. A custom cell is often needed,
    so this is ``info``: know that each timestep costs several small kernel launches.

Evidence:
    ``model.rnn_layers[].kind == "custom_cell"``, ``cell_classes``.

Example:
    ``keras.layers.RNN(MyPeepholeCell(128))``

Use instead:
    If the cell computes a standard LSTM/GRU step, ``keras.layers.LSTM``/``GRU``. Otherwise try
    ``model.compile(..., jit_compile=True)`` so that XLA fuses the cell's ops, and measure.

Fix safety:
    display-only: the right change depends on what the cell computes.

References:
    keras/src/layers/rnn/rnn.py: RNN.inner_loop; TensorFlow guide "Use XLA with tf.function".
"""

from __future__ import annotations

from rnndoctor import rewrite as rw
from rnndoctor.facts import Facts
from rnndoctor.findings import Evidence, Finding, Fix, FixSafety, Severity
from rnndoctor.rules import _fastpath as fp
from rnndoctor.rules import finding, rule


def _fix(facts: Facts) -> Fix:
    """A sketch (the cell's own rewrite is the user's call): XLA on the user's compile call,
    keeping its arguments, where that call was recorded."""
    site = facts.fit.compile_location if facts.fit else None
    call = site.call_source if site is not None else None
    code = rw.set_keyword(call, "jit_compile", "True")
    return Fix(
        title="Use keras.layers.LSTM/GRU if the cell is a standard LSTM/GRU step; "
        "otherwise let XLA fuse the cell's ops, and measure",
        code=code or "model.compile(..., jit_compile=True)  # your arguments, plus this one",
        safety=FixSafety.DISPLAY_ONLY,
        before=call if code else None,
    )


@rule(
    "RD113",
    "custom-cell",
    "a user-defined RNN cell has no fused kernel (info)",
    severity=Severity.INFO,
)
def check(facts: Facts) -> list[Finding]:
    findings = []
    for layer in fp.rnn_layers(facts, ("custom_cell",)):
        cells = ", ".join(layer.cell_classes) or layer.cell_class
        findings.append(
            finding(
                message=f"{layer.class_name} layer '{layer.path}' runs the user-defined cell "
                f"{cells} once per timestep in a generic loop; no fused kernel applies.",
                layer=layer.path,
                location=fp.location(layer),
                evidence=(Evidence("cell", cells, source="model"),),
                fix=_fix(facts),
                gain="not measured: the fused alternative depends on what the cell computes",
                fast_path_after_fix=None,
            )
        )
    return findings
