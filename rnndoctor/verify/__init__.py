"""``rnndoctor check --verify``: every fix that is a source rewrite, measured on the user's job.

After a plain check, each finding whose fix rewrites the user's source (``safe`` or ``unsafe``
with a ``before`` text) is applied to a copy of the script's folder under ``<out>/verify/<fix>/``
(:mod:`.patch`; one more copy, ``all``, with every compatible fix), the copy and the original
alternate A B A B as warm window-only capture children, one per script, one window per run
(:mod:`.run`; the CLI's runner: ``rnndoctor.cli.arms``), each fix
gets a measured speedup with its 90% interval and a status (:mod:`.result`), the confirmed fixes
become ``<out>/fixes.patch`` (:mod:`.patchfile`), and the outcome is written as ``verify.json``,
``verify.md`` and ``report.json``'s ``verified`` list (:mod:`.output`). :mod:`.session` runs the
whole of it. The user's tree is never written.

This package owns the copies, the A/B schedule, the statuses and the patch. It may import
:mod:`rnndoctor.options`, :mod:`rnndoctor.facts`, :mod:`rnndoctor.findings`,
:mod:`rnndoctor.paired`, :mod:`rnndoctor.decide` and :mod:`rnndoctor.stats`; never the CLI (the
CLI passes in the function that starts a child, :data:`rnndoctor.verify.run.Runner`), the rules,
the reports, the capture layer, TensorFlow or Keras.
"""

from rnndoctor.verify.run import RunEnd, Runner
from rnndoctor.verify.session import Job, Verification, verify

__all__ = ["Job", "RunEnd", "Runner", "Verification", "verify"]
