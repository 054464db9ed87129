"""Keras 2 (tf_keras, under TF_USE_LEGACY_KERAS=1): the clean control of
tests/scripts/clean_control.py, built with tf.keras. Expected: no finding at warning or above."""

import numpy as np
import tensorflow as tf

keras = tf.keras  # tf_keras under TF_USE_LEGACY_KERAS=1
layers = keras.layers

rng = np.random.default_rng(0)
x = rng.normal(size=(16384, 30, 8)).astype("float32")
y = rng.normal(size=(16384, 1)).astype("float32")


def scale(features, target):
    return features * 0.5, target


ds = (
    tf.data.Dataset.from_tensor_slices((x, y))
    .batch(256)
    .map(scale, num_parallel_calls=tf.data.AUTOTUNE)
    .cache()
    .shuffle(64)
    .prefetch(tf.data.AUTOTUNE)
)

model = keras.Sequential([keras.Input((30, 8)), layers.LSTM(128), layers.Dense(1)])
model.compile(optimizer="adam", loss="mse", steps_per_execution=8)
model.fit(ds, epochs=2, callbacks=[keras.callbacks.EarlyStopping(monitor="loss", patience=2)])
