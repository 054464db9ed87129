"""The capture child: ``python -P -m rnndoctor.capture --out DIR [options] SCRIPT [ARGS...]``.

Runs the user's script unmodified (``runpy.run_path`` with ``sys.argv`` set and the script's folder
first on ``sys.path``, as ``python SCRIPT`` would), with the construction-site and ``fit`` hooks
installed. It saves ``<out>/facts.json`` after every phase, so the parent always finds the facts
gathered so far, even after a crash or a kill. Its exit status is 0 whenever facts were saved; the
parent reads ``facts.run.outcome``. Status 70 (``ExitCode.CHILD_INTERNAL``) means rnndoctor
itself failed. Its arguments are ``Options.child_argv()``, read back by
:func:`rnndoctor.options.parse_child_args`.
"""

from __future__ import annotations

import functools
import json
import os
import re
import runpy
import sys
import time
import traceback
from datetime import UTC, datetime
from typing import TYPE_CHECKING, NoReturn

from rnndoctor import __version__
from rnndoctor.capture.ending import end_process
from rnndoctor.capture.session import PROGRESS_NOTE
from rnndoctor.capture.step_window import WindowOptions
from rnndoctor.facts import Facts, Outcome, Phase, RunInfo, SourceLocation, StepTimes
from rnndoctor.options import DEFAULTS, ExitCode, Options, parse_child_args
from rnndoctor.paired import ARM_WINDOW_S, MIN_SECONDS

if TYPE_CHECKING:
    from rnndoctor.capture.session import CaptureSession

_STDIN_HINT = (
    "the check gives the script an empty standard input: redirect one "
    "(`rnndoctor check SCRIPT < FILE`) or pass the input as arguments after `--`"
)
_ARGS_HINT = "give the script's own arguments after `--`: rnndoctor check SCRIPT -- ARGS"


class BackendSwitch(BaseException):
    """The script set ``KERAS_BACKEND`` to another backend after Keras was imported with the
    TensorFlow one (raised from an audit hook at the user's line; ``args[0]`` is the value)."""


def _watch_backend(event: str, args: tuple) -> None:
    """PEP 578 audit hook: ``os.environ["KERAS_BACKEND"] = ...`` calls ``os.putenv``."""
    if event != "os.putenv" or len(args) < 2:
        return
    key, value = (os.fsdecode(a) if isinstance(a, bytes) else a for a in args[:2])
    if key == "KERAS_BACKEND" and value not in ("", "tensorflow"):
        raise BackendSwitch(value)


def _requested_backend() -> tuple[str, str]:
    """The Keras backend and where it is set, read the way ``keras/src/backend/config.py`` (Keras
    3.15) reads it at import: ``KERAS_BACKEND``, else ``backend`` in ``keras.json`` under
    ``$KERAS_HOME`` (else ``~/.keras``, or ``/tmp/.keras`` when the home folder is not writable),
    else ``tensorflow``. Used to explain an import that failed before Keras could say."""
    if os.environ.get("KERAS_BACKEND"):
        return os.environ["KERAS_BACKEND"], "the KERAS_BACKEND environment variable"
    if "KERAS_HOME" in os.environ:
        folder = os.environ["KERAS_HOME"]
    else:
        home = os.path.expanduser("~")
        folder = os.path.join(home if os.access(home, os.W_OK) else "/tmp", ".keras")
    path = os.path.expanduser(os.path.join(folder, "keras.json"))
    try:
        with open(path) as f:
            backend = json.load(f).get("backend")
    except (OSError, ValueError, AttributeError):
        backend = None
    if backend:
        return str(backend), path
    return "tensorflow", "Keras' default"


