"""``rnndoctor check train.py --workers N``: a local multi-worker pre-flight on 127.0.0.1.

:func:`run_workers` starts N capture children, one per worker, each with its own ``TF_CONFIG``
(:func:`rnndoctor.cluster.tf_config`, free ports chosen on the loopback interface; the servers
listen on all interfaces, see :mod:`rnndoctor.cluster`), a profiler server
port and its own folder ``<out>/workers/worker-<i>/`` (its ``script.log`` and ``facts.json``).
Worker 0, the chief, traces all workers at its first measured step
(``tf.profiler.experimental.client.trace``) into ``<out>/profile``, one profile run with every
worker's host. The workers run without the probes and without their own profiler: a probe
times a varying number of training steps, which under a multi-worker strategy are collectives
that the other workers would not join.

Every child leads its own process group and carries the launcher's ``RNNDOCTOR_RUN_ID``; all of
them are killed (:func:`rnndoctor.cli.supervisor.end_process_tree`) when the run ends: on
success, on a worker's failure (the others are given ``_PEER_GRACE_S`` to end on their own, then
killed: they would wait in a collective for the failed one), on ``--timeout`` and on Ctrl-C.

When the first worker to fail was ended by a crash in native code (:func:`native_crash`:
TensorFlow's profiler has aborted one when the chief's trace ended), the workers run once more,
up to ``MAX_ATTEMPTS`` attempts in all, each where the time left under ``--timeout`` allows 1.5
times the longest attempt so far (:func:`may_run_again`; never after a timeout or Ctrl-C); a
crashed attempt's logs stay in ``<out>/workers-attempt-<k>/`` and the report's notes say so
(:func:`attempts_note`). The script then runs more than once: what it writes outside ``--out``,
it writes each time.

Then each worker's facts are settled as a plain check settles them, saved as
``<out>/facts-worker-<i>.json``, merged (:func:`rnndoctor.cluster.merge`) into
``<out>/facts.json`` and rendered as one report.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import signal
import subprocess
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rnndoctor import cluster
from rnndoctor.cli import supervisor
from rnndoctor.cli.console import Console
from rnndoctor.facts import Facts, Outcome, save_leftovers
from rnndoctor.options import ExitCode, Options

_PEER_GRACE_S = 15.0  # after one worker failed, how long the others may take to end
_POLL_S = 0.2
TRACE_MS = 1500  # the chief's trace of all workers, ms (the steps run, then they wait for it)
_ATTEMPT_FOLDER = "workers-attempt-{}"  # under --out: the logs of attempt k, which a crash ended
# attempts in all where crashes in native code end them: TF 2.21's profiler crash at the end of
# the chief's trace (native_crash) ended the first attempt of tests/scripts/mwms_fit.py's
# --workers check in 6 of 13 runs in one hour of a shared 2-core machine, and in 0 of 24 in the
# next (2026-12-04), and both of two attempts in one CI run: a third attempt is the difference
MAX_ATTEMPTS = 3
_ORDINALS = ("first", "second", "third", "fourth")
assert MAX_ATTEMPTS <= len(_ORDINALS), "an attempt without an ordinal for its note"


@dataclasses.dataclass
class Worker:
    """One launched worker: its folder, process and how it ended (``ended_s``: the
    ``time.monotonic()`` when it was seen to end on its own; None: killed, or still running)."""

    index: int
    out: Path
    proc: subprocess.Popen
    run: supervisor.ChildRun
    run_id: str
    ended_s: float | None = None


def _environment(
    index: int, ports: list[int], profiler_ports: list[int], out: Path, run_id: str
) -> dict[str, str]:
    env = dict(os.environ, PYTHONUNBUFFERED="1", PYTHONDONTWRITEBYTECODE="1")
    env["PYTHONFAULTHANDLER"] = "1"  # a worker that crashes in native code shows its Python stack
    env[supervisor.RUN_ID_VAR] = run_id
    env["TF_CONFIG"] = cluster.tf_config(ports, index)
    hosts = [cluster.LOOPBACK] * len(ports)
    env.update(cluster.worker_environment(index, profiler_ports, hosts, str(out), TRACE_MS))
    return env


def start_workers(
    script: Path, script_args: list[str], options: Options, out: Path, run_id: str
) -> list[Worker]:
    """Spawns the ``options.workers`` capture children, each in its own session.

    A failure while starting worker ``k`` (an ``OSError``, Ctrl-C) ends the process trees of
    workers ``0..k-1`` (:func:`rnndoctor.cli.supervisor.end_process_tree`) before it propagates:
    each runs in its own session, so nothing else would end them.

    Raises:
        OSError: a port cannot be bound, a log cannot be opened, or a child cannot be spawned.
    """
    count = options.workers
    ports = cluster.free_ports(2 * count)
    ports, profiler_ports = ports[:count], ports[count:]
    (out / "workers").mkdir(parents=True, exist_ok=True)
    (out / "workers" / "trace.done").unlink(missing_ok=True)
    workers: list[Worker] = []
    try:
        for i in range(count):
            env = _environment(i, ports, profiler_ports, out, run_id)
            workers.append(_spawn(i, script, script_args, options, out / "workers", env, run_id))
    except BaseException:
        for worker in workers:
            supervisor.end_process_tree(worker.proc, run_id)
        raise
    return workers


def _spawn(
    index: int,
    script: Path,
    script_args: list[str],
    options: Options,
    folder: Path,
    env: dict[str, str],
    run_id: str,
) -> Worker:
    """Starts worker ``index``'s capture child (its log and facts in ``folder/worker-<index>``)."""
    folder = folder / f"worker-{index}"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "facts.json").unlink(missing_ok=True)
    for tmp in save_leftovers(folder):  # a save an earlier run's kill cut short
        tmp.unlink(missing_ok=True)
    child = dataclasses.replace(options, out=str(folder), no_probes=True, profile_steps=0)
    command = supervisor.capture_command(script, script_args, child)
    with open(folder / "script.log", "wb") as log:
        proc = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            env=env, start_new_session=True,
        )  # fmt: skip
    return Worker(index, folder, proc, supervisor.ChildRun(started_s=time.monotonic()), run_id)


