"""``fit`` under MultiWorkerMirroredStrategy (``TF_CONFIG`` from ``rnndoctor check --workers``):
a tiny LSTM through ``tf.keras``. Under ``TF_USE_LEGACY_KERAS=1`` ``tf.keras`` is tf_keras
(Keras 2), whose ``fit`` trains here; without it ``tf.keras`` is Keras 3, whose ``fit`` fails
before its first step (keras-team/keras#20585)."""

import numpy as np
import tensorflow as tf

strategy = tf.distribute.MultiWorkerMirroredStrategy()
GLOBAL_BATCH = 16

rng = np.random.default_rng(0)
x = rng.normal(size=(512, 10, 3)).astype("float32")
y = rng.normal(size=(512, 1)).astype("float32")
ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(GLOBAL_BATCH).repeat()  # the dataset line

with strategy.scope():
    model = tf.keras.Sequential(
        [tf.keras.Input((10, 3)), tf.keras.layers.LSTM(8), tf.keras.layers.Dense(1)]
    )
    model.compile(optimizer="sgd", loss="mse")
model.fit(ds, epochs=2, steps_per_epoch=50, verbose=0)  # the fit line
