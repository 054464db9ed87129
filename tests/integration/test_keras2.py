"""Keras 2 (tf_keras) models in process: the model facts, the cuDNN verdict taken from tf_keras'
own ``_could_use_gpu_kernel``, the RD1xx findings at their lines, the model graph, and the
tf_keras callbacks that write user state. ``import tf_keras`` directly: no environment variable
is needed in process (``rnndoctor check`` under ``TF_USE_LEGACY_KERAS=1``:
tests/e2e/test_keras2_e2e.py)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

tf_keras = pytest.importorskip("tf_keras")

import rnndoctor  # noqa: E402
from rnndoctor.capture import flavour, neutralise, probes, sequences, sites  # noqa: E402
from rnndoctor.capture.env import collect_environment  # noqa: E402
from rnndoctor.capture.model import collect_model  # noqa: E402
from rnndoctor.capture.session import CaptureSession  # noqa: E402
from rnndoctor.capture.step_window import WindowOptions  # noqa: E402
from rnndoctor.engine import evaluate  # noqa: E402
from rnndoctor.facts import Facts, FitConfig, RunInfo, SourceLocation  # noqa: E402

rnndoctor.record_construction_sites()  # Keras 3 and tf_keras layers
sequences.install(None)  # pad_sequences call sites, tf_keras' own included (nothing is saved)

layers = tf_keras.layers
FAST = dict(
    steps=2, warmup_steps=1, profile_steps=0, epochs=1, batch_size=16, verbose=0, run_probes=False
)


def _sequential(rnn) -> tf_keras.Model:
    return tf_keras.Sequential([tf_keras.Input((6, 3)), rnn, layers.Dense(1)])


@pytest.mark.parametrize(
    ("rnn", "blocking"),
    [
        (lambda: layers.LSTM(4), []),
        (lambda: layers.LSTM(4, recurrent_dropout=0.2), ["recurrent_dropout"]),
        (lambda: layers.LSTM(4, activation="relu"), ["activation"]),
        (lambda: layers.LSTM(4, recurrent_activation="hard_sigmoid"), ["recurrent_activation"]),
        (lambda: layers.LSTM(4, unroll=True), ["unroll"]),
        (lambda: layers.LSTM(4, use_bias=False), ["use_bias"]),
        (lambda: layers.GRU(4), []),
        (lambda: layers.GRU(4, reset_after=False), ["reset_after"]),
        (lambda: layers.GRU(4, dropout=0.3), []),
    ],
    ids=lambda v: "" if callable(v) else ",".join(v) or "fast",
)
def test_the_verdict_is_tf_keras_own_could_use_gpu_kernel(rnn, blocking):
    layer = rnn()
    model = _sequential(layer)
    (facts,) = collect_model(model).rnn_layers
    probe = facts.fast_path
    assert probe.probed, probe.not_probed_reason
    assert probe.takes_fast_path is layer._could_use_gpu_kernel is (not blocking)
    assert probe.blocking_args == blocking
    assert probe.fixed_takes_fast_path is True
    assert "tf_keras" in probe.source and "_could_use_gpu_kernel" in probe.source
    assert facts.kind == type(layer).__name__.lower()


def _line(marker: str) -> int:
    lines = Path(__file__).read_text().splitlines()
    return next(i for i, text in enumerate(lines, 1) if text.rstrip().endswith(f"# {marker}"))


def _facts_of(model: tf_keras.Model) -> Facts:
    """The facts the RD1xx rules read, for a tf_keras model: its model facts (probed) and the
    environment with the Keras that ran it (the rules' Keras 2 severities read it)."""
    facts = Facts(run=RunInfo(script="test", argv=[], cwd="."))
    facts.environment = collect_environment()
    facts.environment.keras_flavour = flavour.flavour_of(model)
    facts.model = collect_model(model)
    return facts


# The fast-path rules on tf_keras layers, as tests/integration/test_fastpath_rules.py runs them
# on Keras 3's (through the model facts alone: a fit adds nothing to an RD1xx verdict, and the
# Keras 2 fit is tests/e2e/test_keras2_e2e.py's). Keras 3's RD109 (use_cudnn) and RD113 (a cell
# built on keras.ops) have no tf_keras twin.
TF_KERAS_RD1 = [
    ("RD101", lambda: layers.LSTM(4, recurrent_dropout=0.25)),  # k2:RD101
    ("RD102", lambda: layers.GRU(4, activation="relu")),  # k2:RD102
    ("RD103", lambda: layers.LSTM(4, recurrent_activation="hard_sigmoid")),  # k2:RD103
    ("RD104", lambda: layers.LSTM(4, unroll=True)),  # k2:RD104
    ("RD105", lambda: layers.GRU(4, use_bias=False)),  # k2:RD105
    ("RD106", lambda: layers.GRU(4, reset_after=False)),  # k2:RD106
    ("RD107", lambda: layers.RNN(layers.LSTMCell(4))),  # k2:RD107
    ("RD108", lambda: layers.SimpleRNN(4)),  # k2:RD108
]


@pytest.mark.parametrize(("rule_id", "rnn"), TF_KERAS_RD1, ids=[r for r, _ in TF_KERAS_RD1])
def test_the_fast_path_rules_fire_on_tf_keras_layers_at_their_lines(rule_id, rnn):
    findings = evaluate(_facts_of(_sequential(rnn()))).findings
    (finding,) = [f for f in findings if f.rule_id.startswith("RD1")]
    assert finding.rule_id == rule_id
    assert finding.location.file == __file__ and finding.location.line == _line(f"k2:{rule_id}")
    assert finding.fix is not None and finding.fix.code and finding.evidence
    expected = "info" if rule_id == "RD108" else "warning"  # no GPU here: the GPU job's cost
    assert finding.severity.label == expected


@pytest.mark.parametrize("rnn", [lambda: layers.LSTM(4, dropout=0.25), lambda: layers.GRU(4)])
def test_the_compliant_tf_keras_twins_give_no_fast_path_finding(rnn):
    findings = evaluate(_facts_of(_sequential(rnn()))).findings
    assert not [f for f in findings if f.rule_id.startswith("RD1")]


# The sequence rules on a masked tf_keras LSTM, padded by tf_keras' own pad_sequences
# (Keras 3's: tests/integration/test_sequences.py). Keras 2 runs the generic kernel on such a
# batch instead of failing: RD110 / RD111 are warnings.
def _padded(kind: str) -> np.ndarray:
    rng = np.random.default_rng(0)
    lengths = rng.integers(3, 9, size=64)
    if kind == "empty":
        lengths[::8] = 0
    seqs = [list(rng.integers(1, 20, size=n)) for n in lengths]
    if kind == "pre":
        return tf_keras.utils.pad_sequences(seqs, maxlen=8)  # k2:pad-pre
    return tf_keras.utils.pad_sequences(seqs, maxlen=8, padding="post")  # k2:pad-post


@pytest.mark.parametrize(
    ("kind", "expected"),
    [("pre", {"RD110": "k2:pad-pre"}), ("empty", {"RD111": "k2:pad-post"}), ("post", {})],
)
def test_the_sequence_rules_on_a_masked_tf_keras_lstm_at_the_padding_line(kind, expected):
    inputs = tf_keras.Input((8,), dtype="int32")
    x = layers.Embedding(20, 3, mask_zero=True)(inputs)
    model = tf_keras.Model(inputs, layers.Dense(1)(layers.LSTM(4)(x)))
    padded = _padded(kind)
    facts = _facts_of(model)
    batches = [(padded[i : i + 16], np.zeros((16, 1), "float32")) for i in range(0, 64, 16)]
    facts.sequences = sequences.measure_batches(
        model, batches, model_facts=facts.model, calls=sequences.pad_calls()
    )
    (record,) = facts.sequences.inputs
    assert record.padding_function == "pad_sequences"
    found = {f.rule_id: f for f in evaluate(facts).findings if f.rule_id in ("RD110", "RD111")}
    assert set(found) == set(expected)
    for rule_id, marker in expected.items():
        assert found[rule_id].severity.label == "warning"  # the generic kernel, silently
        assert found[rule_id].location.line == _line(marker)


def test_rd101_on_a_tf_keras_lstm_at_its_line_and_the_flavour_recorded():
    x = np.random.default_rng(0).normal(size=(64, 6, 3)).astype("float32")
    y = np.zeros((64, 1), "float32")
    model = _sequential(layers.LSTM(4, recurrent_dropout=0.25))  # the RD101 line
    model.compile(optimizer="sgd", loss="mse")
    report = rnndoctor.diagnose(model, x, y=y, **FAST)
    (finding,) = [f for f in report.findings if f.rule_id == "RD101"]
    assert finding.location.file == __file__
    assert "# the RD101 line" in finding.location.code
    assert finding.fast_path_after_fix is True
    assert report.facts.environment.keras_flavour == f"tf_keras {tf_keras.__version__}"
    assert report.facts.model.model_type == "sequential"
    assert report.facts.steps.measured_steps == 2


def test_functional_tf_keras_graph_records_what_feeds_each_rnn():
    inputs = tf_keras.Input((7,), dtype="int32")
    x = layers.Embedding(20, 4, mask_zero=True, name="embedding")(inputs)
    x = layers.Bidirectional(
        layers.LSTM(3, return_sequences=True, name="lstm"), name="bidirectional"
    )(x)
    x = layers.GRU(2, name="gru")(x)
    model = tf_keras.Model(inputs, x, name="m")
    facts = collect_model(model, probe=False)
    assert facts.graph_known and facts.model_type == "functional"
    rnn = {r.path: r for r in facts.rnn_layers}
    assert set(rnn) == {"m/bidirectional/forward_lstm", "m/bidirectional/backward_lstm", "m/gru"}
    forward = rnn["m/bidirectional/forward_lstm"]
    assert forward.wrappers == ["Bidirectional"] and forward.direction == "forward"
    assert forward.fed_by == ["m/embedding"]
    assert rnn["m/gru"].fed_by == ["m/bidirectional"]
    assert rnn["m/gru"].args["reset_after"] is True and rnn["m/gru"].args["activation"] == "tanh"


class MyCheckpoint(tf_keras.callbacks.ModelCheckpoint):
    pass


def test_tf_keras_state_writing_callbacks_are_dropped_and_recorded(tmp_path):
    facts = Facts(run=RunInfo(script="train.py", argv=["train.py"], cwd=str(tmp_path)))
    facts.fit = FitConfig(data_kind="numpy", location=SourceLocation(file="train.py", line=9))
    capture = CaptureSession(facts, WindowOptions(), None)
    early = tf_keras.callbacks.EarlyStopping()
    callbacks = [
        tf_keras.callbacks.ModelCheckpoint("ckpt/best.h5"),
        early,
        tf_keras.callbacks.CSVLogger("log.csv"),
        MyCheckpoint("mine.h5"),
        tf_keras.callbacks.TensorBoard("tb"),
        tf_keras.callbacks.BackupAndRestore("backup"),
    ]
    assert neutralise.filter_callbacks(capture, callbacks) == [early]
    recorded = [(n.what, n.detail) for n in facts.run.neutralised]
    assert recorded == [
        ("ModelCheckpoint callback", os.path.abspath("ckpt/best.h5")),
        ("CSVLogger callback", os.path.abspath("log.csv")),
        ("MyCheckpoint callback (a ModelCheckpoint)", os.path.abspath("mine.h5")),
        ("TensorBoard callback", os.path.abspath("tb")),
        ("BackupAndRestore callback", os.path.abspath("backup")),
    ]


class LeftPaddedRows(tf_keras.utils.Sequence):
    """4 batches of 16 token rows, length 8, left-padded with 0 (valid lengths 2 to 7)."""

    def __len__(self):
        return 4

    def __getitem__(self, index):
        rng = np.random.default_rng(index)
        lengths = rng.integers(2, 8, size=16)
        x = np.zeros((16, 8), "int32")
        for row, length in enumerate(lengths):
            x[row, 8 - length :] = rng.integers(1, 20, size=length)
        return x, rng.normal(size=(16, 1))  # float64 targets: the adapter casts them


def test_a_tf_keras_sequence_is_described_sampled_and_its_masks_read():
    """The data facts through a real fit, then the sampling and the sequence facts the probes
    start from (the compute-only probe reuses those batches as for any input). Keras 3's
    PyDataset: tests/integration/test_probes.py::test_numpy_generator_and_pydataset_kinds."""
    tf_keras.utils.set_random_seed(0)
    inputs = tf_keras.Input((8,), dtype="int32")
    x = layers.Embedding(20, 4, mask_zero=True)(inputs)
    model = tf_keras.Model(inputs, layers.Dense(1)(layers.LSTM(4)(x)))
    model.compile(optimizer="sgd", loss="mse")
    rows = LeftPaddedRows()  # marker:sequence
    report = rnndoctor.diagnose(model, rows, max_queue_size=5, **FAST)
    data = report.facts.data
    assert (data.kind, data.reiterable, data.cardinality) == ("tf_keras.Sequence", True, 4)
    # tf_keras takes these as fit's arguments: max_queue_size as passed, the others its defaults
    assert (data.workers, data.use_multiprocessing, data.max_queue_size) == (1, False, 5)
    assert data.location.file == __file__ and "# marker:sequence" in data.location.code
    capture = CaptureSession(report.facts, WindowOptions(), None, site_book=sites.book())
    capture.probe_state.original_x = rows
    batches = probes.sample_batches(capture, {"x": rows})
    assert batches.method == "fresh indexing (tf_keras Sequence.__getitem__, one worker)"
    assert len(batches.items) == 4 and batches.input_only_ms > 0
    x0, y0 = batches.items[0]
    assert x0.dtype == np.int32 and y0.dtype == np.float32  # tf_keras' adapter cast the floats
    sequences.sample_sequences(capture, model, batches)
    (sequence,) = capture.facts.sequences.inputs
    assert sequence.pad_side == "left" and sequence.sequences == 64
    (rd110,) = [f for f in evaluate(capture.facts).findings if f.rule_id == "RD110"]
    assert rd110.severity.label == "warning"


def test_the_probes_put_back_a_tf_keras_models_steps_per_execution():
    """tf_keras' ``steps_per_execution`` is a variable: the probes saved the variable itself
    and "restored" it to itself, so the steps_per_execution probe's 16 stayed on for the
    length probe after it (a new user's tagger: its 60-step point timed 0.45 ms against a
    7.2 ms step, and its 30-step point failed), and for the user's own fit after the check."""
    model = tf_keras.Sequential([tf_keras.Input((None,)), layers.Embedding(50, 8, mask_zero=True),
                                 layers.GRU(8), layers.Dense(1)])  # fmt: skip
    model.compile(optimizer="sgd", loss="mse", steps_per_execution=2)
    rng = np.random.default_rng(0)
    x = np.zeros((128, 20), dtype="int32")
    for row, n in enumerate(rng.integers(3, 20, size=128)):
        x[row, :n] = rng.integers(1, 50, size=n)
    y = rng.normal(size=(128, 1)).astype("float32")
    report = rnndoctor.diagnose(
        model, x, y=y, select=["RD403", "RD501"],
        **{**FAST, "run_probes": True, "steps": 4},
    )  # fmt: skip
    pr = report.facts.probes
    assert [p.value for p in pr.spe_probe] == [1, 2], pr.spe_probe_not_measured
    assert int(model.steps_per_execution) == 2
    assert pr.length_probe_not_measured is None, pr.length_probe_not_measured
