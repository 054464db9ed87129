"""rnndoctor.keras.DoctorCallback in a real fit, under Keras 3 and under tf_keras (Keras 2): the
fit runs all its epochs, the report is written, and the training is the one without the
callback: at fixed seeds the final weights, the optimizer's variables (slots and iteration
counter) and the per-epoch losses equal those of the same fit without the callback, although the
probes trained the model further on their own fits in between (the callback saves and restores
the training state around them; what it cannot restore is in rnndoctor/keras.py's doc)."""

from __future__ import annotations

import json
import os
import time

import keras as keras3
import numpy as np
import pytest

FLAVOURS = ["keras", pytest.param("tf_keras", marks=pytest.mark.keras2)]


def _keras(flavour: str):
    return keras3 if flavour == "keras" else pytest.importorskip("tf_keras")


def _sleepy(keras):
    """A user callback with a per-batch hook that sleeps 3 ms (RD404's subject)."""

    class Sleepy(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            time.sleep(0.003)

    return Sleepy()


def _fit(keras, callbacks, dropout: float = 0.0, epochs: int = 3):
    keras.utils.set_random_seed(0)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(192, 10, 4)).astype("float32")
    y = rng.normal(size=(192, 1)).astype("float32")
    model = keras.Sequential(
        [keras.Input((10, 4)), keras.layers.LSTM(8), keras.layers.Dropout(dropout),
         keras.layers.Dense(1)]
    )  # fmt: skip
    model.compile(optimizer="adam", loss="mse")
    history = model.fit(x, y, batch_size=16, epochs=epochs, verbose=0, callbacks=callbacks)
    return model, history


def _optimizer_values(model):
    variables = model.optimizer.variables
    variables = variables() if callable(variables) else variables
    return [np.asarray(v) for v in variables]


def _same(a, b) -> bool:
    return len(a) == len(b) and all(np.array_equal(u, v) for u, v in zip(a, b, strict=True))


def _doctor(out, **kwargs):
    from rnndoctor.keras import DoctorCallback

    out = str(out) if out is not None else None  # None: the facts stay in memory
    return DoctorCallback(out=out, steps=3, warmup_steps=1, profile_steps=0, **kwargs)


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_fit_with_the_callback_trains_exactly_as_without_it(flavour, tmp_path):
    """Keras 3 draws its dropout masks from SeedGenerator state variables, which the callback
    restores, so its model has dropout too; tf_keras' Dropout draws from stateful random ops
    whose per-op state cannot be restored (rnndoctor/keras.py), so its model has none."""
    keras = _keras(flavour)
    dropout = 0.5 if flavour == "keras" else 0.0
    plain, plain_history = _fit(keras, [_sleepy(keras)], dropout)
    doctor, sleepy = _doctor(tmp_path / "report"), _sleepy(keras)
    diagnosed, history = _fit(keras, [doctor, sleepy], dropout)
    assert len(history.history["loss"]) == 3  # every epoch ran
    assert history.history["loss"] == plain_history.history["loss"]
    assert _same(diagnosed.get_weights(), plain.get_weights())
    assert _same(_optimizer_values(diagnosed), _optimizer_values(plain))
    assert int(diagnosed.optimizer.iterations) == int(plain.optimizer.iterations) == 36
    report = doctor.report
    assert report is not None and (tmp_path / "report" / "report.html").is_file()
    saved = json.loads((tmp_path / "report" / "report.json").read_text())["facts"]
    assert saved["environment"]["keras_flavour"] == f"{flavour} {keras.__version__}"
    assert saved["steps"]["measured_steps"] == 3
    probes = saved["probes"]  # the probes did run (and train the model) in between
    assert probes["compute_only_not_measured"] is None and probes["batch_probe"]
    assert saved["model"]["rnn_layers"][0]["fast_path"]["takes_fast_path"] is True
    (timed,) = probes["callbacks"]  # the user's per-batch hook, timed during the window
    assert timed["name"] == "Sleepy" and timed["per_step_ms"] >= 2.9  # time.sleep(0.003)
    assert "on_train_batch_end" not in vars(sleepy)  # its hook is its own again after it


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_stop_after_ends_fit_once_the_diagnosis_is_done(flavour, tmp_path):
    keras = _keras(flavour)
    doctor = _doctor(None, stop_after=True, run_probes=False)
    _, history = _fit(keras, [doctor], epochs=5)
    assert len(history.history["loss"]) == 1  # the window fits in the first epoch
    assert doctor.report is not None and doctor.report.facts.steps.measured_steps == 3
    assert not os.path.exists("None")  # out=None writes no report folder


def test_the_users_own_report_files_in_out_are_refused_before_fit(tmp_path):
    """``DoctorCallback(out=)`` and ``diagnose(out=)`` never replace a file of the user's named
    as their outputs (rnndoctor/outdir.py): they raise before any step runs."""
    import rnndoctor
    from rnndoctor.keras import DoctorCallback
    from rnndoctor.outdir import ForeignFiles

    (tmp_path / "report.html").write_text("<p>my own page</p>")
    with pytest.raises(ForeignFiles, match=r"holds report\.html, not marked as rnndoctor's output"):
        DoctorCallback(out=tmp_path)
    layers = keras3.layers
    model = keras3.Sequential([keras3.Input((10, 4)), layers.LSTM(8), layers.Dense(1)])
    model.compile(optimizer="adam", loss="mse")
    x = np.zeros((32, 10, 4), "float32")
    with pytest.raises(ForeignFiles):
        rnndoctor.diagnose(model, x, y=np.zeros((32, 1), "float32"), batch_size=8, out=tmp_path)
    assert int(model.optimizer.iterations.numpy()) == 0  # no step ran
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.html"]
    assert (tmp_path / "report.html").read_text() == "<p>my own page</p>"
