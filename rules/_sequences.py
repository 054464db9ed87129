"""Shared logic of the sequence rules (RD110, RD111, RD114, RD303, RD501, RD502). Pure: no
TensorFlow, no I/O.

They read ``Facts.sequences`` (what the capture measured on sampled batches, see
``rnndoctor/capture/sequences.py``) and, for the RNN layers each input reaches, the model facts
and their cuDNN fast-path probe.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass

from rnndoctor import stats as bk
from rnndoctor.facts import Facts, RNNLayer, SequenceInput
from rnndoctor.findings import Evidence, Location
from rnndoctor.rules import Option
from rnndoctor.rules import _fastpath as fp

# The padding rules' (RD501, RD502) error cut-off on the estimated speedup, as a rule option.
ERROR_SPEEDUP = Option(
    name="error_speedup",
    default=2.0,
    unit="x (estimated step-time speedup)",
    source="rnndoctor's severity scale (rnndoctor/findings.py: Severity): error means the job "
    "runs at least 2x slower than it needs to",
    help="the estimated speedup from which the finding is an error (below it: warning)",
)

# The check that fails on a GPU, in the installed Keras 3 source: `_cudnn_lstm` / `_cudnn_gru`
# call it on every mask before the fused kernel runs.
KERAS_MASK_CHECK = (
    "keras/src/backend/tensorflow/rnn.py: _assert_valid_mask (tf.Assert on "
    "_is_sequence_right_padded and not _has_fully_masked_sequence), called by _cudnn_lstm / "
    "_cudnn_gru"
)
LENGTH_SOURCES = {
    "mask_zero": "Embedding(mask_zero=True): id 0 is padding",
    "masking": "Masking(mask_value={value}): steps equal to it are padding",
    "ragged": "RaggedTensor row lengths",
    "mask": "the mask the layer receives",
    "pad_value": "no mask: runs of the pad step {value} at one end of each row",
    "none": "no mask and no pad value: every step counts",
}


def records(facts: Facts) -> list[SequenceInput]:
    """The sampled sequence inputs (empty when none were sampled)."""
    return list(facts.sequences.inputs) if facts.sequences is not None else []


def rnn_layer(facts: Facts, path: str) -> RNNLayer | None:
    """The model's RNN layer at ``path``, or by bare name (ragged inputs are recorded by name,
    during a ``fit`` that failed before the model's paths were known)."""
    if facts.model is None:
        return None
    layers = facts.model.rnn_layers
    return next((r for r in layers if r.path == path), None) or next(
        (r for r in layers if r.name == path or r.path.endswith(f"/{path}")), None
    )


def fed_layers(facts: Facts, record: SequenceInput) -> list[RNNLayer]:
    """The LSTM/GRU layers the input reaches, one per Bidirectional (see ``fp.rnn_layers``)."""
    listed = [rnn_layer(facts, p) for p in record.rnn_layers]
    paths = {r.path for r in listed if r is not None}
    return [r for r in fp.rnn_layers(facts) if r.path in paths]


@dataclass(frozen=True)
class CudnnVerdict:
    """Whether an LSTM/GRU runs the cuDNN kernel on a GPU ``now`` or ``after`` its RD1xx
    findings are fixed (None: not probed), and the basis of that verdict."""

    now: bool | None
    after: bool | None
    basis: str

    @property
    def eligible(self) -> bool:
        """Takes cuDNN now or once fixed; an unprobed LSTM/GRU counts, as Keras' defaults do."""
        return self.now is not False or self.after is not False


def cudnn_verdict(layer: RNNLayer) -> CudnnVerdict:
    probe = layer.fast_path
    if layer.kind not in fp.FUSED_KINDS:
        return CudnnVerdict(False, False, f"{layer.class_name} has no fused kernel")
    if probe is None or not probe.probed:
        why = probe.not_probed_reason if probe is not None else "probe disabled"
        return CudnnVerdict(None, None, f"not probed ({why}); LSTM/GRU defaults take cuDNN")
    after = bool(probe.takes_fast_path or probe.fixed_takes_fast_path)
    return CudnnVerdict(bool(probe.takes_fast_path), after, f"probed: {probe.source}")


def cudnn_evidence(layers: list[RNNLayer]) -> list[Evidence]:
    """One evidence item per layer: its cuDNN verdict now / once its RD1xx are fixed."""
    evidence = []
    for layer in layers:
        verdict = cudnn_verdict(layer)
        evidence.append(
            Evidence(
                f"{layer.path}: cuDNN on a GPU (now / once RD1xx are fixed)",
                f"{verdict.now} / {verdict.after}",
                source=verdict.basis,
            )
        )
    return evidence


