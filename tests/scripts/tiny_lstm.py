"""A tiny training script with an RD101 layer, HTML on its construction line, and user code after
fit: an except clause that must not run under `rnndoctor check` (fit returns normally), a print
that the run-on after the window reaches, and a save it must stop before.

(TensorFlow's scope names allow no `<` or spaces, so a trainable layer cannot carry an HTML name;
the report's escaping of one is tested on facts in tests/unit.)"""

import sys

import keras
import numpy as np
from keras import layers

rng = np.random.default_rng(0)
x = rng.normal(size=(256, 8, 3)).astype("float32")
y = rng.normal(size=(256, 1)).astype("float32")

model = keras.Sequential(
    [
        keras.Input((8, 3)),
        layers.LSTM(8, recurrent_dropout=0.2, name="encoder"),  # <script>alert(1)</script>
        layers.Dense(1),
    ]
)
model.compile(optimizer="sgd", loss="mse")
try:
    model.fit(x, y, batch_size=16, epochs=int(sys.argv[1]) if len(sys.argv) > 1 else 5)
except Exception:
    print("USER CODE SWALLOWED AN EXCEPTION")
print("AFTER FIT")
model.save("tiny_lstm.keras")
