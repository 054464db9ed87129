"""An LSTM fed a ragged tf.data pipeline: Keras 3 fails when fit traces the step; `rnndoctor
check` must report RD114 at the LSTM's line."""

import keras
import numpy as np
import tensorflow as tf

rng = np.random.default_rng(0)
seqs = [[[float(v)] for v in rng.normal(size=n)] for n in rng.integers(2, 20, size=128)]
data = tf.data.Dataset.from_tensor_slices(
    (tf.ragged.constant(seqs, ragged_rank=1), np.zeros((128, 1), "float32"))
).batch(16)

model = keras.Sequential(
    [
        keras.Input((None, 1)),
        keras.layers.LSTM(8),  # the RNN that receives the RaggedTensor
        keras.layers.Dense(1),
    ]
)
model.compile(optimizer="sgd", loss="mse")
model.fit(data, epochs=2)
