"""Keras 2 (tf_keras, under TF_USE_LEGACY_KERAS=1): batch size 4 and a per-batch callback that
sleeps, built with tf.keras; the twin of tests/scripts/small_batch_slow_callback.py.

Expected under `rnndoctor check`: RD301 small-batch, from the batch-size probe's samples/s, and
RD404 slow-callbacks naming `SleepyLogger` at the line that builds it.
"""

import time

import numpy as np
import tensorflow as tf

keras = tf.keras  # tf_keras under TF_USE_LEGACY_KERAS=1
layers = keras.layers

rng = np.random.default_rng(0)
x = rng.normal(size=(2048, 16, 4)).astype("float32")
y = rng.normal(size=(2048, 1)).astype("float32")


class SleepyLogger(keras.callbacks.Callback):
    """Writes a log row per batch, slowly."""

    def on_train_batch_end(self, batch, logs=None):
        time.sleep(0.004)


model = keras.Sequential([keras.Input((16, 4)), layers.LSTM(16), layers.Dense(1)])
model.compile(optimizer="adam", loss="mse")
logger = SleepyLogger()
model.fit(x, y, batch_size=4, epochs=2, callbacks=[logger])