def _failed(worker: Worker) -> bool:
    """The worker ended with a failed outcome, or with a non-zero status."""
    if worker.run.status not in (None, 0):
        return True
    try:
        return Facts.load(worker.out / "facts.json").run.outcome.failed
    except (OSError, ValueError):
        return True


def wait_workers(workers: list[Worker], timeout_s: float) -> None:
    """Waits for every worker; records timeouts and Ctrl-C in each ``Worker.run``; ends every
    process tree in all cases."""
    deadline = time.monotonic() + timeout_s
    peer_deadline: float | None = None
    try:
        while any(w.run.status is None for w in workers):
            for w in workers:
                if w.run.status is None and w.proc.poll() is not None:
                    w.run.status, w.ended_s = w.proc.returncode, time.monotonic()
                    if peer_deadline is None and _failed(w):
                        peer_deadline = time.monotonic() + _PEER_GRACE_S
            now = time.monotonic()
            if now >= deadline:
                for w in workers:
                    w.run.timed_out = w.run.status is None
                break
            if peer_deadline is not None and now >= peer_deadline:
                break  # the others wait in a collective for the failed worker: kill them
            time.sleep(_POLL_S)
    except KeyboardInterrupt as exc:
        for w in workers:
            w.run.interrupt(exc)
    finally:
        for w in workers:  # every worker's tree, whatever arrives meanwhile
            try:
                w.run.escaped = supervisor.end_process_tree(w.proc, w.run_id)
            except KeyboardInterrupt as exc:  # after this worker's tree was ended
                for other in workers:
                    other.run.interrupt(exc)


def _collect(workers: list[Worker], options: Options, out: Path) -> tuple[list, list[str]]:
    """Each worker's facts, settled as a plain check settles them and saved as
    ``<out>/facts-worker-<i>.json``; None for a worker that saved none."""
    from rnndoctor.cli.check import settle

    loaded: list[Facts | None] = []
    files = []
    for w in workers:
        name = cluster.WORKER_FACTS.format(w.index)
        files.append(name)
        try:
            facts = Facts.load(w.out / "facts.json")
        except (OSError, ValueError):
            loaded.append(None)
            continue
        settle(facts, w.run, options.timeout)
        if facts.run.outcome == Outcome.RUNNING:  # killed while its peer had failed
            facts.run.outcome = Outcome.SCRIPT_ERROR
            facts.run.message = "killed after another worker failed (it waited in a collective)"
        facts.save(out / name)
        loaded.append(facts)
    return loaded, files


