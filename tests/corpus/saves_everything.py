"""Writes user state in every way Keras and TensorFlow offer: weights and a TF checkpoint before
fit, a checkpoint every batch, a backup, a CSV log, TensorBoard logs, a summary writer, weights,
a model file and a SavedModel export from a callback, and a model file after fit. Under
`rnndoctor check`, none of it may appear in this folder."""

import keras
import tensorflow as tf
from _tiny import data, lstm_model


class SaveEverything(keras.callbacks.Callback):
    def on_train_batch_end(self, batch, logs=None):
        self.model.save_weights("callback.weights.h5")
        if batch == 1:
            keras.saving.save_model(self.model, "callback.keras")
            self.model.export("exported")


x, y = data()
model = lstm_model()
model.save_weights("initial.weights.h5")
tf.train.Checkpoint(model=model).save("tf_ckpt/ckpt")
writer = tf.summary.create_file_writer("summaries")
callbacks = [
    keras.callbacks.ModelCheckpoint("ckpt/epoch{epoch}-batch.keras", save_freq=1),
    keras.callbacks.BackupAndRestore("backup"),
    keras.callbacks.CSVLogger("training.csv"),
    keras.callbacks.TensorBoard(log_dir="tb_logs", update_freq="batch"),
    SaveEverything(),
]
model.fit(x, y, batch_size=16, epochs=2, callbacks=callbacks)
model.save("final.keras")
