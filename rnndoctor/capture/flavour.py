"""Which Keras a model belongs to: Keras 3 (``keras``) or Keras 2 (``tf_keras``).

TensorFlow 2.16+ ships Keras 3 as ``tf.keras``; with ``TF_USE_LEGACY_KERAS=1`` (and the
``tf-keras`` package installed) ``tf.keras`` is ``tf_keras`` instead
(``tensorflow/python/util/lazy_loader.py``: ``KerasLazyLoader`` reads the variable), and a
script may also ``import tf_keras`` directly. Both can be importable in one process, and a script
uses one or the other, so the capture hooks both (:func:`keras_modules`) and reads which one ran
from the model that reached ``fit`` (:func:`module_of`): a ``tf_keras.Model`` is Keras 2.
"""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType
from typing import Any

from rnndoctor.capture.step_window import BatchIndex

KERAS3 = "keras"
TF_KERAS = "tf_keras"


def tf_keras(import_it: bool = True) -> ModuleType | None:
    """The ``tf_keras`` package, or None when it is not installed.

    Args:
        import_it: import it when it is installed but not yet imported (False: only when the
            script or TensorFlow already imported it).
    """
    module = sys.modules.get(TF_KERAS)
    if module is not None or not import_it:
        return module
    try:
        if importlib.util.find_spec(TF_KERAS) is None:
            return None
        import tf_keras as module
    except Exception:  # installed but broken (a TensorFlow it does not match, say)
        return None
    return module


def keras_modules(import_tf_keras: bool = True) -> list[ModuleType]:
    """Every Keras whose classes the capture hooks: Keras 3, then ``tf_keras`` when installed."""
    import keras

    extra = tf_keras(import_tf_keras)
    return [keras, extra] if extra is not None else [keras]


def is_tf_keras(obj: Any) -> bool:
    """True when ``obj`` (a model, layer, callback or class) comes from ``tf_keras``."""
    cls = obj if isinstance(obj, type) else type(obj)
    return any(c.__module__.split(".")[0] == TF_KERAS for c in cls.__mro__)


def module_of(obj: Any) -> ModuleType:
    """The Keras package that ``obj`` belongs to (``keras`` or ``tf_keras``)."""
    if is_tf_keras(obj):
        module = tf_keras(import_it=False)
        if module is not None:
            return module
    import keras

    return keras


def flavour_of(obj: Any) -> str:
    """``"keras 3.15.1"`` or ``"tf_keras 2.21.0"``: the Keras ``obj`` belongs to, with its
    version (what ``Environment.keras_flavour`` holds)."""
    module = module_of(obj)
    return f"{module.__name__} {getattr(module, '__version__', '?')}"


def default_flavour() -> str:
    """The Keras that ``tf.keras`` names in this process, before any model is seen: ``tf_keras``
    when ``TF_USE_LEGACY_KERAS`` is set and ``tf_keras`` is installed (TensorFlow's own test in
    ``tensorflow/python/util/lazy_loader.py``), else Keras 3."""
    import os

    legacy = os.environ.get("TF_USE_LEGACY_KERAS") in ("true", "True", "1")
    module = tf_keras(import_it=False) if legacy else None
    if legacy and module is None and importlib.util.find_spec(TF_KERAS) is not None:
        module = tf_keras()
    if module is None:
        import keras as module
    return f"{module.__name__} {getattr(module, '__version__', '?')}"


_TF_KERAS_SITES_ATTR = "_rnndoctor_sites_hooked"  # on tf_keras.layers.Layer, once hooked


def install_tf_keras_sites() -> None:
    """Records the construction site of every tf_keras layer into the book that
    :func:`rnndoctor.capture.sites.install` made for Keras 3 layers (call it after that), by
    wrapping ``tf_keras.layers.Layer.__new__`` the same way. Idempotent; nothing without
    tf_keras."""
    from rnndoctor.capture import sites

    module = tf_keras()
    if module is None:
        return
    layer_cls = module.layers.Layer
    if layer_cls.__dict__.get(_TF_KERAS_SITES_ATTR):
        return
    original = layer_cls.__new__

    def __new__(cls, *args, **kwargs):  # noqa: N807 - it replaces __new__
        # object.__new__ takes no arguments once __new__ is overridden on the class
        obj = original(cls) if original is object.__new__ else original(cls, *args, **kwargs)
        try:
            names = tuple({cls.__name__, *(c.__name__ for c in cls.__mro__[:3])})
            sites.record("layers", obj, sites.user_frame_location(skip=1, call_names=names))
        except Exception:  # recording a site must never break the user's model
            pass
        return obj

    layer_cls.__new__ = staticmethod(__new__)
    setattr(layer_cls, _TF_KERAS_SITES_ATTR, True)


def batch_index(obj: Any) -> BatchIndex:
    """How the Keras of ``obj`` (a model or callback) numbers an execution in its batch hooks
    (:class:`rnndoctor.capture.step_window.BatchIndex`): tf_keras' way, or the installed Keras
    3's by its version."""
    if is_tf_keras(obj):
        return BatchIndex()
    import keras

    return BatchIndex.of(getattr(keras, "__version__", None))
