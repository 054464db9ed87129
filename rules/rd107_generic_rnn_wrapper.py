"""RD107 generic-rnn-wrapper: ``keras.layers.RNN(LSTMCell/GRUCell/StackedRNNCells)`` is never fused.

What it detects:
    A ``keras.layers.RNN`` layer around Keras' own ``LSTMCell``, ``GRUCell`` or
    ``StackedRNNCells`` of them.

Why it slows training:
    Only the ``LSTM`` and ``GRU`` layers override ``inner_loop`` to try the cuDNN kernel. The
    generic ``RNN.inner_loop`` (``keras/src/layers/rnn/rnn.py``) always runs ``backend.rnn``, a
    while-loop that calls the cell once per timestep, even when the cell is a plain LSTMCell.

Evidence:
    ``model.rnn_layers[].kind == "generic_rnn"``, ``cell_classes``; the probe of the equivalent
    ``LSTM``/``GRU`` layer built with the cell's arguments (``fast_path.replacement_class``,
    ``fixed_takes_fast_path``, ``blocking_args``).

Example:
    ``keras.layers.RNN(keras.layers.LSTMCell(128), return_sequences=True)``

Use instead:
    ``keras.layers.LSTM(128, return_sequences=True)``; for ``StackedRNNCells``, one ``LSTM`` layer
    per cell, each with ``return_sequences=True`` except where the stack's output is last-only.

Fix safety:
    safe for a single cell (the same computation and weights layout); display-only for a stack.

References:
    keras/src/layers/rnn/rnn.py: RNN.inner_loop; keras/src/layers/rnn/lstm.py: LSTM.inner_loop;
    keras/src/layers/rnn/gru.py: GRU.inner_loop.
    Keras 2: tf_keras/src/layers/rnn/base_rnn.py: ``RNN.call`` (the generic ``backend.rnn``
    loop); only tf_keras/src/layers/rnn/lstm.py and gru.py hold a cuDNN path
    (``_could_use_gpu_kernel``).
"""

from __future__ import annotations

import ast

from rnndoctor import rewrite as rw
from rnndoctor.facts import Facts, RNNLayer
from rnndoctor.findings import Evidence, Finding, Fix, FixSafety, Severity
from rnndoctor.rules import _fastpath as fp
from rnndoctor.rules import finding, rule


def _merged_call(call_source: str | None, replacement: str) -> str | None:
    """``layers.RNN(layers.LSTMCell(64, a=1), b=2)`` -> ``layers.LSTM(64, a=1, b=2)``: the
    cell's and the wrapper's arguments, each in the user's own spelling."""
    node = fp.parse_call(call_source)
    if node is None or not node.args or not isinstance(node.args[0], ast.Call):
        return None
    cell = node.args[0]
    if len(node.args) > 1 or not isinstance(node.func, (ast.Attribute, ast.Name)):
        return None
    text = call_source.strip()
    parts = [*cell.args, *cell.keywords, *(k for k in node.keywords if k.arg != "cell")]
    pieces = [ast.get_source_segment(text, p) for p in parts]
    if any(p is None for p in pieces):
        return None
    func = rw.rename_func(f"{ast.get_source_segment(text, node.func)}()", replacement)
    return f"{func[:-2]}({', '.join(pieces)})"


def _finding(facts: Facts, layer: RNNLayer) -> Finding:
    probe = layer.fast_path
    replacement = probe.replacement_class if probe else None
    cells = ", ".join(c.rsplit(".", 1)[-1] for c in layer.cell_classes) or layer.cell_class
    call = layer.location.call_source if layer.location else None
    evidence = [
        Evidence("layer class", "keras.layers.RNN", source="model"),
        Evidence("cell", cells, source="model"),
        Evidence(
            "fast-path verdict",
            "never fused",
            source="tf_keras/src/layers/rnn/base_rnn.py: RNN.call runs backend.rnn"
            if fp.is_keras2(facts)
            else "keras/src/layers/rnn/rnn.py: RNN.inner_loop runs backend.rnn",
        ),
    ]
    if replacement:
        merged = _merged_call(call, replacement)
        code = merged or fp.build_call(replacement, layer.args, {}, call)
        if probe.blocking_args:
            code += f"\n# also fix {', '.join(probe.blocking_args)}: see " + ", ".join(
                sorted({fp.RULE_OF_ARG.get(a, "?") for a in probe.blocking_args})
            )
        fix = Fix(
            title=f"Use the {replacement} layer, which computes the same as RNN({cells}) and "
            "can take the cuDNN kernel",
            code=code,
            safety=FixSafety.SAFE,
            before=call,
        )
        if merged is None:  # rebuilt from the run's values: never pasted over the user's call
            fix = fp.rebuilt_fix(fix)
        eligible = bool(probe.fixed_takes_fast_path) and not probe.blocking_args
        after = (
            f"The installed Keras takes the cuDNN kernel for the equivalent {replacement} layer "
            "(probed)."
            if eligible
            else f"The equivalent {replacement} layer is itself blocked by "
            f"{', '.join(probe.blocking_args) or 'its arguments'} (probed)."
        )
        evidence.append(
            Evidence(f"equivalent {replacement} takes cuDNN", eligible, source=probe.source)
        )
    else:
        fix = Fix(
            title="Replace the stacked cells with one LSTM/GRU layer per cell",
            code="x = keras.layers.LSTM(units_1, return_sequences=True)(x)\n"
            "x = keras.layers.LSTM(units_2)(x)  # return_sequences as the RNN had it",
            safety=FixSafety.DISPLAY_ONLY,
            before=call,
        )
        eligible = None
        after = "Each LSTM/GRU layer can then take the cuDNN kernel."
    return finding(
        severity=fp.severity(facts),
        message=f"RNN layer '{layer.path}' wraps {cells}: keras.layers.RNN always runs the "
        f"generic per-timestep loop and never the fused cuDNN kernel. {after}",
        layer=layer.path,
        location=fp.location(layer),
        evidence=tuple(evidence),
        fix=fix,
        gain=fp.gain_text(facts),
        fast_path_after_fix=eligible,
        fast_path_caveat=fp.mask_caveat(layer, facts) if eligible else None,
    )


@rule(
    "RD107",
    "generic-rnn-wrapper",
    "keras.layers.RNN(LSTMCell/GRUCell) is never fused",
    severity=Severity.WARNING,
)
def check(facts: Facts) -> list[Finding]:
    return [_finding(facts, layer) for layer in fp.rnn_layers(facts, ("generic_rnn",))]
