"""A multi-worker cluster for ``rnndoctor check``: the local one of ``--workers N`` (its
``TF_CONFIG``), the task of a worker the user's own launcher started (:func:`launched_task`,
:func:`profiler_ports`), the environment each worker's capture reads, and the merge of the
workers' facts. Pure (no TensorFlow): the CLI (:mod:`rnndoctor.cli.workers`,
:mod:`rnndoctor.cli.launched`) and the capture's :mod:`rnndoctor.capture.distribute` share
these names.

Every address in ``TF_CONFIG`` and the trace's services is on the loopback interface
(``LOOPBACK``): the ports come from the kernel (``bind(("127.0.0.1", 0))``), so they are free
when chosen. The servers bound to them listen on all interfaces, which the installed
TensorFlow does not let a caller change: its gRPC server adds the wildcard ``0.0.0.0:<port>``
(tensorflow/tensorflow ``tensorflow/core/distributed_runtime/rpc/grpc_server_lib.cc``) and its
profiler server ``[::]:<port>`` (tensorflow/tensorflow
``tensorflow/core/profiler/rpc/profiler_server.cc``; ``tf.profiler.experimental.server.start``
takes only a port); the README's *Distributed
training* says what that means.

Environment of worker ``i`` (besides ``TF_CONFIG``, which TensorFlow's
``TFConfigClusterResolver`` reads):

- ``PROFILER_PORT_VAR``: the port of its ``tf.profiler.experimental.server``;
- ``TRACE_DONE_VAR``: a file the chief (worker 0) writes when its trace of all workers has
  ended; every worker waits for it (bounded) after its window, at the same step, so no worker
  leaves while the trace still reads it, and none waits in a collective;
- worker 0 only: ``TRACE_SERVICES_VAR`` (``grpc://127.0.0.1:p0,grpc://127.0.0.1:p1``, the
  argument of ``tf.profiler.experimental.client.trace``), ``TRACE_LOGDIR_VAR`` (the merged
  profile run) and ``TRACE_MS_VAR`` (the trace's duration, ms).
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import socket
from collections.abc import Mapping, Sequence

from rnndoctor.facts import Facts, StrategyFacts, WorkerFacts

LOOPBACK = "127.0.0.1"
# Marks a capture child's environment (its descendants inherit it): the check's processes, found
# by it at teardown (rnndoctor/cli/supervisor.py) and, under --workers, where all the workers
# carry one marker, counted as the job's own CPU by each worker's load sampler
# (rnndoctor/machine.py: job_cpu_s).
RUN_ID_VAR = "RNNDOCTOR_RUN_ID"
PROFILER_PORT_VAR = "RNNDOCTOR_PROFILER_PORT"
TRACE_DONE_VAR = "RNNDOCTOR_TRACE_DONE"
TRACE_SERVICES_VAR = "RNNDOCTOR_TRACE_SERVICES"
TRACE_LOGDIR_VAR = "RNNDOCTOR_TRACE_LOGDIR"
TRACE_MS_VAR = "RNNDOCTOR_TRACE_MS"
WORKER_FACTS = "facts-worker-{}.json"  # each worker's facts, next to the merged report
JOB_FILE = "job.json"  # the chief's start announcement of a launched job: {"job": job_id(...)}
# a worker started by the user's own launcher (TF_CONFIG set, no --workers): its profiler port
PROFILER_PORTS_VAR = "RNNDOCTOR_PROFILER_PORTS"  # one per task, in task order, comma-separated
PROFILER_OFFSET_VAR = "RNNDOCTOR_PROFILER_PORT_OFFSET"  # else: its TF_CONFIG port + this
PROFILER_OFFSET = 1000
MERGE_WAIT_VAR = "RNNDOCTOR_MERGE_WAIT_S"  # how long the chief waits for the others' facts
MERGE_WAIT_S = 60.0
# the chief's word after a launched job's attempt, which the other workers wait for:
# {"job": the attempt's job id, "again": the next attempt's job id or null, "why": text}
WORD_FILE = "attempt.json"
# the signals of a crash in native code (a negative exit status; faulthandler re-raises them)
NATIVE_CRASH_SIGNALS = (
    signal.SIGSEGV, signal.SIGABRT, signal.SIGBUS, signal.SIGILL, signal.SIGFPE,
)  # fmt: skip
# the WorkerFacts fields that the chief's trace fills (StrategyFacts.traced)
_TRACED_FIELDS = (
    "traced_host", "traced_ms", "collective_ms", "input_ms", "compute_ms",
    "outside_collectives_ms", "input_bound_share",
)  # fmt: skip


def free_ports(count: int) -> list[int]:
    """``count`` distinct TCP ports free on ``LOOPBACK`` now (the kernel's choice).

    All sockets stay open until every port is chosen, so the kernel never hands one out twice.

    Raises:
        OSError: a socket cannot be bound.
    """
    sockets = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind((LOOPBACK, 0))
            sockets.append(s)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def tf_config(ports: Sequence[int], index: int) -> str:
    """``TF_CONFIG`` of worker ``index`` in a cluster of ``len(ports)`` workers on
    ``LOOPBACK`` (worker 0 is the chief, as TensorFlow's multi-worker guide has it)."""
    workers = [f"{LOOPBACK}:{p}" for p in ports]
    return json.dumps({"cluster": {"worker": workers}, "task": {"type": "worker", "index": index}})


def trace_services(profiler_ports: Sequence[int], hosts: Sequence[str] | None = None) -> str:
    """The service addresses ``tf.profiler.experimental.client.trace`` takes for all workers
    (``hosts``: one per port, ``LOOPBACK`` when not given)."""
    hosts = hosts or [LOOPBACK] * len(profiler_ports)
    return ",".join(f"grpc://{h}:{p}" for h, p in zip(hosts, profiler_ports, strict=True))


def worker_environment(
    index: int, profiler_ports: Sequence[int], hosts: Sequence[str], out: str, trace_ms: int
) -> dict[str, str]:
    """The variables the capture of worker ``index`` reads (this module's docstring): its
    profiler port, the trace-done file under ``<out>/workers/``, and for worker 0 the trace of
    all workers into ``<out>/profile``. ``trace_ms``: the trace's duration, ms."""
    env = {
        PROFILER_PORT_VAR: str(profiler_ports[index]),
        TRACE_DONE_VAR: os.path.join(out, "workers", "trace.done"),
    }
    if index == 0:
        env[TRACE_SERVICES_VAR] = trace_services(profiler_ports, hosts)
        env[TRACE_LOGDIR_VAR] = os.path.join(out, "profile")
        env[TRACE_MS_VAR] = str(trace_ms)
    return env


@dataclasses.dataclass(frozen=True)
class LaunchedTask:
    """This process's place in a cluster its ``TF_CONFIG`` describes (the user's launcher).

    Attributes:
        index: the task's worker index: the chief is 0 and ``worker`` ``i`` is ``i + 1`` when
            the cluster has a ``chief``, else ``worker`` ``i`` is ``i`` (TensorFlow's order:
            ``id_in_cluster`` in ``tensorflow/python/distribute/multi_worker_util.py``).
        hosts: each task's host, in index order; ``ports``: each task's ``TF_CONFIG`` port.
    """

    index: int
    hosts: tuple[str, ...]
    ports: tuple[int, ...]

    @property
    def count(self) -> int:
        return len(self.hosts)


def launched_task(environ: Mapping[str, str]) -> LaunchedTask | None:
    """The task of a multi-worker ``TF_CONFIG`` in ``environ``; None without one, for a
    cluster of one task, or a task that is neither ``chief`` nor ``worker``.

    Raises:
        ValueError: ``TF_CONFIG`` is not JSON, or an address has no ``host:port``.
    """
    text = environ.get("TF_CONFIG")
    if not text:
        return None
    config = json.loads(text)
    spec, task = config.get("cluster") or {}, config.get("task") or {}
    addresses = list(spec.get("chief") or []) + list(spec.get("worker") or [])
    kind, number = task.get("type"), int(task.get("index", 0))
    if len(addresses) < 2 or kind not in ("chief", "worker"):
        return None
    index = number + (1 if kind == "worker" and spec.get("chief") else 0)
    hosts, ports = zip(*(_host_port(a) for a in addresses), strict=True)
    return LaunchedTask(index=index, hosts=tuple(hosts), ports=tuple(ports))


def in_multi_worker_job(environ: Mapping[str, str]) -> bool:
    """This process is one task of several: a worker of ``--workers`` or of a launched job
    (``TRACE_DONE_VAR``, which the CLI sets for each), or a ``TF_CONFIG`` whose cluster has more
    than one task of any kind. An unreadable ``TF_CONFIG`` counts as one: nothing rules a
    cluster out. Read by the probes (``rnndoctor/capture/probes.py``: no probe is skipped for a
    cluster) and the run-on after the window (``rnndoctor/capture/after_window.py``)."""
    if environ.get(TRACE_DONE_VAR):
        return True
    text = environ.get("TF_CONFIG")
    if not text:
        return False
    try:
        spec = json.loads(text).get("cluster") or {}
        return sum(len(v) for v in spec.values() if isinstance(v, list)) > 1
    except (ValueError, AttributeError):
        return True


def job_id(task: LaunchedTask, token: str) -> str:
    """The id of one run of a launched job: its cluster (every task's ``host:port``, in index
    order, as each worker reads it from ``TF_CONFIG``) and the chief's per-run ``token`` (a
    random hex string it announces in ``<out>/JOB_FILE`` when it starts). A worker copies the
    announced id into its facts (``RunInfo.job_id``) and the chief merges only the facts that
    carry its own: no clock is compared, so hosts with skewed clocks do not drop a worker."""
    cluster = ",".join(f"{h}:{p}" for h, p in zip(task.hosts, task.ports, strict=True))
    return f"{cluster}#{token}"


def launched_crash(workers: Sequence[Facts | None]) -> tuple[int, int] | None:
    """The worker of a launched job whose crash makes the workers run once more (its index
    and exit status, minus the signal): the first whose capture a crash in native code ended
    (``RunInfo.exit_status`` is minus one of ``NATIVE_CRASH_SIGNALS``), when every worker's
    facts are there and every worker that did not crash that way ended with status 0 (where
    two crashed, the first is named). Else None: a worker whose facts are missing cannot be
    told to run again, and where another worker failed in another way, the crash may be the
    consequence (TensorFlow may abort a worker left in a broken collective) rather than the
    cause.

    The crash it is for is TensorFlow's own, and how often it comes depends on the machine's
    state (:func:`rnndoctor.cli.workers.native_crash` for ``--workers``): the profiler server
    crashing a worker when the chief's trace of the workers ends, after every worker's window
    (``double free or corruption``, ``free(): invalid pointer``, a segmentation fault); the
    other workers' captures then complete."""
    if not workers or any(f is None for f in workers):
        return None
    crashes = {-int(s) for s in NATIVE_CRASH_SIGNALS}
    statuses = [f.run.exit_status if f is not None else None for f in workers]
    crashed = [(i, status) for i, status in enumerate(statuses) if status in crashes]
    others = [status for status in statuses if status not in crashes]
    if not crashed or any(status != 0 for status in others):
        return None
    return crashed[0]


def _host_port(address: str) -> tuple[str, int]:
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"TF_CONFIG address {address!r} is not host:port")
    return host, int(port)


def profiler_ports(task: LaunchedTask, environ: Mapping[str, str]) -> list[int]:
    """Every task's profiler server port: ``PROFILER_PORTS_VAR`` (one per task, in index
    order), else each task's ``TF_CONFIG`` port plus ``PROFILER_OFFSET_VAR`` (default
    ``PROFILER_OFFSET``). Every worker derives the same list, so no worker needs another's word.

    Raises:
        ValueError: the list has the wrong length, or a port is outside 1..65535.
    """
    given = environ.get(PROFILER_PORTS_VAR)
    if given:
        ports = [int(p) for p in given.split(",") if p.strip()]
        if len(ports) != task.count:
            raise ValueError(f"{PROFILER_PORTS_VAR} has {len(ports)} ports for {task.count} tasks")
    else:
        offset = int(environ.get(PROFILER_OFFSET_VAR) or PROFILER_OFFSET)
        ports = [p + offset for p in task.ports]
    if any(not 0 < p < 65536 for p in ports):
        raise ValueError(f"profiler port out of range: {ports} (set {PROFILER_PORTS_VAR})")
    return ports


def worker_of(facts: Facts | None, index: int, facts_file: str) -> WorkerFacts:
    """Worker ``index``'s row: its capture's own :class:`WorkerFacts`, else one made from how
    its run ended (a worker that failed before its strategy was seen)."""
    strategy = facts.strategy if facts is not None else None
    if strategy is not None and strategy.per_worker:
        row = dataclasses.replace(strategy.per_worker[0], index=index, facts_file=facts_file)
    else:
        row = WorkerFacts(index=index, task=f"worker:{index}", facts_file=facts_file)
    if facts is None:
        row.outcome, row.message = "no facts", "the worker saved no readable facts"
        return row
    row.outcome = str(facts.run.outcome)
    row.message = facts.run.message
    if facts.steps is not None and row.median_step_time_ms is None:
        row.median_step_time_ms = facts.steps.median_step_time_ms
        row.step_time_ms = list(facts.steps.step_time_ms)
    return row


def failed_worker(workers: Sequence[Facts | None]) -> int | None:
    """The worker whose run a merge reports (:func:`merge`): the first that failed
    (``Outcome.failed``), else the first that did not complete; None when all completed."""
    ended = [(i, f.run.outcome) for i, f in enumerate(workers) if f is not None]
    failed = [i for i, o in ended if o.failed]
    unfinished = [i for i, o in ended if str(o) != "completed"]
    return (failed or unfinished or [None])[0]


def separate_trainings(workers: Sequence[Facts | None]) -> bool:
    """Whether a multi-worker check's workers were separate trainings, not one job: no worker's
    capture saw a ``tf.distribute`` strategy, and at least one measured its window (so the
    script ran far enough to have built one). Ask before :func:`merge`, which gives the base
    facts a "not seen" strategy."""
    ran = [f for f in workers if f is not None]
    return not any(f.strategy is not None for f in ran) and any(f.steps for f in ran)


def _no_strategy(workers: Sequence[Facts | None]) -> str:
    """Why the merged facts have no strategy: the chief's capture saw none; where no worker's
    did and at least one measured its window, that the job was not one job: without a
    ``tf.distribute`` strategy Keras trains a separate copy of the model in each worker
    (``TF_CONFIG`` alone distributes nothing; ``tf.distribute.MultiWorkerMirroredStrategy``
    reads it), so each worker's step time also holds the other workers' competing for the
    machine."""
    if not separate_trainings(workers):
        return "the chief's capture saw no tf.distribute strategy"
    return (
        f"no worker's capture saw a tf.distribute strategy: the {len(workers)} workers each "
        "trained a separate copy of the model (TF_CONFIG alone distributes nothing), not one "
        "job, and each one's steps shared the machine with the others; check the script "
        "without --workers, or build and train the model under "
        "tf.distribute.MultiWorkerMirroredStrategy"
    )


def merge(workers: Sequence[Facts | None], files: Sequence[str]) -> Facts | None:
    """One report's facts from the workers' facts (None: a worker saved none).

    The chief's facts (worker 0's, else the first worker's that exist) are the base; its
    ``strategy.per_worker`` becomes one row per worker (:func:`worker_of`). A worker whose run
    failed while the base completed makes the merged run the failed one's outcome, so the exit
    code says so. Returns None when no worker saved facts.
    """
    base_index = next((i for i, f in enumerate(workers) if f is not None), None)
    if base_index is None:
        return None
    base = workers[base_index]
    rows = [worker_of(f, i, files[i]) for i, f in enumerate(workers)]
    strategy = base.strategy or StrategyFacts("not seen", not_measured=_no_strategy(workers))
    for traced in strategy.traced:  # the chief's trace figures, per worker
        if 0 <= traced.index < len(rows):
            for name in _TRACED_FIELDS:
                setattr(rows[traced.index], name, getattr(traced, name))
    strategy.per_worker = rows
    strategy.workers = max(strategy.workers, len(workers))
    base.strategy = strategy
    index = failed_worker(workers)
    failed = workers[index] if index is not None else None
    if failed is not None and failed is not base and str(base.run.outcome) == "completed":
        run, other = base.run, failed.run
        run.outcome, run.message = other.outcome, other.message
        run.error_type, run.error_location = other.error_type, other.error_location
    base.run.notes.append(
        f"merged from {len(workers)} workers ({', '.join(files)}); the report's other sections "
        f"are worker {base_index}'s"
    )
    return base
