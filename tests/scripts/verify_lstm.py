"""--verify e2e: a small LSTM with recurrent_dropout (RD101, a multi-line call) at batch 8
(RD301), on data from a module of its own folder."""

import keras
from keras import layers
from verify_data import make_data

x, y = make_data()
model = keras.Sequential(
    [
        keras.Input((16, 4)),
        layers.LSTM(
            16,
            recurrent_dropout=0.2,
        ),
        layers.Dense(1),
    ]
)
model.compile(optimizer="sgd", loss="mse")
model.fit(x, y, batch_size=8, epochs=2)
