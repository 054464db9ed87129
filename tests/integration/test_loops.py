"""Custom training loops and tf.function tracing counts, in process, on tiny real models.

Each test installs the hooks of ``rnndoctor.capture.loop`` on its own ``CaptureSession`` and
detaches them afterwards (``loop.uninstall``). ``CaptureSession.end_script`` is replaced by a plain
raise: the
real one stops the process at the next line of user code, and the test's lines are user code.
"""

from __future__ import annotations

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")
keras = pytest.importorskip("keras")

from rnndoctor.capture import loop, traces, window  # noqa: E402
from rnndoctor.capture.env import collect_environment  # noqa: E402
from rnndoctor.capture.session import CaptureSession, StopScript  # noqa: E402
from rnndoctor.capture.step_window import WindowOptions  # noqa: E402
from rnndoctor.facts import Facts, RunInfo  # noqa: E402

T, F, B = 5, 3, 8


@pytest.fixture
def capture(tmp_path, monkeypatch):
    facts = Facts(run=RunInfo(script=__file__, argv=[], cwd=str(tmp_path)))
    facts.environment = collect_environment()
    options = WindowOptions(
        warmup_steps=1, measured_steps=3, profile_steps=0, probe_fast_path=False,
        run_probes=False, timeout_s=120,
    )  # fmt: skip
    cap = CaptureSession(facts, options, tmp_path / "facts.json")

    def stop():
        raise StopScript

    monkeypatch.setattr(cap, "end_script", stop)
    loop.install(cap)
    yield cap
    loop.uninstall()
    tf.config.run_functions_eagerly(False)


def make_model(units: int = 4, name: str | None = None):
    return keras.Sequential(
        [keras.Input((None, F)), keras.layers.LSTM(units), keras.layers.Dense(1)], name=name
    )


def batch(length: int = T):
    rng = np.random.default_rng(length)
    return (
        tf.constant(rng.normal(size=(B, length, F)).astype("float32")),
        tf.constant(rng.normal(size=(B, 1)).astype("float32")),
    )


def step_for(model, optimizer):
    loss_fn = keras.losses.MeanSquaredError()

    def train_step(x, y):
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        return loss

    return train_step


def run_loop(step, steps: int = 20, lengths=(T,)):
    for i in range(steps):
        step(*batch(lengths[i % len(lengths)]))


def test_an_eager_loop_is_measured_and_twinned_and_finishes_with_its_model(capture):
    other = make_model(name="unrelated")  # not trained: must not be picked
    model = make_model(name="trained")
    optimizer = keras.optimizers.Adam()
    train_step = step_for(model, optimizer)
    with pytest.raises(StopScript):
        run_loop(train_step)
    facts = capture.facts
    assert facts.loop.eager and not facts.loop.step_is_tf_function
    assert facts.loop.step_function.endswith("train_step")
    assert facts.loop.location.code.startswith("optimizer.apply_gradients(")
    assert facts.loop.model == "trained" and facts.model.name == "trained" and other.built
    assert facts.loop.variables_updated == len(model.trainable_variables)
    assert facts.steps.source == "custom loop" and facts.steps.measured_steps == 3
    assert all(ms > 0 for ms in facts.steps.step_time_ms) and facts.steps.batch_size == B
    assert facts.loop.steps_seen == 1 + 3  # warm-up + measured (no profiled step)
    assert facts.loop.eager_call_ms > facts.loop.traced_call_ms > 0, facts.loop.twin_not_measured
    (x, y) = facts.loop.step_arguments
    assert (x.name, x.spec) == ("x", f"tf.TensorSpec([None, {T}, {F}], tf.float32)")
    assert facts.run.outcome == "completed"
    assert optimizer.iterations.numpy() > 4  # the twin trained too: it is real


