"""Arrays of float64 and ``fit(..., batch_size=batch_size)`` with the name set above: RD301's
fix belongs on the ``batch_size = ...`` line, the float64 cast on the array's assignment line.
Shaped like defect 2 (batch size) and 7 of issue 12."""

import keras
import numpy as np

rng = np.random.default_rng(0)
x_train = rng.normal(size=(512, 10, 4))  # x-line (float64)
y_train = rng.normal(size=(512, 1)).astype("float32")
batch_size = 4  # batch-line

model = keras.Sequential([keras.Input((10, 4)), keras.layers.GRU(8), keras.layers.Dense(1)])
model.compile(
    loss="mse",
    optimizer="adam",
    metrics=["mae"],
)
model.fit(x_train, y_train, batch_size=batch_size, epochs=2)
