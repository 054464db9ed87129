"""A tiny LSTM trained with fit, eagerly (tests/e2e/test_custom_loops.py: RD401).

``python run_eagerly_fit.py compile``: ``model.compile(..., run_eagerly=True)``.
``python run_eagerly_fit.py config``: ``tf.config.run_functions_eagerly(True)``.
"""

import sys

import keras
import numpy as np
import tensorflow as tf

MODE = sys.argv[1] if len(sys.argv) > 1 else "compile"
rng = np.random.default_rng(0)
x = rng.normal(size=(512, 10, 4)).astype("float32")
y = rng.normal(size=(512, 1)).astype("float32")

if MODE == "config":
    tf.config.run_functions_eagerly(True)  # eager-switch
model = keras.Sequential([keras.Input((10, 4)), keras.layers.LSTM(8), keras.layers.Dense(1)])
model.compile(optimizer="adam", loss="mse", run_eagerly=True)  # compile-line
if MODE == "config":  # only the tf.config switch (a literal above: RD401 rewrites it in place)
    model.run_eagerly = False
model.fit(x, y, batch_size=16, epochs=2, verbose=0)