def test_a_traced_loop_counts_its_tracings_and_retracings(capture):
    model = make_model()
    train_step = tf.function(step_for(model, keras.optimizers.SGD()))
    with pytest.raises(StopScript):
        run_loop(train_step, lengths=(5, 6, 7, 8, 9, 10))
    facts = capture.facts
    assert not facts.loop.eager and facts.loop.step_is_tf_function
    assert facts.steps.measured_steps == 3
    (trace,) = [t for t in facts.probes.traces if t.role == "custom_step"]
    assert trace.calls == 4 and trace.traced_calls == 4  # every new length traced
    assert trace.traces == train_step.experimental_get_tracing_count()
    assert trace.baseline_calls > 0 and trace.median_call_ms > 0 and trace.tracing_ms > 0
    assert "x: float32[8, 6, 3]" in " ".join(trace.shapes)
    (x, _y) = trace.arguments
    assert x.spec == "tf.TensorSpec([None, None, 3], tf.float32)"


def test_run_functions_eagerly_makes_a_traced_step_eager_and_is_located(capture):
    model = make_model()
    train_step = tf.function(step_for(model, keras.optimizers.SGD()))
    tf.config.run_functions_eagerly(True)
    with pytest.raises(StopScript):
        run_loop(train_step)
    facts = capture.facts
    assert facts.loop.eager and facts.loop.functions_run_eagerly
    assert facts.environment.run_functions_eagerly is True
    location = facts.environment.run_eagerly_location
    assert location.file == __file__ and location.code == "tf.config.run_functions_eagerly(True)"
    assert facts.loop.traced_call_ms is not None, facts.loop.twin_not_measured
    assert tf.config.functions_run_eagerly()  # the twin restored the user's setting


def test_a_loop_that_ends_early_is_finished_with_what_was_measured(capture):
    model = make_model()
    run_loop(step_for(model, keras.optimizers.SGD()), steps=3)
    assert capture.facts.steps is None
    assert loop.finish_pending(capture) is True
    facts = capture.facts
    assert facts.steps.measured_steps == 2 and facts.run.outcome == "completed"
    assert any("ended after 3 custom-loop steps" in n for n in facts.run.notes)
    assert loop.finish_pending(capture) is False  # once


def test_tf_functions_are_counted_per_python_function(capture):
    @tf.function
    def scale(x, factor):
        return x * factor

    for length in (2, 3, 3, 4):
        scale(tf.ones((length,)), 2.0)
    for factor in range(3):  # a new Python value traces again
        scale(tf.ones((2,)), float(factor))
    for _ in range(3):  # a new tf.function object each time: traces each time
        tf.function(lambda v: v + 1)(tf.ones((2,)))
    traces.collect_traces(capture)
    rows = {t.name: t for t in capture.facts.probes.traces}
    scaled = rows[scale.python_function.__qualname__]
    assert (scaled.calls, scaled.traced_calls, scaled.traces) == (7, 5, 5)
    assert scaled.location.file == __file__
    factor = next(a for a in scaled.arguments if a.name == "factor")
    assert factor.kind == "python" and factor.values_seen == 3  # 2.0, 0.0, 1.0 traced
    lam = next(t for t in rows.values() if "<lambda>" in t.name)
    assert (lam.instances, lam.traces, lam.calls) == (3, 3, 3)
    scale(tf.ones((9,)), 2.0)  # after collection: not counted
    traces.collect_traces(capture)
    assert {t.name: t for t in capture.facts.probes.traces}[scaled.name].calls == 7


def test_fit_reports_its_train_function_and_no_custom_loop(capture):
    model = make_model()
    model.compile(optimizer="sgd", loss="mse")
    x, y = batch()
    fit = getattr(keras.Model.fit, "__wrapped__", keras.Model.fit)
    window.run_window(capture, fit, model,
                      (np.repeat(x.numpy(), 8, 0), np.repeat(y.numpy(), 8, 0)),
                      {"batch_size": B, "epochs": 1, "verbose": 0})  # fmt: skip
    facts = capture.facts
    assert facts.loop is None  # fit's own gradient applications are not a custom loop
    (train,) = [t for t in facts.probes.traces if t.role == "train_function"]
    assert train.name == "train_function" and train.calls >= 4 and train.traces >= 1
    assert train.reduce_retracing is True
    assert "iterator of (float32[" in train.shapes[0]
