"""Capture: runs inside the user's process and is the only layer that imports TensorFlow/Keras.

What it owns: the hooks installed before the user's script runs (``Model.fit``, gradient
application and ``tf.function`` calls for custom loops, construction sites, saving calls,
padding calls), the one diagnosis window (:mod:`.step_window`, driven by the ``fit`` callback in
:mod:`.window` and by the custom-loop hook in :mod:`.loop`), the probes that run after it
(:mod:`.diagnosis`, :mod:`.probes`, :mod:`.sequences`, :mod:`.model`, :mod:`.data`,
:mod:`.profile`, :mod:`.env`), and the child process that runs a script under them
(:mod:`.__main__`). One check's state lives in one :class:`.session.CaptureSession`, passed
explicitly; the modules keep no check state of their own.

What it may import: :mod:`rnndoctor.facts` (what it produces), :mod:`rnndoctor.stats` (shared
math), :mod:`rnndoctor.options` (defaults and exit codes), :mod:`rnndoctor.cluster` (the
``--workers`` environment), :mod:`rnndoctor.paired` and :mod:`rnndoctor.machine` (the paired
timer, each phase's load) and :mod:`rnndoctor.dispatch` (the steps_per_execution probe's
arithmetic, which RD403 shares, for the probe's second stage), plus TensorFlow, Keras and their
helpers. Never the rules, the reports or the CLI: the parent process turns the facts into
findings, and the rules' cut-offs reach the capture as options (``WindowOptions``).

Submodules import TensorFlow or Keras at import time (except :mod:`.step_window`,
:mod:`.session`, :mod:`.budget`, :mod:`.profile`, the xprof converter's own process,
:mod:`.conversion` and :mod:`.__main__`'s top level); import them only in the capture child or in
:func:`rnndoctor.diagnose`.
"""
