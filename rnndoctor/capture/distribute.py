"""``tf.distribute``: the strategy a check's training runs under, as :class:`StrategyFacts`.

:func:`install` runs before the user's script. It wraps the two ways a dataset is handed to a
strategy, ``Strategy.experimental_distribute_dataset`` and
``Strategy.distribute_datasets_from_function`` (``tensorflow/python/distribute/
distribute_lib.py``, class ``StrategyBase``), to record who called them (the user's own line, or
Keras: ``fit`` distributes its dataset itself, ``keras/src/trainers/epoch_iterator.py`` and
``keras/src/backend/tensorflow/trainer.py``), the strategy and the dataset.

:func:`collect` runs at the end of the diagnosis (:func:`rnndoctor.capture.diagnosis.finish`)
and fills ``facts.strategy`` when the model, its optimizer or a distributed dataset belongs to a
strategy other than TensorFlow's default one: the public strategy name, replicas and workers
(``TF_CONFIG``'s cluster through the strategy's cluster resolver), the global and per-replica
batch, the all-reduce implementation, the auto-shard policy and what it resolves to, and this
process's :class:`WorkerFacts`.

:func:`record_fit_failure` recognises Keras 3's ``fit`` failing under
``MultiWorkerMirroredStrategy`` before its first step (keras-team/keras#20585,
tensorflow/tensorflow#72388) from the exception itself: a ``ValueError`` "Attempt to convert a
value (PerReplica..." raised below the installed Keras' ``_maybe_symbolic_build``
(``keras/src/backend/tensorflow/trainer.py``). Nothing is decided from a version number.
"""

from __future__ import annotations

