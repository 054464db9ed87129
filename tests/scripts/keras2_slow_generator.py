"""Keras 2 (tf_keras, under TF_USE_LEGACY_KERAS=1): a Dataset.from_generator pipeline whose
generator does slow per-example Python work, built with tf.keras; the twin of
tests/scripts/input_slow_generator.py.

Expected under `rnndoctor check`: RD201 input-bound with a measured share >= 50%, and RD204 at
the from_generator line.
"""

import math

import numpy as np
import tensorflow as tf

keras = tf.keras  # tf_keras under TF_USE_LEGACY_KERAS=1
layers = keras.layers

rng = np.random.default_rng(0)
TOKENS = rng.integers(1, 50, size=(4096, 20)).astype("int32")
LABELS = rng.normal(size=(4096,)).astype("float32")


def examples():
    for tokens, label in zip(TOKENS, LABELS, strict=True):
        # per-example feature work in Python: a weighted sum of sines per token
        weight = sum(math.sin(t * k) for t in tokens.tolist() for k in range(60))
        yield tokens, np.float32(label + 0.0 * weight)


ds = tf.data.Dataset.from_generator(  # the generator line
    examples,
    output_signature=(tf.TensorSpec((20,), tf.int32), tf.TensorSpec((), tf.float32)),
)
ds = ds.batch(32)

model = keras.Sequential(
    [keras.Input((20,), dtype="int32"), layers.Embedding(50, 8), layers.LSTM(16), layers.Dense(1)]
)
model.compile(optimizer="adam", loss="mse")
model.fit(ds, epochs=2)
