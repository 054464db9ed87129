"""Writes user state in every way Keras offers: a checkpoint every batch, a CSV log, TensorBoard
logs, weights from a callback, and a model file after fit. Under `rnndoctor check`, none of it
may appear in this folder."""

import keras
from _tiny import data, lstm_model


class SaveWeights(keras.callbacks.Callback):
    def on_train_batch_end(self, batch, logs=None):
        self.model.save_weights("callback.weights.h5")


x, y = data()
model = lstm_model()
callbacks = [
    keras.callbacks.ModelCheckpoint("ckpt/epoch{epoch}-batch.keras", save_freq=1),
    keras.callbacks.BackupAndRestore("backup"),
    keras.callbacks.CSVLogger("training.csv"),
    keras.callbacks.TensorBoard(log_dir="tb_logs", update_freq="batch"),
    SaveWeights(),
]
model.fit(x, y, batch_size=16, epochs=2, callbacks=callbacks)
model.save("final.keras")
