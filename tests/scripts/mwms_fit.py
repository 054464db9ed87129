"""``fit`` under MultiWorkerMirroredStrategy (``TF_CONFIG`` from ``rnndoctor check --workers``):
a tiny LSTM through ``tf.keras``, on a pipeline that reads text files it writes to a temporary
folder (under ``MWMS_FIT_DIR`` where set), sharded by DATA (every worker reads every file:
RD704). Under ``TF_USE_LEGACY_KERAS=1`` ``tf.keras`` is tf_keras (Keras 2), whose ``fit`` trains
here; without it ``tf.keras`` is Keras 3, whose ``fit`` fails before its first step
(keras-team/keras#20585: RD706)."""

import os
import tempfile

import numpy as np
import tensorflow as tf

strategy = tf.distribute.MultiWorkerMirroredStrategy()
GLOBAL_BATCH = 16
STEPS, FEATURES = 10, 3

# MWMS_FIT_DIR: where the tests put it (a folder they own). The script removes nothing itself,
# and a cleanup of its own (atexit) would not run under a check, which ends workers with os._exit.
folder = tempfile.mkdtemp(prefix="mwms-fit-", dir=os.environ.get("MWMS_FIT_DIR"))
rng = np.random.default_rng(0)
files = []
for i in range(4):
    path = os.path.join(folder, f"part-{i}.csv")
    rows = rng.normal(size=(128, STEPS * FEATURES + 1)).astype("float32")
    np.savetxt(path, rows, delimiter=",", fmt="%.4f")
    files.append(path)


def parse(line):
    values = tf.strings.to_number(tf.strings.split(line, ","))
    return tf.reshape(values[:-1], (STEPS, FEATURES)), values[-1:]


options = tf.data.Options()
options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
lines = tf.data.TextLineDataset(files)
ds = lines.map(parse).batch(GLOBAL_BATCH).repeat().with_options(options)  # the dataset line

with strategy.scope():
    model = tf.keras.Sequential(
        [tf.keras.Input((STEPS, FEATURES)), tf.keras.layers.LSTM(8), tf.keras.layers.Dense(1)]
    )
    model.compile(optimizer="sgd", loss="mse")
model.fit(ds, epochs=2, steps_per_epoch=50, verbose=0)  # the fit line
