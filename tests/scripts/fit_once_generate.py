"""One fit, then a text-generation loop: 300 single-sample model.predict calls after training,
as a character-level sampler makes. `rnndoctor check` must run on after the window of this
single fit, count the predicts (RD406) and add what runs after fit to the job forecast, once.
The script prints how many objects the garbage collector holds frozen as its run-on begins: the
capture child keeps the window's objects frozen there (capture/heap.py: frozen)."""

import gc

import keras
import numpy as np
from keras import layers

rng = np.random.default_rng(1)
x = rng.integers(0, 30, size=(512, 20))
y = keras.utils.to_categorical(rng.integers(0, 30, size=512), 30)
model = keras.Sequential(
    [keras.Input((20,), dtype="int32"), layers.Embedding(30, 16), layers.LSTM(32),
     layers.Dense(30, activation="softmax")]
)  # fmt: skip
model.compile(optimizer="adam", loss="categorical_crossentropy")
model.fit(x, y, batch_size=32, epochs=3)  # the fit line
print("FROZEN", gc.get_freeze_count(), "ENABLED", gc.isenabled())

seed = x[:1].copy()
generated = []
for _ in range(300):
    preds = model.predict(seed, verbose=0)[0]  # the predict line
    nxt = int(np.argmax(preds))
    generated.append(nxt)
    seed = np.concatenate([seed[:, 1:], [[nxt]]], axis=1)
print("GENERATED", generated[:10])
