"""One fit, then TensorFlow file-system writes under the working directory, which raise no
audit event: `rnndoctor check` must stop the run-on before them and leave the tree unchanged."""

import keras
import numpy as np
import tensorflow as tf
from keras import layers

rng = np.random.default_rng(1)
x = rng.normal(size=(64, 8, 4)).astype("float32")
y = rng.normal(size=(64, 1)).astype("float32")
model = keras.Sequential([keras.Input((8, 4)), layers.LSTM(8), layers.Dense(1)])
model.compile(optimizer="adam", loss="mse")
model.fit(x, y, batch_size=8, epochs=2)  # the fit line

tf.io.gfile.makedirs("exported/run1")  # the makedirs line
tf.io.write_file("exported/run1/done.txt", "done")
print("WROTE")