import functools
import os
import shutil
import socket
import sys
import tempfile
import threading
import time
import traceback
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rnndoctor import cluster
from rnndoctor.capture import conversion, sites
from rnndoctor.capture.budget import Budget, Overrun, run_bounded
from rnndoctor.facts import (
    KerasFitFailure,
    Outcome,
    Phase,
    SourceLocation,
    StrategyFacts,
    WorkerFacts,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    from rnndoctor.capture.session import CaptureSession

# The public names, most specific first (MultiWorkerMirroredStrategy is
# CollectiveAllReduceStrategy, tensorflow/python/distribute/collective_all_reduce_strategy.py).
_PUBLIC_STRATEGIES = (
    "MultiWorkerMirroredStrategy", "MirroredStrategy", "OneDeviceStrategy", "TPUStrategy",
    "ParameterServerStrategy", "CentralStorageStrategy",
)  # fmt: skip
_DISTRIBUTE_METHODS = ("experimental_distribute_dataset", "distribute_datasets_from_function")
_HOOK_ATTR = "_rnndoctor_distribute_session"  # the session the hooks record into, on the class
# Keras 3's fit failure under MultiWorkerMirroredStrategy (see the module docstring).
_FIT_FAILURE_FUNCTION = "_maybe_symbolic_build"
_FIT_FAILURE_FILE = os.path.join("backend", "tensorflow", "trainer.py")
_FIT_FAILURE_TEXT = "Attempt to convert a value (PerReplica"
_FILE_SOURCES = ("files",)  # DataFacts.source_kinds of a pipeline that reads files


@dataclass
class DistributeState:
    """What the dataset-distribution hooks saw in one check.

    Attributes:
        calls: ``(method, caller, location, strategy, dataset)`` per call: ``caller`` is
            ``user`` or ``keras``; ``dataset`` is None for ``distribute_datasets_from_function``.
    """

    calls: list[tuple[str, str, SourceLocation | None, Any, Any]] = field(default_factory=list)
    fit_failure: tuple[BaseException, str, int, Any] | None = None  # exc, file, line, model
    window_ended: bool = False  # the wait for the chief's trace is over
    trace: Any = None  # the chief's trace thread (threading.Thread), once started
    trace_error: str | None = None
    profiler_error: str | None = None


def install(session: CaptureSession) -> None:
    """Wraps ``StrategyBase.experimental_distribute_dataset`` and
    ``distribute_datasets_from_function`` (once per process) to record into ``session``."""
    from tensorflow.python.distribute import distribute_lib

    base = distribute_lib.StrategyBase
    session.distribute_state = DistributeState()
    if getattr(base, _HOOK_ATTR, None) is None:
        for name in _DISTRIBUTE_METHODS:
            setattr(base, name, _wrap(getattr(base, name), name))
    setattr(base, _HOOK_ATTR, session)
    _hook_symbolic_build()
    port = os.environ.get(cluster.PROFILER_PORT_VAR)
    if port:  # a worker of --workers: serve the chief's trace
        try:
            import tensorflow as tf

            tf.profiler.experimental.server.start(int(port))
        except Exception as exc:
            session.distribute_state.profiler_error = f"{type(exc).__name__}: {exc}"[:300]
        if os.environ.get(cluster.TRACE_SERVICES_VAR):
            session.phase_listeners.append(functools.partial(_on_phase, session))


def _hook_symbolic_build() -> None:
    """Wraps the installed Keras 3's ``TensorFlowTrainer._maybe_symbolic_build`` (once per
    process), where its multi-worker ``fit`` fails: the failure is caught there, inside Keras'
    own traceback filtering (``keras/src/utils/traceback_utils.py`` drops Keras' frames from
    the traceback ``fit`` raises), with the frame that raised it."""
    try:
        from keras.src.backend.tensorflow.trainer import TensorFlowTrainer
    except ImportError:  # another Keras layout: the failure is not recognised, never faked
        return
    original = getattr(TensorFlowTrainer, _FIT_FAILURE_FUNCTION, None)
    if original is None or getattr(original, _HOOK_ATTR, False):
        return
    from tensorflow.python.distribute import distribute_lib

    @functools.wraps(original)
    def symbolic_build(self, *args, **kwargs):
        try:
            return original(self, *args, **kwargs)
        except ValueError as exc:
            session = getattr(distribute_lib.StrategyBase, _HOOK_ATTR, None)
            frame = fit_failure_frame(exc)
            if session is not None and session.distribute_state is not None and frame:
                session.distribute_state.fit_failure = (exc, frame[0], frame[1], self)
            raise

    setattr(symbolic_build, _HOOK_ATTR, True)
    setattr(TensorFlowTrainer, _FIT_FAILURE_FUNCTION, symbolic_build)


def _wrap(original: Any, name: str) -> Any:
    @functools.wraps(original)
    def distribute(self, dataset_or_fn, *args, **kwargs):
        session = getattr(type(self), _HOOK_ATTR, None)
        if session is not None and session.distribute_state is not None:
            caller = sys._getframe(1).f_code.co_filename
            who = "user" if sites.is_user_file(caller) else "keras"
            location = sites.user_frame_location(skip=1, call_names=(name,))
            dataset = dataset_or_fn if name == "experimental_distribute_dataset" else None
            session.distribute_state.calls.append((name, who, location, self, dataset))
        return original(self, dataset_or_fn, *args, **kwargs)

    return distribute


def strategy_of(session: CaptureSession, model: Any) -> Any:
    """The non-default strategy the training ran under, or None: the model's
    (``Model.distribute_strategy``), else its optimizer's, else a distributed dataset's."""
    import tensorflow as tf

    candidates = [getattr(model, "distribute_strategy", None)]
    optimizer = getattr(model, "optimizer", None)
    candidates.append(getattr(optimizer, "_distribution_strategy", None))
    state = session.distribute_state
    candidates += [call[3] for call in (state.calls if state else [])]
    default = tf.distribute.get_strategy() if not tf.distribute.has_strategy() else None
    for strategy in candidates:
        if strategy is None or not isinstance(strategy, tf.distribute.Strategy):
            continue
        if default is not None and strategy is default:
            continue
        if type(strategy).__name__.startswith("_Default"):
            continue
        return strategy
    return None


def _public_name(strategy: Any) -> str:
    import tensorflow as tf

    for name in _PUBLIC_STRATEGIES:
        cls = getattr(tf.distribute, name, None) or getattr(tf.distribute.experimental, name, None)
        if isinstance(cls, type) and isinstance(strategy, cls):
            return name
    return type(strategy).__name__


def _cluster(strategy: Any) -> tuple[int, str | None, int | None]:
    """``(workers, task_type, task_id)`` from the strategy's cluster resolver (``TF_CONFIG``)."""
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None:
        return 1, None, None
    try:
        spec = resolver.cluster_spec().as_dict()
    except Exception:
        spec = {}
    workers = sum(len(spec.get(job, ())) for job in ("chief", "worker")) or 1
    task_id = getattr(resolver, "task_id", None)
    return (
        workers,
        getattr(resolver, "task_type", None),
        task_id if task_id is None else int(task_id),
    )


def _communication(strategy: Any) -> tuple[str | None, str | None]:
    """``(implementation, cross-device ops class)``: ``RING`` / ``NCCL`` / ``AUTO`` from the
    strategy's (or its collective ops') ``CommunicationOptions``."""
    extended = getattr(strategy, "extended", None)
    ops = getattr(extended, "_cross_device_ops", None) or getattr(
        extended, "_inferred_cross_device_ops", None
    )
    options = getattr(extended, "_communication_options", None) or getattr(ops, "_options", None)
    implementation = getattr(options, "implementation", None)
    name = getattr(implementation, "name", None)
    return name, type(ops).__name__ if ops is not None else None


def _batch_of(dataset: Any) -> int | None:
    """The constant batch size of a tf.data pipeline's last batch op, or None."""
    while dataset is not None:
        value = getattr(dataset, "_batch_size", None)
        if value is not None:
            try:
                return int(value)
            except (TypeError, ValueError):
                return None
        dataset = getattr(dataset, "_input_dataset", None)
    return None


def _shard_policy(dataset: Any) -> str | None:
    try:
        return dataset.options().experimental_distribute.auto_shard_policy.name
    except Exception:
        return None


def resolve_auto_shard(policy: str | None, workers: int, reads_files: bool | None) -> tuple:
    """``(resolved, reason)``: what tf.data's auto-shard rewrite does with ``policy`` for
    ``workers`` input workers (``tensorflow/python/distribute/input_ops.py``:
    ``auto_shard_dataset`` shards only when there is more than one input worker and the policy is
    not OFF; ``tensorflow/core/grappler/optimizers/data/auto_shard.cc``: AUTO shards by FILE
    when the pipeline reads files, else falls back to DATA)."""
    if policy is None:
        return None, "the dataset's options could not be read"
    if policy == "OFF":
        return "OFF", "auto-shard policy OFF: every worker reads the whole dataset"
    if workers <= 1:
        return "OFF", "one input worker: nothing is sharded (the batch is split across replicas)"
    if policy in ("FILE", "DATA"):
        return policy, f"auto-shard policy {policy}, as set"
    if policy == "HINT":
        return "DATA", "HINT shards where the pipeline calls shard(SHARD_HINT); DATA otherwise"
    if reads_files:
        return "FILE", "AUTO on a pipeline that reads files: each worker reads its own files"
    if reads_files is None:
        return None, "AUTO: the pipeline's source is unknown (FILE if it reads files, else DATA)"
    return "DATA", "AUTO on a pipeline that reads no files: every worker reads all the data"


def _dataset_facts(session: CaptureSession) -> tuple[Any, Any]:
    """``(DataFacts, dataset)`` of the training data: ``facts.data`` for ``fit``, else the
    dataset the user distributed (described here, not stored in ``facts.data``)."""
    calls = session.distribute_state.calls if session.distribute_state else []
    dataset = next((c[4] for c in reversed(calls) if c[4] is not None), None)
    if session.facts.data is not None:
        return session.facts.data, session.probe_state.original_x or dataset
    if dataset is None:
        return None, None
    from rnndoctor.capture import data

    try:
        return data.describe(dataset), dataset
    except Exception:
        return None, dataset


def collect(session: CaptureSession, model: Any) -> None:
    """Fills ``session.facts.strategy`` when the training ran under a non-default strategy;
    a failure becomes ``StrategyFacts.not_measured`` or a note, never a failed check."""
    try:
        strategy = strategy_of(session, model)
        if strategy is None:
            return
        session.facts.strategy = describe(session, strategy, model)
    except Exception as exc:  # the strategy facts are a nicety: never end the capture
        session.facts.run.notes.append(f"strategy facts failed: {type(exc).__name__}: {exc}")


def _gradient_bytes(model: Any) -> int | None:
    """Bytes of ``model``'s trainable variables (one gradient each, all-reduced every step)."""
    try:
        import tensorflow as tf

        return int(
            sum(
                int(np_size(v.shape)) * tf.as_dtype(v.dtype).size for v in model.trainable_variables
            )
        )
    except Exception:
        return None


def np_size(shape: Any) -> int:
    """The number of elements of a fully defined ``shape``."""
    size = 1
    for dim in shape:
        size *= int(dim)
    return size


def describe(session: CaptureSession, strategy: Any, model: Any = None) -> StrategyFacts:
    """The :class:`StrategyFacts` of ``strategy`` for this check's training (``model``: the
    trained model, for the gradient bytes)."""
    workers, task_type, task_id = _cluster(strategy)
    communication, ops = _communication(strategy)
    facts = StrategyFacts(
        strategy=_public_name(strategy),
        strategy_class=type(strategy).__name__,
        replicas=int(strategy.num_replicas_in_sync),
        workers=workers,
        task_type=task_type,
        task_id=task_id,
        communication=communication,
        cross_device_ops=ops,
        gradient_bytes=_gradient_bytes(model) if model is not None else None,
    )
    data_facts, dataset = _dataset_facts(session)
    fit = session.facts.fit
    facts.global_batch_size = (fit.batch_size if fit else None) or _batch_of(dataset)
    if facts.global_batch_size and facts.replicas:
        facts.per_replica_batch_size = facts.global_batch_size // facts.replicas
    calls = session.distribute_state.calls if session.distribute_state else []
    user = next((c for c in calls if c[1] == "user"), None)
    if user is not None:
        facts.distributed_by, facts.distribute_location = user[0], user[2]
    elif calls:
        facts.distributed_by = "keras"
    facts.dataset_location = data_facts.location if data_facts else None
    if dataset is not None and hasattr(dataset, "options"):
        facts.auto_shard_policy = _shard_policy(dataset)
        kinds = data_facts.source_kinds if data_facts else None
        reads = None if kinds is None else any(k in _FILE_SOURCES for k in kinds)
        facts.auto_shard_resolved, facts.auto_shard_reason = resolve_auto_shard(
            facts.auto_shard_policy, workers, reads
        )
    facts.per_worker = [worker_facts(session, task_type, task_id)]
    trace_facts(session, facts)
    if session.distribute_state and session.distribute_state.profiler_error:
        facts.not_measured = f"profiler server: {session.distribute_state.profiler_error}"
    return facts


def worker_facts(
    session: CaptureSession, task_type: str | None, task_id: int | None
) -> WorkerFacts:
    """This process's :class:`WorkerFacts` from its step times and probes."""
    facts = session.facts
    steps, probes = facts.steps, facts.probes
    breakdown = probes.breakdown if probes else None
    worker = WorkerFacts(
        index=int(task_id or 0) + (1 if task_type == "worker" and _has_chief() else 0),
        task=f"{task_type}:{task_id}" if task_type else "local",
        host=socket.gethostname(),
        median_step_time_ms=steps.median_step_time_ms if steps else None,
        step_time_ms=list(steps.step_time_ms) if steps else [],
        input_bound_share=probes.input_bound_share if probes else None,
        outcome=str(facts.run.outcome),
    )
    if breakdown is not None:
        worker.input_ms, worker.compute_ms = breakdown.input_ms, breakdown.compute_ms
        worker.outside_collectives_ms = round(breakdown.input_ms + breakdown.compute_ms, 3)
    return worker


def _has_chief() -> bool:
    import json

    try:
        return bool(json.loads(os.environ.get("TF_CONFIG", "{}")).get("cluster", {}).get("chief"))
    except ValueError:
        return False


def fit_failure_frame(exc: BaseException) -> tuple[str, int] | None:
    """``(file, line)`` of the installed Keras' ``_maybe_symbolic_build`` frame when ``exc`` is
    Keras 3's ``fit`` failure under a multi-worker strategy (the module docstring), else None.
    ``exc``'s traceback must hold that frame (it does inside Keras' traceback filtering)."""
    if not isinstance(exc, ValueError) or _FIT_FAILURE_TEXT not in str(exc):
        return None
    for frame, line in traceback.walk_tb(exc.__traceback__):
        code = frame.f_code
        if code.co_name == _FIT_FAILURE_FUNCTION and code.co_filename.endswith(_FIT_FAILURE_FILE):
            return code.co_filename, line
    return None


def record_fit_failure(session: CaptureSession, exc: BaseException) -> bool:
    """When ``exc`` is Keras 3's multi-worker ``fit`` failure, records it as
    ``StrategyFacts.fit_failure`` (with the strategy's facts), marks the run completed (the
    diagnosis is that failure: RD706 reports it) and returns True; else returns False."""
    state = session.distribute_state
    caught = state.fit_failure if state is not None else None
    if caught is None or caught[0] is not exc:
        return False
    _, file, line, model = caught
    frame = (file, line)
    import keras

    strategy = strategy_of(session, model)
    facts = describe(session, strategy, model) if strategy is not None else StrategyFacts("unknown")
    facts.fit_failure = KerasFitFailure(
        message=f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0]}"[:500],
        keras_file=os.path.relpath(frame[0], os.path.dirname(os.path.dirname(keras.__file__))),
        keras_function=_FIT_FAILURE_FUNCTION,
        keras_line=frame[1],
        location=session.facts.fit.location if session.facts.fit else None,
        keras_version=getattr(keras, "__version__", None),
    )
    session.facts.strategy = facts
    run = session.facts.run
    run.outcome = Outcome.COMPLETED
    run.notes.append(
        "Keras' fit failed under the strategy before its first step (RD706): no step was "
        "measured; the finding says why and the ways out"
    )
    session.window_finished = True
    session.set_phase(Phase.DONE)
    return True


