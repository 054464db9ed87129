"""A MirroredStrategy script over 2 logical CPU devices (``tf.config.
set_logical_device_configuration``): a tiny LSTM (recurrent_dropout: RD101) trained with Keras 3
``fit`` on a tf.data pipeline, the global batch of 32 split across the 2 replicas (16 each)."""

import numpy as np
import tensorflow as tf

cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(
    cpu, [tf.config.LogicalDeviceConfiguration(), tf.config.LogicalDeviceConfiguration()]
)

import keras  # noqa: E402
from keras import layers  # noqa: E402

strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
GLOBAL_BATCH = 32

rng = np.random.default_rng(0)
x = rng.normal(size=(1024, 12, 4)).astype("float32")
y = rng.normal(size=(1024, 1)).astype("float32")
ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(GLOBAL_BATCH).prefetch(2)  # the dataset line

with strategy.scope():
    lstm = layers.LSTM(8, recurrent_dropout=0.1)  # RD101
    model = keras.Sequential([keras.Input((12, 4)), lstm, layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
model.fit(ds, epochs=3)
