"""A Dataset.from_generator pipeline whose generator does slow per-example Python work.

Expected under `rnndoctor check`: RD201 input-bound at error (input share >= 50%) and RD204 at
the from_generator line. `input_fast_pipeline.py` is the same job built from arrays with tf ops.
The Python work per example is large enough that the share clears RD201's 50% error cut-off
by a margin its interval keeps: with 60 sines per token a CI run measured 57% (90% interval
50–59%), a warning, on a share at the cut-off; with 120 two checks gave 72% (71–74%, 70–74%).
"""

import math

import keras
import numpy as np
import tensorflow as tf
from keras import layers

rng = np.random.default_rng(0)
TOKENS = rng.integers(1, 50, size=(4096, 20)).astype("int32")
LABELS = rng.normal(size=(4096,)).astype("float32")


def examples():
    for tokens, label in zip(TOKENS, LABELS, strict=True):
        # per-example feature work in Python: a weighted sum of sines per token
        weight = sum(math.sin(t * k) for t in tokens.tolist() for k in range(120))
        yield tokens, np.float32(label + 0.0 * weight)


ds = tf.data.Dataset.from_generator(
    examples,
    output_signature=(tf.TensorSpec((20,), tf.int32), tf.TensorSpec((), tf.float32)),
)
ds = ds.batch(32)

model = keras.Sequential(
    [keras.Input((20,), dtype="int32"), layers.Embedding(50, 8), layers.LSTM(16), layers.Dense(1)]
)
model.compile(optimizer="adam", loss="mse")
model.fit(ds, epochs=2)
