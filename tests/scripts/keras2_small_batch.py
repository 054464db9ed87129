"""Keras 2 (tf_keras, under TF_USE_LEGACY_KERAS=1): batch size 4, built with tf.keras; the twin
of tests/scripts/small_batch_slow_callback.py without its callback.

Expected under `rnndoctor check`: RD301 small-batch, from the batch-size probe's samples/s.
"""

import numpy as np
import tensorflow as tf

keras = tf.keras  # tf_keras under TF_USE_LEGACY_KERAS=1
layers = keras.layers

rng = np.random.default_rng(0)
x = rng.normal(size=(2048, 16, 4)).astype("float32")
y = rng.normal(size=(2048, 1)).astype("float32")

model = keras.Sequential([keras.Input((16, 4)), layers.LSTM(16), layers.Dense(1)])
model.compile(optimizer="adam", loss="mse")
model.fit(x, y, batch_size=4, epochs=2)
