"""rnndoctor: automatic diagnosis of slow RNN training in TensorFlow/Keras.

Run ``rnndoctor check train.py`` from a shell, or call :func:`rnndoctor.diagnose` from Python.
Importing this package does not import TensorFlow.
"""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__", "diagnose", "record_construction_sites", "Report"]


def __getattr__(name: str):
    # Lazy: keep `import rnndoctor` (and the CLI's start-up) free of TensorFlow.
    if name in ("diagnose", "record_construction_sites"):
        from rnndoctor import api

        return getattr(api, name)
    if name == "Report":
        from rnndoctor.engine import Report

        return Report
    raise AttributeError(f"module 'rnndoctor' has no attribute {name!r}")
