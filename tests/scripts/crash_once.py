"""A tiny LSTM ``fit`` in each worker of ``rnndoctor check --workers 2`` (no strategy: each
trains alone). The first ``CRASH_TIMES`` times (default 1) worker 1 runs, it aborts
(``os.abort``: SIGABRT, as a crash in native code ends a process) before its ``fit``: the file
``CRASH_MARKER`` names counts its crashes (one line each)."""

import json
import os

marker = os.environ["CRASH_MARKER"]
task = json.loads(os.environ.get("TF_CONFIG", "{}")).get("task", {}).get("index", 0)
crashed = open(marker).read().count("\n") if os.path.exists(marker) else 0
if task == 1 and crashed < int(os.environ.get("CRASH_TIMES", "1")):
    with open(marker, "a") as f:
        f.write("crashed\n")
    os.abort()

import keras  # noqa: E402
import numpy as np  # noqa: E402

rng = np.random.default_rng(0)
x = rng.normal(size=(256, 10, 3)).astype("float32")
y = rng.normal(size=(256, 1)).astype("float32")
model = keras.Sequential([keras.Input((10, 3)), keras.layers.LSTM(8), keras.layers.Dense(1)])
model.compile(optimizer="sgd", loss="mse")
model.fit(x, y, batch_size=16, epochs=2, verbose=0)  # the fit line