def out_names(workers: int) -> tuple[str, ...]:
    """What a multi-worker check (``--workers N``, or a launched ``TF_CONFIG`` job of ``N``
    tasks) writes or replaces in ``--out`` besides a plain check's files, which
    :func:`rnndoctor.cli.check.prepare_out` guards too: the workers' folders and facts, the
    crashed attempts' folders (:data:`MAX_ATTEMPTS`), and a launched job's start and merge
    files (``cluster.JOB_FILE``, ``cluster.WORD_FILE``)."""
    return (
        "workers",
        cluster.JOB_FILE,
        cluster.WORD_FILE,
        *(cluster.WORKER_FACTS.format(i) for i in range(workers)),
        *(_ATTEMPT_FOLDER.format(k) for k in range(1, MAX_ATTEMPTS + 1)),
    )


def run_workers_check(
    script: Path, script_args: list[str], cli: Mapping[str, Any], console: Console
) -> ExitCode:
    """``rnndoctor check --workers N``: validates as a plain check does, then
    :func:`run_workers` (the arguments are :func:`rnndoctor.cli.check.run_check`'s)."""
    from rnndoctor.cli.check import prepare_out, validate

    options = validate(script, cli, console)
    if options is None:
        return ExitCode.USAGE
    paths = prepare_out(options, console, out_names(options.workers or 0))
    if paths is None:
        return ExitCode.USAGE
    return run_workers(script, script_args, options, paths.out, console)


def run_workers(
    script: Path, script_args: list[str], options: Options, out: Path, console: Console
) -> ExitCode:
    """Launches ``options.workers`` local workers, merges their facts, renders one report.

    Returns:
        the check's exit code, as a plain check maps it (on the merged facts).
    """
    from rnndoctor.cli.check import CheckPaths, exit_code, render_and_summarise

    paths = CheckPaths(out)
    run_id = uuid.uuid4().hex
    console.say(
        f"rnndoctor: running {script} on {options.workers} local workers "
        f"(TF_CONFIG on {cluster.LOOPBACK}; output: {out / 'workers'})",
        err=True,
    )
    timeout = options.timeout if options.timeout is not None else float("inf")
    begin = time.monotonic()
    workers = _attempt(script, script_args, options, out, run_id, timeout, console)
    if workers is None:
        return ExitCode.INTERNAL
    longest, crashes, escaped = time.monotonic() - begin, [], []
    while (crashed := native_crash(workers)) is not None and may_run_again(
        len(crashes) + 1, longest, timeout - (time.monotonic() - begin)
    ):
        crash = keep_attempt(crashed.index, crashed.run.status, out, len(crashes) + 1)
        crashes.append(crash)
        console.say(f"rnndoctor: {crash}; running the workers once more", err=True)
        escaped += [pid for w in workers for pid in w.run.escaped]
        start = time.monotonic()
        left = timeout - (start - begin)
        workers = _attempt(script, script_args, options, out, run_id, left, console)
        if workers is None:
            return ExitCode.INTERNAL
        longest = max(longest, time.monotonic() - start)
    retry_note = None
    if crashes:
        workers[0].run.escaped[:0] = escaped  # the report names every process it had to kill
        retry_note = attempts_note(crashes, native_crash(workers) is not None)
    loaded, files = _collect(workers, options, out)
    separate = cluster.separate_trainings(loaded)  # before the merge gives the base a strategy
    facts = cluster.merge(loaded, files)
    if facts is None:
        console.error(f"no worker saved its facts; see {out / 'workers'}/worker-*/script.log")
        return ExitCode.INTERNAL
    if retry_note:
        facts.run.notes.append(retry_note)
    facts.save(paths.facts)
    report = render_and_summarise(facts, options, paths, console)
    shown = _first_failed(workers) or next(w for w in workers if loaded[w.index] is facts)
    log_paths = dataclasses.replace(paths, out=shown.out)  # the failing worker's log tail
    code = exit_code(facts, _merged_run(workers), report, options, log_paths, console)
    if code in (ExitCode.OK, ExitCode.FINDINGS) and separate:
        # not the job --workers checks: its exit code must not pass a CI gate that a plain
        # check of the script (probes included) may fail
        console.error(
            f"--workers {options.workers}: the script builds no tf.distribute strategy, so the "
            "workers ran separate trainings, not one job; check it without --workers"
        )
        return ExitCode.USAGE
    return code


def _attempt(
    script: Path,
    script_args: list[str],
    options: Options,
    out: Path,
    run_id: str,
    timeout_s: float,
    console: Console,
) -> list[Worker] | None:
    """Starts the workers and waits for them (:func:`wait_workers`); None when they cannot
    be started (said on the console)."""
    try:
        workers = start_workers(script, script_args, options, out, run_id)
    except OSError as exc:
        console.error(f"cannot start the workers: {exc}")
        return None
    wait_workers(workers, timeout_s)
    return workers