def cudnn_sentence(layers: list[RNNLayer]) -> str:
    """When the GPU job meets the cuDNN mask check: now, or once the RD1xx fixes are applied."""
    verdicts = [(layer, cudnn_verdict(layer)) for layer in layers]
    if any(v.now for _, v in verdicts):
        return "On a GPU this layer runs the cuDNN kernel"
    blocked = sorted(
        {
            f"{arg} ({fp.RULE_OF_ARG.get(arg, '?')})"
            for layer, _ in verdicts
            for arg in (layer.fast_path.blocking_args if layer.fast_path else [])
        }
    )
    if blocked:
        return (
            "The layer misses the cuDNN kernel today only because of "
            + ", ".join(blocked)
            + "; once that is fixed, on a GPU it runs the cuDNN kernel"
        )
    return "On a GPU this LSTM/GRU runs the cuDNN kernel by default (not probed)"


def padding_location(facts: Facts, record: SequenceInput) -> tuple[Location | None, Evidence]:
    """The line that pads ``record``: the recorded padding call, else the line that built the
    data, else the ``fit`` call; with an evidence item saying which it is."""
    if record.padding_location is not None:
        what = record.padding_function or "padding call"
        if record.padding_function == "pad_sequences":
            what += f"(padding={record.padding_argument!r})"
        return fp.to_location(record.padding_location), Evidence(
            "padding call", what, source="hooked in the run"
        )
    for loc, what in (
        (facts.data.location if facts.data else None, "the line that built the training data"),
        (facts.fit.location if facts.fit else None, "the fit call"),
    ):
        if loc is not None:
            return fp.to_location(loc), Evidence(
                "padding call", f"not seen: located at {what}", source="capture"
            )
    return None, Evidence("padding call", "not seen", source="capture")


def length_source_text(record: SequenceInput) -> str:
    text = LENGTH_SOURCES.get(record.length_source, record.length_source)
    value = record.pad_value if record.pad_value is not None else record.mask_value
    return text.format(value=value)


def common_evidence(record: SequenceInput) -> list[Evidence]:
    return [
        Evidence("sequence input", record.input, source="model input"),
        Evidence("valid lengths from", length_source_text(record), source="sampled batches"),
        Evidence(
            "sampled", f"{record.sequences} sequences in {record.batches} batches",
            source="sampled batches",
        ),
    ]  # fmt: skip


def speedup_interval_text(record: SequenceInput, boundaries: tuple[int, ...] = ()) -> str:
    """`` (90% interval 2.10–2.25x over the sampled batches and sequences)``: the bootstrap
    interval of a padding speedup estimate (:func:`rnndoctor.stats.padding_speedup_interval`:
    bucketed at ``boundaries``, or per-batch padding when empty), or "" where it cannot be
    formed (no per-batch figures)."""
    try:
        dist = bk.LengthDistribution(tuple(record.length_values), tuple(record.length_counts))
        low, high = bk.padding_speedup_interval(
            dist, boundaries, batch_size(record), record.padded_lengths, record.batch_sizes
        )
    except (ValueError, ZeroDivisionError):
        return ""
    return f" (90% interval {low:.2f}\u2013{high:.2f}x over the sampled batches and sequences)"


