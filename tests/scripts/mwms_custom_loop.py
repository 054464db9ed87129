"""A Keras 3 custom training loop under MultiWorkerMirroredStrategy (``TF_CONFIG`` from
``rnndoctor check --workers``): ``strategy.run`` over ``experimental_distribute_dataset``, the
way out of Keras 3's ``fit`` failure there. The worker whose index is in ``SLOW_WORKER`` sleeps
``SLOW_MS`` in its input pipeline before every batch (a straggler, RD701)."""

import json
import os

import keras
import numpy as np
import tensorflow as tf

strategy = tf.distribute.MultiWorkerMirroredStrategy()
GLOBAL_BATCH = 16

rng = np.random.default_rng(0)
x = rng.normal(size=(512, 10, 3)).astype("float32")
y = rng.normal(size=(512, 1)).astype("float32")
ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(GLOBAL_BATCH).repeat()  # the dataset line
task = json.loads(os.environ.get("TF_CONFIG", "{}")).get("task", {}).get("index", 0)
if str(task) == os.environ.get("SLOW_WORKER"):  # tf.data's own sleep, before each batch
    from tensorflow.python.data.experimental.ops import testing

    ds = ds.apply(testing.sleep(int(float(os.environ.get("SLOW_MS", "40")) * 1000)))
dist_ds = strategy.experimental_distribute_dataset(ds)  # the distribute line

with strategy.scope():
    model = keras.Sequential([keras.Input((10, 3)), keras.layers.LSTM(8), keras.layers.Dense(1)])
    optimizer = keras.optimizers.SGD(0.01)
    loss_fn = keras.losses.MeanSquaredError(reduction="none")


@tf.function
def train_step(batch):
    def step(xb, yb):
        with tf.GradientTape() as tape:
            per_example = loss_fn(yb, model(xb, training=True))
            loss = tf.nn.compute_average_loss(per_example, global_batch_size=GLOBAL_BATCH)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        return loss

    per_replica = strategy.run(step, args=batch)
    return strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None)


iterator = iter(dist_ds)
for _ in range(100):
    train_step(next(iterator))
