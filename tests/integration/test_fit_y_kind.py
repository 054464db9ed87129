"""``FitConfig.y_kind`` from the ``y`` that ``fit`` received: RD501 rewrites ``fit`` only for
one target array (a list or dict of targets would be sliced as a list)."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from rnndoctor.capture import window


@pytest.mark.parametrize(
    ("y", "kind"),
    [
        (np.zeros((4, 3)), "array"),
        (tf.zeros((4, 3)), "array"),
        ([np.zeros(4), np.zeros(4)], "list"),
        ((np.zeros(4), np.zeros(4)), "tuple"),
        ({"a": np.zeros(4)}, "dict"),
        (None, "none"),
        (7, "int"),
    ],
)
def test_y_kind_names_one_array_apart_from_structures_of_targets(y, kind):
    assert window._y_kind(y) == kind
