"""--verify e2e: a script the RD101 fix breaks (it relies on the layer's recurrent_dropout), so
the patched copy raises and the fix must show as failed, with its error line."""

import keras
from keras import layers
from verify_data import make_data

x, y = make_data(n=256)
lstm = layers.LSTM(16, recurrent_dropout=0.2)
model = keras.Sequential([keras.Input((16, 4)), lstm, layers.Dense(1)])
assert lstm.recurrent_dropout == 0.2, "this job needs recurrent_dropout=0.2"
model.compile(optimizer="sgd", loss="mse")
model.fit(x, y, batch_size=32, epochs=2)
