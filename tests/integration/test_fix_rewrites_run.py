"""The rewrites rules offer run (issue 12): the rewritten compile call compiles a tiny real model
with every argument the user gave, and the pipeline fixes run on a real ``tf.data`` pipeline.
Also the capture side: ``keras.utils.timeseries_dataset_from_array`` is recorded at the user's
line, and the data's float64 input dtype is read."""

from __future__ import annotations

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")
keras = pytest.importorskip("keras")

from rnndoctor import rewrite as rw  # noqa: E402
from rnndoctor.capture import data as data_mod  # noqa: E402
from rnndoctor.capture import sites  # noqa: E402


def tiny_model():
    model = keras.Sequential([keras.Input((5, 3)), keras.layers.LSTM(4), keras.layers.Dense(2)])
    return model


def run_call(code: str, model) -> None:
    exec(compile(code, "<fix>", "exec"), {"model": model, "keras": keras, "tf": tf})


def test_rewritten_compile_call_runs_and_keeps_the_metrics():
    call = 'model.compile(loss="categorical_crossentropy", optimizer="adam", metrics=["accuracy"])'
    model = tiny_model()
    run_call(rw.set_keyword(call, "steps_per_execution", "16"), model)
    assert model.steps_per_execution == 16
    x = np.zeros((32, 5, 3), "float32")
    y = np.eye(2, dtype="float32")[np.zeros(32, int)]
    logs = model.evaluate(x, y, verbose=0, return_dict=True)
    assert "accuracy" in logs  # the metrics survived the rewrite


def test_compile_without_run_eagerly_runs_graph_steps():
    call = 'model.compile(optimizer="adam", loss="mse", run_eagerly=True, metrics=["mae"])'
    model = tiny_model()
    run_call(rw.remove_keyword(call, "run_eagerly"), model)
    assert model.run_eagerly is False


def test_timeseries_pipeline_is_recorded_at_the_users_line_and_float64_is_read():
    sites.install(__file__)
    data_mod.install()
    series = np.random.default_rng(0).normal(size=(200, 6))  # float64
    targets = series[24:, 0]
    dataset_train = keras.utils.timeseries_dataset_from_array(series, targets, 24, batch_size=8)
    facts = data_mod.describe(dataset_train)
    assert facts.location is not None
    assert "timeseries_dataset_from_array" in (facts.location.code or "")
    assert facts.input_dtypes == ["float64"]
    # the array the source was built from: its assignment, where RD207 casts it
    assert facts.array_location is not None
    assert facts.array_location.call_source.startswith("series = np.random.default_rng(0)")
    # RD205's and RD207's fixes for it run, and the cast halves the element's bytes
    dataset_train = dataset_train.cache()
    dataset_train = dataset_train.map(lambda x, y: (tf.cast(x, tf.float32), y))
    ((x, _),) = dataset_train.take(1)
    assert x.dtype == tf.float32


def _facts_with(data):
    from rnndoctor.facts import Facts, FitConfig, ProbeFacts, RunInfo, StepTimes

    f = Facts(run=RunInfo(script=__file__, argv=[], cwd="/", outcome="completed"))
    f.fit = FitConfig(data_kind="tf.data", batch_size=32, epochs=3)
    f.steps = StepTimes(warmup_steps=1, measured_steps=10, median_step_time_ms=10.0)
    f.probes = ProbeFacts(input_only_ms=4.0, compute_only_ms=6.0, input_bound_share=0.4,
                          input_share_check=0.4, memory_limit_mib=10_000.0,
                          memory_limit_source="test")  # fmt: skip
    f.data = data
    return f


def test_a_random_map_is_seen_as_such_and_rd205_never_caches_after_it():
    from rnndoctor.engine import evaluate

    sites.install(__file__)
    data_mod.install()
    x = np.random.default_rng(0).normal(size=(256, 10, 3)).astype("float32")
    ds = tf.data.Dataset.from_tensor_slices(x)
    ds = ds.map(lambda t: t * 2.0)  # decode-line
    ds = ds.map(lambda t: t + tf.random.normal(tf.shape(t)))  # augment-line
    ds = ds.batch(32)
    data = data_mod.describe(ds)
    data.batch_bytes = 32 * 10 * 3 * 4
    (finding,) = [f for f in evaluate(_facts_with(data)).findings if f.rule_id == "RD205"]
    assert "# decode-line" in finding.location.code  # the cache goes before the random map
    assert finding.fix.code.endswith("ds.map(lambda t: t * 2.0).cache()")
    assert finding.fix.safety == "safe"

    ds = tf.data.Dataset.from_tensor_slices(x)
    ds = ds.map(lambda t: t + tf.random.normal(tf.shape(t)))  # only-map
    data = data_mod.describe(ds.batch(32))
    data.batch_bytes = 32 * 10 * 3 * 4
    (finding,) = [f for f in evaluate(_facts_with(data)).findings if f.rule_id == "RD205"]
    assert finding.fix.safety == "display-only"
    assert ".cache()" not in finding.fix.code.splitlines()[-1]
    assert "cannot be cached as built" in finding.message