def _first_failed(workers: list[Worker]) -> Worker | None:
    """The worker that failed first (:func:`_failed`, in the order they ended on their own),
    or None when none of those did."""
    ended = sorted((w for w in workers if w.ended_s is not None), key=lambda w: w.ended_s or 0.0)
    return next((w for w in ended if _failed(w)), None)


def native_crash(workers: list[Worker]) -> Worker | None:
    """The worker that failed first (:func:`_first_failed`) when a signal of a native crash
    ended it (``cluster.NATIVE_CRASH_SIGNALS``: its exit status is minus the signal), else
    None; also None after ``--timeout`` or Ctrl-C. A worker that crashed after another had
    failed (TensorFlow may abort one left in a broken collective) is the consequence, not a
    crash to run again.

    One such crash is TensorFlow's own: TF 2.21's profiler server, stopping the
    chief's trace of the workers (``tf.profiler.experimental.client.trace``), aborted a worker
    in ``TraceMeRecorder::Consume`` (``SplitEventTracker::FindStartAndMerge``: ``free():
    invalid pointer``, ``double free or corruption``, or a segmentation fault; gdb on the core
    files), in one worker that its remote trace stopped. How often depends on the machine's
    state, not the run: in 2 of 12 runs of ``tests/scripts/mwms_fit.py`` on a loaded 2-core
    machine, 6 of 13 in one hour and 0 of 24 in the next on a shared one, both attempts of one
    CI run; :func:`run_workers` runs the workers once more (``MAX_ATTEMPTS``)."""
    if any(w.run.timed_out or w.run.interrupted for w in workers):
        return None
    first = _first_failed(workers)
    crashes = {-int(s) for s in cluster.NATIVE_CRASH_SIGNALS}
    return first if first is not None and first.run.status in crashes else None


def may_run_again(attempts: int, longest_s: float, left_s: float) -> bool:
    """Whether the workers run once more after ``attempts`` attempts that a crash in native
    code ended: fewer than ``MAX_ATTEMPTS`` so far, and ``left_s`` (the seconds left under
    ``--timeout``; inf without one) at least 1.5 times ``longest_s``, the longest attempt so
    far (an attempt that would not fit gives no report at all)."""
    return attempts < MAX_ATTEMPTS and left_s >= 1.5 * longest_s


def keep_attempt(index: int, status: int | None, out: Path, attempt: int = 1) -> str:
    """Moves the crashed ``attempt``'s ``<out>/workers`` to ``<out>/workers-attempt-<attempt>``
    and drops its partial ``<out>/profile``; returns what happened to worker ``index`` (its exit
    ``status``: minus the signal), for the report's note."""
    kept = out / _ATTEMPT_FOLDER.format(attempt)
    shutil.rmtree(kept, ignore_errors=True)
    os.replace(out / "workers", kept)
    shutil.rmtree(out / "profile", ignore_errors=True)
    name = signal.Signals(-(status or 0)).name
    return (
        f"worker {index} was ended by {name} (a crash in native code) in the "
        f"{_ORDINALS[attempt - 1]} attempt (its log: {kept / f'worker-{index}' / 'script.log'})"
    )


def attempts_note(crashes: list[str], crashed_again: bool) -> str:
    """The report's note on a run whose first ``len(crashes)`` attempts a crash in native code
    ended (``crashes``: :func:`keep_attempt`'s texts); ``crashed_again``: the last attempt,
    the report's, ended the same way."""
    last, more = _ORDINALS[len(crashes)], len(crashes)
    ran = {1: "once more", 2: "twice more"}.get(more, f"{more} times more")
    end = f"this report is the {last}'s"
    if crashed_again:
        end = f"the {last} attempt ended the same way"
    return "; ".join(crashes) + f"; the workers ran {ran}; {end}"


def _merged_run(workers: list[Worker]) -> supervisor.ChildRun:
    """One ``ChildRun`` for the exit code: timed out / interrupted if any worker was; the
    first non-zero status."""
    return supervisor.ChildRun(
        status=next((w.run.status for w in workers if w.run.status), 0),
        timed_out=any(w.run.timed_out for w in workers),
        interrupted=any(w.run.interrupted for w in workers),
        interrupted_by=next((w.run.interrupted_by for w in workers if w.run.interrupted), "Ctrl-C"),
        escaped=[pid for w in workers for pid in w.run.escaped],
    )
