"""Keras 2 (tf_keras, under TF_USE_LEGACY_KERAS=1): a tiny masked LSTM trained on sequences
padded at the start (pad_sequences' default), with a few empty sequences among them; the twin of
tests/scripts/padded_lstm.py. tf_keras checks the mask at run time
(gru_lstm_utils.is_cudnn_supported_inputs) and silently falls back to the generic kernel:
`rnndoctor check` must give RD110 and RD111 at warning, at the padding line. With `--post`, the
sequences are padded at the end and the empty ones dropped: neither."""

import sys

import numpy as np
import tensorflow as tf

keras = tf.keras  # tf_keras under TF_USE_LEGACY_KERAS=1
layers = keras.layers

post = "--post" in sys.argv
rng = np.random.default_rng(0)
lengths = rng.integers(2, 31, size=512)
lengths[::64] = 0  # empty texts
seqs = [list(rng.integers(1, 40, size=n)) for n in lengths]
if post:
    seqs = [s for s in seqs if s]
padding = "post" if post else "pre"
x = keras.utils.pad_sequences(seqs, maxlen=40, padding=padding)  # the padding line
y = rng.normal(size=(len(x), 1)).astype("float32")

model = keras.Sequential(
    [
        keras.Input((40,), dtype="int32"),
        layers.Embedding(40, 8, mask_zero=True),
        layers.LSTM(8),
        layers.Dense(1),
    ]
)
model.compile(optimizer="sgd", loss="mse")
model.fit(x, y, batch_size=32, epochs=3)
