"""A weather-style forecaster: float64 windows straight from a float64 array, built with
``keras.utils.timeseries_dataset_from_array`` (one line, assigned to ``dataset_train``), and a
compile call with metrics. Shaped like defects 1, 2 and 7 of issue 12."""

import keras
import numpy as np

rng = np.random.default_rng(0)
series = rng.normal(size=(3000, 6))  # float64, as pandas' .values gives it; series-line
targets = series[:, 0]

dataset_train = keras.utils.timeseries_dataset_from_array(  # ts-line
    series, targets[24:], sequence_length=24, batch_size=64
)

model = keras.Sequential([keras.Input((24, 6)), keras.layers.LSTM(16), keras.layers.Dense(1)])
model.compile(loss="mse", optimizer="adam", metrics=["mae"])  # compile-line
model.fit(dataset_train, epochs=3)
