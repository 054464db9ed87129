"""The capture child: ``python -P -m rnndoctor.capture --out DIR [options] SCRIPT [ARGS...]``.

Runs the user's script unmodified (``runpy.run_path`` with ``sys.argv`` set and the script's folder
first on ``sys.path``, as ``python SCRIPT`` would), with the construction-site and ``fit`` hooks
installed. It saves ``<out>/facts.json`` after every phase, so the parent always finds the facts
gathered so far, even after a crash or a kill. Its exit status is 0 whenever facts were saved; the
parent reads ``facts.run.outcome``. Status 70 means rnndoctor itself failed.
"""

from __future__ import annotations

import argparse
import os
import runpy
import sys
import time
import traceback
from datetime import UTC, datetime

from rnndoctor import __version__
from rnndoctor.facts import Facts, RunInfo

EXIT_INTERNAL = 70  # EX_SOFTWARE


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m rnndoctor.capture")
    parser.add_argument("--out", required=True)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--profile-steps", type=int, default=3)
    parser.add_argument("--no-probe", action="store_true")
    parser.add_argument("--timeout", type=float, default=None)
    parser.add_argument("--no-probes", action="store_true", help="skip the input/compute probes")
    parser.add_argument("script")
    parser.add_argument("script_args", nargs=argparse.REMAINDER)
    return parser.parse_args(argv)


def _error_location(exc: BaseException):
    from rnndoctor.capture import sites

    for frame, line in reversed(list(traceback.walk_tb(exc.__traceback__))):
        if sites.is_user_file(frame.f_code.co_filename):
            return sites.source_location(frame.f_code.co_filename, line)
    return None


def _source_root(script: str) -> str:
    """The git work tree that holds ``script`` (a folder with ``.git``), else the cwd."""
    folder = os.path.dirname(script)
    while True:
        if os.path.exists(os.path.join(folder, ".git")):
            return folder
        parent = os.path.dirname(folder)
        if parent == folder:
            return os.getcwd()
        folder = parent


def main(argv: list[str] | None = None) -> int:
    args = _parse(sys.argv[1:] if argv is None else argv)
    script = os.path.abspath(args.script)
    os.makedirs(args.out, exist_ok=True)
    facts_path = os.path.join(args.out, "facts.json")
    started = time.monotonic()
    facts = Facts(
        run=RunInfo(
            script=script,
            argv=[args.script, *args.script_args],
            cwd=os.getcwd(),
            started_utc=datetime.now(UTC).isoformat(timespec="seconds"),
        ),
        tool_version=__version__,
    )
    root = _source_root(script)
    facts.run.source_root = root
    facts.run.script_dir_in_source_root = os.path.relpath(os.path.dirname(script), root)
    facts.run.enter_phase("importing TensorFlow and Keras", time.monotonic() - started)
    facts.save(facts_path)

    from rnndoctor.capture import loop, neutralise, sites
    from rnndoctor.capture.env import collect_environment
    from rnndoctor.capture.window import Capture, StopScript, WindowOptions, default_profile_dir

    facts.environment = collect_environment()
    options = WindowOptions(
        warmup_steps=args.warmup,
        measured_steps=args.steps,
        profile_steps=args.profile_steps,
        profile_dir=default_profile_dir(args.out),
        probe_fast_path=not args.no_probe,
        timeout_s=args.timeout,
        run_probes=not args.no_probes,
    )
    capture = Capture(facts, options, facts_path, started)
    if facts.environment.keras_backend != "tensorflow":
        facts.run.outcome = "capture_error"
        facts.run.message = (
            f"Keras backend is {facts.environment.keras_backend!r}; rnndoctor diagnoses the "
            "TensorFlow backend only (set KERAS_BACKEND=tensorflow)"
        )
        facts.save(facts_path)
        return 0
    sites.set_script(script)
    sites.install()
    neutralise.install(capture)
    loop.install(capture)
    capture.install_fit_hook()

    sys.argv = [script, *args.script_args]
    sys.path.insert(0, os.path.dirname(script))
    capture.set_phase("running the script until its first Model.fit call")
    try:
        runpy.run_path(script, run_name="__main__")
    except StopScript:
        sys.settrace(None)
    except SystemExit as exc:
        if not capture.window_finished:
            facts.run.outcome = "no_fit" if not capture.fit_called else "script_error"
            facts.run.error_type = "SystemExit"
            facts.run.message = f"the script called sys.exit({exc.code!r}) " + (
                "before calling Model.fit" if not capture.fit_called else "during the diagnosis"
            )
            facts.run.error_location = _error_location(exc)
    except BaseException as exc:  # the user's script failed: report it, never crash
        if not capture.window_finished:
            facts.run.outcome = "script_error"
            facts.run.error_type = type(exc).__name__
            first = (str(exc).strip().splitlines() or [""])[0]
            facts.run.message = f"{type(exc).__name__}: {first}"[:500]
            facts.run.error_location = _error_location(exc)
            traceback.print_exc()
    else:
        if not capture.fit_called:
            facts.run.outcome = "no_fit"
            facts.run.message = "the script ended without calling Model.fit"
    facts.run.wall_time_s = round(time.monotonic() - started, 3)
    facts.save(facts_path)
    return 0


if __name__ == "__main__":
    try:
        code = main()
    except BaseException:
        traceback.print_exc()
        code = EXIT_INTERNAL
    sys.stdout.flush()
    sys.stderr.flush()
    # The user's script may leave non-daemon threads or worker pools behind; do not wait on them.
    os._exit(code)
