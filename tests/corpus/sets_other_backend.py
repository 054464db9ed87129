"""Selects the JAX backend itself, as some notebooks-turned-scripts do."""

import os

os.environ["KERAS_BACKEND"] = "jax"

import keras  # noqa: E402

print(keras.backend.backend())
