"""An infinite tf.data pipeline (repeat() with no count) and no steps_per_epoch: the epoch never
ends on its own."""

import tensorflow as tf
from _tiny import data, lstm_model

x, y = data()
dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(16).repeat()
lstm_model().fit(dataset, epochs=3)
