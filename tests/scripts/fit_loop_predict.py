"""A text-generation shape: an LSTM trained with fit(epochs=1) inside a Python loop, and after
each fit a loop of single-sample model.predict calls (sampling one character at a time).
`rnndoctor check` must see the loop (5 fit calls), the predict calls after the window (RD406)
and forecast the whole loop."""

import keras
import numpy as np
from keras import layers

ITERATIONS = 5
rng = np.random.default_rng(0)
x = rng.integers(0, 30, size=(512, 20))
y = keras.utils.to_categorical(rng.integers(0, 30, size=512), 30)
model = keras.Sequential(
    [keras.Input((20,), dtype="int32"), layers.Embedding(30, 16), layers.LSTM(32),
     layers.Dense(30, activation="softmax")]
)  # fmt: skip
model.compile(optimizer="adam", loss="categorical_crossentropy")

for iteration in range(ITERATIONS):
    model.fit(x, y, batch_size=32, epochs=1)  # the fit line
    seed = x[:1].copy()
    generated = []
    for _ in range(200):
        preds = model.predict(seed, verbose=0)[0]  # the predict line
        nxt = int(np.argmax(preds))
        generated.append(nxt)
        seed = np.concatenate([seed[:, 1:], [[nxt]]], axis=1)
    print(iteration, generated[:10])
