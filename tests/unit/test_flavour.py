"""Which Keras an object belongs to (rnndoctor.capture.flavour), on stand-in classes: a class
from a ``tf_keras.*`` module is Keras 2, anything else Keras 3; ``TF_USE_LEGACY_KERAS`` takes
TensorFlow's own values (tensorflow/python/util/lazy_loader.py)."""

from __future__ import annotations

import sys
import types

import pytest

from rnndoctor.capture import flavour


def _class(module: str, name: str = "LSTM", base: type = object) -> type:
    return type(name, (base,), {"__module__": module})


def test_a_class_from_tf_keras_or_deriving_from_one_is_keras_2():
    tf_lstm = _class("tf_keras.src.layers.rnn.lstm")
    mine = _class("__main__", "MyLSTM", tf_lstm)
    keras3 = _class("keras.src.layers.rnn.lstm")
    assert flavour.is_tf_keras(tf_lstm) and flavour.is_tf_keras(mine())
    assert not flavour.is_tf_keras(keras3) and not flavour.is_tf_keras(_class("tf_kerasx.y"))


def test_flavour_names_the_package_and_its_version(monkeypatch):
    fake = types.ModuleType("tf_keras")
    fake.__version__ = "2.21.0"
    monkeypatch.setitem(sys.modules, "tf_keras", fake)
    assert flavour.flavour_of(_class("tf_keras.src.engine.training", "Model")()) == (
        "tf_keras 2.21.0"
    )
    import keras

    assert flavour.flavour_of(object()) == f"keras {keras.__version__}"
    assert flavour.keras_modules(import_tf_keras=False) == [keras, fake]


@pytest.mark.parametrize(("value", "legacy"), [("1", True), ("True", True), ("yes", False)])
def test_the_default_flavour_follows_tf_use_legacy_keras(monkeypatch, value, legacy):
    fake = types.ModuleType("tf_keras")
    fake.__version__ = "2.21.0"
    monkeypatch.setitem(sys.modules, "tf_keras", fake)
    monkeypatch.setenv("TF_USE_LEGACY_KERAS", value)
    assert flavour.default_flavour().startswith("tf_keras" if legacy else "keras ")
