"""``rnndoctor check train.py`` as one worker of a job the user's own launcher starts.

When ``TF_CONFIG`` names a cluster of two or more tasks (``chief`` and ``worker``), each
worker's ``rnndoctor check`` runs its capture as one worker of ``--workers`` does
(:func:`rnndoctor.cluster.worker_environment`: a profiler server, no probes, the same window
end): every worker derives all workers' profiler ports from ``TF_CONFIG``
(:func:`rnndoctor.cluster.profiler_ports`), so the chief (index 0) traces all of them into
``<out>/profile`` without any other word from them.

All workers share one ``--out`` (one host, or a shared filesystem): worker ``i`` writes its
capture into ``<out>/workers/worker-<i>/`` and its settled facts to
``<out>/facts-worker-<i>.json``; the chief waits for the others' files (bounded,
``RNNDOCTOR_MERGE_WAIT_S``, default :data:`rnndoctor.cluster.MERGE_WAIT_S`), merges them
(:func:`rnndoctor.cluster.merge`) and renders one report; a worker whose file did not arrive
is a row "not merged: ... did not arrive within N s" of a partial report. Without a shared
filesystem, ``rnndoctor merge`` (:func:`run_merge`) merges the copied files.

After its facts are saved, every other worker waits for the chief's word on the attempt
(:func:`wait_for_word`, ``<out>/attempt.json``, at most the merge wait plus ``_WORD_GRACE_S``
and never past ``--timeout``; no wait where no job was announced, as without a shared
filesystem). When a crash in native code ended one worker's capture and every other one's
completed (:func:`rnndoctor.cluster.launched_crash`, from each worker's
``RunInfo.exit_status``), and :func:`rnndoctor.cli.workers.may_run_again` allows it (up to
``MAX_ATTEMPTS`` attempts, each where the time left under ``--timeout`` allows 1.5 times the
longest so far), the chief moves ``<out>/workers`` to ``<out>/workers-attempt-<k>``, announces a
new job and says so; every worker then runs its capture once more, as ``--workers`` does
(:mod:`rnndoctor.cli.workers`), waits for the chief's word on that attempt too, and the
report's notes name the crashes.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rnndoctor import cluster
from rnndoctor.cli import supervisor
from rnndoctor.cli.common import claim_out
from rnndoctor.cli.console import Console
from rnndoctor.facts import Facts
from rnndoctor.options import ExitCode, Options

_POLL_S = 0.2
# how much longer than the chief's merge wait another worker waits for the chief's word: the
# chief's capture may end a little after its own (its trace, its facts), s
_WORD_GRACE_S = 30.0


@dataclasses.dataclass
class _Worker:
    """One worker's check: what each attempt of its capture needs (``begin``: the
    ``time.monotonic()`` when the check started)."""

    script: Path
    script_args: list[str]
    options: Options
    task: cluster.LaunchedTask
    ports: list[int]
    out: Path
    begin: float

    def time_left(self) -> float:
        """Seconds left under ``--timeout`` (inf without one; never below 0)."""
        timeout = self.options.timeout
        if timeout is None:
            return float("inf")
        return max(0.0, timeout - (time.monotonic() - self.begin))

    def capture(self, console: Console) -> tuple[Facts | None, supervisor.ChildRun, str | None]:
        """One attempt: runs the capture in ``<out>/workers/worker-<i>/`` (the time left under
        ``--timeout``), settles its facts and saves them as ``<out>/facts-worker-<i>.json``
        with the job id the chief announced. Returns the facts (None: none saved), how the
        child ended, and the job id (None: none announced)."""
        from rnndoctor.cli import check
        from rnndoctor.cli.workers import TRACE_MS

        index, options = self.task.index, self.options
        folder = self.out / "workers" / f"worker-{index}"
        folder.mkdir(parents=True, exist_ok=True)
        mine = self.out / cluster.WORKER_FACTS.format(index)
        for stale in (mine, folder / "facts.json", self.out / "workers" / "trace.done"):
            stale.unlink(missing_ok=True)  # the chief's trace needs every worker: none is done
        hosts = self.task.hosts
        env = cluster.worker_environment(index, self.ports, hosts, str(self.out), TRACE_MS)
        env["PYTHONFAULTHANDLER"] = "1"  # a crash in native code shows its Python stack (as
        # under --workers); faulthandler re-raises the signal, so the exit status stays its own
        timeout = None if options.timeout is None else self.time_left()
        child_options = dataclasses.replace(
            options, out=str(folder), no_probes=True, profile_steps=0, timeout=timeout
        )
        paths = check.CheckPaths(folder)
        child = check.supervise(self.script, self.script_args, child_options, paths, console, env)
        if options.redact:
            check.redact_log(paths.log, self.script, console)
        try:
            facts = Facts.load(folder / "facts.json")
        except (OSError, ValueError):
            facts = None
        job = announced_job(self.out)  # read after the window: this job's chief announced it
        if facts is not None:
            check.settle(facts, child, options.timeout)
            facts.run.job_id = job
            facts.save(mine)
        return facts, child, job


def run_launched_check(
    script: Path,
    script_args: list[str],
    cli: Mapping[str, Any],
    task: cluster.LaunchedTask,
    console: Console,
) -> ExitCode:
    """One worker's check (the arguments are :func:`rnndoctor.cli.check.run_check`'s, and its
    ``TF_CONFIG`` task); the chief's exit code is the merged report's, as a plain check maps
    it; another worker's is its own run's."""
    from rnndoctor.cli import check, workers

    begin = time.monotonic()
    options = check.validate(script, cli, console)
    if options is None:
        return ExitCode.USAGE
    if options.verify:
        console.error("--verify runs a single process: not under a multi-worker TF_CONFIG")
        return ExitCode.USAGE
    try:
        ports = cluster.profiler_ports(task, os.environ)
    except ValueError as exc:
        console.error(str(exc))
        return ExitCode.USAGE
    out = Path(options.out).resolve()
    names = workers.out_names(task.count)
    if task.index == 0 and check.prepare_out(options, console, names) is None:
        return ExitCode.USAGE
    # the chief's guard on every worker, so that none waits for a chief that refused a shared
    # --out (and a host's own --out is marked as rnndoctor's)
    if task.index > 0 and not claim_out(out, (*check.out_names(options), *names), console):
        return ExitCode.USAGE
    if task.index == 0:
        _announce(out, cluster.job_id(task, uuid.uuid4().hex))
    console.say(f"rnndoctor: worker {task.index} of {task.count} (TF_CONFIG)", err=True)
    worker = _Worker(script, script_args, options, task, ports, out, begin)
    if task.index == 0:
        return _chief(worker, console)
    facts, child, job = worker.capture(console)
    while facts is not None and job is not None:  # the chief can merge these facts: its word
        wait_s = min(_merge_wait_s() + _WORD_GRACE_S, worker.time_left())
        word = wait_for_word(out, job, wait_s)
        if word is None:
            console.say(f"rnndoctor: no word from the chief on this job within {wait_s:g} s")
        if word is None or not word.get("again"):
            break
        console.say(f"rnndoctor: the chief runs the workers once more: {word.get('why')}")
        facts, child, job = worker.capture(console)
    folder = out / "workers" / f"worker-{task.index}"
    mine = out / cluster.WORKER_FACTS.format(task.index)
    return _worker_done(facts, child, options, folder, mine, console)


def _merge_wait_s() -> float:
    """How long the chief waits for the others' facts (``RNNDOCTOR_MERGE_WAIT_S``), s."""
    return float(os.environ.get(cluster.MERGE_WAIT_VAR) or cluster.MERGE_WAIT_S)