def median(values: list[int]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return float(ordered[mid]) if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def batch_size(record: SequenceInput) -> int:
    """The most common rows per sampled batch (the training batch size), the smallest on a tie
    (:func:`rnndoctor.stats.most_common_batch_size`, as capture records
    ``per_batch_padded_fraction``); 1 where no batch was sampled."""
    return bk.most_common_batch_size(record.batch_sizes or [1])


# -- code for fixes ------------------------------------------------------------------------------


def data_names(facts: Facts) -> tuple[str, str]:
    """The names the user's ``fit`` call gives its inputs and targets (``x``, ``y`` otherwise;
    ``rnndoctor.diagnose(model, data, y=...)`` is read the same way)."""
    names = ["x", "y"]
    loc = facts.fit.location if facts.fit else None
    node = fp.parse_call(loc.call_source if loc else None)
    func = node.func if node is not None else None
    called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
    if node is None or called not in ("fit", "diagnose"):
        return names[0], names[1]
    positional = node.args[1:3] if called == "diagnose" else node.args[:2]
    given: dict[str, ast.expr] = {"xy"[i]: arg for i, arg in enumerate(positional)}
    for keyword in node.keywords:
        if keyword.arg in ("x", "data", "y"):
            given["y" if keyword.arg == "y" else "x"] = keyword.value
    for i, key in enumerate("xy"):
        value = given.get(key)
        if isinstance(value, (ast.Name, ast.Attribute)):
            names[i] = ast.unparse(value)
    return names[0], names[1]


def pad_step_code(record: SequenceInput, module: str = "tf") -> str:
    """The pad step as code: the value (``-1``, ``0.0``), or the one-hot vector
    (``tf.one_hot(3, 40)`` / ``np.eye(40)[3]``)."""
    if record.pad_index is not None and record.pad_depth is not None:
        if module == "np":
            return f"np.eye({record.pad_depth}, dtype='float32')[{record.pad_index}]"
        return f"tf.one_hot({record.pad_index}, {record.pad_depth})"
    return repr(record.mask_value if record.mask_value is not None else 0)


def valid_steps_expr(record: SequenceInput, var: str) -> tuple[str, str]:
    """A TF expression for the valid steps of one unbatched sequence ``var``, and its comment.

    Without a mask (``length_source="pad_value"``) only the run of the pad step at the padded end
    is padding: the same step inside a sequence (a space between words) is data, so the valid
    steps are those before (right padding) or after (left padding) the last / first real one.
    """
    if record.length_source == "pad_value" and record.pad_value is not None:
        pad = pad_step_code(record)
        rank3 = record.input_rank is not None and record.input_rank >= 3
        real = (
            f"tf.reduce_any(tf.not_equal({var}, {pad}), axis=-1)"
            if rank3
            else f"tf.not_equal({var}, {pad})"
        )
        reverse = ", reverse=True" if record.pad_side != "left" else ""
        return (
            f"tf.cumsum(tf.cast({real}, tf.int32){reverse}) > 0",
            f"the run of the pad step ({record.pad_value}) at the end is padding",
        )
    value = record.mask_value if record.mask_value is not None else 0
    if record.input_rank is not None and record.input_rank >= 3:
        return (
            f"tf.reduce_any(tf.not_equal({var}, {value!r}), axis=-1)",
            f"a step whose features all equal {value!r} is padding",
        )
    comment = {
        "mask_zero": "Embedding(mask_zero=True): id 0 is padding",
        "masking": f"Masking(mask_value={value!r})",
    }.get(record.length_source, f"{value!r} is the pad value")
    return f"tf.not_equal({var}, {value!r})", comment


def unpad_function(record: SequenceInput, per_step_targets: bool) -> list[str]:
    """``def unpad(x, y)``: drops the padded steps of one (unbatched) sequence and, when the
    targets are per step, the same steps of the targets."""
    expr, comment = valid_steps_expr(record, "x")
    y_out = "tf.boolean_mask(y, valid)" if per_step_targets else "y"
    return [
        "def unpad(x, y):",
        f"    valid = {expr}  # {comment}",
        f"    return tf.boolean_mask(x, valid), {y_out}",
    ]


def iter_findable(facts: Facts) -> Iterator[tuple[SequenceInput, list[RNNLayer]]]:
    """Each sampled (non-ragged) input with the LSTM/GRU layers it reaches."""
    for record in records(facts):
        if not record.ragged and record.sequences:
            yield record, fed_layers(facts, record)


def layers_label(layers: list[RNNLayer]) -> str:
    return " and ".join(fp.layer_label(layer) for layer in layers) or "the RNN"


def require_sampled(facts: Facts) -> None:
    """Raises ``NotEvaluated`` when no sequence input was measured and the facts say why (the
    rule then reports "not evaluated", never a pass). A model without RNN layers passes.

    Raises:
        NotEvaluated: nothing was sampled, with the capture's reason.
    """
    from rnndoctor.rules import NotEvaluated

    sequences = facts.sequences
    if sequences is None or sequences.inputs or not sequences.not_measured:
        return
    if facts.model is not None and not facts.model.rnn_layers:
        return
    raise NotEvaluated(f"sequences were not sampled: {sequences.not_measured}")


def mask_advice(record: SequenceInput) -> tuple[str, list[str]]:
    """For an unmasked input with padding: a sentence and the code of a mask that the installed
    Keras 3 keeps on the cuDNN fast path (``keras/src/backend/tensorflow/rnn.py``: a mask must
    be right-padded): ``Embedding(mask_zero=True)`` with pad id 0 (another pad id is remapped to
    0 first), or ``Masking(mask_value=...)`` on features, with the padding at the end."""
    rank3 = record.input_rank is not None and record.input_rank >= 3
    pad = record.pad_value if record.pad_value is not None else repr(record.mask_value)
    left = record.pad_side == "left"
    end = " and pad at the end instead of the start (cuDNN takes right-padded masks only)"
    code: list[str] = []
    if not rank3:
        if record.mask_value in (0, None):
            sentence = "Add mask_zero=True to the Embedding (id 0 pads)"
        else:
            sentence = f"Remap the pad id {pad} to 0 and add mask_zero=True to the Embedding"
            code.append(f"x = np.where(x == {pad}, 0, x + 1)  # pad id -> 0, real ids shift by 1")
        code.append("layers.Embedding(vocab_size + 1, dim, mask_zero=True)")
    elif record.pad_index is None and record.mask_value is not None:
        sentence = f"Put keras.layers.Masking(mask_value={record.mask_value!r}) before the RNN"
        code.append(f"layers.Masking(mask_value={record.mask_value!r})  # first layer")
    else:
        sentence = (
            f"Pad with zero vectors instead of the {pad} and put "
            "keras.layers.Masking(mask_value=0.0) before the RNN"
        )
        pads = "(x == PAD).all(axis=-1)"
        run = (
            f"np.logical_and.accumulate({pads}, axis=1)"
            if left  # numpy arrays have no .flip method: np.flip reverses the time axis
            else f"np.flip(np.logical_and.accumulate(np.flip({pads}, axis=1), axis=1), axis=1)"
        )
        code += [
            f"PAD = {pad_step_code(record, 'np')}",
            f"x[{run}] = 0.0  # only the run at the padded end, not the same step inside",
            "layers.Masking(mask_value=0.0)  # first layer",
        ]
    return sentence + (end if left else ""), code