# -- the chief's trace of all workers (``--workers``) -------------------------------------------
# framework_op_stats op types: the collectives (tensorflow/core/ops/collective_ops.cc,
# nccl_ops.cc) and the input pipeline's (tf.data's own ops, the iterator's, py_function).
_COLLECTIVE_PREFIXES = ("Collective", "Nccl", "AllReduce")
_INPUT_PREFIXES = ("Dataset", "Iterator", "MultiDeviceIterator", "EagerPyFunc", "PyFunc")


def _split(totals: dict[str, tuple[float, int]]) -> tuple[float, float, float]:
    """``(collective_us, input_us, compute_us)`` of one host's op totals."""
    collective = sum(us for t, (us, _) in totals.items() if t.startswith(_COLLECTIVE_PREFIXES))
    inputs = sum(us for t, (us, _) in totals.items() if t.startswith(_INPUT_PREFIXES))
    return collective, inputs, sum(us for us, _ in totals.values()) - collective - inputs


def traced_rows(
    facts: StrategyFacts,
    files: list[str],
    services: str,
    scratch: str | None = None,
    cancelled: Callable[[], bool] = lambda: False,
) -> None:
    """Per worker, from its host's xplane file in the merged run: ``facts.traced`` and
    ``facts.collective_share`` (a file ``<host>_<port>.xplane.pb`` is the worker whose address
    is ``grpc://<host>:<port>`` in ``services``, in worker order; else the one with that port).
    ``scratch``: the folder for the files' copies (``profile.host_op_times``); ``cancelled()``
    true: no further host is started (a caller that stopped waiting)."""
    from rnndoctor.capture.profile import host_op_times

    addresses = [s.split("://", 1)[-1] for s in services.split(",") if s]
    names = [a.replace(":", "_") for a in addresses]  # the file of grpc://h:p is h_p.xplane.pb
    ports = [a.rsplit(":", 1)[-1] for a in addresses]
    duration = float(os.environ.get(cluster.TRACE_MS_VAR, "0") or 0) or None
    busy = collective_all = 0.0
    for path in files:
        host = os.path.basename(path)[: -len(".xplane.pb")]
        port = host.rsplit("_", 1)[-1]
        if cancelled():
            break
        if host not in names and port not in ports:
            continue
        index = names.index(host) if host in names else ports.index(port)
        try:
            collective, inputs, compute = _split(host_op_times(path, scratch))
        except Exception as exc:
            facts.not_measured = f"op stats of {host}: {type(exc).__name__}: {exc}"[:300]
            continue
        total = collective + inputs + compute
        busy, collective_all = busy + total, collective_all + collective
        facts.traced.append(
            WorkerFacts(
                index=index,
                task=f"worker:{index}",
                traced_host=host,
                traced_ms=duration,
                collective_ms=round(collective / 1000, 3),
                input_ms=round(inputs / 1000, 3),
                compute_ms=round(compute / 1000, 3),
                outside_collectives_ms=round((inputs + compute) / 1000, 3),
                input_bound_share=round(inputs / total, 4) if total else None,
            )
        )
    facts.traced.sort(key=lambda w: w.index)
    facts.collective_share = round(collective_all / busy, 4) if busy else None


