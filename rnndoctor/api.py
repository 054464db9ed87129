"""The Python API: diagnose a model in the current process, with the same probes and rules.

Example::

    import rnndoctor
    rnndoctor.record_construction_sites()   # before building the model: file:line per layer
    model = build_model()
    report = rnndoctor.diagnose(model, train_ds, epochs=1, out="rnndoctor-report")
    for finding in report.findings:
        print(finding.rule_id, finding.message)
"""

from __future__ import annotations

import os
import shutil
import tempfile
import weakref
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rnndoctor import __version__, outdir
from rnndoctor.engine import (
    Report,
    batch_min_speedup,
    evaluate,
    spe_share_cutoffs,
    unread_probes,
)
from rnndoctor.facts import Facts, RunInfo, SourceLocation
from rnndoctor.options import DEFAULTS
from rnndoctor.reports import notebook as _notebook  # noqa: F401 - registers Report._repr_html_

if TYPE_CHECKING:
    from rnndoctor.capture.session import CaptureSession
    from rnndoctor.capture.step_window import WindowOptions


def record_construction_sites() -> None:
    """Records, from now on, the file:line where each Keras layer is built.

    Call it before building the model and the data; layers, datasets and callbacks built
    earlier have no recorded site, and their findings say "construction site not recorded".
    ``rnndoctor check`` does this for you.
    """
    from rnndoctor.capture import flavour, probes, sites

    sites.install()
    flavour.install_tf_keras_sites()  # tf_keras (Keras 2) layers too, when it is installed
    probes.install(None)  # where tf.data datasets, PyDatasets and callbacks are built


def diagnose(
    model: Any,
    data: Any = None,
    *,
    steps: int = DEFAULTS.steps,
    warmup_steps: int = DEFAULTS.warmup,
    profile_steps: int = DEFAULTS.profile_steps,
    out: str | os.PathLike | None = None,
    probe_fast_path: bool = DEFAULTS.probe_fast_path,
    run_probes: bool = not DEFAULTS.no_probes,
    select: list[str] | None = None,
    ignore: list[str] | None = None,
    display: bool | None = None,
    verify: bool = False,
    **fit_kwargs: Any,
) -> Report:
    """Runs the diagnosis window on ``model.fit(data, **fit_kwargs)`` and returns the Report.

    The model really trains for ``warmup_steps + steps + profile_steps`` steps (at most one
    ``fit`` call's worth), so its weights and optimizer state change, as in a short ``fit``.

    Args:
        model: a compiled ``keras.Model``.
        data: what ``fit`` takes as ``x`` (a ``tf.data.Dataset``, arrays, a PyDataset...).
        steps: measured steps (wall time per step, in ms, after warm-up).
        warmup_steps: steps run first and not timed.
        profile_steps: steps captured by the TF profiler (0: no profile).
        out: directory for ``OUT_FILES`` and the profile logdir; None keeps the facts in
            memory and profiles into a temporary directory, removed once the returned report is
            garbage collected or Python exits (:class:`TemporaryFolder`, named in its notes).
        probe_fast_path: run the cuDNN fast-path probe on each LSTM/GRU layer.
        run_probes: after the window, run the input-only, compute-only, batch-size and
            steps_per_execution probes and the sequence sampling (they train the model a little
            further; a few seconds on a small model).
        select: rule IDs or names to run (default: all).
        ignore: rule IDs or names to skip.
        display: show the report in the notebook cell (None: when running in IPython; see
            :func:`show_in_ipython`).
        verify: after the diagnosis, measure A/B in this process each fix that changes the
            model or the data object (RD101: the model cloned without recurrent_dropout; RD110:
            the arrays padded at the end; RD301: fit's batch_size; RD501: the arrays bucketed by
            length), 5 pairs of windows (5 steps, >= 0.2 s) each, into ``report.verification`` (and
            ``report.json``'s ``verified`` list with ``out``). A fix to the source (a pipeline
            op, a compile argument) is ``not verifiable`` here: ``rnndoctor check --verify``
            measures those (:mod:`rnndoctor.inprocess` says what each measures).
        **fit_kwargs: passed to ``model.fit`` (``y``, ``batch_size``, ``epochs``, ``callbacks``...).

    Returns:
        The :class:`rnndoctor.engine.Report` (``report.findings``, ``report.facts``).

    Raises:
        rnndoctor.outdir.ForeignFiles: ``out`` holds the user's own ``OUT_FILES`` (no step run).
        Whatever the model's ``fit`` raises.
    """
    from rnndoctor.capture import sites
    from rnndoctor.capture.step_window import WindowOptions

    location = sites.user_frame_location(skip=1, call_names=("diagnose",))
    folder = TemporaryFolder() if out is None else None
    try:
        options = WindowOptions(
            warmup_steps=warmup_steps, measured_steps=steps, profile_steps=profile_steps,
            profile_dir=folder.path if folder else _profile_dir(out),
            probe_fast_path=probe_fast_path, run_probes=run_probes,
            skip_probes=unread_probes(select, ignore), spe_share_cutoffs=spe_share_cutoffs(),
            batch_min_speedup=batch_min_speedup(), profile_keeper=folder,
        )  # fmt: skip
        session = _session(location, options, out)
        fit = _run_window(session, model, data, fit_kwargs, location)
        report = evaluate(session.facts, select=select, ignore=ignore)
        if verify:
            _verify(report, model, data, fit, fit_kwargs)
    except BaseException:
        if folder is not None:  # the temporary profile folder: nothing will read it
            folder.remove()
        raise
    _keep(report, folder, out)
    if display is not False:
        show_in_ipython(report)
    return report


