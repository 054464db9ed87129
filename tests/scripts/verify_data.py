"""Random training data for the --verify e2e scripts (a module of the user's own, imported by
them from the script's folder: the patched copies must import it too)."""

import numpy as np


def make_data(n: int = 512, steps: int = 16, features: int = 4):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(n, steps, features)).astype("float32")
    y = rng.normal(size=(n, 1)).astype("float32")
    return x, y