def _import_keras(facts: Facts) -> bool:
    """Imports Keras with the TensorFlow backend; on failure, says why in ``facts.run``."""
    try:
        import keras

        backend, source = keras.backend.backend(), None
    except Exception as exc:  # the configured backend, or TensorFlow itself, is not importable
        backend, source = _requested_backend()
        failure = f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0]}"[:300]
    else:
        failure = None
    if backend == "tensorflow" and failure is None:
        return True
    facts.run.outcome = Outcome.CAPTURE_ERROR
    facts.run.error_type = "KerasBackend"
    if backend != "tensorflow":
        source = source or _requested_backend()[1]
        facts.run.message = (
            f"Keras backend is {backend!r} (from {source}); rnndoctor diagnoses the TensorFlow "
            "backend only: run the check with KERAS_BACKEND=tensorflow"
            + (f" (importing Keras with {backend!r} failed here: {failure})" if failure else "")
        )
    else:
        facts.run.message = (
            f"cannot import Keras with the TensorFlow backend: {failure}; install TensorFlow "
            "(pip install 'rnndoctor[cpu]', or your own build)"
        )
    return False


def _error_location(exc: BaseException) -> SourceLocation | None:
    from rnndoctor.capture import sites

    if isinstance(exc, SyntaxError) and exc.filename and exc.lineno:
        if sites.is_user_file(exc.filename):  # compile errors have no frame in the user's file
            return sites.source_location(exc.filename, exc.lineno)
    for frame, line in reversed(list(traceback.walk_tb(exc.__traceback__))):
        filename = frame.f_code.co_filename
        if os.path.basename(filename).startswith(_AUTOGRAPH_FILE):
            traced = _autograph_user_line(exc)
            if traced is not None:
                return traced
            continue  # the converted copy is no line of the user's
        if sites.is_user_file(filename):
            return sites.source_location(filename, line)
    return None


# TensorFlow's autograph converts a tf.function's (or a tf.data map's) Python function into a
# temporary module (tensorflow/python/autograph/pyct/loader.py: "__autograph_generated_file"),
# and rewrites an error raised there to name the user's own lines, each marked "*" as user code
# (tensorflow/python/autograph/impl/api.py: _ErrorMetadata, "in user code:"). A new user's map
# function failed, and the check pointed at /tmp/__autograph_generated_file...py:21.
_AUTOGRAPH_FILE = "__autograph_generated_file"
_AUTOGRAPH_USER_FRAME = re.compile(r'File "([^"]+)", line (\d+), in [^\n]*?\s\*\s*$', re.M)


def _autograph_user_line(exc: BaseException) -> SourceLocation | None:
    """The last user-code frame autograph's message names (``File "train.py", line 12, in
    expensive  *``) that is in a user file, or None."""
    from rnndoctor.capture import sites

    for filename, line in reversed(_AUTOGRAPH_USER_FRAME.findall(str(exc))):
        if sites.is_user_file(filename) and os.path.exists(filename):
            return sites.source_location(filename, int(line))
    return None


def _argparse_error(exc: SystemExit) -> str | None:
    """The message of an ``argparse`` error that ended the script, or None.

    ``ArgumentParser.error(message)`` prints the usage and calls ``sys.exit(2)``; its frame is on
    the traceback, with ``message`` among its locals.
    """
    for frame, _ in traceback.walk_tb(exc.__traceback__):
        code = frame.f_code
        if code.co_name == "error" and os.path.basename(code.co_filename) == "argparse.py":
            message = frame.f_locals.get("message")
            return str(message) if message is not None else ""
    return None


def _exit_message(exc: SystemExit, fit_called: bool) -> str:
    parse_error = _argparse_error(exc)
    if parse_error is not None:
        return (
            f"the script's argument parser rejected its arguments (sys.exit({exc.code!r})): "
            f"{parse_error}; {_ARGS_HINT}"
        )
    return f"the script called sys.exit({exc.code!r}) " + (
        "before calling Model.fit" if not fit_called else "during the diagnosis"
    )


def _error_message(exc: BaseException) -> str:
    if isinstance(exc, SyntaxError):
        first = exc.msg or "invalid syntax"
    else:
        first = (str(exc).strip().splitlines() or [""])[0]
    message = f"{type(exc).__name__}: {first}"[:500]
    if isinstance(exc, EOFError):
        message += f" ({_STDIN_HINT})"
    return message


# Once awake, the watchdog looks this often whether the running window has done more steps, and
# saves them where it has (a save is a few ms of JSON, beside the window's next step).
_PROGRESS_POLL_S = 0.05


