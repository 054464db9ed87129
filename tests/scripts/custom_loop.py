"""A tiny custom GradientTape training loop with no fit (tests/e2e/test_custom_loops.py).

``python custom_loop.py eager``: the step runs eagerly (RD402).
``python custom_loop.py traced``: the step is a ``tf.function`` with an ``input_signature``.
``python custom_loop.py retrace``: a ``tf.function`` step fed sequences whose length changes
every batch, so that it traces again and again (RD405).
"""

import sys

import keras
import numpy as np
import tensorflow as tf

MODE = sys.argv[1] if len(sys.argv) > 1 else "eager"
STEPS = 200
T, F, BATCH = 12, 4, 16

model = keras.Sequential([keras.Input((None, F)), keras.layers.LSTM(8), keras.layers.Dense(1)])
optimizer = keras.optimizers.Adam(1e-3)
loss_fn = keras.losses.MeanSquaredError()
rng = np.random.default_rng(0)


def batches():
    for i in range(STEPS):
        length = T + (i % 9) if MODE == "retrace" else T  # a new length each batch: retraces
        x = rng.normal(size=(BATCH, length, F)).astype("float32")
        y = rng.normal(size=(BATCH, 1)).astype("float32")
        yield tf.constant(x), tf.constant(y)


def train_step(x, y):
    with tf.GradientTape() as tape:
        loss = loss_fn(y, model(x, training=True))
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))  # apply-line
    return loss


if MODE == "traced":
    signature = [tf.TensorSpec([None, None, F], tf.float32), tf.TensorSpec([None, 1], tf.float32)]
    train_step = tf.function(train_step, input_signature=signature)
elif MODE == "retrace":
    train_step = tf.function(train_step)

for x, y in batches():
    loss = train_step(x, y)
print("LOOP ENDED")
