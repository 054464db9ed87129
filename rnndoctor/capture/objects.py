"""Copies of the user's objects with a fix applied, for ``rnndoctor.diagnose(..., verify=True)``
(:mod:`rnndoctor.inprocess`): the model without recurrent dropout, token-id arrays bucketed by
length. The user's objects are not changed."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def without_recurrent_dropout(model: Any) -> Any:
    """A clone of ``model`` (``keras.models.clone_model``, the same weights, compiled from its
    ``get_compile_config()``) with each layer's ``recurrent_dropout`` moved to ``dropout`` (the
    larger of the two)."""
    from rnndoctor.capture import flavour

    keras = flavour.module_of(model)

    def clone(layer: Any) -> Any:
        config = layer.get_config()
        if config.get("recurrent_dropout"):
            config["dropout"] = max(config.get("dropout") or 0.0, config["recurrent_dropout"])
            config["recurrent_dropout"] = 0.0
        return layer.__class__.from_config(config)

    copy = keras.models.clone_model(model, clone_function=clone)
    copy.set_weights(model.get_weights())
    copy.compile_from_config(model.get_compile_config())
    return copy


def bucketed_dataset(x: Any, y: Any, boundaries: Sequence[int], batch_size: int) -> Any:
    """Arrays of token ids (id 0: padding) and per-step targets as a shuffled ``tf.data``
    pipeline bucketed by length: each row unpadded, ``bucket_by_sequence_length`` with
    ``boundaries`` (timesteps) and ``batch_size`` in every bucket, prefetched."""
    import tensorflow as tf

    def unpad(a: Any, b: Any) -> Any:
        valid = tf.not_equal(a, 0)
        return tf.boolean_mask(a, valid), tf.boolean_mask(b, valid)

    return (
        tf.data.Dataset.from_tensor_slices((x, y))
        .map(unpad, num_parallel_calls=tf.data.AUTOTUNE)
        .cache()
        .shuffle(len(x))
        .bucket_by_sequence_length(
            lambda a, b: tf.shape(a)[0], list(boundaries), [batch_size] * (len(boundaries) + 1)
        )  # fmt: skip
        .prefetch(tf.data.AUTOTUNE)
    )
