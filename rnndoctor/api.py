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

from rnndoctor import __version__
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
        out: directory for ``facts.json``, ``report.html``, ``report.json`` and the profile
            logdir; None keeps the facts in memory and profiles into a temporary directory,
            removed once the returned report is garbage collected or Python exits.
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
            length), 5 pairs of 5-step windows each, into ``report.verification`` (and
            ``report.json``'s ``verified`` list with ``out``). A fix to the source (a pipeline
            op, a compile argument) is ``not verifiable`` here: ``rnndoctor check --verify``
            measures those (:mod:`rnndoctor.inprocess` says what each measures).
        **fit_kwargs: passed to ``model.fit`` (``y``, ``batch_size``, ``epochs``, ``callbacks``...).

    Returns:
        The :class:`rnndoctor.engine.Report` (``report.findings``, ``report.facts``).

    Raises:
        Whatever the model's ``fit`` raises.
    """
    from rnndoctor.capture import sites
    from rnndoctor.capture.step_window import WindowOptions

    location = sites.user_frame_location(skip=1, call_names=("diagnose",))
    options = WindowOptions(
        warmup_steps=warmup_steps, measured_steps=steps, profile_steps=profile_steps,
        profile_dir=_profile_dir(out), probe_fast_path=probe_fast_path, run_probes=run_probes,
        skip_probes=unread_probes(select, ignore), spe_share_cutoffs=spe_share_cutoffs(),
        batch_min_speedup=batch_min_speedup(),
    )  # fmt: skip
    try:
        session = _session(location, options, out)
        fit = _run_window(session, model, data, fit_kwargs, location)
        report = evaluate(session.facts, select=select, ignore=ignore)
        if verify:
            _verify(report, model, data, fit, fit_kwargs)
    except BaseException:
        if out is None:  # the temporary profile folder: nothing will read it
            shutil.rmtree(options.profile_dir, ignore_errors=True)
        raise
    if out is None:
        remove_with(report, options.profile_dir)
    else:
        _write(report, out)
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


def show_in_ipython(report: Report) -> None:
    """Shows ``report`` in the running notebook cell (``IPython.display.display``, which calls
    ``Report._repr_html_``) when this process runs IPython (``get_ipython()`` is not None)."""
    try:
        from IPython import get_ipython
        from IPython.display import display
    except ImportError:
        return
    if get_ipython() is not None:
        display(report)


def _profile_dir(out: str | os.PathLike | None) -> str:
    """``<out>/profile`` (absolute), or a fresh temporary directory when ``out`` is None (its
    owner removes it: :func:`remove_with`)."""
    if out is None:
        return tempfile.mkdtemp(prefix="rnndoctor-profile-")
    Path(out).mkdir(parents=True, exist_ok=True)
    return os.path.join(os.path.abspath(out), "profile")


def remove_with(owner: Any, folder: str) -> None:
    """Removes ``folder`` (a temporary profile folder, :func:`_profile_dir` without ``out``) once
    ``owner`` is garbage collected, or when Python exits (``weakref.finalize``): the profile
    stays readable, e.g. by the ``tensorboard --logdir`` command the report shows, while the
    report (or the callback) that points at it is alive, and no diagnosis leaves a folder in
    the temporary directory behind."""
    weakref.finalize(owner, shutil.rmtree, folder, ignore_errors=True)


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
