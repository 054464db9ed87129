"""The ``rnndoctor`` command line: a thin front door over the capture child and the engine.

``rnndoctor check SCRIPT [-- ARGS...]`` runs SCRIPT in a child process
(``python -P -m rnndoctor.capture``) for a short diagnosis window, then runs the rules on the facts
the child saved and writes the reports.

This package owns the typer app (:mod:`.app`: parameters and help only, each command one
delegation), the steps of a check (:mod:`.check`), the commands that run no script
(:mod:`.offline`), the child's supervision (:mod:`.supervisor`: spawn, progress, the kill of its
process tree, the log tail) and the terminal (:mod:`.console`). Options, their defaults, the
``[tool.rnndoctor]`` table and the exit codes live in :mod:`rnndoctor.options`, shared with the
child.

It may import :mod:`rnndoctor.options`, :mod:`rnndoctor.facts`, :mod:`rnndoctor.engine`,
:mod:`rnndoctor.compare`, :mod:`rnndoctor.redact`, ``rnndoctor.rules`` and
``rnndoctor.reports``; it never imports TensorFlow or Keras, nor :mod:`rnndoctor.capture` (the
child runs it).
"""

from rnndoctor.cli.app import app, example_path, main

__all__ = ["app", "example_path", "main"]
