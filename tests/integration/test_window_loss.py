"""The window records the training loss fit logged at its last step (``StepTimes.final_loss``),
which ``--verify`` compares between the original and a patched run."""

from __future__ import annotations

import math

import numpy as np

import rnndoctor


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
