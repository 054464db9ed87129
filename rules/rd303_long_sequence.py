"""RD303 long-sequence: the RNN iterates over 500 or more timesteps per sequence.

What it detects:
    A sequence input whose sampled batches have a median padded length of at least 500
    timesteps (``long_sequence_steps``; the length the RNN loops over), or, where no batch was
    sampled, an RNN layer whose static input shape has a time dimension of at least 500.

Why it slows training:
    An RNN is sequential in time: each of the T steps waits for the previous one, so a step's
    latency grows linearly with T whatever the hardware's width, and backpropagation through
    time stores activations for all T steps (memory linear in T). The generic kernel also pays a
    per-timestep launch overhead. Gradients over hundreds of steps also vanish or explode, so the
    long context is often not learned anyway.

Evidence:
    ``sequences.inputs[].padded_lengths`` and ``quantiles`` (or
    ``model.rnn_layers[].input_shape``); the RNN layers it reaches.

Example:
    Audio frames or character streams of 2000 steps fed whole to ``LSTM(128)``.

Use instead:
    Shorten what the RNN loops over: a strided ``Conv1D`` (or pooling) before the RNN to
    downsample time; truncated backpropagation through time (windows of a few hundred steps,
    with ``stateful=True`` to carry the state across windows); bucketing by length (RD501) when
    most sequences are much shorter than the longest.

Fix safety:
    display-only: each option changes the model or what it learns; pick one and retrain.

Options:
    ``long_sequence_steps`` = 500 (timesteps): the sequence length (median padded length per
    batch, or the static time dimension) from which the rule reports. Source: rnndoctor's
    choice.

References:
    Williams & Peng (1990), truncated BPTT; the Keras
    ``stateful`` RNN docs (keras/src/layers/rnn/rnn.py: RNN).
"""

from __future__ import annotations

from rnndoctor.facts import Facts, RNNLayer, SequenceInput
from rnndoctor.findings import Evidence, Finding, Fix, FixSafety, Severity
from rnndoctor.rules import Option, OptionValues, finding, rule
from rnndoctor.rules import _fastpath as fp
from rnndoctor.rules import _sequences as sq

LONG_SEQUENCE_STEPS = Option(
    name="long_sequence_steps",
    default=500,
    unit="timesteps",
    source="rnndoctor's choice",
    help="the sequence length from which the rule reports",
)
_THRESHOLD_SOURCE = "option long_sequence_steps"
_KINDS = ("lstm", "gru", "simple_rnn", "generic_rnn")

_FIX = """\
# Option 1: downsample time 4x with a strided convolution before the RNN
x = layers.Conv1D(filters=64, kernel_size=4, strides=4, padding="same")(x)
x = layers.LSTM(units)(x)

# Option 2: truncated BPTT: train on windows of WINDOW steps, carrying the state
WINDOW = 200
# reshape each sequence into consecutive windows (batch order must keep them in sequence)
# and use layers.LSTM(units, stateful=True), resetting states between sequences"""


@rule(
    "RD303",
    "long-sequence",
    "sequences of 500 or more timesteps: truncate (TBPTT), downsample or bucket",
    needs=("sequences",),
    severity=Severity.INFO,
    options=(LONG_SEQUENCE_STEPS,),
)
def check(facts: Facts, options: OptionValues) -> list[Finding]:
    threshold = options.long_sequence_steps
    findings = []
    covered: set[str] = set()
    for record in sq.records(facts):
        if not record.padded_lengths or sq.median(record.padded_lengths) < threshold:
            continue
        layers = sq.fed_layers(facts, record) or [
            r for p in record.rnn_layers if (r := sq.rnn_layer(facts, p)) is not None
        ]
        covered.update(layer.path for layer in layers)
        findings.append(_sampled_finding(record, layers, threshold))
    if facts.sequences and not facts.sequences.inputs and facts.model:
        static = [
            layer
            for layer in fp.rnn_layers(facts, kinds=_KINDS)
            if layer.input_shape and len(layer.input_shape) >= 2 and layer.input_shape[1]
        ]
        if not static and facts.model.rnn_layers:
            sq.require_sampled(facts)  # no time dimension to read either: not evaluated
        for layer in fp.rnn_layers(facts, kinds=_KINDS):
            shape = layer.input_shape or []
            if layer.path in covered or len(shape) < 2 or not shape[1]:
                continue
            if shape[1] >= threshold:
                findings.append(_static_finding(facts, layer, shape[1], threshold))
    return findings


def _sampled_finding(record: SequenceInput, layers: list[RNNLayer], threshold: int) -> Finding:
    """The finding for a sampled input whose median padded length reaches ``threshold``."""
    steps = sq.median(record.padded_lengths)
    first = layers[0] if layers else None
    return finding(
        message=(
            f"{sq.layers_label(layers)} loops over a median of {steps:g} timesteps per "
            f"batch (input '{record.input}', valid length p50 "
            f"{record.quantiles.get('p50', 0):g}, max "
            f"{record.quantiles.get('max', 0):g}): the step time and the activation "
            "memory grow linearly with it, one timestep after the other."
        ),
        layer=first.path if first else None,
        location=fp.location(first) if first else None,
        evidence=(
            *sq.common_evidence(record),
            Evidence(
                "padded length per batch (median / max)",
                f"{steps:g} / {max(record.padded_lengths)}",
                "timesteps",
                source="sampled batches",
            ),
            Evidence("threshold", threshold, "timesteps", source=_THRESHOLD_SOURCE),
        ),
        fix=Fix("Shorten what the RNN loops over", _FIX, FixSafety.DISPLAY_ONLY),
        gain="not measured: depends on the chosen change (a 4x downsampling makes the "
        "recurrent loop 4x shorter)",
    )


def _static_finding(facts: Facts, layer: RNNLayer, steps: int, threshold: int) -> Finding:
    """The finding for an RNN layer whose static time dimension reaches ``threshold``."""
    return finding(
        message=f"{fp.layer_label(layer)} loops over {steps} timesteps (its "
        "static input shape): the step time and the activation memory grow linearly "
        "with it.",
        layer=layer.path,
        location=fp.location(layer),
        evidence=(
            Evidence("time dimension", steps, "timesteps", source="input shape"),
            Evidence(
                "sequences sampled",
                "no",
                source=(facts.sequences.not_measured if facts.sequences else None) or "capture",
            ),
            Evidence("threshold", threshold, "timesteps", source=_THRESHOLD_SOURCE),
        ),
        fix=Fix("Shorten what the RNN loops over", _FIX, FixSafety.DISPLAY_ONLY),
        gain="not measured: depends on the chosen change",
    )
