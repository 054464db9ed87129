"""The window records the training loss fit logged at its last step (``StepTimes.final_loss``),
which ``--verify`` compares between the original and a patched run."""

from __future__ import annotations

import math

import numpy as np

import rnndoctor
from rnndoctor.facts import Outcome


def test_the_window_records_the_loss_of_its_last_step(tmp_path):
    import keras

    rng = np.random.default_rng(0)
    x = rng.normal(size=(256, 5, 3)).astype("float32")
    y = rng.normal(size=(256, 1)).astype("float32")
    model = keras.Sequential([keras.Input((5, 3)), keras.layers.LSTM(4), keras.layers.Dense(1)])
    model.compile(optimizer="adam", loss="mse")
    report = rnndoctor.diagnose(
        model, x, y=y, batch_size=16, epochs=1, steps=4, warmup_steps=1, profile_steps=0,
        run_probes=False, probe_fast_path=False,
    )  # fmt: skip
    loss = report.facts.steps.final_loss
    assert isinstance(loss, float) and math.isfinite(loss) and loss > 0
    assert report.facts.steps.final_loss_step == 1 + 4  # warm-up and measured steps


def test_the_loss_step_counts_every_step_of_an_execution():
    """At steps_per_execution 4 each measured step is an execution of 4 steps: --verify must not
    compare its loss with a copy at 1 as if both had trained as much (verify/result.py:
    loss_verdict)."""
    import keras

    rng = np.random.default_rng(0)
    x = rng.normal(size=(512, 5, 3)).astype("float32")
    y = rng.normal(size=(512, 1)).astype("float32")
    model = keras.Sequential([keras.Input((5, 3)), keras.layers.LSTM(4), keras.layers.Dense(1)])
    model.compile(optimizer="adam", loss="mse", steps_per_execution=4)
    report = rnndoctor.diagnose(
        model, x, y=y, batch_size=16, epochs=1, steps=3, warmup_steps=1, profile_steps=0,
        run_probes=False, probe_fast_path=False,
    )  # fmt: skip
    assert report.facts.steps.final_loss_step == 4 * (1 + 3)


def test_the_users_own_process_gets_its_garbage_collector_back_unfrozen():
    """In the user's process the window's objects are unfrozen after the diagnosis (only the
    capture child, which ends with os._exit, keeps them frozen: capture/heap.py: frozen)."""
    import gc

    import keras

    x = np.zeros((64, 5, 3), "float32")
    model = keras.Sequential([keras.Input((5, 3)), keras.layers.LSTM(4), keras.layers.Dense(1)])
    model.compile(optimizer="adam", loss="mse")
    gc.unfreeze()
    report = rnndoctor.diagnose(
        model, x, y=np.zeros((64, 1), "float32"), batch_size=16, epochs=1, steps=2,
        warmup_steps=1, profile_steps=0, run_probes=False, probe_fast_path=False,
    )  # fmt: skip
    assert report.facts.run.outcome == Outcome.COMPLETED  # the diagnosis did run
    assert gc.get_freeze_count() == 0 and gc.isenabled()


def test_the_history_fit_returns_holds_the_windows_epoch():
    """The window ends fit mid-epoch, before Keras' History records the epoch: a fit loop that
    reads ``model.fit(...).history["loss"]`` after the window raised KeyError in the run-on
    (a new user's trial), where its own run would not. The History holds the window's last
    training logs as its epoch, and NaN for val_ metrics where fit validates."""
    import keras

    rng = np.random.default_rng(0)
    x = rng.normal(size=(256, 5, 3)).astype("float32")
    y = rng.normal(size=(256, 1)).astype("float32")
    model = keras.Sequential([keras.Input((5, 3)), keras.layers.LSTM(4), keras.layers.Dense(1)])
    model.compile(optimizer="adam", loss="mse", metrics=["mae"])
    report = rnndoctor.diagnose(
        model, x, y=y, batch_size=16, epochs=1, steps=3, warmup_steps=1, profile_steps=0,
        run_probes=False, probe_fast_path=False,
    )  # fmt: skip
    history = model.history
    assert history.epoch == [0] and sorted(history.history) == ["loss", "mae"]
    assert history.history["loss"] == [report.facts.steps.final_loss]  # the last step's
    assert all(isinstance(v[0], float) and math.isfinite(v[0]) for v in history.history.values())
    assert not any("History" in note for note in report.facts.run.notes)

    report = rnndoctor.diagnose(
        model, x, y=y, batch_size=16, epochs=1, steps=3, warmup_steps=1, profile_steps=0,
        run_probes=False, probe_fast_path=False, validation_split=0.25,
    )  # fmt: skip
    logged = model.history.history
    assert sorted(logged) == ["loss", "mae", "val_loss", "val_mae"]
    assert math.isfinite(logged["loss"][0]) and math.isnan(logged["val_loss"][0])
    assert any("NaN for the val_ metrics" in note for note in report.facts.run.notes)


def test_a_window_in_a_later_epoch_keeps_every_historys_list_as_long_as_its_epochs():
    """A review: a window ending in epoch 2 appended its batch logs (no learning_rate, which a
    scheduler adds to epoch logs only), so pd.DataFrame(history.history) failed on unequal
    lengths in the user's code after fit."""
    from types import SimpleNamespace

    from rnndoctor.capture.window import fill_history

    history = SimpleNamespace(history={"loss": [1.0], "learning_rate": [0.1]}, epoch=[0])
    window = SimpleNamespace(last_logs={"loss": 0.5, "mae": 0.4}, epoch=1)
    session = SimpleNamespace(facts=SimpleNamespace(run=SimpleNamespace(notes=[])))
    fill_history(session, SimpleNamespace(history=history), window, {})
    assert history.epoch == [0, 1]
    assert {len(v) for v in history.history.values()} == {2}
    assert history.history["loss"] == [1.0, 0.5]
    assert math.isnan(history.history["learning_rate"][1]) and math.isnan(history.history["mae"][0])
    fill_history(session, SimpleNamespace(history=history), window, {})  # its epoch is there
    assert history.epoch == [0, 1]
