"""``charlm_stdlib.py`` with rnndoctor's fixes applied: the clean control.

- RD101: input ``dropout`` instead of ``recurrent_dropout``, so the LSTM keeps the cuDNN kernel.
- RD110: sequences padded at the end (``padding="post"``), the only mask layout cuDNN accepts.
- RD501 / RD502: batches of similar lengths, each padded to its own longest line
  (``bucket_by_sequence_length`` with the boundaries rnndoctor computed from the lengths it
  sampled on ``charlm_stdlib.py``), instead of every batch padded to 80 steps.

Run on its own: ``python charlm_stdlib_fixed.py --epochs 2``; check it: ``rnndoctor demo --fixed``.
"""

import argparse

import keras
import tensorflow as tf
from _stdlib_text import VOCAB_SIZE, encode, stdlib_lines
from keras import layers

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=3)
parser.add_argument("--lines", type=int, default=20000)
parser.add_argument("--batch-size", type=int, default=64)
args = parser.parse_args()

MAX_LEN = 80
BOUNDARIES = [12, 20, 26, 35, 43, 51, 58, 68]  # from rnndoctor's RD501 on charlm_stdlib.py
ids = encode(stdlib_lines(args.lines, MAX_LEN + 1))
x = keras.utils.pad_sequences([s[:-1] for s in ids], maxlen=MAX_LEN, padding="post")
y = keras.utils.pad_sequences([s[1:] for s in ids], maxlen=MAX_LEN, padding="post")


def unpad(x, y):
    valid = tf.not_equal(x, 0)  # Embedding(mask_zero=True): id 0 is padding
    return tf.boolean_mask(x, valid), tf.boolean_mask(y, valid)


def length(x, y):
    return tf.shape(x)[0]


def bucketed(x, y, shuffle):
    dataset = (
        tf.data.Dataset.from_tensor_slices((x, y))
        .map(unpad, num_parallel_calls=tf.data.AUTOTUNE)
        .cache()
    )
    if shuffle:
        dataset = dataset.shuffle(len(x))
    return dataset.bucket_by_sequence_length(
        length, BOUNDARIES, [args.batch_size] * (len(BOUNDARIES) + 1)
    ).prefetch(tf.data.AUTOTUNE)


held_out = len(x) // 20  # the 5% validation_split of charlm_stdlib.py
train = bucketed(x[held_out:], y[held_out:], shuffle=True)
validation = bucketed(x[:held_out], y[:held_out], shuffle=False)

model = keras.Sequential(
    [
        keras.Input(shape=(None,), dtype="int32"),
        layers.Embedding(VOCAB_SIZE, 64, mask_zero=True),
        layers.LSTM(256, return_sequences=True, dropout=0.1),
        layers.Dense(VOCAB_SIZE),
    ]
)
model.compile(
    optimizer="adam",
    loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    metrics=["accuracy"],
)
model.fit(train, epochs=args.epochs, validation_data=validation)
model.save("charlm_stdlib_fixed.keras")