_TRACE_PHASES = (Phase.MEASURED, Phase.LOOP_MEASURED)
_TRACE_WAIT_S = 30.0  # beyond the trace's duration, how long a worker waits for the chief's word


def _on_phase(session: CaptureSession, phase: Phase) -> None:
    """At the first measured step of the chief (worker 0), starts the trace of all workers in a
    thread: ``tf.profiler.experimental.client.trace(services, logdir, duration_ms)``."""
    state = session.distribute_state
    if phase not in _TRACE_PHASES or state.trace is not None:
        return
    services = os.environ[cluster.TRACE_SERVICES_VAR]
    logdir = os.environ.get(cluster.TRACE_LOGDIR_VAR, "")
    duration_ms = int(os.environ.get(cluster.TRACE_MS_VAR, "1000"))

    def trace() -> None:
        import tensorflow as tf

        try:
            tf.profiler.experimental.client.trace(services, logdir, duration_ms)
        except Exception as exc:
            state.trace_error = f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0]}"

    state.trace = threading.Thread(target=trace, name="rnndoctor trace", daemon=True)
    state.trace.start()


def window_ended(session: CaptureSession) -> None:
    """After the window, a worker of ``--workers`` waits for the chief's trace to end: the chief
    joins its trace thread and writes the ``TRACE_DONE_VAR`` file, the others wait for that file
    (bounded). Every worker stops at the same step, so none waits in a collective meanwhile.
    ``fit``'s window calls it after its last step, before ``fit`` ends (its iterator is still
    alive while the trace reads the worker); a custom loop's, from its last step; once."""
    done = os.environ.get(cluster.TRACE_DONE_VAR)
    state = session.distribute_state
    if not done or state is None or state.window_ended:
        return
    state.window_ended = True
    bound_s = int(os.environ.get(cluster.TRACE_MS_VAR, "1000")) / 1000 + _TRACE_WAIT_S
    if os.environ.get(cluster.TRACE_SERVICES_VAR):
        if state.trace is not None:
            state.trace.join(bound_s)
        with open(done, "w") as f:
            f.write(state.trace_error or "ok")
        return
    deadline = time.monotonic() + bound_s
    while not os.path.exists(done) and time.monotonic() < deadline:
        time.sleep(0.05)


