"""rnndoctor: automatic diagnosis of slow RNN training in TensorFlow/Keras.

Run ``rnndoctor check train.py`` from a shell, or call :func:`rnndoctor.diagnose` from Python.
Importing this package does not import TensorFlow.

Layers (data flows one way; each may import only those before it):

- ``options``, ``stats``: every option's default and the exit codes; shared pure math. Import
  nothing of rnndoctor's.
- ``capture/``: runs inside the user's process, the only layer that imports TensorFlow/Keras;
  fills :class:`rnndoctor.facts.Facts`.
- ``facts``, ``findings``: the typed, versioned data the layers pass on.
- ``rules/`` (``rnndoctor.rules``): pure functions Facts -> Findings; ``engine`` runs them into a
  :class:`rnndoctor.engine.Report`.
- ``reports/`` (``rnndoctor.reports``): renderers; they render and compute nothing new.
- ``cli/``: the typer front door and the process supervisor; ``api``: the in-process entry.
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
