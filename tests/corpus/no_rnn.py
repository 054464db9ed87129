"""A model with no RNN layer at all (Conv1D + pooling)."""

import keras
from _tiny import FEATURES, STEPS, data

model = keras.Sequential(
    [
        keras.Input((STEPS, FEATURES)),
        keras.layers.Conv1D(8, 3, name="conv"),
        keras.layers.GlobalAveragePooling1D(),
        keras.layers.Dense(1),
    ],
    name="convnet",
)
model.compile(optimizer="sgd", loss="mse")
x, y = data()
model.fit(x, y, batch_size=16, epochs=1)
