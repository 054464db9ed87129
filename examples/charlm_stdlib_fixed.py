"""``charlm_stdlib.py`` with rnndoctor's fixes applied: the clean control.

- RD101: input ``dropout`` instead of ``recurrent_dropout``, so the LSTM keeps the cuDNN kernel.
- Sequences padded at the end (``padding="post"``), the only mask layout cuDNN accepts.

Run on its own: ``python charlm_stdlib_fixed.py --epochs 2``; check it: ``rnndoctor demo --fixed``.
"""

import argparse

import keras
from _stdlib_text import VOCAB_SIZE, encode, stdlib_lines
from keras import layers

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=3)
parser.add_argument("--lines", type=int, default=20000)
parser.add_argument("--batch-size", type=int, default=64)
args = parser.parse_args()

MAX_LEN = 80
ids = encode(stdlib_lines(args.lines, MAX_LEN + 1))
x = keras.utils.pad_sequences([s[:-1] for s in ids], maxlen=MAX_LEN, padding="post")
y = keras.utils.pad_sequences([s[1:] for s in ids], maxlen=MAX_LEN, padding="post")

model = keras.Sequential(
    [
        keras.Input(shape=(MAX_LEN,), dtype="int32"),
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
model.fit(x, y, batch_size=args.batch_size, epochs=args.epochs, validation_split=0.05)
model.save("charlm_stdlib_fixed.keras")
