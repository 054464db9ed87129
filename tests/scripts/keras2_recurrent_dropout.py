"""Keras 2 (tf_keras, under TF_USE_LEGACY_KERAS=1): an LSTM with recurrent dropout, which
tf_keras' LSTM.__init__ excludes from cuDNN (_could_use_gpu_kernel), and a ModelCheckpoint
that `rnndoctor check` must neutralise, as the save_weights call before fit. Expected: RD101 at
the LSTM line; no checkpoint or weights file."""

import sys

import numpy as np
import tensorflow as tf

keras = tf.keras  # tf_keras under TF_USE_LEGACY_KERAS=1
layers = keras.layers

out = sys.argv[1] if len(sys.argv) > 1 else "keras2-checkpoint.h5"
rng = np.random.default_rng(0)
x = rng.normal(size=(512, 20, 4)).astype("float32")
y = rng.normal(size=(512, 1)).astype("float32")

model = keras.Sequential(
    [
        keras.Input((20, 4)),
        layers.LSTM(8, recurrent_dropout=0.25),  # the RD101 line
        layers.Dense(1),
    ]
)
model.compile(optimizer="adam", loss="mse")
model.save_weights(out + ".weights.h5")  # the save line
checkpoint = keras.callbacks.ModelCheckpoint(out)  # the checkpoint line
model.fit(x, y, batch_size=32, epochs=2, callbacks=[checkpoint])
