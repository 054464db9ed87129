"""Shared by the corpus scripts: tiny data and a tiny LSTM model (kept small so each case runs in
seconds on 2 CPU cores)."""

import keras
import numpy as np

SAMPLES, STEPS, FEATURES = 256, 8, 3


def data(samples: int = SAMPLES):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(samples, STEPS, FEATURES)).astype("float32")
    y = rng.normal(size=(samples, 1)).astype("float32")
    return x, y


def lstm_model() -> keras.Model:
    model = keras.Sequential(
        [keras.Input((STEPS, FEATURES)), keras.layers.LSTM(8), keras.layers.Dense(1)]
    )
    model.compile(optimizer="sgd", loss="mse")
    return model
