"""RD108 simple-rnn: ``SimpleRNN`` has no fused kernel (info).

What it detects:
    A ``keras.layers.SimpleRNN`` layer.

Why it slows training:
    Keras has no cuDNN path for SimpleRNN: ``SimpleRNN`` does not override ``inner_loop``, so it
    always runs the generic ``backend.rnn`` while-loop. A ``GRU`` of the same width runs as one
    fused kernel on a GPU and is usually the faster *and* the better-converging choice, though
    it has about 3x the parameters per unit. This is a modelling choice, hence ``info``.

Evidence:
    ``model.rnn_layers[].kind == "simple_rnn"``; the probe of a ``GRU`` built with the same
    arguments (``fast_path.fixed_takes_fast_path``, ``blocking_args``).

Example:
    ``keras.layers.SimpleRNN(64)``

Use instead:
    ``keras.layers.GRU(64)`` when training speed matters.

Fix safety:
    unsafe: a different model; retrain and compare.

References:
    keras/src/layers/rnn/simple_rnn.py (no inner_loop override); keras/src/layers/rnn/rnn.py:
    RNN.inner_loop; keras/src/layers/rnn/gru.py: GRU.inner_loop.
    Keras 2: tf_keras/src/layers/rnn/simple_rnn.py (``SimpleRNN``, a plain ``RNN``: no cuDNN
    path); tf_keras/src/layers/rnn/gru.py: ``_could_use_gpu_kernel``.
"""

from __future__ import annotations

from rnndoctor.facts import Facts
from rnndoctor.findings import Evidence, Finding, Fix, FixSafety, Severity
from rnndoctor.rules import _fastpath as fp
from rnndoctor.rules import finding, rule


@rule("RD108", "simple-rnn", "SimpleRNN has no fused kernel (info)", severity=Severity.INFO)
def check(facts: Facts) -> list[Finding]:
    findings = []
    for layer in fp.rnn_layers(facts, ("simple_rnn",)):
        probe = layer.fast_path
        blocking = list(probe.blocking_args) if probe else []
        call = layer.location.call_source if layer.location else None
        rewritten = fp.rewrite_call(
            call, drop=tuple(blocking), func_name="GRU", positional_names=layer.init_params
        )
        code = rewritten or fp.build_call("GRU", layer.args, {a: None for a in blocking}, call)
        eligible = probe.fixed_takes_fast_path if probe and probe.probed else None
        findings.append(
            finding(
                message=f"SimpleRNN layer '{layer.path}' always runs the generic per-timestep "
                "loop; Keras has no fused kernel for it. A GRU of the same width can take the "
                "cuDNN kernel" + (f" once {', '.join(blocking)} is removed." if blocking else "."),
                layer=layer.path,
                location=fp.location(layer),
                evidence=(
                    Evidence("layer class", layer.class_name, source="model"),
                    Evidence(
                        "equivalent GRU takes cuDNN",
                        eligible,
                        source=probe.source if probe else "not probed",
                    ),
                ),
                fix=_fix(code, call, rewritten is None, tuple(blocking), layer.init_params),
                gain=fp.gain_text(facts),
                fast_path_after_fix=eligible,
                fast_path_caveat=fp.mask_caveat(layer, facts) if eligible else None,
            )
        )
    return findings


def _fix(
    code: str,
    call: str | None,
    rebuilt: bool,
    blocking: tuple[str, ...],
    init_params: tuple[str, ...] | list[str] = (),
) -> Fix:
    """The GRU fix; a call rebuilt from the run's values is a display-only sketch
    (:func:`rnndoctor.rules._fastpath.rebuilt_fix`)."""
    fix = Fix(
        title="When speed matters, use a GRU (a different model: retrain)",
        code=code,
        safety=FixSafety.UNSAFE,
        before=call,
    )
    return fp.rebuilt_fix(fix, blocking, positional_names=init_params) if rebuilt else fix