def _run_window(session: Any, model: Any, data: Any, fit_kwargs: dict[str, Any], location: Any):
    """Runs the window on ``model``'s original ``fit`` (under ``rnndoctor check`` the hooked one
    would end the script); returns that ``fit``. The user's callbacks are handed back after."""
    from rnndoctor.capture import flavour, probes, window

    model_fit = flavour.module_of(model).Model.fit
    fit = getattr(model_fit, "__wrapped__", model_fit)
    args = (data,) if data is not None else ()
    try:
        window.run_window(session, fit, model, args, dict(fit_kwargs), location)
    finally:
        probes.untime_callbacks(session)  # the user's callbacks, as they were before
    return fit


def _verify(report: Report, model: Any, data: Any, fit: Any, fit_kwargs: dict[str, Any]) -> None:
    """``diagnose(..., verify=True)``: ``report.verification`` from the in-process A/B."""
    from rnndoctor.inprocess import Arm, verify_in_process
    from rnndoctor.verify.result import sort_key
    from rnndoctor.verify.summary import VerifySummary

    environment = report.facts.environment
    cpu = environment is None or environment.gpu_count == 0
    items = verify_in_process(report.findings, Arm(model, data, dict(fit_kwargs)), fit, cpu)
    report.verification = VerifySummary(
        items=sorted(items, key=sort_key), root=os.getcwd(), measured_on="cpu" if cpu else "gpu",
        notes=["measured in process (rnndoctor.diagnose(verify=True)): object-level fixes only"],
    )  # fmt: skip


def _write(report: Report, out: str | os.PathLike) -> None:
    """report.html and report.json under ``out`` (with the verification when there is one)."""
    from rnndoctor.reports import write_reports

    write_reports(report, out, ["html", "json"])


def show_in_ipython(report: Report) -> bool:
    """Shows ``report`` in the running notebook cell (``IPython.display.display``, which calls
    ``Report._repr_html_``) when this process is a notebook's kernel (``get_ipython()`` with a
    ``kernel``: a terminal IPython, ``ipython train.py``, would print the object's text form
    instead); whether it did."""
    try:
        from IPython import get_ipython
        from IPython.display import display
    except ImportError:
        return False
    if getattr(get_ipython(), "kernel", None) is None:
        return False
    display(report)
    return True