# The least budget left for which the chief starts the merged trace's summary: the bundled
# demo's own profile took 1.0 s to convert on the 2-core development machine (README, "Overhead
# at 4956f45"), and a merged trace of several workers is larger. Source: that measurement.
_MIN_CONVERSION_S = 1.0


def trace_facts(session: CaptureSession, facts: StrategyFacts) -> None:
    """The chief's merged profile run: ``profile_logdir``, ``profile_hosts`` (one
    ``<host>.xplane.pb`` per worker), each worker's op stats (:func:`traced_rows`) and, where
    the chief's own profile gave none, ``session.facts.profile`` summarised from it. Both
    conversions share one ``"profile conversion"`` budget (``capture/budget.py: SHARES``), a
    second one after the chief's own conversion: xprof stuck on one host's file leaves
    ``not_measured`` and a cut-short phase, not a check held until ``--timeout``; a thread left
    behind by it runs on in the chief (one core at most) until the child exits. With less
    than :data:`_MIN_CONVERSION_S` of the budget left after the op stats, the merged summary
    is not started (a note says so). Exceptions of :func:`traced_rows` other than the overrun
    propagate (:func:`collect` records them)."""
    state = session.distribute_state
    logdir = os.environ.get(cluster.TRACE_LOGDIR_VAR)
    if state is None or not logdir or not os.environ.get(cluster.TRACE_SERVICES_VAR):
        return
    if state.trace is None:
        facts.not_measured = "the workers' trace did not start (no measured step)"
        return
    if state.trace_error:
        facts.not_measured = f"the workers' trace failed: {state.trace_error}"
        return
    import glob

    runs = sorted(glob.glob(os.path.join(logdir, "plugins", "profile", "*")))
    files = sorted(glob.glob(os.path.join(runs[-1], "*.xplane.pb"))) if runs else []
    facts.profile_logdir = os.path.abspath(logdir)
    facts.profile_hosts = [os.path.basename(f)[: -len(".xplane.pb")] for f in files]
    budget = session.budget("profile conversion")
    if not _traced_rows_bounded(session, facts, files, budget):
        return
    if files and session.facts.profile is None:
        left = budget.left()
        if left < _MIN_CONVERSION_S:
            session.facts.run.notes.append(
                f"profile not converted: {max(left, 0.0):.1f} s of the {budget.seconds:g} s "
                f"profile conversion budget left after the workers' op stats "
                f"({budget.seconds - left:.1f} s), under the {_MIN_CONVERSION_S:g} s a "
                "conversion is started with"
            )
            return
        conversion.convert_bounded(session, logdir, 0, budget)