def _chief(worker: _Worker, console: Console) -> ExitCode:
    """The chief's check: its capture, the others' facts, and its word on the attempt
    (:func:`say_word`). When a crash in native code ended one worker's capture and every other
    one's completed (:func:`rnndoctor.cluster.launched_crash`), the workers run once more, as
    under ``--workers`` (:func:`rnndoctor.cli.workers.may_run_again`: up to ``MAX_ATTEMPTS``
    in all, each where the time left under ``--timeout`` allows 1.5 times the longest attempt;
    a crashed attempt's logs in ``<out>/workers-attempt-<k>/``, the report's notes say so);
    then the merged report."""
    from rnndoctor.cli.workers import attempts_note, keep_attempt, may_run_again

    out, task = worker.out, worker.task
    crashes: list[str] = []
    longest, start = 0.0, worker.begin  # the first attempt's time counts from the check's start
    while True:
        facts, child, job = worker.capture(console)
        wait_s = min(_merge_wait_s(), worker.time_left())
        loaded, why = gather_facts(out, task, facts, job, wait_s)
        longest = max(longest, time.monotonic() - start)
        start = time.monotonic()
        crashed = cluster.launched_crash(loaded)
        if job is None:
            break
        if crashed is None or not may_run_again(len(crashes) + 1, longest, worker.time_left()):
            say_word(out, job, None, "")
            break
        crash = keep_attempt(*crashed, out, len(crashes) + 1)
        crashes.append(crash)
        again = cluster.job_id(task, uuid.uuid4().hex)
        _announce(out, again)
        say_word(out, job, again, crash)  # after the move and the announcement
        console.say(f"rnndoctor: {crash}; running the workers once more", err=True)
    note = attempts_note(crashes, crashed is not None) if crashes else None
    return merge_and_report(task, loaded, why, child, worker.options, console, note)


