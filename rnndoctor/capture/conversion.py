"""The xprof conversion of a profile folder into ``session.facts.profile``, within a budget.

Two callers share it: the capture's own profiled steps
(:func:`rnndoctor.capture.diagnosis.convert_profile`) and, under ``--workers``, the chief's merged
trace of every worker (:func:`rnndoctor.capture.distribute.trace_facts`). Either way the
conversion is bounded by the ``"profile conversion"`` phase's budget (``capture/budget.py:
SHARES``), so xprof stuck on a profile cannot hold the check past ``--timeout``'s share for it.
Imports no TensorFlow.
"""

from __future__ import annotations

import subprocess
from typing import TYPE_CHECKING

from rnndoctor.capture.budget import Budget, Overrun, run_bounded
from rnndoctor.capture.profile import NOT_STARTED, summarize_in_subprocess, summarize_profile

if TYPE_CHECKING:
    from rnndoctor.capture.session import CaptureSession
    from rnndoctor.facts import ProfileSummary


def convert_bounded(
    session: CaptureSession, logdir: str, profiled_steps: int, budget: Budget
) -> None:
    """Sets ``session.facts.profile`` to the summary of the profile under ``logdir``.

    The conversion runs in a converter process
    (:func:`~rnndoctor.capture.profile.summarize_in_subprocess`): in the capture child, so
    xprof's library and heap never add to the child's memory; in the user's own process
    (``rnndoctor.diagnose``, ``DoctorCallback``), so that xprof's native logging (dozens of
    ``I0000 ...`` lines) stays out of the user's output, its library out of the user's memory,
    and a crash inside it out of the user's training. There the converter is waited for in a
    thread (:func:`~rnndoctor.capture.budget.run_bounded`), and where it cannot be started at
    all (``profile.NOT_STARTED``: an embedded interpreter, no process allowed) that thread
    converts in the user's process. A
    conversion past ``budget`` leaves ``session.facts.profile`` as it was, a note ("profile not
    converted: ...") and a cut-short phase; the capture goes on (in the user's process the
    thread runs on until the converter is killed at its timeout, or xprof returns; its result
    is dropped). That thread holds the
    temporary folder's owner (``session.options.profile_keeper``), so the folder is not
    removed under it when the report goes, and calls its ``read_done()`` when xprof returns:
    where the folder was removed meanwhile (an error after the window), what xprof wrote after
    is removed then. At Python's exit the thread (a daemon) is stopped wherever it is, so
    what xprof wrote after the exit's removal can stay.

    Never raises: a failed conversion is the summary's ``error`` (``summarize_profile``,
    ``summarize_in_subprocess``), an overrun the note above.

    Args:
        session: the check's session (``facts.environment.gpu_count``: the GPUs whose cuDNN
            ops the summary looks for).
        logdir: the profile folder (TensorBoard's layout: ``plugins/profile/<run>/``).
        profiled_steps: steps the profile holds (0: not counted, a merged trace of workers).
        budget: the phase's budget, ``session.budget("profile conversion")``.
    """
    environment = session.facts.environment
    gpus = environment.gpu_count if environment else 0
    try:
        if session.child:  # xprof never loads into the process that runs the probes
            session.facts.profile = summarize_in_subprocess(
                logdir, profiled_steps, gpus, budget.left()
            )
        else:
            keeper = getattr(session.options, "profile_keeper", None)

            def convert() -> ProfileSummary:
                try:
                    summary = summarize_in_subprocess(logdir, profiled_steps, gpus, budget.left())
                    if (summary.error or "").startswith(NOT_STARTED):
                        summary = summarize_profile(logdir, profiled_steps, gpus)
                    return summary
                finally:
                    if keeper is not None:
                        keeper.read_done()

            session.facts.profile = run_bounded(convert, budget)
    except (Overrun, subprocess.TimeoutExpired):  # a thread left behind, or the converter killed
        session.facts.run.notes.append(f"profile not converted: {Overrun.of(budget)}")
        session.cut_short(budget, "the xprof conversion did not finish")
