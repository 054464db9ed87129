"""A callback calls sys.exit(0) during training."""

import sys

import keras
from _tiny import data, lstm_model


class Quit(keras.callbacks.Callback):
    def on_train_batch_end(self, batch, logs=None):
        if batch == 1:
            sys.exit(0)


x, y = data()
lstm_model().fit(x, y, batch_size=16, epochs=1, callbacks=[Quit()])
