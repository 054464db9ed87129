"""A bare run of a training script to a given training step, with no rnndoctor in the process:
``python benchmarks/_bare.py STEPS SCRIPT [ARGS...]``. The first ``Model.fit`` call gets one
callback that ends the process after STEPS training batches (what ``rnndoctor check`` runs:
warm-up + measured + profiled steps). The overhead benchmark's "A" arm."""

from __future__ import annotations

import os
import runpy
import sys

steps, script = int(sys.argv[1]), os.path.abspath(sys.argv[2])
sys.argv = [script, *sys.argv[3:]]
sys.path.insert(0, os.path.dirname(script))

import keras  # noqa: E402

_fit = keras.Model.fit


class _Stop(keras.callbacks.Callback):
    def __init__(self) -> None:
        super().__init__()
        self.seen = 0

    def on_train_batch_end(self, batch, logs=None):
        self.seen += 1
        if self.seen >= steps:
            sys.stdout.flush()
            os._exit(0)


def fit(model, *args, **kwargs):
    kwargs["callbacks"] = [*(kwargs.get("callbacks") or []), _Stop()]
    return _fit(model, *args, **kwargs)


keras.Model.fit = fit
runpy.run_path(script, run_name="__main__")
