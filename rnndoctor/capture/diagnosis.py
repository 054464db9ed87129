"""Everything after the measured steps, for ``fit`` and custom loops alike.

:func:`finish` runs the model inspection, the profile conversion, the data facts, the sequence
sampling and the probes, each bounded by its own budget, then the ``tf.function`` tracing counts;
it marks the window finished and the run completed. The ``fit`` hook
(:mod:`rnndoctor.capture.window`) and the custom-loop hook (:mod:`rnndoctor.capture.loop`) call
it once their :class:`~rnndoctor.capture.step_window.StepWindow` is done.
"""

from __future__ import annotations

import gc
from typing import TYPE_CHECKING, Any

from rnndoctor.capture import conversion, distribute, heap, probes, sequences, sites, traces
from rnndoctor.capture.model import collect_model
from rnndoctor.facts import Outcome, Phase

if TYPE_CHECKING:
    from rnndoctor.capture.session import CaptureSession


def finish(
    session: CaptureSession,
    model: Any,
    profiled_steps: int,
    profile_error: str | None,
    arguments: dict[str, Any] | None = None,
) -> None:
    """Model inspection, the profile conversion, data facts, sequence sampling and the probes
    (none of them with ``window_only``: the run is then marked completed at once).

    Args:
        session: the check's session.
        model: the user's model (None: a custom loop whose variables belong to no model).
        profiled_steps: steps the profiler captured.
        profile_error: why the profiler did not capture, or None.
        arguments: the bound ``fit`` arguments (None for a custom loop).
    """
    options = session.options
    distribute.window_ended(session)  # a worker of --workers: the chief's trace has ended
    if options.window_only:  # a --verify arm: the window's throughput and loss are all it needs
        session.window_finished = True
        session.facts.run.outcome = Outcome.COMPLETED
        session.set_phase(Phase.DONE)
        return
    # The window's objects, its garbage included, are frozen for the whole diagnosis: no
    # automatic collection finalises the window's epoch iterator in a phase (heap.frozen), and
    # the probes' collections scan only what the probes allocated. The child keeps them frozen
    # after it: neither does the script's run-on then.
    with heap.frozen(thaw=not session.child):
        _diagnose(session, model, profiled_steps, profile_error, arguments)
        traces.collect_traces(session, model)  # tf.function tracing counts of the window
        session.window_finished = True
        session.facts.run.outcome = Outcome.COMPLETED
        distribute.collect(session, model)  # the tf.distribute strategy, if any
    files = sites.location_files(session.facts)  # one pass over the facts serves both
    if not session.child:  # a notebook's cells, named as IPython names them (In[3])
        session.facts.run.cells = sites.notebook_cells(session.facts, files)
    session.facts.run.tensorflow_names = sites.tensorflow_names(session.facts, files)
    session.set_phase(Phase.DONE)


def _diagnose(
    session: CaptureSession,
    model: Any,
    profiled_steps: int,
    profile_error: str | None,
    arguments: dict[str, Any] | None,
) -> None:
    """The model inspection, the profile conversion, the data facts, the sequence sampling and
    the probes (:func:`finish`'s arguments)."""
    options = session.options
    session.set_phase(Phase.MODEL)
    collect_model_into(session, model)
    if options.profile_steps and options.profile_dir:
        convert_profile(session, profiled_steps, profile_error)
    if arguments is not None:
        session.set_phase(Phase.DATA)
        probes.collect_data(session, arguments)
        if options.run_probes:
            batches = probes.sample_batches(session, arguments)  # each sets its own phase
            more = probes.more_batches(session, arguments)  # arrays: a larger fresh sample
            sequences.sample_sequences(session, model, batches, more)
            session.save()
            probes.run_probes(session, model, arguments, batches)
        else:
            probes.not_run(session)


def convert_profile(session: CaptureSession, profiled_steps: int, error: str | None) -> None:
    """The xprof conversion of the profiled steps into ``session.facts.profile``, within its
    own budget (``capture/budget.py: SHARES``), before the probes
    (:func:`rnndoctor.capture.conversion.convert_bounded`). In the capture child it runs in a
    converter process, so xprof's library and heap never add to the child's peak, the
    batch-size probe's largest point; from the user's own process too, waited for in a thread
    (xprof's native logging stays out of the user's output). Then what the
    phases left is collected and handed back to the system (:func:`heap.release_freed`) before
    the probes grow the process (the demo's capture grew 1374 -> 1535 MiB in the conversion
    when it ran after the probes, on top of their peak)."""
    session.save()  # the window's facts are on disk before the conversion runs
    session.set_phase(Phase.PROFILE)
    if error:
        session.facts.run.notes.append(f"profiler not captured: {error}")
    conversion.convert_bounded(
        session, session.options.profile_dir, profiled_steps, session.budget("profile conversion")
    )
    gc.collect()  # automatic collection is off (heap.frozen): free what the phases left first
    heap.release_freed()


def collect_model_into(session: CaptureSession, model: Any) -> None:
    """Fills ``session.facts.model``; a failure (or no model) becomes a note."""
    if model is None:  # a custom loop whose variables belong to no keras.Model
        session.facts.run.notes.append(
            "model not inspected: no keras.Model holds the variables the optimizer updated"
        )
        return
    try:
        session.facts.model = collect_model(model, probe=session.options.probe_fast_path)
    except Exception as exc:
        session.facts.run.notes.append(f"model inspection failed: {type(exc).__name__}: {exc}")