def _announce(out: Path, job: str) -> None:
    """The chief's start announcement: ``<out>/job.json`` (written atomically) holds ``job``."""
    path = out / cluster.JOB_FILE
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"job": job}))
    os.replace(tmp, path)


def announced_job(out: Path) -> str | None:
    """The job id the chief announced in ``<out>/job.json``; None when there is none (no
    shared filesystem) or it is unreadable.

    A worker reads it when its capture has ended: its window ran the strategy's collectives
    with this job's chief, which announced the job before it started its own capture, so an
    earlier job's announcement has been replaced by then. (A worker that failed before its
    first collective may read an earlier job's id: its facts are then not merged.)"""
    try:
        job = json.loads((out / cluster.JOB_FILE).read_text()).get("job")
    except (OSError, ValueError, AttributeError):
        return None
    return job if isinstance(job, str) else None


def _worker_done(
    facts: Facts | None,
    child: supervisor.ChildRun,
    options: Options,
    folder: Path,
    mine: Path,
    console: Console,
) -> ExitCode:
    """A non-chief worker's end: where its facts are, and its own run's exit code."""
    from rnndoctor.cli.check import CheckPaths, exit_code

    if facts is None:
        console.error(f"the worker saved no facts; see {folder / 'script.log'}")
        return ExitCode.INTERNAL
    console.say(f"rnndoctor: facts saved to {mine}; the chief (worker 0) merges the report")
    # its findings are in the chief's merged report
    return exit_code(facts, child, None, options, CheckPaths(folder), console)


def wait_for_facts(
    out: Path, count: int, job: str | None, wait_s: float
) -> tuple[list[Facts | None], list[str]]:
    """Each worker's ``<out>/facts-worker-<i>.json`` (``count`` workers), waiting up to
    ``wait_s`` seconds for those not there yet; a file whose ``run.job_id`` is not ``job``
    (an earlier job's, :func:`rnndoctor.cluster.job_id`) does not count. No file time is
    compared with the chief's clock: the workers' hosts may have skewed clocks. Returns the
    facts (None: not arrived, or unreadable) and, per worker, why it is missing ("" when it
    arrived)."""
    deadline = time.monotonic() + wait_s
    loaded: list[Facts | None] = [None] * count
    while True:
        for i in range(count):
            path = out / cluster.WORKER_FACTS.format(i)
            if loaded[i] is None and path.is_file():
                try:
                    facts = Facts.load(path)
                except (OSError, ValueError):
                    continue  # saved atomically: unreadable means not ours
                if job is not None and facts.run.job_id == job:
                    loaded[i] = facts
        if all(f is not None for f in loaded) or time.monotonic() >= deadline:
            break
        time.sleep(_POLL_S)
    why = [
        "" if f is not None else f"worker {i}'s facts did not arrive within {wait_s:g} s"
        for i, f in enumerate(loaded)
    ]
    return loaded, why


def say_word(out: Path, job: str, again: str | None, why: str) -> None:
    """The chief's word on attempt ``job`` of a launched job, which every other worker waits
    for (:func:`wait_for_word`): ``again``, the next attempt's job id (None: no other attempt),
    and ``why`` it runs. Written atomically to ``<out>/attempt.json`` (``cluster.WORD_FILE``)."""
    path = out / cluster.WORD_FILE
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"job": job, "again": again, "why": why}))
    os.replace(tmp, path)


