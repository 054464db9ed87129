"""Where a script's error is reported (``capture/__main__.py: _error_location``) when it is
raised inside a function TensorFlow's autograph converted (a ``tf.data`` map, a
``tf.function``): the user's own line, not autograph's temporary copy of it."""

from __future__ import annotations

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

from rnndoctor.capture.__main__ import _error_location  # noqa: E402


def test_an_error_in_a_mapped_function_points_at_the_users_line():
    def bad(a):
        return tf.matmul(a, tf.ones((5, 8)))  # marker:bad

    with pytest.raises(ValueError) as raised:
        tf.data.Dataset.from_tensor_slices(np.zeros((4, 2, 8), "float32")).map(bad)
    location = _error_location(raised.value)
    assert location.file == __file__ and "# marker:bad" in location.code


def test_an_error_in_a_tf_function_points_at_the_users_line():
    @tf.function
    def step(a):
        return tf.matmul(a, tf.ones((5, 8)))  # marker:step

    with pytest.raises(ValueError) as raised:
        step(tf.zeros((2, 8)))
    location = _error_location(raised.value)
    assert location.file == __file__ and "# marker:step" in location.code