def _start_watchdog(session: CaptureSession) -> None:
    """Saves what the diagnosis window gathered before the parent's ``--timeout`` kill.

    The phases after the window save their facts as they go, but the window keeps its step times
    in memory until it ends. When the window is stuck (a data source that hangs) or slow, a
    daemon thread wakes ``budget.RESERVE_S`` before the overall deadline and saves the step
    times measured so far and the model facts (without the cuDNN fast-path probe, which would
    run TensorFlow ops beside the stuck step), and saves them again after every step the window
    runs on (looking every :data:`_PROGRESS_POLL_S`): the kill comes up to ``RESERVE_S`` later,
    and the steps measured meanwhile count (a new user's BiLSTM, ``--timeout 9``: awake during
    its warm-up's trace, the one save held 0 steps, and the 4 steps of 80 ms measured in the
    0.3 s before the kill were lost). It runs while the main thread blocks in TensorFlow's C++
    code, and stops once the window has saved its own step times. Each save (a few ms of JSON)
    runs beside the window's next step: where the window finishes after all, a note says from
    which measured step on its steps were timed beside those saves
    (``session.watchdog_from_step``). A save that fails is tried again at the next step.
    """
    import threading

    left = session.budgets.overall_left()
    if left == float("inf"):
        return

    def watch() -> None:
        time.sleep(max(0.0, session.budgets.overall_left()))
        written: StepTimes | None = None
        failures = 0
        while session.window is None and not session.window_finished:
            time.sleep(_PROGRESS_POLL_S)  # awake before fit: the window's steps may yet come
        while True:
            done = _steps_done(session)  # before the save: a step ending during it is saved next
            try:
                written = _save_window_progress(session, written=written)
            except Exception:  # best effort: the facts saved before stand; try at the next step
                failures += 1
                if failures >= 3:
                    traceback.print_exc()
                    return
            else:
                if written is None:
                    return
            while _steps_done(session) == done and not session.window_finished:
                time.sleep(_PROGRESS_POLL_S)

    threading.Thread(target=watch, name="rnndoctor watchdog", daemon=True).start()


def _steps_done(session: CaptureSession) -> int:
    """The running window's steps so far (0 without one)."""
    window = session.window
    return window.steps_done if window is not None else 0


def _save_window_progress(
    session: CaptureSession, why: str = "when --timeout came", written: StepTimes | None = None
) -> StepTimes | None:
    """Saves the window's step times so far and the model facts (no fast-path probe); returns
    the step times it saved, or None where it saved nothing: not in the window, or the window
    has ended and saved its own (``facts.steps`` set, and not to ``written``, what an earlier
    call of this returned). Under ``session.progress_lock``, which the window takes to save
    its own step times, so that those are never replaced by these."""
    window = session.window
    facts = session.facts
    if window is None or session.window_finished:
        return None
    model, failed = None, None
    if facts.model is None and getattr(window, "model", None) is not None:
        from rnndoctor.capture.model import collect_model

        try:  # outside the lock, which the window's end waits for
            model = collect_model(window.model, probe=False)
        except Exception as exc:
            failed = f"model inspection failed: {type(exc).__name__}: {exc}"
    with session.progress_lock:
        if session.window_finished:
            return None
        if facts.steps is not None and facts.steps is not written:
            return None  # the window ended and saved its facts
        facts.steps = window.step_times(facts.fit.batch_size if facts.fit else None)
        if session.watchdog_from_step is None:
            session.watchdog_from_step = facts.steps.measured_steps
        if facts.model is None and model is not None:
            facts.model = model
        if failed and failed not in facts.run.notes:
            facts.run.notes.append(failed)
        note = (
            f"{PROGRESS_NOTE}{why} ({window.steps_done} steps done): the "
            "step times and model facts are those gathered so far; the cuDNN fast-path probe, "
            "the probes and the profile did not run"
        )
        notes = facts.run.notes
        earlier = [i for i, n in enumerate(notes) if n.startswith(PROGRESS_NOTE)]
        if earlier:
            notes[earlier[-1]] = note  # the same note, with the steps done since
        else:
            notes.append(note)
        session.save()
        return facts.steps


