"""A Dataset.from_generator pipeline whose slow Python generator is cached right after it, trained
for 4 epochs: epoch 1 (the window) pays the generator, epochs 2..4 read the cache. Shaped like
the "input costs that only some epochs pay" item of issue 12.

Expected under `rnndoctor check`: RD201 says the cost is epoch 1's only and weighs it by the job.
"""

import math

import keras
import numpy as np
import tensorflow as tf

rng = np.random.default_rng(1)
TOKENS = rng.integers(1, 40, size=(2048, 16)).astype("int32")
LABELS = rng.normal(size=(2048,)).astype("float32")


def examples():
    for tokens, label in zip(TOKENS, LABELS, strict=True):
        weight = sum(math.cos(t * k) for t in tokens.tolist() for k in range(60))  # Python work
        yield tokens, np.float32(label + 0.0 * weight)


ds = tf.data.Dataset.from_generator(
    examples,
    output_signature=(tf.TensorSpec((16,), tf.int32), tf.TensorSpec((), tf.float32)),
)
ds = ds.cache()  # cache-line
ds = ds.batch(32)

model = keras.Sequential(
    [keras.Input((16,), dtype="int32"), keras.layers.Embedding(40, 8), keras.layers.LSTM(16),
     keras.layers.Dense(1)]
)  # fmt: skip
model.compile(optimizer="adam", loss="mse")
model.fit(ds, epochs=4)
