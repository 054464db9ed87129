"""Keras 2 (tf_keras) models in process: the model facts, the cuDNN verdict taken from tf_keras'
own ``_could_use_gpu_kernel``, the RD1xx findings at their lines, the model graph, and the
tf_keras callbacks that write user state. ``import tf_keras`` directly: no environment variable
is needed in process (``rnndoctor check`` under ``TF_USE_LEGACY_KERAS=1``:
tests/e2e/test_keras2_e2e.py)."""

from __future__ import annotations

import os

import numpy as np
import pytest

tf_keras = pytest.importorskip("tf_keras")

import rnndoctor  # noqa: E402
from rnndoctor.capture import neutralise, probes, sequences, sites  # noqa: E402
from rnndoctor.capture.model import collect_model  # noqa: E402
from rnndoctor.capture.session import CaptureSession  # noqa: E402
from rnndoctor.capture.step_window import WindowOptions  # noqa: E402
from rnndoctor.engine import evaluate  # noqa: E402
from rnndoctor.facts import Facts, FitConfig, RunInfo, SourceLocation  # noqa: E402

rnndoctor.record_construction_sites()  # Keras 3 and tf_keras layers

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