def _watch_os_exit(session: CaptureSession) -> None:
    """Wraps ``os._exit`` so that the script's own call (which skips every ``except`` and
    ``finally``) still leaves its partial facts, its line and a clear outcome.

    Only in this process: a forked worker inherits the wrapper, and its ``os._exit`` at the end
    of its work (``multiprocessing``'s fork start method) must not touch the facts.
    """
    from rnndoctor.capture import sites

    real_exit = os._exit
    pid = os.getpid()

    def _exit(status: int) -> NoReturn:
        location = sites.user_frame_location(skip=1) if os.getpid() == pid else None
        facts = session.facts
        if location is not None and facts.run.outcome == Outcome.RUNNING:
            try:
                _save_window_progress(session, "when the script called os._exit")
                facts.run.outcome = Outcome.SCRIPT_ERROR if session.fit_called else Outcome.NO_FIT
                facts.run.error_type = "SystemExit"
                facts.run.message = f"the script called os._exit({status!r}) " + (
                    "before calling Model.fit" if not session.fit_called else "during the diagnosis"
                )
                facts.run.error_location = location
                session.save()
            except Exception:  # never keep the script from exiting
                pass
        real_exit(status)

    os._exit = _exit


def _source_root(script: str) -> str:
    """The git work tree that holds ``script`` (a folder with ``.git``), else the cwd where it
    holds the script, else the script's folder: ``rnndoctor check ../scripts/train.py`` run
    from a folder beside it wrote no confirmed fix into ``fixes.patch``, its file being
    "outside the work tree" (a new user's trial; ``--verify`` patches files of the script's
    folder only)."""
    folder = os.path.dirname(script)
    while True:
        if os.path.exists(os.path.join(folder, ".git")):
            return folder
        parent = os.path.dirname(folder)
        if parent == folder:
            break
        folder = parent
    cwd = os.path.realpath(os.getcwd())  # the folder holding the script that is the cwd,
    folder = os.path.dirname(script)  # in the script path's own form (no symlink resolved)
    while os.path.realpath(folder) != cwd:
        parent = os.path.dirname(folder)
        if parent == folder:
            return os.path.dirname(script)
        folder = parent
    return folder


def _new_facts(script: str, argv: list[str], started: float) -> Facts:
    """The facts of a check that starts now: the run, the source root, the first phase."""
    facts = Facts(
        run=RunInfo(
            script=script,
            argv=argv,
            cwd=os.getcwd(),
            started_utc=datetime.now(UTC).isoformat(timespec="seconds"),
        ),
        tool_version=__version__,
    )
    root = _source_root(script)
    facts.run.source_root = root
    facts.run.script_dir_in_source_root = os.path.relpath(os.path.dirname(script), root)
    facts.run.enter_phase(Phase.IMPORTING, time.monotonic() - started)
    return facts


def _min_measured_s(options: Options) -> float:
    """The window's time floor (``WindowOptions.min_measured_s``): the default window (20
    steps) also times at least 1 s, as each arm of a probe does, and each window of a warm
    ``--verify`` arm (``control``) ``ARM_WINDOW_S``. A --steps other than 20 is measured as
    asked, and so is every worker of a multi-worker job (TF_CONFIG): all of them must end fit
    at the same step, or those still training wait in a collective (capture/distribute.py,
    window_ended)."""
    if "TF_CONFIG" in os.environ:
        return 0.0
    if options.control is not None:
        return ARM_WINDOW_S
    return MIN_SECONDS if options.steps == DEFAULTS.steps else 0.0


def _window_options(options: Options) -> WindowOptions:
    """The window's part of the check's options."""
    from rnndoctor.capture.session import default_profile_dir

    return WindowOptions(
        warmup_steps=options.warmup,
        measured_steps=options.steps,
        min_measured_s=_min_measured_s(options),
        profile_steps=options.profile_steps,
        profile_dir=default_profile_dir(options.out),
        probe_fast_path=options.probe_fast_path,
        timeout_s=options.timeout,
        run_probes=not options.no_probes and not options.window_only,
        skip_probes=options.skip_probes,
        spe_share_cutoffs=options.spe_share_cutoffs,
        batch_min_speedup=options.batch_min_speedup,
        window_only=options.window_only,
        control=options.control,
    )


