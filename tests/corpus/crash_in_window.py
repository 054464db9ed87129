"""A callback raises in the middle of the diagnosis window (after the warm-up step)."""

import keras
from _tiny import data, lstm_model


class Flaky(keras.callbacks.Callback):
    def on_train_batch_end(self, batch, logs=None):
        if batch == 2:
            raise RuntimeError("simulated crash in the middle of training")


x, y = data()
lstm_model().fit(x, y, batch_size=16, epochs=1, callbacks=[Flaky()])