def _traced_rows_bounded(
    session: CaptureSession, facts: StrategyFacts, files: list[str], budget: Budget
) -> bool:
    """:func:`traced_rows` in a thread joined with ``budget``'s time left, into a scratch
    :class:`StrategyFacts` copied into ``facts`` once it is done (a thread left behind never
    writes into the facts being saved). False when it ran past the budget.

    The files' copies go to a ``rnndoctor-hosts-*`` folder in the temporary directory, removed
    here and, by a thread left behind in xprof, once its host is done (it starts no other):
    whichever is last removes what the other could not. A child that exits while that thread
    is still in xprof leaves the folder. Without a temporary folder (``OSError``), the op
    stats are ``not_measured`` and the merged summary may still run."""
    scratch = StrategyFacts(strategy=facts.strategy)
    services = os.environ.get(cluster.TRACE_SERVICES_VAR, "")
    try:
        copies = tempfile.mkdtemp(prefix="rnndoctor-hosts-")
    except OSError as exc:
        facts.not_measured = f"the workers' op stats: no temporary folder: {exc}"[:300]
        return True
    stopped = threading.Event()  # the chief stopped waiting

    def rows() -> None:
        try:
            traced_rows(scratch, files, services, copies, stopped.is_set)
        finally:
            if stopped.is_set():  # left behind: what xprof wrote after the chief's removal
                shutil.rmtree(copies, ignore_errors=True)

    try:
        run_bounded(rows, budget)
    except Overrun:
        facts.not_measured = f"the workers' op stats: {Overrun.of(budget)}"
        session.cut_short(budget, "the xprof conversion of the workers' trace did not finish")
        return False
    finally:
        stopped.set()
        shutil.rmtree(copies, ignore_errors=True)
    facts.traced, facts.collective_share = scratch.traced, scratch.collective_share
    facts.not_measured = scratch.not_measured or facts.not_measured
    return True