def _install_hooks(session: CaptureSession, script: str) -> None:
    """Every hook, before the user's script runs: construction sites, neutralisation, custom
    loops and tf.function counts, sequences, probes, and ``Model.fit``."""
    from rnndoctor.capture import (
        distribute,
        flavour,
        loop,
        neutralise,
        probes,
        sequences,
        sites,
        window,
    )

    session.site_book = sites.install(script)
    flavour.install_tf_keras_sites()  # Keras 2 layers, when tf_keras is installed
    neutralise.install(session)
    loop.install(session)
    sequences.install(session)
    probes.install(session)
    distribute.install(session)
    window.install_fit_hook(session)


def _run_script(session: CaptureSession, script: str) -> None:
    """Runs the user's script as ``python SCRIPT`` would, and records how it ended."""
    from rnndoctor.capture import after_window, loop
    from rnndoctor.capture.session import StopScript

    facts = session.facts
    run = facts.run
    try:
        try:
            runpy.run_path(script, run_name="__main__")
        finally:  # from here the run-on's stop signal is ignored; one before it lands below
            session.script_over = True
    except StopScript:
        sys.settrace(None)
        after_window.stop(session, "stopped")
    except BaseException as exc:
        after_window.stop(session, "error", f"{type(exc).__name__}: {exc}"[:300])
        _script_failed(session, exc)
    else:
        after_window.stop(session, "script end")
        loop.finish_pending(session)  # a custom loop that ended before its window was done
        if not session.fit_called and not session.window_finished:
            run.outcome = Outcome.NO_FIT
            run.message = (
                "the script ended without calling Model.fit or applying gradients with a Keras "
                "optimizer"
            )


def _script_failed(session: CaptureSession, exc: BaseException) -> None:
    """Records how the script's exception ended it (nothing once the window has finished)."""
    from rnndoctor.capture import distribute, loop

    run = session.facts.run
    if distribute.record_fit_failure(session, exc):  # Keras 3's fit under a multi-worker strategy
        return
    if isinstance(exc, SystemExit):
        loop.finish_pending(session)  # a custom loop that ended before its window was done
    if session.window_finished:
        return
    if isinstance(exc, BackendSwitch):
        run.outcome = Outcome.CAPTURE_ERROR
        run.error_type = "KerasBackend"
        run.message = (
            f"the script sets KERAS_BACKEND={exc.args[0]!r}, but rnndoctor diagnoses the "
            "TensorFlow backend only (Keras was already imported with it): check the script "
            "with KERAS_BACKEND=tensorflow"
        )
    elif isinstance(exc, SystemExit):
        run.outcome = Outcome.SCRIPT_ERROR if session.fit_called else Outcome.NO_FIT
        run.error_type = "SystemExit"
        run.message = _exit_message(exc, session.fit_called)
    else:  # the user's script failed: report it, never crash
        run.outcome = Outcome.SCRIPT_ERROR
        run.error_type = type(exc).__name__
        run.message = _error_message(exc)
        traceback.print_exception(exc)
    run.error_location = _error_location(exc)


def no_core_files() -> None:
    """Sets this process's core-file size limit to 0 (``RLIMIT_CORE``, inherited by the
    processes the script starts): a crash in native code (TensorFlow's profiler has crashed
    workers of ``--workers``) would otherwise let the kernel write a core file, over 1 GiB for
    a TensorFlow process, into the working directory, the user's tree, where ``ulimit -c``
    allows it and ``/proc/sys/kernel/core_pattern`` is a plain file name (``core``). A limit
    that cannot be set (a platform without ``RLIMIT_CORE``) is left as it is."""
    try:
        import resource

        _, hard = resource.getrlimit(resource.RLIMIT_CORE)
        resource.setrlimit(resource.RLIMIT_CORE, (0, hard))
    except (ImportError, OSError, ValueError, AttributeError):
        pass