def _keep(report: Report, folder: TemporaryFolder | None, out: str | os.PathLike | None) -> None:
    """Writes the report's files into ``out``, or ties the temporary profile ``folder`` (no
    ``out``) to the report."""
    if folder is not None:
        folder.keep_with(report)
    else:
        _write(report, out)


# The files a diagnosis in process writes into its ``out`` (:func:`_write`, :func:`_session`).
OUT_FILES = ("facts.json", "report.html", "report.json", "profile")


def _profile_dir(out: str | os.PathLike) -> str:
    """``<out>/profile`` (absolute); ``out`` is created and marked as rnndoctor's.

    Raises:
        rnndoctor.outdir.ForeignFiles: ``out`` holds the user's own files of the names written
            there (:data:`OUT_FILES`), which a diagnosis would replace.
    """
    outdir.claim(Path(out), OUT_FILES, option="out=")
    return os.path.join(os.path.abspath(out), "profile")


class TemporaryFolder:
    """The profile folder of a diagnosis without ``out``: a fresh ``rnndoctor-profile-*`` folder
    in the temporary directory (``tempfile.mkdtemp``), removed once this object is garbage
    collected, at a normal exit of Python (``weakref.finalize``), or by :meth:`remove`. Every
    object that points at the folder (the report, whose ``tensorboard --logdir`` command names
    it; the :class:`rnndoctor.keras.DoctorCallback` that profiles into it; a profile conversion
    still reading it past its budget, ``WindowOptions.profile_keeper``) holds this object, so
    the folder lives as long as any of them. A process killed (``os._exit``, SIGKILL, a
    killed notebook kernel) leaves it behind.

    Raises:
        OSError: from ``tempfile.mkdtemp`` (the temporary directory is not writable).
    """

    def __init__(self) -> None:
        self.path = tempfile.mkdtemp(prefix="rnndoctor-profile-")
        self._finalizer = weakref.finalize(self, shutil.rmtree, self.path, ignore_errors=True)

    def keep_with(self, report: Report) -> None:
        """Ties the folder's life to ``report`` too (``report.temporary_profile``), and notes in
        its facts that the profile is temporary."""
        report.temporary_profile = self
        report.facts.run.notes.append(
            f"the profile is in a temporary folder ({self.path}), removed with this report or "
            "when Python exits: pass out=... to keep it"
        )

    def remove(self) -> None:
        """Removes the folder now (idempotent)."""
        self._finalizer()

    def read_done(self) -> None:
        """Called by a profile conversion once xprof has returned
        (``rnndoctor.capture.conversion.convert_bounded``, whose thread holds this object
        while xprof reads the folder, past its budget too): where the folder was removed
        meanwhile (:meth:`remove`), removes what xprof wrote into it after. Not at Python's
        exit, which stops that (daemon) thread wherever it is."""
        if not self._finalizer.alive:
            shutil.rmtree(self.path, ignore_errors=True)


def _session(
    location: SourceLocation | None, options: WindowOptions, out: str | os.PathLike | None
) -> CaptureSession:
    """A capture session in this process: the facts of a run started now by ``location``."""
    from rnndoctor.capture import sites
    from rnndoctor.capture.env import collect_environment
    from rnndoctor.capture.session import CaptureSession

    facts = Facts(
        run=RunInfo(
            script=location.file if location else "<python>",
            argv=[],
            cwd=os.getcwd(),
            started_utc=datetime.now(UTC).isoformat(timespec="seconds"),
        ),
        tool_version=__version__,
    )
    facts.environment = collect_environment()
    facts_path = os.path.join(out, "facts.json") if out is not None else None
    return CaptureSession(facts, options, facts_path, site_book=sites.book())