_SPE_FAILURE = "InvalidArgumentError"  # the multi-step function's failure under a strategy


def spe_failure(model: Any, points: list[Any]) -> str | None:
    """Why the steps_per_execution probe measured nothing under a strategy, or None.

    Keras 3's multi-step train function (``multi_step_on_iterator`` in
    ``keras/src/backend/tensorflow/trainer.py``) calls ``strategy.run`` inside a ``tf.cond`` in
    a ``tf.while_loop``; under ``MirroredStrategy`` with several replicas that graph fails with
    ``InvalidArgumentError: You must feed a value for placeholder tensor
    '.../while/cond/Placeholder'`` (TF 2.21, Keras 3.15, measured here), and so does the
    user's own ``fit`` at any ``steps_per_execution`` above 1. Decided from the probe's own
    failure (``points``: ``ProbeFacts.spe_probe``), not from a version.
    """
    strategy = getattr(model, "distribute_strategy", None)
    replicas = int(getattr(strategy, "num_replicas_in_sync", 1) or 1)
    failed = next((p for p in points if p.value > 1 and _SPE_FAILURE in (p.stopped or "")), None)
    if failed is None or replicas <= 1:
        return None
    return (
        f"not measured: Keras' train function for steps_per_execution {failed.value} "
        f"(multi_step_on_iterator, keras/src/backend/tensorflow/trainer.py) fails under "
        f"{type(strategy).__name__} with {replicas} replicas ({_SPE_FAILURE}: a placeholder of "
        "strategy.run inside its tf.while_loop is never fed), so fit with steps_per_execution "
        "> 1 would fail the same way under this strategy"
    )