def _syntax_error(facts: Facts, script: str) -> bool:
    """Whether the script does not compile: then its ``SyntaxError`` is recorded as the run's
    (the outcome, the message, the user's line) before TensorFlow is imported, as running it
    would record it after (a new user waited for TensorFlow's import, about 3 s, to be told of
    a syntax error). A script that cannot be read is left to the run, which says why."""
    try:
        with open(script, "rb") as file:
            source = file.read()
    except OSError:
        return False
    try:
        compile(source, script, "exec", dont_inherit=True)
    except SyntaxError as exc:
        facts.run.outcome = Outcome.SCRIPT_ERROR
        facts.run.error_type = type(exc).__name__
        facts.run.message = _error_message(exc)
        facts.run.error_location = _error_location(exc)
        return True
    except (ValueError, TypeError):  # a null byte: the run says so, as python would
        return False
    return False


def main(argv: list[str] | None = None) -> int:
    """The child's entry point: runs the script under the hooks and saves ``facts.json``.

    Returns:
        0 whenever the facts were saved (the parent reads ``facts.run.outcome``).
    """
    options, script_arg, script_args = parse_child_args(sys.argv[1:] if argv is None else argv)
    no_core_files()
    script = os.path.abspath(script_arg)
    os.makedirs(options.out, exist_ok=True)
    facts_path = os.path.join(options.out, "facts.json")
    started = time.monotonic()
    facts = _new_facts(script, [script_arg, *script_args], started)
    facts.save(facts_path)
    if _syntax_error(facts, script) or not _import_keras(facts):
        facts.run.wall_time_s = round(time.monotonic() - started, 3)
        facts.save(facts_path)
        return 0

    from rnndoctor.capture.env import collect_environment
    from rnndoctor.capture.session import CaptureSession

    facts.environment = collect_environment()  # keras_flavour: set again at fit
    session = CaptureSession(facts, _window_options(options), facts_path, started, child=True)
    if facts.environment.keras_backend != "tensorflow":
        facts.run.outcome = Outcome.CAPTURE_ERROR
        facts.run.message = (
            f"Keras backend is {facts.environment.keras_backend!r}; rnndoctor diagnoses the "
            "TensorFlow backend only (set KERAS_BACKEND=tensorflow)"
        )
        facts.save(facts_path)
        return 0
    _install_hooks(session, script)
    sys.argv = [script, *script_args]
    sys.path.insert(0, os.path.dirname(script))
    sys.addaudithook(_watch_backend)
    _start_watchdog(session)
    _watch_os_exit(session)
    session.set_phase(Phase.RUNNING_SCRIPT)
    from rnndoctor.capture import after_window

    after_window.install_stop_signal(session)  # here: the main thread, whoever runs fit
    session.end_now = functools.partial(_end_blocked, session, started)
    _run_script(session, script)
    session.end_lock.acquire()  # held to the process's end: the backstop leaves the end to it
    _finish(session, started)
    return 0


def _finish(session: CaptureSession, started: float, note: str | None = None) -> None:
    """Saves the facts as the check ends (the child commands' writes attributed, the wall
    time, ``note``), by the thread that holds ``session.end_lock``."""
    from rnndoctor.capture import neutralise

    if note is not None:
        session.facts.run.notes.append(note)
    neutralise.attribute_child_writes(session, save=False)
    session.facts.run.wall_time_s = round(time.monotonic() - started, 3)
    session.save()


def _end_blocked(session: CaptureSession, started: float, note: str) -> None:
    """Ends the check from another thread where the script's main thread did not stop at its
    run-on's end (``rnndoctor.capture.after_window``): the facts saved as at a normal end, with
    ``note``, and the process ended whatever the save does; nothing where the main thread holds
    ``session.end_lock`` (it is ending the check)."""
    if not session.end_lock.acquire(blocking=False):
        return
    try:
        _finish(session, started, note)
    except BaseException:  # the facts saved before stay; the process ends all the same
        traceback.print_exc()
    finally:
        end_process(0)


if __name__ == "__main__":
    try:
        code = main()
    except BaseException:
        traceback.print_exc()
        code = ExitCode.CHILD_INTERNAL
    # The user's script may leave non-daemon threads or worker pools behind; do not wait on them.
    end_process(code)