def wait_for_word(out: Path, job: str, wait_s: float) -> dict[str, Any] | None:
    """The chief's word on attempt ``job`` (:func:`say_word`), waiting up to ``wait_s``
    seconds; None when none came (no shared filesystem, or the chief ended first). A word on
    another job (an earlier run's file) does not count."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            word = json.loads((out / cluster.WORD_FILE).read_text())
        except (OSError, ValueError):
            word = None
        if isinstance(word, dict) and word.get("job") == job:
            return word
        if time.monotonic() >= deadline:
            return None
        time.sleep(_POLL_S)


def gather_facts(
    out: Path, task: cluster.LaunchedTask, facts: Facts | None, job: str | None, wait_s: float
) -> tuple[list[Facts | None], list[str]]:
    """The chief's ``facts`` and the other workers' of job ``job`` (its announced id), waiting
    up to ``wait_s`` seconds for them (:func:`wait_for_facts`, whose pair it returns, the
    chief's facts first)."""
    loaded, why = wait_for_facts(out, task.count, job, wait_s)
    loaded[0] = facts
    return loaded, why


def merge_and_report(
    task: cluster.LaunchedTask,
    loaded: list[Facts | None],
    why: Sequence[str],
    child: supervisor.ChildRun,
    options: Options,
    console: Console,
    note: str | None = None,
) -> ExitCode:
    """Merges the workers' facts (``loaded``, the chief's first; ``why``: per worker, why its
    facts are missing, :func:`wait_for_facts`), adds ``note`` to the run's notes, renders one
    report and returns the chief's exit code (``child``: the chief's capture); the log tail
    shown for a failure is the failed worker's."""
    from rnndoctor.cli.check import CheckPaths, exit_code, render_and_summarise

    out = Path(options.out).resolve()
    files = [cluster.WORKER_FACTS.format(i) for i in range(task.count)]
    merged = cluster.merge(loaded, files)
    if merged is None:
        console.error(f"no worker saved its facts; see {out / 'workers'}/worker-*/script.log")
        return ExitCode.INTERNAL
    _note_missing(merged, why[1:], 1)
    if note:
        merged.run.notes.append(note)
    paths = CheckPaths(out)
    merged.save(paths.facts)
    report = render_and_summarise(merged, options, paths, console)
    for reason in filter(None, why[1:]):
        console.error(f"not merged: {reason} (partial report)")
    shown = cluster.failed_worker(loaded) or 0
    log_paths = dataclasses.replace(paths, out=out / "workers" / f"worker-{shown}")
    return exit_code(merged, child, report, options, log_paths, console)


def _note_missing(facts: Facts, why: Sequence[str], first: int) -> None:
    """Marks the rows and the run of a merge where some workers' facts did not arrive."""
    rows = facts.strategy.per_worker if facts.strategy else []
    for i, reason in enumerate(why, first):
        if reason and i < len(rows):
            rows[i].message = f"not merged: {reason}"
            facts.run.notes.append(f"not merged: {reason}; the report is partial")


def run_merge(files: Sequence[Path], cli: Mapping[str, Any], console: Console) -> ExitCode:
    """``rnndoctor merge facts-worker-0.json facts-worker-1.json ... --out DIR``: one report
    from workers' facts copied from hosts without a shared filesystem. A file's worker index
    is its ``strategy.task_id`` when every file has a distinct one, else its place in
    ``files``. The merged ``facts.json`` goes to ``--out`` (default: the first file's folder),
    then it is reported as ``rnndoctor report`` does."""
    from rnndoctor.cli.offline import load_report_facts, run_report

    try:
        loaded = [load_report_facts(f) for f in files]
    except ValueError as exc:
        console.error(str(exc))
        return ExitCode.USAGE
    ids = [f.strategy.task_id if f.strategy else None for f in loaded]
    order = list(range(len(files)))
    if None not in ids and sorted(ids) == list(range(len(files))):
        order = sorted(order, key=lambda i: ids[i])
    merged = cluster.merge([loaded[i] for i in order], [files[i].name for i in order])
    if merged is None:
        console.error("no facts to merge")
        return ExitCode.USAGE
    out = Path(cli.get("out") or files[0].resolve().parent)
    from rnndoctor.reports import FILENAMES

    if not claim_out(out, ("facts.json", *FILENAMES.values()), console):
        return ExitCode.USAGE
    merged.save(out / "facts.json")
    return run_report(out / "facts.json", dict(cli, out=str(out)), console)
