"""A two-input functional model fed with dicts of named arrays (tokens + side features)."""

import keras
import numpy as np

rng = np.random.default_rng(0)
n = 256
tokens = keras.Input((10,), dtype="int32", name="tokens")
extra = keras.Input((4,), name="extra")
h = keras.layers.Embedding(50, 8)(tokens)
h = keras.layers.GRU(8)(h)
h = keras.layers.Concatenate()([h, extra])
model = keras.Model({"tokens": tokens, "extra": extra}, keras.layers.Dense(1)(h))
model.compile(optimizer="sgd", loss="mse")
x = {
    "tokens": rng.integers(1, 50, size=(n, 10)).astype("int32"),
    "extra": rng.normal(size=(n, 4)).astype("float32"),
}
model.fit(x, rng.normal(size=(n, 1)).astype("float32"), batch_size=16, epochs=1)
