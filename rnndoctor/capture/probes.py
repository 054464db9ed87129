"""Probes that isolate the input pipeline, the compute and the host overhead of a ``fit`` step.

Each probe measures one part of the user's real training step, on the user's own data and
model, after the diagnosis window (the README's "What happens during a check"):

- **input-only**: a fresh iterator over the user's data with no model (``sample_batches``,
  :mod:`rnndoctor.capture.sampling`). A Python generator passed to ``fit`` cannot be iterated
  twice: ``prepare_fit_data`` wraps it before ``fit`` runs, so that its batches are timed and
  kept as they flow through ``fit``.
- **compute-only**: training steps on up to ``K_BATCHES`` sampled batches cached in memory,
  with the element spec ``fit`` saw (so the traced train function is reused): Keras' own
  ``fit`` loop (``session.original_fit()``) runs them with a timing callback and no user
  callbacks. Where the data can be iterated again, short bursts of the same ``fit`` on the
  user's real data alternate with the cached bursts (``real_step_ms``). It is not run where
  the input-only probe of data held in memory already bounds the input wait under 1% of a
  step too long for the steps_per_execution probe, on one replica (:func:`_compute_skip`):
  then no finding could rest on it.
- **input-bound share**: ``real_step x (1 - 1 / r) / (real_step + callbacks)`` from the
  paired bursts (``r``: the median of the pairs' real / compute-only ratios), else
  ``(step - compute_only - callbacks) / step`` from the window's median step; cross-checked
  with ``input_only / step``. The :class:`~rnndoctor.facts.StepBreakdown` splits the window's
  median step.
- **batch-size probe**: compute-only samples/s at b, 2b and 4b (the same few cached batches,
  tiled along axis 0, at every point, so that the points differ in batch size only), bounded
  by its time budget and by memory (:mod:`rnndoctor.capture.memory`): before
  each point the extra memory it needs is estimated (at least its tiled batches; the working
  set per sample from the previous point's measured growth) and compared with the limit.
  Out-of-memory errors (``tf.errors.ResourceExhaustedError``, ``MemoryError``) stop the probe
  cleanly.
- **steps_per_execution probe**: compute-only at ``steps_per_execution`` 1 and 16, or, for a
  model compiled with N > 1, at 1 and N (:func:`_spe_values` says why).
- **sequence length probe**: compute-only at the sampled batches' padded length and at half
  of it (the model's one sequence input, and targets per timestep), each on its own train
  function; where a sequence input is padded as RD501 or RD502 can report (:func:`_length_skip`).
- **per-batch callbacks**: ``time_callbacks`` wraps each user callback's batch hooks.

The probes train the user's model further (the script is ended after the window and nothing is
saved); the model's ``steps_per_execution``, train function and ``history`` are restored.
Every probe is bounded by its phase budget (:mod:`rnndoctor.capture.budget`); a probe that runs
out records a :class:`~rnndoctor.facts.CutShort` and the next one still runs.
"""

from __future__ import annotations

import gc
import inspect
import os
import re
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from rnndoctor import cluster, dispatch, stats
from rnndoctor.capture import data as data_mod
from rnndoctor.capture import flavour, interleave, memory, pairs, sampling, sites
from rnndoctor.capture.budget import PAIRED_WALL_S, Budget, paired_left
from rnndoctor.capture.pairs import Burst
from rnndoctor.capture.sampling import Batches
from rnndoctor.capture.step_window import read_back
from rnndoctor.facts import (
    COMPUTE_SKIPPED_FOR_INPUT_BOUND,
    CONSISTENCY_FLOOR,
    PROBE_NOT_MEASURED_FIELDS,
    PROBE_UNREAD,
    PROBES_NOT_RUN,
    CallbackTime,
    DataKind,
    Phase,
    ProbeFacts,
    ProbePoint,
    StepBreakdown,
)
from rnndoctor.paired import INTERVAL_PAIRS, paired_from_samples

if TYPE_CHECKING:
    from rnndoctor.capture.session import CaptureSession, ProbeState

__all__ = [
    "Batches",
    "callback_site",
    "collect_data",
    "install",
    "prepare_fit_data",
    "run_probes",
    "sample_batches",
    "time_callbacks",
    "untime_callbacks",
]

_POINT_WARMUP_STEPS = 1  # steps of a probe point that are not timed (tracing, iterator start)
_POINT_MIN_STEPS = 3  # timed intervals per probe point, at least...
_POINT_TARGET_S = 0.3  # ...and this much timed wall time, after the warm-up
_POINT_LONG_S = 1.0  # ...or, for long steps, this much timed wall time (one step or more)
_POINT_MAX_STEPS = 2000  # steps_per_epoch of a probe point's fit (the time target stops it)
# A burst of a paired comparison (rnndoctor.capture.pairs): at least 2 timed steps and this
# much timed time after its warm-up step. With the floor of 10 steps and 1 s per arm, that is
# about 5 pairs for most steps: enough for a bootstrap interval, few enough fit calls.
_PAIR_BURST_S = 0.2
# No more rounds once a real-data burst's set-up (its wall time beyond its timed steps and its
# untimed warm-up step) took this long: buffers filling, an adapter converting arrays. Its wall
# time alone would stop long steps after one round (3 steps of the demo's 0.7 s under load).
_PAIR_SLOW_START_S = 2.0
_PAIR_MAX_ARRAY_BYTES = 256 * 2**20  # arrays above this are not re-adapted by a second fit
# The compute-only probe interleaves the real and the cached step in one fit only where the
# input-only probe produced a batch in at most this share of the window's step (see
# _compute_only). Source: rnndoctor's choice: a producer twice as fast as its consumer.
_ONE_FIT_INPUT_SHARE = 0.5
_BATCH_FACTORS = (2, 4)  # the batch-size probe's points, times the user's batch size
_SPE_PROBE = 16  # steps_per_execution compared with 1
# The steps_per_execution probe retraces the train step inside a tf.while_loop (seconds for an
# LSTM). It is not run when the compute-only step is longer than this, for its cost: RD403 would
# need 20% of the step saved, here 5 ms of per-step dispatch, several times what Keras' fit loop
# cost per step where the probe measured it (about 1 ms for a 16-unit LSTM on CPU). Not run is
# not measured: RD403 is then not evaluated (rules/rd403_tiny_steps.py: _unmeasured).
_SPE_PROBE_MAX_STEP_MS = 25.0
# A model compiled with N > 1 steps per call is probed at 1 and N while one call of N steps takes
# at most this long. Source: the issue's floor of 1 s timed per arm (rnndoctor.paired
# .MIN_SECONDS): up to it, one timed call per burst reaches the floor in one or two bursts.
_SPE_MAX_CALL_S = 1.0
# The compute-only probe is not run where the input-only probe bounds the input wait below this
# share of the window's step (a fresh iterator produced a batch in at most 1% of the step, and
# the input rules count the input share only up to that bound: rules/_measured.py,
# corroborated_share), and where the window's train step is over twice _SPE_PROBE_MAX_STEP_MS
# at one step per call (the steps_per_execution probe, which needs the compute-only step, would
# not run either). Source: rnndoctor's choice, a fifth of the lowest cut-off of the input rules
# (RD201's min_input_share, 5%: xprof's kModeratelyInfeedBoundThresholdInPercent), so that no
# input finding can rest on what the probe would have measured.
_INPUT_BOUND_SKIP_SHARE = 0.01
# ... and only where the window timed at least this many steps: its median is what says the
# train step is long. Issue 11's floor for an arm of a comparison (10 timed steps); a corpus
# case's 3 steps (--steps 3), timed beside the corpus's other cases, read 63 ms where the
# batch-size probe then timed 1.8 ms a step at the same batch, and the probe was skipped.
_SKIP_MIN_STEPS = 10


# on keras.callbacks.Callback (and tf_keras.callbacks.Callback), once hooked
_CALLBACKS_HOOKED_ATTR = "_rnndoctor_sites_hooked"


def install(session: CaptureSession | None = None) -> None:
    """Installs the hooks the probes need before the user's script runs: where each tf.data
    dataset, ``PyDataset`` and Keras callback was built (the user's file:line). Idempotent.

    Args:
        session: the check's session, which then reads the construction sites these hooks
            record (``session.site_book``); None (:func:`rnndoctor.record_construction_sites`,
            before any check): record only.
    """
    book = sites.install()
    data_mod.install()
    if session is not None:
        session.site_book = book
    for module in flavour.keras_modules():  # Keras 3, and tf_keras when installed
        _hook_callback_sites(module.callbacks.Callback)


def _hook_callback_sites(callback_cls: type) -> None:
    """Wraps ``callback_cls.__new__`` (``keras.callbacks.Callback`` or tf_keras') to record the
    user's line that builds each callback. Idempotent per class."""
    if callback_cls.__dict__.get(_CALLBACKS_HOOKED_ATTR):
        return
    original_new = callback_cls.__new__

    def __new__(cls, *args, **kwargs):  # noqa: N807 - it replaces __new__
        if original_new is object.__new__:
            obj = original_new(cls)  # object.__new__ takes no constructor arguments
        else:
            obj = original_new(cls, *args, **kwargs)
        if data_mod.called_from_user_code():  # not Keras' own History, ProgbarLogger...
            try:
                location = sites.user_frame_location(skip=1, call_names=(cls.__name__,))
                sites.record("callbacks", obj, location)
            except Exception:  # recording a site must never break the user's callback
                pass
        return obj

    callback_cls.__new__ = staticmethod(__new__)
    setattr(callback_cls, _CALLBACKS_HOOKED_ATTR, True)


def callback_site(callback: Any):
    """The user's line that built ``callback`` (recorded by :func:`install`), or None."""
    return sites.lookup("callbacks", callback)


# -- before fit ------------------------------------------------------------------------------


def prepare_fit_data(session: CaptureSession, arguments: dict[str, Any]) -> None:
    """Runs before the user's ``fit``: wraps a Python generator so that its batches are timed
    and kept as they flow, and records the process's memory before ``fit`` (the batch-size
    probe's first memory estimate).

    Args:
        session: the check's session (its ``probe_state`` is filled).
        arguments: ``fit``'s bound arguments; ``arguments["x"]`` may be replaced.
    """
    state = session.probe_state
    x = arguments.get("x")
    state.original_x = x
    state.rss_before_fit_mib = memory.reset_peak_rss()
    if inspect.isgenerator(x):
        state.tee = sampling.Tee(x)
        arguments["x"] = iter(state.tee)


# -- per-batch callbacks ---------------------------------------------------------------------


class _CallbackTimer:
    """Wraps one callback's ``on_train_batch_begin`` / ``on_train_batch_end`` (which call the
    legacy ``on_batch_begin`` / ``on_batch_end``) and records the time per training step.

    A Keras 3 or a tf_keras callback: both Keras mark their base class's empty hooks
    (``_is_default``) and call only the hooks a callback overrides, each with
    ``(batch, logs)`` (``CallbackList`` in keras/src/callbacks/callback_list.py and
    tf_keras/src/callbacks.py: ``_call_batch_hook_helper``); the wrapped hooks are instance
    attributes set before ``fit`` builds its ``CallbackList``, which then sees them as custom.
    """

    def __init__(self, callback: Any):
        self.callback = callback
        self.samples: list[tuple[int, float]] = []  # (steps covered, ms)
        self._begin_ms = 0.0
        self._begin_batch = 0
        self._index = flavour.batch_index(callback)  # how its Keras numbers an execution
        # the instance attributes the wrappers replaced: name -> (was set, its value)
        self._replaced: dict[str, tuple[bool, Any]] = {}

    def _set(self, name: str, wrapper: Callable[..., Any]) -> None:
        own = vars(self.callback)
        self._replaced[name] = (name in own, own.get(name))
        setattr(self.callback, name, wrapper)

    def unwrap(self) -> None:
        """Puts the callback's hooks back as they were before :meth:`wrap`."""
        own = vars(self.callback)
        for name, (was_set, value) in self._replaced.items():
            if was_set:
                own[name] = value
            else:
                own.pop(name, None)
        self._replaced.clear()

    def wrap(self) -> bool:
        """Wraps the hooks the callback overrides; False when it overrides none."""
        cb = self.callback
        default = _is_default_hook(cb)
        begin_custom = not (default(cb.on_train_batch_begin) and default(cb.on_batch_begin))
        end_custom = not (default(cb.on_train_batch_end) and default(cb.on_batch_end))
        if begin_custom:
            original_begin = cb.on_train_batch_begin

            def on_train_batch_begin(batch, logs=None):
                start = time.perf_counter()
                try:
                    return original_begin(batch, logs=logs)
                finally:
                    self._begin_ms = (time.perf_counter() - start) * 1000.0
                    self._begin_batch = batch

            self._set("on_train_batch_begin", on_train_batch_begin)
        if end_custom:
            original_end = cb.on_train_batch_end

            def on_train_batch_end(batch, logs=None):
                start = time.perf_counter()
                try:
                    return original_end(batch, logs=logs)
                finally:
                    self._record(batch, (time.perf_counter() - start) * 1000.0)

            self._set("on_train_batch_end", on_train_batch_end)
        elif begin_custom:

            def on_train_batch_end(batch, logs=None, _original=cb.on_train_batch_end):
                self._record(batch, 0.0)
                return _original(batch, logs=logs)

            self._set("on_train_batch_end", on_train_batch_end)
        return begin_custom or end_custom

    def _record(self, batch: int, end_ms: float) -> None:
        epoch_steps = (getattr(self.callback, "params", None) or {}).get("steps")
        begin, spe = self._begin_batch, 1
        if self._index.shared:  # Keras 3.0-3.10: one index for both hooks (BatchIndex)
            model = getattr(self.callback, "model", None)
            begin, spe = batch, int(getattr(model, "steps_per_execution", 1) or 1)
        steps = self._index.steps(begin, batch, spe, epoch_steps)
        self.samples.append((steps, self._begin_ms + end_ms))
        self._begin_ms = 0.0
        self._begin_batch = batch + 1

    def per_step_ms(self, skip_steps: int) -> float | None:
        """Median time per training step, in ms, after the first ``skip_steps`` steps."""
        done = 0
        values = []
        for steps, ms in self.samples:
            if done >= skip_steps:
                values.append(ms / steps)
            done += steps
        if not values:
            values = [ms / steps for steps, ms in self.samples]
        return statistics.median(values) if values else None


def _is_default_hook(callback: Any) -> Callable[[Any], bool]:
    """The ``is_default`` of the Keras ``callback`` belongs to: whether a hook is the base
    class's empty one (``keras/src/utils/python_utils.py`` or
    ``tf_keras/src/utils/generic_utils.py``)."""
    if flavour.is_tf_keras(callback):
        from tf_keras.src.utils.generic_utils import is_default
    else:
        from keras.src.utils.python_utils import is_default
    return is_default


def _callback_bases() -> tuple[type, ...]:
    """The base callback class of each installed Keras (Keras 3, tf_keras)."""
    return tuple(module.callbacks.Callback for module in flavour.keras_modules(False))


def time_callbacks(session: CaptureSession, callbacks: list[Any]) -> list[Any]:
    """Wraps each user callback (Keras 3 or tf_keras) that overrides a per-batch hook so its
    time per step is measured during the window. The callbacks themselves are returned
    unchanged otherwise.

    Args:
        session: the capture session.
        callbacks: the user's callbacks (after ``neutralise``).

    Returns:
        The same list.
    """
    state = session.probe_state
    bases = _callback_bases()
    for callback in callbacks:
        if not isinstance(callback, bases):
            continue
        timer = _CallbackTimer(callback)
        try:
            wrapped = timer.wrap()
        except Exception:  # an odd callback: leave it alone
            continue
        if wrapped:
            state.timers.append(timer)
    return callbacks


def untime_callbacks(session: CaptureSession) -> None:
    """Puts back the hooks :func:`time_callbacks` wrapped (the callbacks then run as the user
    wrote them: :class:`rnndoctor.keras.DoctorCallback` lets the user's fit go on). The times
    recorded so far stay in ``session.probe_state.timers``."""
    for timer in session.probe_state.timers:
        timer.unwrap()


# -- the data --------------------------------------------------------------------------------


def collect_data(session: CaptureSession, arguments: dict[str, Any]) -> None:
    """Fills ``session.facts.data`` from ``fit``'s ``x`` (the user's object, not a wrapper)."""
    state = session.probe_state
    x = state.original_x if state.original_x is not None else arguments.get("x")
    fit_location = session.facts.fit.location if session.facts.fit else None
    try:
        session.facts.data = data_mod.describe(x, fit_location, arguments)
    except Exception as exc:  # describing the data must never end the capture
        session.facts.run.notes.append(f"data inspection failed: {type(exc).__name__}: {exc}")
    session.save()


def sample_batches(session: CaptureSession, arguments: dict[str, Any]) -> Batches:
    """Up to ``K_BATCHES`` batches of the user's data, as numpy structures, timed.

    Bounded by ``session.budget("input-only probe")``: a pipeline that blocks (a generator
    that hangs) is abandoned when the budget runs out, with a ``CutShort`` recorded.
    """
    state = session.probe_state
    x = state.original_x if state.original_x is not None else arguments.get("x")
    kind = data_mod.data_kind(x)
    session.set_phase(Phase.INPUT_PROBE)
    budget = session.budget("input-only probe")
    try:
        if state.tee is not None:
            batches = sampling.flowed(state.tee)
        elif kind == DataKind.TF_DATA:
            batches = sampling.fresh_iterator(session, budget, lambda: iter(x), x.element_spec)
        elif kind == DataKind.PY_DATASET:
            batches = sampling.index_pydataset(session, budget, x)
        elif kind == DataKind.TF_KERAS_SEQUENCE:
            batches = sampling.index_tf_keras_sequence(session, budget, x)
        elif DataKind.is_array(kind):
            batches = sampling.array_batches(session, budget, x, arguments)
        else:
            batches = Batches(not_measured=f"input of kind {kind} cannot be sampled")
    except Exception as exc:
        batches = Batches(not_measured=f"sampling failed: {type(exc).__name__}: {exc}"[:300])
    if session.facts.data is not None and batches.items:
        session.facts.data.batch_bytes = int(
            statistics.mean(sampling.nbytes(item) for item in batches.items)
        )
    return batches


def more_batches(
    session: CaptureSession, arguments: dict[str, Any]
) -> Callable[[Budget, int], list[Any]] | None:
    """For the sequence sampling's larger sample (``sequences.sample_sequences``' ``more``): a
    function that draws up to N batches of ``fit``'s arrays afresh, as the input-only probe
    does (``sampling.array_batches``: Keras' array adapter, shuffled as ``fit`` shuffles), and
    returns them as numpy batches. None for any other data (a pipeline, a generator, a
    PyDataset): drawing more of it costs its own time, or consumes it."""
    state = session.probe_state
    x = state.original_x if state.original_x is not None else arguments.get("x")
    if not DataKind.is_array(data_mod.data_kind(x)) or state.tee is not None:
        return None

    def draw(budget: Budget, count: int) -> list[Any]:
        return sampling.array_batches(session, budget, x, arguments, keep=count).items

    return draw


# -- compute-only probes ---------------------------------------------------------------------


def _step_timer(
    deadline: float, target_s: float = _POINT_TARGET_S, min_steps: int = _POINT_MIN_STEPS
) -> Any:
    """A Keras callback that times the steps of one probe point (end to end, as the window
    does: from one ``on_train_batch_end`` to the next, per step covered) and stops its ``fit``
    once enough steps are timed or at ``deadline`` (a ``time.monotonic()`` value).

    The first step of every ``fit`` is its warm-up and is not timed: it starts a new iterator
    (for cached batches too, where tf.data's start costs several ms, which timing it would add
    to a burst of 2-3 steps)."""
    import keras

    class StepTimer(keras.callbacks.Callback):
        def __init__(self):
            super().__init__()
            self.ends: list[tuple[int, float]] = []
            self.intervals: list[float] = []
            self.covered: list[int] = []
            self.timed_s = 0.0
            self.begin = 0
            self.index: Any = None  # how the model's Keras numbers an execution (BatchIndex)

        def on_train_begin(self, logs=None):
            self.index = flavour.batch_index(self.model)

        def on_train_batch_begin(self, batch, logs=None):
            self.begin = batch

        def _steps(self, batch: int) -> int:
            """The execution's steps, however its Keras numbers them (BatchIndex), an epoch's
            partial last one included (the user's own data, in a real-data burst)."""
            index = self.index or flavour.batch_index(self.model)
            spe = int(getattr(self.model, "steps_per_execution", 1) or 1) if index.shared else 1
            return index.steps(self.begin, batch, spe, (self.params or {}).get("steps"))

        def on_train_batch_end(self, batch, logs=None):
            read_back(logs)  # the step's work has finished
            now = time.perf_counter()
            # The first call (tracing) and the steps up to _POINT_WARMUP_STEPS are not timed.
            if self.ends and self.ends[-1][0] + 1 >= _POINT_WARMUP_STEPS:
                last_t = self.ends[-1][1]
                self.covered.append(self._steps(batch))
                self.intervals.append((now - last_t) * 1000.0 / self.covered[-1])
                self.timed_s += now - last_t
            self.ends.append((batch, now))
            enough = (len(self.intervals) >= min_steps and self.timed_s >= target_s) or (
                self.intervals and self.timed_s >= max(target_s, _POINT_LONG_S)
            )
            if enough or time.monotonic() >= deadline:
                self.model.stop_training = True

    return StepTimer()


@dataclass
class _PointResult:
    step_time_ms: float | None
    steps: int
    stopped: str | None = None
    intervals: list[float] = field(default_factory=list)
    covered: list[int] = field(default_factory=list)

    def timed(self) -> list[tuple[float, int]]:
        """The intervals as (ms per step, steps covered), for ``pairs.ArmRecord.add``."""
        return list(zip(self.intervals, self.covered or [1] * len(self.intervals), strict=True))


def _is_oom(exc: BaseException) -> bool:
    import tensorflow as tf

    return isinstance(exc, (MemoryError, tf.errors.ResourceExhaustedError))


def _run_point(
    session: CaptureSession,
    model: Any,
    dataset: Any,
    budget: Budget,
    target_s: float = _POINT_TARGET_S,
    fit_kwargs: dict[str, Any] | None = None,
    min_steps: int = _POINT_MIN_STEPS,
) -> _PointResult:
    """Runs Keras' own ``fit`` on ``dataset`` (or on ``fit_kwargs``, the user's own data) with
    no callback but the timer, until ``min_steps`` steps and ``target_s`` are timed or the
    budget ends."""
    timer = _step_timer(budget.deadline, target_s, min_steps)
    fit = session.original_fit()
    kwargs = fit_kwargs or {"x": dataset, "shuffle": False, "steps_per_epoch": _POINT_MAX_STEPS}
    try:
        fit(model, epochs=1, verbose=0, callbacks=[timer], **kwargs)
    except Exception as exc:
        if _is_oom(exc):
            return _PointResult(None, 0, f"out of memory: {type(exc).__name__}")
        return _PointResult(None, 0, f"failed: {error_gist(exc)}")
    finally:
        model.stop_training = False
        _collect_fit_garbage()
    if not timer.intervals:
        return _PointResult(None, 0, f"out of its {budget.seconds:g} s time budget")
    intervals = list(timer.intervals)
    return _PointResult(
        statistics.median(intervals), sum(timer.covered), intervals=intervals,
        covered=list(timer.covered),
    )  # fmt: skip


def _collect_fit_garbage() -> None:
    """Collects the cyclic garbage one probe ``fit`` left (its epoch iterator, its datasets), at
    once, outside its timed steps.

    Destroying a tf.data iterator whose autotuning is on waits for the autotuning thread
    (``RootDataset::Iterator::~Iterator`` in ``UnboundedThreadPool::LogicalThreadWrapper``, as
    :func:`rnndoctor.capture.interleave.without_autotune` says), and the wait grows with the
    iterator's age. The real-data bursts keep the user's own pipeline, autotuning included, and
    under a distribution strategy every burst builds per-device iterators, so the iterators of
    a whole probe, collected together at its end, waited for seconds each: for
    tests/scripts/mirrored_lstm.py (MirroredStrategy, 2 replicas) the collections after the
    compute-only, batch-size and steps_per_execution probes took 19.7, 6.9 and 2.0 s, and the
    check 47.0 s; collected after each ``fit``, 18 collections took 0.0-0.4 s each and the
    check 19.6 s (``rnndoctor.diagnose`` on the script's model, one run each). The window's
    objects are frozen for the whole diagnosis (``diagnosis.finish``: ``heap.frozen``), so a
    collection scans only what the diagnosis allocated since."""
    gc.collect()


def _any_batch_size(spec: Any) -> Any:
    """``spec`` with the batch dimension of every ``TensorSpec`` unknown (None)."""
    import tensorflow as tf

    def relax(s: Any) -> Any:
        if isinstance(s, tf.TensorSpec) and s.shape.rank:
            return tf.TensorSpec([None, *s.shape[1:]], s.dtype, s.name)
        return s

    return tf.nest.map_structure(relax, spec)


def _cached_dataset(raw: list[Any], spec: Any, tuned: bool = False) -> Any:
    """An in-memory dataset cycling through ``raw`` batches, with element spec ``spec`` where the
    components allow it (``PlaceholderWithDefault`` only relaxes the static shape), prefetched
    (:func:`_prefetched`; ``tuned``: with tf.data's autotuning left on)."""
    import tensorflow as tf

    dataset = None
    for item in raw:
        one = tf.data.Dataset.from_tensors(item)
        dataset = one if dataset is None else dataset.concatenate(one)
    return _prefetched(_shaped(dataset.repeat(), spec), tuned)


def _shaped(dataset: Any, spec: Any) -> Any:
    """``dataset`` with element spec ``spec`` where the components allow it, by a map over its
    elements (``PlaceholderWithDefault`` only relaxes the static shape); as it is where
    ``spec`` is None or the structures differ."""
    import tensorflow as tf

    if spec is None:
        return dataset

    def shape(element: Any) -> Any:
        def one(t: Any, s: Any) -> Any:
            if isinstance(s, tf.TensorSpec) and isinstance(t, tf.Tensor):
                if s.shape.is_compatible_with(t.shape) and s.dtype == t.dtype:
                    return tf.compat.v1.placeholder_with_default(t, s.shape)
            return t

        return tf.nest.map_structure(one, element, spec)

    try:
        if isinstance(dataset.element_spec, tuple):  # tf.data unpacks tuple elements
            return dataset.map(lambda *args: shape(tuple(args)))
        return dataset.map(shape)
    except (TypeError, ValueError):  # structures differ (list vs tuple, say): keep as is
        return dataset


def _prefetched(dataset: Any, tuned: bool = False) -> Any:
    """``dataset`` with a prefetch buffer of 2 batches, so that the compute-only step finds its
    batch ready, as the window's step does with Keras' adapters (``prefetch(AUTOTUNE)`` in
    keras/src/trainers/data_adapters/array_data_adapter.py). Without it every step pulled its
    batch through the chain of 16 ``concatenate`` and a ``map`` inside the train function: a
    tiny LSTM's compute-only step (tests/scripts/tiny_lstm.py) timed 3.4 ms against the
    window's 2.6 ms, and the batch-size probe was "inconsistent with the window". Autotuning
    is off (:func:`rnndoctor.capture.interleave.without_autotune`): a fixed buffer of cached
    batches has nothing to tune, and the autotuner's thread made each iterator's end wait;
    ``tuned`` leaves it on, for an interleaved ``fit`` with the user's own pipeline, whose
    options the cached arm's would otherwise turn off too (tf.data merges the options of a
    dataset's inputs)."""
    if tuned:
        return dataset.prefetch(2)
    return interleave.without_autotune(dataset.prefetch(2))


def _tile(item: Any, factor: int, batch: int) -> Any:
    import tensorflow as tf

    def tile(t: Any) -> Any:
        shape = getattr(t, "shape", None)
        if shape is None or not len(shape) or shape[0] != batch:
            return t
        return tf.concat([t] * factor, axis=0)

    return tf.nest.map_structure(tile, item)


def _batch_size_of(item: Any) -> int | None:
    import keras

    for leaf in keras.tree.flatten(item):
        shape = getattr(leaf, "shape", None)
        if shape is not None and len(shape):
            try:
                return int(shape[0])
            except (TypeError, ValueError):
                continue
    return None


@dataclass
class _Stage:
    """One probe of :func:`run_probes`: its phase, the field that says why it did not measure,
    the probe itself, and what follows it."""

    phase: Phase
    not_measured: str
    run: Callable[[], None]
    after: Callable[[], Any] = lambda: None
    name: str | None = None  # its name in ``WindowOptions.skip_probes`` (None: always runs)
    # why it does not run, asked before its phase starts: None runs it, "" skips it with
    # nothing recorded (nothing for it to do), a text is its ``not_measured``
    skip: Callable[[], str | None] = lambda: None


def run_probes(
    session: CaptureSession, model: Any, arguments: dict[str, Any], batches: Batches
) -> None:
    """Fills ``session.facts.probes``: input-only, callbacks, compute-only, the breakdown, and
    the batch-size, steps_per_execution and sequence length probes. Never raises for a probe
    that fails: its ``*_not_measured`` says why. A probe named in
    ``session.options.skip_probes`` does not run (``rnndoctor.facts.PROBE_UNREAD``), nor one
    whose ``skip`` says so before its phase starts.
    """
    state = session.probe_state
    probes = ProbeFacts()
    session.facts.probes = probes
    _input_only(probes, batches)
    _callbacks(session, probes, state)
    # RD205 reads the memory limit whether or not the batch-size probe runs (it reads it again)
    limit, probes.memory_limit_source = memory.memory_limit(session)
    probes.memory_limit_mib = round(limit, 3) if limit is not None else None
    saved = {
        # its value, not tf_keras' variable (the property returns it): restoring the variable
        # to itself kept the steps_per_execution probe's 16 for the probes after it
        "steps_per_execution": int(getattr(model, "steps_per_execution", 1) or 1),
        "train_function": getattr(model, "train_function", None),
        "history": getattr(model, "history", None),
    }
    real_kwargs = _real_fit_kwargs(state, arguments)
    stages = (
        _Stage(Phase.COMPUTE_PROBE, "compute_only_not_measured",
               lambda: _compute_stage(session, model, probes, batches, state, real_kwargs),
               after=lambda: probes.breakdown is None and _breakdown(session, probes)),
        _Stage(Phase.BATCH_PROBE, "batch_probe_not_measured",
               lambda: _batch_stage(session, model, probes, batches, state, real_kwargs),
               name="batch-size"),
        _Stage(Phase.SPE_PROBE, "spe_probe_not_measured",
               lambda: _spe_probe(session, model, probes, batches, state, saved),
               name="steps-per-execution"),
        _Stage(Phase.LENGTH_PROBE, "length_probe_not_measured",
               lambda: _length_probe(session, model, probes, batches, saved),
               name="sequence-length", skip=lambda: _length_skip(session, batches)),
    )  # fmt: skip
    # The probes' fits leave cyclic garbage (epoch iterators, datasets, traced functions): it is
    # collected after each fit (_collect_fit_garbage) and after each probe, in the probe's own
    # phase, so that the phase times say what each probe cost and no automatic collection
    # lands inside a timed step. The window's objects (the model, TensorFlow's, the script's)
    # outlive the probes: frozen, with automatic collection off, by the caller
    # (diagnosis.finish: heap.frozen, around the whole diagnosis), those collections scan only
    # what the probes allocated.
    try:
        for stage in stages:
            if stage.name in session.options.skip_probes:
                setattr(probes, stage.not_measured, PROBE_UNREAD)
                continue
            why = stage.skip()
            if why is not None:
                setattr(probes, stage.not_measured, why or None)
                continue
            session.set_phase(stage.phase)
            try:
                stage.run()
            except Exception as exc:  # a probe's own failure: the others still run
                setattr(probes, stage.not_measured, f"failed: {error_gist(exc)}")
            stage.after()
            gc.collect()
            session.save()
    finally:
        _restore(model, saved)


def not_run(session: CaptureSession) -> None:
    """Records why no probe ran (``rnndoctor.facts.PROBES_NOT_RUN``): ``--no-probes``, or a
    worker of a multi-worker job (``rnndoctor/cli/workers.py`` and ``cli/launched.py`` start
    the workers without probes: a probe's steps would be collectives the other workers do not
    join). Without it, the rules that rest on the probes would read empty probes as a pass."""
    probes = session.facts.probes
    if probes is None:
        probes = session.facts.probes = ProbeFacts()
    why = (
        "a worker of a multi-worker job runs none (a probe's steps would be collectives the "
        "other workers do not join)"
        if cluster.in_multi_worker_job(os.environ)
        else "turned off (--no-probes; run_probes=False or a generator's running fit in the "
        "Python API and the Keras callback)"
    )
    for _, attr in PROBE_NOT_MEASURED_FIELDS:
        if getattr(probes, attr) is None:
            setattr(probes, attr, f"{PROBES_NOT_RUN}: {why}")


def _restore(model: Any, saved: dict[str, Any]) -> None:
    """Puts back the model's steps_per_execution, train function and history."""
    try:
        model.steps_per_execution = saved["steps_per_execution"]
        model.train_function = saved["train_function"]
        model.history = saved["history"]
        model.stop_training = False
    except Exception:
        pass


def _input_only(probes: ProbeFacts, batches: Batches) -> None:
    probes.input_only_method = batches.method
    probes.input_only_batches = len(batches.times_ms)
    if batches.input_only_ms is not None:
        probes.input_only_ms = round(batches.input_only_ms, 4)
    else:
        probes.input_only_not_measured = batches.not_measured or "no batch was timed"


def _callbacks(session: CaptureSession, probes: ProbeFacts, state: ProbeState) -> None:
    skip = session.options.warmup_steps
    total = 0.0
    for timer in state.timers:
        per_step = timer.per_step_ms(skip)
        if per_step is None:
            continue
        total += per_step
        probes.callbacks.append(
            CallbackTime(
                name=type(timer.callback).__name__,
                per_step_ms=round(per_step, 4),
                location=session.site_book.lookup("callbacks", timer.callback),
            )
        )
    probes.callback_ms = round(total, 4)


def _real_fit_kwargs(state: ProbeState, arguments: dict[str, Any]) -> dict[str, Any] | None:
    """``fit`` arguments that train on the user's own data again (a fresh iterator), for the
    real-data side of the paired probe: arrays as ``fit`` trains on them, ``validation_split``'s
    share off (:func:`rnndoctor.capture.sampling.training_arrays`); None for inputs that should
    not be iterated again here (a Python generator; a PyDataset, whose workers would start
    again)."""
    x = state.original_x
    kind = data_mod.data_kind(x)
    if kind == DataKind.TF_DATA:
        try:
            cardinality = int(x.cardinality())
        except Exception:
            cardinality = -2
        steps = min(_POINT_MAX_STEPS, cardinality) if cardinality > 0 else _POINT_MAX_STEPS
        return {"x": x, "steps_per_epoch": steps, "shuffle": False}
    if DataKind.is_array(kind):
        size = arguments.get("batch_size") or 32  # Keras' default for arrays
        try:
            import keras

            x, y, sample_weight = sampling.training_arrays(x, arguments)  # fit's own split
            leaves = keras.tree.flatten((x, y))
            count = len(leaves[0])
            if sum(int(getattr(a, "nbytes", 0) or 0) for a in leaves) > _PAIR_MAX_ARRAY_BYTES:
                return None  # fit's array adapter would convert them all again
        except Exception:
            return None
        steps = max(1, min(_POINT_MAX_STEPS, count // size))
        return {
            "x": x,
            "y": y,
            "batch_size": size,
            "sample_weight": sample_weight,
            "class_weight": arguments.get("class_weight"),
            "shuffle": bool(arguments.get("shuffle", True)),
            "steps_per_epoch": steps,
        }
    return None


def _arrays_once(model: Any, kwargs: dict[str, Any] | None) -> dict[str, Any] | None:
    """``fit`` arguments on arrays (:func:`_real_fit_kwargs`) as one tf.data dataset built once,
    for every real-data burst of the paired compute-only probe; else ``kwargs`` as they are.

    Every ``fit`` on arrays builds Keras' array adapter again (``get_data_adapter`` in
    keras/src/trainers/data_adapters/__init__.py; ``ArrayDataAdapter.get_tf_dataset`` converts
    the arrays to tensors), which took 2-3 s per burst of the bundled demo on a loaded machine
    and left it 1-2 pairs. The dataset built here is the one that adapter gives ``fit`` (same
    batch size, sample and class weights, and, with ``shuffle``, the adapter's shuffle: a new
    permutation for each iterator, i.e. each burst, unless a global seed is set, when every
    burst draws the same one), so a burst times the same steps on the user's data. Keras 3
    only; a Keras 2 (``tf_keras``) model, or an adapter that fails, keeps the arrays (and
    their per-fit adapter)."""
    if kwargs is None or "batch_size" not in kwargs:
        return kwargs
    try:
        import keras
        from keras.src.trainers.data_adapters import get_data_adapter

        if not isinstance(model, keras.Model):
            return kwargs
        adapter = get_data_adapter(
            kwargs["x"], kwargs.get("y"), kwargs.get("sample_weight"), kwargs["batch_size"],
            kwargs["steps_per_epoch"], kwargs.get("shuffle", False), kwargs.get("class_weight"),
        )  # fmt: skip
        dataset = adapter.get_tf_dataset()
    except Exception:  # an odd structure: fit's own adapter, per burst
        return kwargs
    return {"x": dataset, "steps_per_epoch": kwargs["steps_per_epoch"], "shuffle": False}


def _burst_steps(per_step_ms: Sequence[float]) -> int:
    """Timed steps a burst of the compute-only probe's pairs asks for: 2, or 1 once each of the
    arm's bursts so far took :data:`_PAIR_BURST_S` or more per step (one step is then the
    burst's timed time, and a second adds a step to every burst besides its warm-up step: for
    the bundled demo's 0.6 s steps under load, 2 pairs in the 8 s allowance instead of 3)."""
    return 1 if per_step_ms and min(per_step_ms) >= _PAIR_BURST_S * 1000.0 else 2


def _same_spec(a: Any, b: Any) -> bool:
    """True when two datasets' element specs have the same structure, and every tensor the same
    dtype and static shape (the traced train function takes both without a retrace)."""
    import tensorflow as tf

    try:
        tf.nest.assert_same_structure(a, b)
    except (TypeError, ValueError):
        return False
    for x, y in zip(tf.nest.flatten(a), tf.nest.flatten(b), strict=True):
        if not (isinstance(x, tf.TensorSpec) and isinstance(y, tf.TensorSpec)):
            if x != y:
                return False
        elif x.dtype != y.dtype or x.shape.rank != y.shape.rank:
            return False
        elif x.shape.rank is not None and x.shape.as_list() != y.shape.as_list():
            return False
    return True


def _compute_only(
    session: CaptureSession,
    model: Any,
    probes: ProbeFacts,
    batches: Batches,
    real_kwargs: dict[str, Any] | None,
    real_dataset: Any = None,
) -> None:
    """The compute-only step on cached batches. Where the user's data can be iterated again,
    bursts of the same ``fit`` on that data (A) alternate with the cached bursts (B), so that
    the input wait is the difference of two steps timed side by side, under the same machine
    load (``probes.compute_paired``).

    The bursts are one ``fit`` each (:func:`rnndoctor.capture.pairs.alternate`), except for
    in-memory arrays made into one dataset (``real_dataset``, :func:`_arrays_once`) whose
    element spec is the cached batches' own and whose batch the input-only probe produced in
    at most half the window's step (:data:`_ONE_FIT_INPUT_SHARE`): then every round runs in one
    interleaved ``fit`` (:func:`_rounds_in_one_fit`), with no per-burst set-up or warm-up step.
    Interleaving lets the arrays' pipeline (Keras' array adapter: a parallel gather per batch,
    prefetched) fill its buffer during the cached bursts. A producer at least twice as fast as
    the step (timed serially, with no parallelism) keeps that buffer full in the window's own
    steady state too, so interleaving hides no wait the window would show. A user's
    ``tf.data`` pipeline, and slower arrays, keep one ``fit`` per burst."""
    if not batches.raw:
        probes.compute_only_not_measured = "no batch was sampled: " + (
            batches.not_measured or "unknown reason"
        )
        return
    budget = session.budget("compute-only probe")
    try:
        dataset = _cached_dataset(batches.raw, batches.element_spec)
    except Exception as exc:
        probes.compute_only_not_measured = f"cached dataset failed: {type(exc).__name__}: {exc}"
        return
    probes.compute_only_batches = len(batches.raw)
    slow: list[float] = []  # set-up seconds of real-data bursts that started slowly

    def real_burst() -> list[tuple[float, int]]:
        started = time.monotonic()
        wanted = _burst_steps(real.per_step_ms)
        result = _run_point(session, model, None, budget, _PAIR_BURST_S, real_kwargs, wanted)
        timed_s = sum(v * n for v, n in result.timed()) / 1000.0
        set_up = time.monotonic() - started - timed_s - (result.step_time_ms or 0.0) / 1000.0
        if set_up > _PAIR_SLOW_START_S:
            slow.append(set_up)
        if result.stopped:
            raise RuntimeError(result.stopped)
        return result.timed()

    def cached_burst() -> list[tuple[float, int]]:
        wanted = _burst_steps(cached.per_step_ms)
        result = _run_point(session, model, dataset, budget, _PAIR_BURST_S, None, wanted)
        if result.stopped:
            raise RuntimeError(result.stopped)
        return result.timed()

    cached = pairs.ArmRecord("compute-only", cached_burst)
    real = pairs.ArmRecord("real step", real_burst)
    arms = [cached] if real_kwargs is None else [real, cached]
    left = paired_left(budget)
    why = None
    # bursts sized from the window's train function (its step without the callbacks' hooks,
    # which the probe does not run), else its step
    steps = session.facts.steps
    step_ms = (
        (steps.median_train_function_ms or steps.median_step_time_ms) if steps else None
    ) or _PAIR_BURST_S * 1000.0
    produced = probes.input_only_ms
    if (real_dataset is not None and produced is not None
            and produced <= _ONE_FIT_INPUT_SHARE * step_ms
            and _same_spec(real_dataset.element_spec, dataset.element_spec)):  # fmt: skip
        # the cached arm keeps tf.data's autotuning: it would turn it off for the user's arm
        tuned = _cached_dataset(batches.raw, batches.element_spec, tuned=True)
        why = _rounds_in_one_fit(session, model, arms, [real_dataset.repeat(), tuned],
                                 [step_ms, step_ms], left, budget)  # fmt: skip
    if not cached.per_step_ms:  # not interleaved, or the interleaved fit failed: one per burst
        why = _alternate_bursts(arms, slow, left, budget)
    if slow and why is not None:
        why = f"a real-data burst's set-up took {slow[0]:.1f} s (buffers filling): {why}"
    _record_compute(session, probes, arms, why, budget)


def _alternate_bursts(
    arms: list[pairs.ArmRecord], slow: list[float], left: Callable[[], float], budget: Budget
) -> str | None:
    """The compute-only probe's rounds, one ``fit`` per burst (``pairs.alternate``), until the
    rounds have their floor and, past it, while the interval is wider than
    ``pairs.PRECISE_WIDTH`` of the ratio (``precise``): RD201's input share and RD403's scale
    rest on this ratio. 5 pairs of tests/scripts/timeseries_float64.py gave 2.42x
    (1.05–2.42x): one pair at 1.05x made a 59% input share "inconclusive: 5–59%" where two
    other runs warned at 49–60% (issue 11). No more rounds after a slow real-data set-up
    (:func:`_unless`). Returns ``cut_short``."""
    return pairs.alternate(arms, _unless(slow, left), phase_left=_unless(slow, budget.left),
                           precise=True)  # fmt: skip


def _unless(slow: list[float], left: Callable[[], float]) -> Callable[[], float]:
    """``left``, or no time at all once ``slow`` holds a real-data burst's slow set-up: each
    further round would pay it again (``_PAIR_SLOW_START_S``), so the rounds stop there."""
    return lambda: 0.0 if slow else left()


def _record_compute(
    session: CaptureSession,
    probes: ProbeFacts,
    arms: list[pairs.ArmRecord],
    why: str | None,
    budget: Budget,
) -> None:
    """The compute-only probe's arms (``[real, cached]``, or ``[cached]``) as its facts: the
    compute-only step, and with a real-data arm the pairing and the real step."""
    cached = arms[-1]
    if not cached.per_step_ms:
        probes.compute_only_not_measured = cached.failed or why or "no compute-only step timed"
        if "budget" in (probes.compute_only_not_measured or ""):
            session.cut_short(budget, "no compute-only step was timed within the budget")
        return
    probes.compute_only_ms = round(statistics.median(cached.per_step_ms), 4)
    if len(arms) == 2 and arms[0].per_step_ms:
        probes.compute_paired = pairs.pair(
            arms[0], cached, phase=Phase.COMPUTE_PROBE, cut_short=why
        )
        if probes.compute_paired is not None:
            probes.compute_only_ms = probes.compute_paired.median_b_ms
            probes.real_step_ms = probes.compute_paired.median_a_ms


def _window_noise(session: CaptureSession) -> tuple[float | None, float, str]:
    """The window's median step (ms), its noise allowance
    (:meth:`rnndoctor.facts.StepTimes.noise_allowance`) and that allowance in words."""
    steps = session.facts.steps
    step = steps.median_step_time_ms if steps else None
    if not step:
        return None, 1.0 + CONSISTENCY_FLOOR, ""
    noise = steps.noise_allowance()
    return step, noise, f"p90 / median = {noise:.2f}"


# The phases whose load the batch-size probe's check allows for: the window's, and the
# compute-only probe's, where the real step it is also checked against was timed.
_CHECKED_PHASES = (Phase.MEASURED, Phase.LOOP_MEASURED, Phase.COMPUTE_PROBE)


def _load_factor(session: CaptureSession) -> float:
    """The largest widening factor (``rnndoctor.machine.MachineLoad.widen_factor``: 1 + foreign
    cores on a noisy phase, else 1) of the window's and the compute-only probe's recorded
    phases and of the running phase so far (``session.load_so_far``)."""
    factors = [m.widen_factor for m in session.facts.run.machine if m.phase in _CHECKED_PHASES]
    now = session.load_so_far()
    if now is not None:
        factors.append(now.widen_factor)
    return max(factors, default=1.0)


def inconsistency(session: CaptureSession, probes: ProbeFacts) -> str | None:
    """Why the compute-only probe (and the breakdown built on it) disagrees with the window
    beyond the window's own noise, or None when it agrees.

    Two checks (issue 11, item 3): the compute-only step may not exceed the window's median
    step times its noise allowance (:func:`_window_noise`: the window's p90 / median); and the
    parts of the breakdown (input wait + compute + callbacks) may not add up to more than the
    step by more than that allowance.

    A paired probe (``probes.compute_paired``: the real step timed in bursts beside the
    compute-only one) is checked against its own real step instead where the window's differs:
    the compute-only step may not exceed the real step beyond the window's noise. Its parts are
    the pair's, each timed side by side; they exceed the window's step when the machine's pace
    moved after the window (keras2_slow_generator.py in a CI run: RD201 at error "not
    evaluated" once, on a share the pair measured at 70%), which moves both arms and not
    their ratio. The input share stays counted up to the input-only bound
    (``rules/_measured.py: corroborated_share``), so a slow real arm cannot inflate it.
    """
    step, allowance, basis = _window_noise(session)
    compute = probes.compute_only_ms
    if step is None or compute is None:
        return None
    limit = step * allowance
    real = probes.real_step_ms if probes.compute_paired is not None else None
    over = _over_the_step("compute-only", compute, step, (allowance, basis), real)
    if over is not None or real is not None:  # paired: the parts are the pair's (above)
        return over
    parts = probes.breakdown
    if parts is not None:
        total = parts.input_ms + parts.compute_ms + parts.host_ms
        if total > limit:
            return (
                f"the breakdown adds up to {total:.0f} ms, {total - step:.0f} ms more than the "
                f"median step {step:.0f} ms (beyond the window's noise: {basis})"
            )
    return None


def _compute_stage(
    session: CaptureSession,
    model: Any,
    probes: ProbeFacts,
    batches: Batches,
    state: ProbeState,
    real_kwargs: dict[str, Any] | None,
    may_skip: bool = True,
) -> None:
    """The compute-only probe and the breakdown, checked against the window: a probe that
    disagrees with it is measured once more; if it still disagrees, ``probes.inconsistent``
    says why (with both numbers) and the rules that rest on it are not evaluated. Arrays are
    made into a dataset once, for every burst (:func:`_arrays_once`). With ``may_skip``, not
    run where :func:`_compute_skip` says no finding could rest on it
    (``state.compute_skipped``)."""
    skip = _compute_skip(session, model, probes) if may_skip else None
    state.compute_skipped = skip is not None
    if skip is not None:
        probes.compute_only_not_measured = skip
        return
    once = _arrays_once(model, real_kwargs)
    real_dataset = once["x"] if once is not real_kwargs and once is not None else None
    real_kwargs = once
    _compute_only(session, model, probes, batches, real_kwargs, real_dataset)
    _breakdown(session, probes)
    if inconsistency(session, probes) is None:
        return
    probes.remeasured = True
    for name in ("compute_only_ms", "real_step_ms", "compute_paired", "breakdown"):
        setattr(probes, name, None)
    probes.input_bound_share = None
    _compute_only(session, model, probes, batches, real_kwargs, real_dataset)
    _breakdown(session, probes)
    probes.inconsistent = inconsistency(session, probes)


def _compute_skip(session: CaptureSession, model: Any, probes: ProbeFacts) -> str | None:
    """Why the compute-only probe need not run, or None. All of:

    - the data is held in memory: arrays, or a tf.data pipeline whose sources are tensors or a
      range and that runs no Python (``facts.data``). Only there is the input-only time (a
      fresh iterator, no model) a bound on the window's input wait: a PyDataset's workers and
      queue, a generator's conversion and its contention for the GIL, and files read from a
      warm page cache all cost the window more than the probe sees;
    - it bounds the input wait under :data:`_INPUT_BOUND_SKIP_SHARE` of the window's step, a
      window of at least :data:`_SKIP_MIN_STEPS` measured steps;
    - the model runs one step per call with a train step over twice
      :data:`_SPE_PROBE_MAX_STEP_MS` (the compute-only step is at least the train step less
      the input wait), so the steps_per_execution probe would not run either;
    - one process on one replica, read from the live strategy (RD701 and RD705 compare the
      workers' breakdowns; ``facts.strategy`` is filled only after the probes)."""
    steps = session.facts.steps
    step = steps.median_step_time_ms if steps else None
    produced = probes.input_only_ms
    if not step or produced is None or produced > _INPUT_BOUND_SKIP_SHARE * step:
        return None
    if steps.measured_steps < _SKIP_MIN_STEPS:
        return None  # too few steps to vouch for a long train step
    if not _in_memory(session.facts.data) or _distributed(session, model):
        return None
    train_ms = (steps.median_train_function_ms or step) - produced
    if int(getattr(model, "steps_per_execution", 1) or 1) > 1:
        return None
    if train_ms < 2.0 * _SPE_PROBE_MAX_STEP_MS:
        return None
    return (
        f"{COMPUTE_SKIPPED_FOR_INPUT_BOUND} {produced:.2f} ms, "
        f"{produced / step:.2%} of the {step:.1f} ms step, so the input wait is at most that "
        f"(under {_INPUT_BOUND_SKIP_SHARE:.0%}, below RD201's default cut-off of 5%), and at a "
        f"{train_ms:.0f} ms step the steps_per_execution probe, which needs it, is not run "
        f"either (over {2 * _SPE_PROBE_MAX_STEP_MS:g} ms, for its cost; the dispatch is not "
        "measured)"
    )


def _in_memory(data: Any) -> bool:
    """``facts.data`` describes data held in memory: arrays, or tf.data from tensors or a range
    that runs no Python (no files, generator or ``py_function``)."""
    if data is None:
        return False
    if DataKind.is_array(data.kind):
        return True
    return (
        data.kind == DataKind.TF_DATA
        and bool(data.source_kinds)
        and set(data.source_kinds) <= {"tensor_slices", "tensors", "range"}
        and not data.python_ops
    )


def _distributed(session: CaptureSession, model: Any) -> bool:
    """The training runs on several replicas or workers (the live strategy, or a TF_CONFIG
    cluster of more than one task)."""
    from rnndoctor.capture import distribute

    try:
        strategy = distribute.strategy_of(session, model)
    except Exception:
        return True  # cannot tell: keep the probe
    if strategy is not None and int(getattr(strategy, "num_replicas_in_sync", 1) or 1) > 1:
        return True
    return cluster.in_multi_worker_job(os.environ)


def _breakdown(session: CaptureSession, probes: ProbeFacts) -> None:
    """The input-bound share and the split of the window's median step.

    With the paired probe (``probes.compute_paired``, ratio ``r``: the median over pairs of
    real / compute-only per-step times), the input wait is ``real_step x (1 - 1 / r)`` and the
    share is taken of ``real_step + callbacks``: the point of the share's interval
    (``rules/_measured.py: share_interval`` maps the ratio's bounds the same way). On a steady
    machine that is ``real_step - compute_only``; under noise the pairs' median is the robust
    one (input_fast_pipeline.py in a CI run: arms of 5.85 and 4.42 ms, a 24% share from their
    medians, while the pairs' median ratio was 1.08, 8%). Without it (a Python generator, a
    PyDataset), of the window's step: ``step - compute_only - callbacks``.

    The input-only cross-check (``probes.input_share_check``, the input-only time per batch
    over a step, which bounds the input share in the rules: ``rules/_measured.py:
    corroborated_share``) is taken of the same step as the share: ``real_step + callbacks``
    with the paired probe, else the window's step. Of the window's step beside a share of the
    paired real step, a window slower than the probe capped the share: tests/scripts/
    input_slow_generator.py in CI, 9.76 ms of input-only time over a 20.2 ms window step, 48%,
    capped a share of 69% of the probe's 11.2 ms real step, and RD201 fell from error to
    warning.
    """
    steps = session.facts.steps
    step = steps.median_step_time_ms if steps else None
    host = probes.callback_ms or 0.0
    compute = probes.compute_only_ms
    real = probes.real_step_ms if compute is not None else None
    whole = real + host if real is not None else step  # the step the share is of
    if whole and probes.input_only_ms is not None:
        probes.input_share_check = round(min(1.0, probes.input_only_ms / whole), 4)
    if not step or compute is None or not whole:
        return
    paired = probes.compute_paired
    if real is not None:
        ratio = paired.ratio if paired is not None and paired.ratio > 0 else None
        input_ms = max(0.0, real * (1.0 - 1.0 / ratio) if ratio else real - compute)
    else:
        input_ms = max(0.0, step - compute - host)
    probes.input_bound_share = round(min(1.0, input_ms / whole), 4)
    probes.breakdown = StepBreakdown(
        step_ms=round(step, 4),
        input_ms=round(input_ms, 4),
        compute_ms=round(compute, 4),
        host_ms=round(host, 4),
        other_ms=round(step - input_ms - compute - host, 4),
    )


def _out_of_budget(session: CaptureSession, budget: Budget, point: ProbePoint, what: str) -> bool:
    """True (and ``point.stopped`` / ``session.cut_short`` set) when ``budget`` ran out before the
    probe point ``what`` (``batch size 256``, ``16``) could start."""
    if not budget.expired():
        return False
    point.stopped = f"not run: out of its {budget.seconds:g} s time budget"
    session.cut_short(budget, f"{budget.phase} stopped before {what}")
    return True


def _time_point(
    session: CaptureSession,
    model: Any,
    point: ProbePoint,
    dataset: Any,
    budget: Budget,
    what: str,
    min_steps: int = 2,
) -> pairs.ArmRecord | None:
    """Runs the first burst of one probe point and fills ``point`` (``steps``, ``stopped``,
    ``step_time_ms``, a median in ms). Returns the point's arm, for the paired rounds that
    follow (:func:`_pair_points`), or None when it gave no time (its probe stops there); a point
    cut by the budget is recorded with ``session.cut_short``. Each burst times ``min_steps``
    calls of the train function at least (and :data:`_PAIR_BURST_S`)."""

    def burst() -> list[tuple[float, int]]:
        result = _run_point(session, model, dataset, budget, _PAIR_BURST_S, None, min_steps)
        if result.stopped:
            raise RuntimeError(result.stopped)
        return result.timed()

    result = _run_point(session, model, dataset, budget, _PAIR_BURST_S, None, min_steps)
    point.steps = result.steps
    point.stopped = result.stopped
    if result.step_time_ms is None:
        if result.stopped and "budget" in result.stopped:
            session.cut_short(budget, f"{budget.phase} stopped at {what}")
        return None
    point.step_time_ms = round(result.step_time_ms, 4)
    arm = pairs.ArmRecord(what, burst)
    arm.add(result.timed())
    return arm


def _pair_points(
    arms: list[tuple[ProbePoint, pairs.ArmRecord]],
    left: Callable[[], float],
    phase: Phase,
    before_burst: Callable[[ProbePoint], None] = lambda point: None,
    precise: bool = False,
    phase_left: Callable[[], float] | None = None,
    undecided: Callable[[Sequence[pairs.ArmRecord]], bool] | None = None,
    early: pairs.EarlyLook | None = None,
) -> str | None:
    """Alternates bursts of a probe's points (the first round already ran) until each has its
    10 steps and 1 s (and, with ``precise``, a tight interval: ``pairs.alternate``; past
    ``left()`` while ``phase_left()`` allows, until the pairs give an interval; with
    ``undecided``, a second stage when it says the first stage's interval straddles a
    cut-off; with ``early``, no further than where its one look says a rule's decision is
    made), then
    records each point's median step and its pairing with the first point (``point.paired``:
    A = the first point, B = this one). ``before_burst`` sets the model up for a point (its
    ``steps_per_execution``). Returns why the rounds stopped short (the points' ``cut_short``),
    or None."""
    if len(arms) < 2:
        return None
    records = []
    for point, arm in arms:
        inner = arm.burst

        def burst(point: ProbePoint = point, inner: Burst = inner) -> Sequence[tuple[float, int]]:
            before_burst(point)
            return inner()

        arm.burst = burst
        records.append(arm)
    why = pairs.alternate(records, left, precise=precise, phase_left=phase_left,
                          undecided=undecided, early=early)  # fmt: skip
    _record_points(arms, phase, why)
    return why


def _record_points(
    arms: list[tuple[ProbePoint, pairs.ArmRecord]], phase: Phase, why: str | None
) -> None:
    """Each point's steps and median step from its arm's bursts, and its pairing with the first
    point (``point.paired``: A = the first point, B = this one; ``why``: its ``cut_short``)."""
    first = arms[0][1]
    for point, arm in arms:
        point.steps = sum(arm.steps)
        point.step_time_ms = round(statistics.median(arm.per_step_ms), 4)
        if arm is not first:
            point.paired = pairs.pair(first, arm, phase=phase, cut_short=why)


def _rounds_in_one_fit(
    session: CaptureSession,
    model: Any,
    records: list[pairs.ArmRecord],
    datasets: list[Any],
    step_ms: Sequence[float],
    left: Callable[[], float],
    budget: Budget,
    early: pairs.EarlyLook | None = None,
) -> str | None:
    """Paired rounds of the arms ``records`` in one ``fit`` whose dataset alternates the arms'
    ``datasets`` (:mod:`rnndoctor.capture.interleave`; bursts planned from ``step_ms``, each
    arm's step time so far), until each arm has its 10 steps and 1 s or the allowance
    ``left()`` ends (past it, within ``budget``, while the pairs are too few for an interval:
    :func:`rnndoctor.capture.pairs.stop_reason`), or ``early``'s one look says a rule's
    decision is made (:class:`rnndoctor.capture.pairs.EarlyLook`). The rounds are added to
    ``records``; returns ``cut_short`` (None when every arm got its steps and time,
    :func:`rnndoctor.capture.pairs.finish_reason`)."""
    spe = int(getattr(model, "steps_per_execution", 1) or 1)
    round_plan = interleave.plan(step_ms, spe)
    clock = interleave.RoundClock(round_plan, flavour.batch_index(model).shared)
    state: dict[str, str | None] = {"why": None}

    def on_round(done: interleave.Round) -> bool:
        for record, intervals in zip(records, done, strict=True):
            record.add(intervals)
        why = pairs.stop_reason(
            records, left(), clock.last_round_s, max_rounds=interleave.MAX_ROUNDS,
            phase_left_s=budget.left(),
        )  # fmt: skip
        state["why"] = pairs.look(early, records, why, clock.last_round_s, budget.left())
        return state["why"] is not None

    why = pairs.stop_reason(
        records, left(), 0.0, max_rounds=interleave.MAX_ROUNDS, phase_left_s=budget.left()
    )
    if why is None:
        timer = interleave.round_timer(clock, on_round, budget.deadline)
        fit = session.original_fit()
        try:
            data = interleave.dataset(datasets, round_plan)
            fit(model, x=data, epochs=1, verbose=0, callbacks=[timer], shuffle=False,
                steps_per_epoch=interleave.MAX_STEPS)  # fmt: skip
            why = state["why"] or "out of its time budget"
        except Exception as exc:  # out of memory, a failed fit: keep the rounds so far
            why = "out of memory" if _is_oom(exc) else f"failed: {type(exc).__name__}: {exc}"
            why = why[:200]
        finally:
            model.stop_training = False
            _collect_fit_garbage()
    return pairs.finish_reason(why, records)


def _pair_in_one_fit(
    session: CaptureSession,
    model: Any,
    arms: list[tuple[ProbePoint, pairs.ArmRecord]],
    datasets: list[Any],
    left: Callable[[], float],
    budget: Budget,
    early: pairs.EarlyLook | None = None,
) -> None:
    """The batch-size probe's paired rounds (the first round already ran, one ``fit`` per point)
    in one more ``fit`` (:func:`_rounds_in_one_fit`, with ``early``'s one look); then each
    point's median step and its pairing with the first point (``point.paired``: A = the first
    point, B = this one), as :func:`_pair_points` does."""
    if len(arms) < 2:
        return
    records = [arm for _, arm in arms]
    step_ms = [statistics.median(r.per_step_ms) for r in records]
    why = _rounds_in_one_fit(session, model, records, datasets, step_ms, left, budget, early)
    _record_points(arms, Phase.BATCH_PROBE, why)


def _batch_inconsistency(
    session: CaptureSession, probes: ProbeFacts, beside: bool = True
) -> str | None:
    """Why the batch-size probe's first point (the user's batch, compute-only) disagrees with
    the window: its step is longer than the window's median step beyond the window's noise,
    and longer than the real step timed side by side with the cached one
    (``probes.real_step_ms``, the compute-only probe's real-data arm) beyond that noise too,
    and, where the point was timed again beside the real step in the probe's own phase
    (``probes.batch_real_paired``, :func:`_real_beside_the_point`, at least
    ``INTERVAL_PAIRS`` pairs; ``beside`` False: not consulted, for a point measured after it),
    longer than that real step beyond the window's own noise too (not widened for the load:
    the two were timed side by side, as the compute-only probe's own check).

    The second reference is the window's own step (same data, train function and ``fit``)
    timed again, in the probes' minutes: a machine that got slower after the window (the
    demo's window at 358 ms, its user's batch in the probe at 430 ms, nothing else running)
    moves both, while a probe that does not represent the window (a retraced function, a slower
    pipeline) exceeds the paired real step too. RD301 rests on ratios among the points, each
    paired within the probe, which such a drift does not move.

    Both references were timed in other phases than this probe, so on a noisy machine the
    allowance is also multiplied by the load factor of the phases compared
    (:func:`_load_factor`): under one busy core the pace moves between phases by more than the
    window's own noise shows (tests/scripts/verify_lstm.py in a loaded stability run: its
    batch-8 point at 5.0 ms against the real step's 3.7 ms, both phases noisy, and RD301, a
    warning in every quiet run, "not evaluated"), as the intervals widen for it (issue 11:
    under load a finding becomes inconclusive rather than flipping). The compute-only probe's
    own check (:func:`inconsistency`) is not widened: its paired real arm is timed in its own
    phase, beside the cached one."""
    step, allowance, basis = _window_noise(session)
    first = probes.batch_probe[0] if probes.batch_probe else None
    if step is None or first is None or first.step_time_ms is None:
        return None
    own = allowance  # the window's noise alone: for the pair timed in this phase
    factor = _load_factor(session)
    if factor > 1.0:
        allowance, basis = allowance * factor, basis + f", x {factor:.2f} for the noisy machine"
    what = f"batch {first.value}: compute-only"
    reason = _over_the_step(what, first.step_time_ms, step, (allowance, basis), probes.real_step_ms)
    pair = probes.batch_real_paired if beside else None
    if reason is None or pair is None or pair.pairs < INTERVAL_PAIRS:
        return reason
    if pair.median_b_ms <= pair.median_a_ms * own:
        return None  # timed beside the real step in this phase, it is not slower
    return (
        f"{reason}; timed again beside the real step in this phase: {pair.median_b_ms:.1f} ms "
        f"against {pair.median_a_ms:.1f} ms ({pair.pairs} pairs)"
    )


def _over_the_step(
    what: str, value_ms: float, step_ms: float, noise: tuple[float, str], real_ms: float | None
) -> str | None:
    """Why a probe's step (``value_ms``, ms) is longer than the window's median step
    (``step_ms``) and than the real step timed beside it (``real_ms``; None: none was), each
    beyond the window's noise (``noise``: the allowance and its words, :func:`_window_noise`);
    None when it is not longer than one of them. ``what`` names the probe's step in the text."""
    allowance, basis = noise
    if value_ms <= step_ms * allowance:
        return None
    if real_ms is not None and value_ms <= real_ms * allowance:
        return None
    beside = "" if real_ms is None else f" and > the real step {real_ms:.0f} ms timed beside it"
    return (
        f"{what} {value_ms:.0f} ms > step {step_ms:.0f} ms{beside} "
        f"(beyond the window's noise: {basis})"
    )


def _batch_stage(
    session: CaptureSession,
    model: Any,
    probes: ProbeFacts,
    batches: Batches,
    state: ProbeState,
    real_kwargs: dict[str, Any] | None,
) -> None:
    """The batch-size probe, checked against the window (:func:`_batch_inconsistency`). When
    it disagrees and the compute-only probe was not run (``state.compute_skipped``), that probe
    runs now, for its real step timed beside the cached one, and the check is made again; where
    the compute-only probe ran in its own phase and the user's data can be iterated again
    (``real_kwargs``), the user's batch is timed again beside the real step in this phase
    instead (:func:`_real_beside_the_point`), and the check made again; when it still
    disagrees, the probe is measured once more, and
    ``probes.batch_probe_inconsistent`` says why when it still does. The model's train
    function is the window's again afterwards (the points may build their own)."""
    window_function = getattr(model, "train_function", None)
    traced: dict[int, Any] = {}
    try:
        first = _batch_probe(session, model, probes, batches, state, traced)
        if _batch_inconsistency(session, probes) is None:
            return
        if not state.compute_skipped and real_kwargs is not None and first is not None:
            model.train_function = window_function
            try:
                _real_beside_the_point(session, model, probes, first, real_kwargs)
            except Exception:  # the pair failed: the check stands as it was
                probes.batch_real_paired = None
            if _batch_inconsistency(session, probes) is None:
                return
        if state.compute_skipped:
            model.train_function = window_function
            probes.compute_only_not_measured = None
            session.set_phase(Phase.COMPUTE_PROBE)
            try:
                _compute_stage(session, model, probes, batches, state, real_kwargs, may_skip=False)
            except Exception as exc:  # the referee failed: the batch-size points still stand
                probes.compute_only_not_measured = f"failed: {type(exc).__name__}: {exc}"[:300]
            session.set_phase(Phase.BATCH_PROBE)
            if _batch_inconsistency(session, probes) is None:
                return
        probes.batch_probe = []
        _batch_probe(session, model, probes, batches, state, traced)
        # the pair timed the first measurement's point: the new one is judged without it
        probes.batch_probe_inconsistent = _batch_inconsistency(session, probes, beside=False)
    finally:
        model.train_function = window_function


def _fit_mib_per_sample(session: CaptureSession, state: ProbeState, base: int) -> float | None:
    """The working set per sample (MiB), from the whole fit's peak growth at batch ``base`` (an
    upper bound: it also holds the model build and tracing); None on a GPU or without the
    figures, or for a growth of zero (memory the allocator kept from earlier work)."""
    fit_peak = memory.proc_status_mib("VmHWM")
    if state.rss_before_fit_mib is None or fit_peak is None or memory.gpu_memory(session):
        return None
    return max(0.0, fit_peak - state.rss_before_fit_mib) / base or None


def _static_batch(spec: Any) -> bool:
    """True when ``fit`` saw a fixed batch size: a ``TensorSpec`` in ``spec`` with a known first
    dimension (a batch that divides the data; ``drop_remainder=True``)."""
    import tensorflow as tf

    leaves = [s for s in tf.nest.flatten(spec) if isinstance(s, tf.TensorSpec) and s.shape.rank]
    return any(s.shape[0] is not None for s in leaves)


def _with_batch(spec: Any, size: int) -> Any:
    """``spec`` with the batch dimension of every ``TensorSpec`` set to ``size``."""
    import tensorflow as tf

    def fix(s: Any) -> Any:
        if isinstance(s, tf.TensorSpec) and s.shape.rank:
            return tf.TensorSpec([size, *s.shape[1:]], s.dtype, s.name)
        return s

    return tf.nest.map_structure(fix, spec)


class _PointFunctions:
    """The train function of each batch-size point. Where ``fit`` saw a fixed batch (the window's
    train function is traced for it: ``float32[16, 8, 3]``), every point runs a function traced
    for its own fixed batch, as the user's ``fit`` at that batch size would: the user's batch
    runs the window's own function, each larger batch one that Keras builds at its first burst
    (``model.train_function = None``). A function traced with an unknown batch dimension runs
    slower than the window's for a small model: for the 8-unit LSTM of
    tests/scripts/tiny_lstm.py, 2.95-3.0 ms against 2.3-2.5 ms per step in the quieter rounds of
    six interleaved ``fit`` bursts each (and 4.0 ms against the window's 2.7 ms in a check),
    so that the user's own batch failed the consistency check and RD301 flipped to "not
    evaluated" (issue 11). Where the batch is already unknown, all points share the window's
    function (``static`` False) and the rounds run in one interleaved ``fit``."""

    def __init__(self, model: Any, spec: Any, base: int, traced: dict[int, Any]):
        self.model, self.base_spec, self.base = model, spec, base
        self.static = spec is not None and _static_batch(spec)
        self.functions = traced  # kept by the caller: a re-measurement traces nothing again
        self.functions.setdefault(base, getattr(model, "train_function", None))

    @property
    def first_burst_steps(self) -> int:
        """Timed steps of a point's first burst: where every point shares the window's function
        the rounds after it run in one interleaved fit (:func:`_pair_in_one_fit`), and the first
        burst only gives the plan a step time and the memory meter its growth: one step after
        its warm-up. Else 2, as every later burst of :func:`_pair_points`."""
        return 2 if self.static else 1

    def spec(self, size: int) -> Any:
        if self.base_spec is None:
            return None
        return _with_batch(self.base_spec, size) if self.static else _any_batch_size(self.base_spec)

    def set_up(self, point: ProbePoint) -> None:
        if self.static:
            self.model.train_function = self.functions.get(point.value)  # None: Keras builds it

    def keep(self, point: ProbePoint) -> None:
        if self.static and self.model.train_function is not None:
            self.functions.setdefault(point.value, self.model.train_function)


def _batch_probe(
    session: CaptureSession,
    model: Any,
    probes: ProbeFacts,
    batches: Batches,
    state: ProbeState,
    traced: dict[int, Any],
) -> Any:
    """The batch-size probe's points (``probes.batch_probe``). Returns the cached dataset of its
    first point (the user's batch), for :func:`_real_beside_the_point`; None when that point
    did not run."""
    sizes = [_batch_size_of(item) for item in batches.raw]
    base = _batch_base(probes, sizes, state)
    if base is None:
        return None
    full = [item for item, s in zip(batches.raw, sizes, strict=True) if s == base][:4]
    # Every point, the user's batch size included, trains on the same few batches (tiled), so
    # that the points differ in batch size only: with bucketed or per-batch padded data, the
    # compute-only probe's 16 batches have other lengths than these.
    limit, source = memory.memory_limit(session)
    probes.memory_limit_mib = round(limit, 3) if limit is not None else None
    probes.memory_limit_source = source
    # The memory a point needs: at least its own tiled batches; and the working set per sample,
    # first from the whole fit's peak growth at batch `base` (an upper bound: it also holds the
    # model build and tracing), then from each point's own measured growth. A growth of zero
    # (memory the allocator kept from earlier work) gives no per-sample figure.
    per_sample_mib = _fit_mib_per_sample(session, state, base)
    batch_mib = sum(sampling.nbytes_tf(item) for item in full) / 2**20
    budget = session.budget("batch-size probe")
    left = paired_left(budget)  # from the probe's start: its first round counts
    meter_gpu, previous = memory.MemoryMeter(session).gpu, base
    functions = _PointFunctions(model, batches.element_spec, base, traced)
    arms: list[tuple[ProbePoint, pairs.ArmRecord]] = []
    datasets: list[Any] = []
    for factor in (1, *_BATCH_FACTORS):
        size = base * factor
        point = ProbePoint(value=size)
        probes.batch_probe.append(point)
        estimate = batch_mib * factor  # the tiled batches this point keeps in memory
        if per_sample_mib is not None:
            # GPU: the allocator's peak is a step's whole working set, which scales with the
            # batch; CPU: the peak RSS growth is the memory beyond what earlier points kept.
            extra = size if meter_gpu else max(0, size - previous)
            estimate = max(estimate, per_sample_mib * extra)
        point.memory_estimate_mib = round(estimate, 3)
        if factor > 1 and limit is not None and estimate > limit:  # b itself: fit ran it
            point.stopped = (
                f"not run: estimated {estimate:.3g} MiB more memory, over the {limit:g} MiB "
                f"limit ({source})"
            )
            break
        if _out_of_budget(session, budget, point, f"batch size {size}"):
            break
        meter = memory.MemoryMeter(session)
        meter.start()
        try:
            dataset = _cached_dataset(
                [_tile(item, factor, base) for item in full], functions.spec(size)
            )
        except Exception as exc:
            point.stopped = (
                "out of memory" if _is_oom(exc) else f"failed: {type(exc).__name__}: {exc}"
            )[:300]
            break
        functions.set_up(point)
        arm = _time_point(session, model, point, dataset, budget, f"batch size {size}",
                          functions.first_burst_steps)  # fmt: skip
        functions.keep(point)
        if arm is None:
            break
        arms.append((point, arm))
        datasets.append(dataset)
        growth = meter.growth_mib()
        if growth and size > previous:
            per_sample_mib = growth / (size if meter_gpu else size - previous)
        previous = size
    _pair_batch_points(session, model, functions, arms, datasets, left, budget)
    return datasets[0] if datasets else None


def _batch_base(probes: ProbeFacts, sizes: list[int | None], state: ProbeState) -> int | None:
    """The user's batch size (the largest of the sampled batches' ``sizes``), or None with
    ``probes.batch_probe_not_measured`` saying why the probe does not run."""
    if probes.compute_only_ms is None and not state.compute_skipped:
        probes.batch_probe_not_measured = "the compute-only probe did not run: " + (
            probes.compute_only_not_measured or ""
        )
        return None
    base = max((s for s in sizes if s), default=None)
    if not base:
        probes.batch_probe_not_measured = "the sampled batches have no batch dimension"
        return None
    return base


def _real_beside_the_point(
    session: CaptureSession,
    model: Any,
    probes: ProbeFacts,
    dataset: Any,
    real_kwargs: dict[str, Any],
) -> None:
    """The user's batch on its cached batches (``dataset``, the batch-size probe's first point)
    timed again in bursts alternating with the same ``fit`` on the user's own data, both one
    ``fit`` per burst like the probe's points, in the probe's phase
    (``probes.batch_real_paired``: A the real step, B the cached one).

    Why: the point is checked against the real step the compute-only probe timed, in another
    phase and in one interleaved ``fit``, and the machine's pace moves between phases
    (tests/scripts/padded_lstm.py in an idle stability run: the point at batch 32 took 7.24 ms
    against a window of 5.37 ms and a real step of 5.71 ms, while its three runs gave the
    point 6.84-7.24 ms and the window 5.37-6.53 ms; RD301 "not evaluated" in one run of
    three). Timed beside each other, a point that represents the user's step is not slower
    than the real step beyond the window's noise (:func:`_batch_inconsistency`). The rounds
    stop at the probe's allowance (``PAIRED_WALL_S``); a pair of fewer than
    ``INTERVAL_PAIRS`` pairs decides nothing there.

    Raises:
        Exception: whatever a ``fit`` burst raises outside Keras' own loop (the caller keeps
            the check as it was)."""
    budget = session.budget("batch-size probe")
    real_kwargs = _arrays_once(model, real_kwargs) or real_kwargs  # arrays: one dataset

    def burst(data: Any, kwargs: dict[str, Any] | None) -> Burst:
        def run() -> list[tuple[float, int]]:
            result = _run_point(session, model, data, budget, _PAIR_BURST_S, kwargs, 2)
            if result.stopped:
                raise RuntimeError(result.stopped)
            return result.timed()

        return run

    real = pairs.ArmRecord("real step", burst(None, real_kwargs))
    cached = pairs.ArmRecord(f"batch size {probes.batch_probe[0].value}", burst(dataset, None))
    why = pairs.alternate([real, cached], paired_left(budget))  # within its allowance only
    probes.batch_real_paired = pairs.pair(real, cached, phase=Phase.BATCH_PROBE, cut_short=why)


def _pair_batch_points(
    session: CaptureSession,
    model: Any,
    functions: _PointFunctions,
    arms: list[tuple[ProbePoint, pairs.ArmRecord]],
    datasets: list[Any],
    left: Callable[[], float],
    budget: Budget,
) -> None:
    """The batch-size points' paired rounds after their first bursts, and their samples/s: one
    ``fit`` per burst where each point has its own train function, else one interleaved
    ``fit`` for all rounds. Either way the rounds stop at their one early look where RD301's
    decision is already made (:func:`_early_look`)."""
    early = _early_look(session, [point.value for point, _ in arms])
    if functions.static:
        _pair_points(arms, left, Phase.BATCH_PROBE, before_burst=functions.set_up,
                     phase_left=budget.left, early=early)  # fmt: skip
    else:
        _pair_in_one_fit(session, model, arms, datasets, left, budget, early)
    for point, _ in arms:
        point.samples_per_s = round(point.value * 1000.0 / point.step_time_ms, 2)
        if early is not None:
            point.paired = early.mark(point.paired)


def _early_look(session: CaptureSession, sizes: list[int]) -> pairs.EarlyLook | None:
    """The batch-size probe's one early look (``pairs.EarlyLook``, at
    ``pairs.EARLY_LOOK_PAIRS`` pairs): it stops the rounds where RD301's decision is already
    made (``pairs.ThroughputDecided``, with the rule's ``min_speedup`` handed to the capture:
    ``WindowOptions.batch_min_speedup``), and says nothing on a phase noisy so far
    (``session.load_so_far``). None without the cut-off (then the rounds run to their floor or
    allowance). Why: on long steps the floor, 10 steps and 1 s per point, is more than the
    probe's allowance, spent where five pairs on one side of the cut-off already decide.
    Where the allowance ends the rounds with the decision not made, a second stage runs on to
    ``pairs.EXTENDED_PAIRS`` pairs within one more allowance (``pairs.EarlyLook.extends``):
    at 5 pairs one slow pair decides."""
    cutoff = session.options.batch_min_speedup
    if cutoff is None:
        return None

    def noisy() -> bool:
        load = session.load_so_far()
        return load is not None and load.noisy

    extension_s = PAIRED_WALL_S["batch-size probe"]  # a second stage: one more allowance
    return pairs.EarlyLook(pairs.ThroughputDecided(sizes, cutoff, noisy), extension_s=extension_s)


def _spe_values(current: int) -> tuple[int, int]:
    """The two ``steps_per_execution`` values the probe pairs (A, B), for a model compiled with
    ``current``: 1 and :data:`_SPE_PROBE` where the model runs 1 step per call (what the fix
    would give), else 1 and ``current``, the user's own setting.

    Why against 1 and not against a larger value: the pair 1 vs ``current`` is what the setting
    buys, with both ends on traced functions the check has or builds cheaply (the window's own
    at ``current``; one at 1, a plain call with no ``tf.while_loop`` to trace), and it also
    bounds what a larger value could still save: with a fixed host cost ``d`` per call, the
    step at 1 is ``c + d`` and at N ``c + d / N``, so the cost left at N, ``d / N``, is the
    measured saving over ``N - 1`` (RD403, Bounds). A pair N vs 2N would time a difference of
    ``d / 2N``, inside the noise for any N where the question matters, and trace one more
    multi-step function (seconds for an LSTM)."""
    return (1, _SPE_PROBE) if current <= 1 else (1, current)


def _spe_skip(probes: ProbeFacts, current: int, compute_skipped: bool) -> str | None:
    """Why the steps_per_execution probe does not run, or None. A model at 1 step per call with a
    compute-only step over :data:`_SPE_PROBE_MAX_STEP_MS` is not probed, for the 16-step
    function's tracing and bursts: its saving was not measured, and RD403 is not evaluated (a
    saving past RD403's cut-off would take several times the dispatch Keras' loop showed where
    the probe measured it). Nor where the compute-only probe was not run
    (``compute_skipped``, :func:`_compute_skip`). A model that already
    runs N > 1 steps per call is probed where one call (N compute-only steps) takes at most
    :data:`_SPE_MAX_CALL_S`: its pair reuses the window's function and traces only a plain one
    at 1, so its cost is the timed bursts, each one call after a warm-up call."""
    if probes.compute_only_ms is None:
        why = probes.compute_only_not_measured or ""
        if compute_skipped:  # a long step: no dispatch to measure (_compute_skip)
            return why
        return "the compute-only probe did not run: " + why
    call_s = current * probes.compute_only_ms / 1000.0
    if current > 1 and call_s > _SPE_MAX_CALL_S:
        return (
            f"not run: one call of {current} steps takes {call_s:.1f} s (compute-only), over "
            f"{_SPE_MAX_CALL_S:g} s: each burst at {current} would cost more than the 1 s each "
            "arm is timed for (the dispatch left at this setting is not measured)"
        )
    if current <= 1 and probes.compute_only_ms > _SPE_PROBE_MAX_STEP_MS:
        return (
            f"not run: the compute-only step takes {probes.compute_only_ms:.1f} ms, over "
            f"{_SPE_PROBE_MAX_STEP_MS:g} ms: per-step dispatch would have to cost "
            f"{probes.compute_only_ms * 0.2:.1f} ms to reach 20% of it (Keras' fit loop costs "
            "about 1 ms a step on a small LSTM, measured with Keras 3; not measured for this "
            "model)"
        )
    return None


class _Straddle:
    """``undecided`` for the steps_per_execution probe's pairs (``pairs.alternate``): whether
    their ratio's 90% interval straddles the ratio at which RD403's dispatch share reaches one
    of its cut-offs (``WindowOptions.spe_share_cutoffs``, the rule's ``min_dispatch_share`` and
    ``error_dispatch_share``; :func:`rnndoctor.dispatch.ratio_at_share`, with the compute-only
    step's share of the real step the rule uses, :func:`rnndoctor.dispatch.real_scale`).
    ``why`` says so, for ``PairedRatio.second_stage``.

    The interval read is the pairs' own, not widened for the machine's load as the rule widens
    it: a noisy phase makes the rule's figure inconclusive, which more pairs do not undo."""

    def __init__(
        self,
        probes: ProbeFacts,
        step_ms: float | None,
        current: int,
        cutoffs: Sequence[float],
        arms: list[tuple[ProbePoint, pairs.ArmRecord]],
    ):
        self.probes, self.step_ms, self.current = probes, step_ms, current
        self.cutoffs, self.arms = tuple(cutoffs), arms
        self.why: str | None = None
        self.first_pairs = 0  # the pairs when it asked for a second stage

    def __call__(self, records: Sequence[pairs.ArmRecord]) -> bool:
        if len(records) < 2 or not self.cutoffs:
            return False
        one, many = records[0], records[1]
        n = min(len(one.per_step_ms), len(many.per_step_ms))
        if n < INTERVAL_PAIRS:
            return False
        result = paired_from_samples(one.per_step_ms[:n], many.per_step_ms[:n])
        value = self.arms[1][0].value
        # the compute-only step the rule scales: at 1 for a model at 1, else at its own N
        compute_ms = result.median_a if self.current <= 1 else result.median_b
        # without a window step the rule divides by the step at 1 (rules/rd403_tiny_steps.py)
        scale = dispatch.real_scale(self.probes, compute_ms, self.step_ms or result.median_a)
        for cutoff in self.cutoffs:
            at = dispatch.ratio_at_share(cutoff, scale, value, self.current)
            if result.low < at <= result.high:
                self.why = (
                    f"RD403's cut-off {cutoff:.0%} of the step (a ratio of {at:.3f}x) was inside "
                    f"the 90% interval {result.low:.3f}–{result.high:.3f}x of the first "
                    f"{n} pairs: pairs went on to {pairs.MAX_ROUNDS} or the time allowance"
                )
                self.first_pairs = n
                return True
        return False


def _spe_straddle(
    session: CaptureSession,
    probes: ProbeFacts,
    current: int,
    arms: list[tuple[ProbePoint, pairs.ArmRecord]],
) -> _Straddle:
    """The second-stage test of the steps_per_execution probe's pairs (:class:`_Straddle`), on
    the window's median step and the cut-offs in ``session.options``."""
    steps = session.facts.steps
    step_ms = steps.median_step_time_ms if steps is not None else None
    return _Straddle(probes, step_ms, current, session.options.spe_share_cutoffs, arms)


def _spe_probe(
    session: CaptureSession,
    model: Any,
    probes: ProbeFacts,
    batches: Batches,
    state: ProbeState,
    saved: dict[str, Any],
) -> None:
    """Compute-only at the two values of :func:`_spe_values` (1 and 16, or 1 and the user's
    setting), in interleaved bursts: ``probes.spe_probe[1].paired`` is A = 1 over B = the other.
    Keras builds the train function of the value the model was not compiled with; the model's
    own is restored afterwards."""
    current = int(saved["steps_per_execution"] or 1)
    skip = _spe_skip(probes, current, state.compute_skipped)
    if skip is not None:
        probes.spe_probe_not_measured = skip
        return
    budget = session.budget("steps_per_execution probe")
    dataset = _cached_dataset(batches.raw, batches.element_spec)
    # the window's function (the compute-only probe ran it) at the model's own setting
    functions = {current: saved["train_function"] or model.train_function}
    arms: list[tuple[ProbePoint, pairs.ArmRecord]] = []

    def set_up(point: ProbePoint) -> None:
        model.steps_per_execution = point.value
        model.train_function = functions.get(point.value)  # None: Keras builds it

    try:
        for value in _spe_values(current):
            point = ProbePoint(value=value)
            probes.spe_probe.append(point)
            if _out_of_budget(session, budget, point, str(value)):
                break
            try:
                set_up(point)
            except Exception as exc:
                point.stopped = f"failed: {type(exc).__name__}: {exc}"[:300]
                break
            # a call of several steps is timed once per burst (it is N steps, and at least as
            # long as two calls at 1); a call of one step twice
            calls = 1 if value > 1 and current > 1 else 2
            arm = _time_point(session, model, point, dataset, budget, str(value), calls)
            if arm is None:
                break
            functions[value] = model.train_function  # built once, swapped in for each burst
            arms.append((point, arm))
        # The allowance counts from here: the first round holds the new function's tracing.
        # RD403's share rests on this ratio alone, near its cut-off for small models: its
        # rounds go on past the floor until the interval is tight (pairs.PRECISE_WIDTH), and
        # then, where it straddles RD403's cut-off, in a second stage (_spe_straddle).
        straddle = _spe_straddle(session, probes, current, arms)
        _pair_points(arms, paired_left(budget), Phase.SPE_PROBE, before_burst=set_up,
                     precise=True, phase_left=budget.left, undecided=straddle)  # fmt: skip
        point = arms[1][0] if len(arms) > 1 else None
        # only where the second stage ran a round (the first may have spent the allowance)
        if straddle.why and point and point.paired and point.paired.pairs > straddle.first_pairs:
            point.paired = replace(point.paired, second_stage=straddle.why)
    finally:
        model.steps_per_execution = saved["steps_per_execution"]
        model.train_function = saved["train_function"]
    from rnndoctor.capture import distribute  # under a tf.distribute strategy

    reason = distribute.spe_failure(model, probes.spe_probe)
    if reason:
        probes.spe_probe_not_measured = reason


# -- the sequence length probe (RD501, RD502) -------------------------------------------------
# The padding rules estimate a step after bucketing from the padded timesteps it saves, and only
# the part of the step that grows with the padded length shrinks: the optimizer's update, the
# layers after the RNN and the host's dispatch do not. A new user's Bidirectional GRU was
# estimated at 1.77x and measured at 1.32x by --verify (and by hand, 51 -> 38 ms a step); its
# RD502 at 1.06x, from a sample, flipped against its 1.05x cut-off. The probe times the
# compute-only step on the sampled batches as they are and cut to half their length.
# The probe runs where RD501 or RD502 can report: a sequence input padded to one global maximum
# (RD502) with at least 1 - 1 / 1.05 of its timesteps padding (below it per-batch padding cannot
# reach RD502's default min_speedup, 1.05x), or with at least 30% (RD501's default
# min_padded_fraction). Lower options leave the estimate unmeasured, saying so. Not on the
# fixed demo's bucketed batches (about 10% padded, not to one maximum).
_LENGTH_PROBE_MIN_PADDING = 1 - 1 / 1.05
_LENGTH_PROBE_RD501_PADDING = 0.30
# The shortest time axis the probe halves: half of it must leave the RNN a loop of at least two
# steps. Source: rnndoctor's choice.
_LENGTH_PROBE_MIN_STEPS = 4
# Not run, for its cost, where the window's median step is longer than this: its three pairs
# and a new trace cost the bundled demo (0.28 s steps) 3.5 s, its check 2.25x a bare run
# against 1.90x without the probe (benchmarks/overhead.py --against, paired, README), where
# issue 11 allows no stronger measurement to cost more wall time; and the demo's LSTM grew
# 96-100% with the length, so its estimate moved within its interval (2.2x either way,
# --verify: 2.13x). The costs that do not grow with the length weigh most in short steps (a
# GRU step of 50 ms: 13% of it; RD501 1.77x -> 1.57x). Source: rnndoctor's choice, from those
# figures. Not run is not measured: the estimates stay upper bounds and say so.
_LENGTH_PROBE_MAX_STEP_MS = 100.0


def _x_of(item: Any) -> Any:
    """A sampled batch's ``x`` (``item``, or its first part)."""
    return item[0] if isinstance(item, tuple) else item


def _length_skip(session: CaptureSession, batches: Batches) -> str | None:
    """Why the sequence length probe does not run ("" where there is nothing for it to do: no
    sequence input is padded as RD501 or RD502 can report it, and the reports list no probe
    that was not needed), or None: it needs the model's one sequence input padded, sampled
    batches, and ``x`` one array whose second axis is the time axis, of at least
    :data:`_LENGTH_PROBE_MIN_STEPS` steps in every batch (a dict or list of inputs is not cut)."""
    sequences = session.facts.sequences
    records = [r for r in (sequences.inputs if sequences else []) if not r.ragged]
    padded = [
        r for r in records
        if (r.padded_fraction or 0.0) >= _LENGTH_PROBE_RD501_PADDING
        or (r.global_max_padding and (r.padded_fraction or 0.0) >= _LENGTH_PROBE_MIN_PADDING)
    ]  # fmt: skip
    if not padded:
        return ""
    steps = session.facts.steps
    step_ms = steps.median_step_time_ms if steps is not None else None
    if step_ms is not None and step_ms > _LENGTH_PROBE_MAX_STEP_MS:
        return (
            f"not run, for its cost: the window's step takes {step_ms:.0f} ms, over "
            f"{_LENGTH_PROBE_MAX_STEP_MS:g} ms (three pairs of steps at two lengths and a new "
            "trace)"
        )
    if len(records) != 1:
        return f"not run: it cuts one sequence input; the model has {len(records)}"
    if not batches.raw:
        return f"not run: no sampled batches ({batches.not_measured or 'none'})"
    shapes = [getattr(_x_of(b), "shape", None) for b in batches.raw]
    if any(s is None or len(s) < 2 or s[1] is None for s in shapes):
        return "not run: the input is not one array with a time axis (a dict or list of inputs)"
    shortest = min(int(s[1]) for s in shapes)
    if shortest < _LENGTH_PROBE_MIN_STEPS:
        return f"not run: a sampled batch of {shortest} timesteps, too few to halve"
    return None


def _time_axis(spec: Any) -> int | None:
    """The second axis of ``spec``'s ``x`` (its first part where it is a tuple), or None where
    it is not known (a spec of no fixed length, or none)."""
    x = _x_of(spec) if spec is not None else None
    shape = getattr(x, "shape", None)
    if shape is None or shape.rank is None or shape.rank < 2 or shape[1] is None:
        return None
    return int(shape[1])


def _halved(item: Any, per_step_targets: bool) -> Any:
    """``item`` (``x``, or ``(x, y[, sample_weight])``) with ``x`` cut to the first half of its
    second axis, and, where the targets are per timestep (``per_step_targets``), every other
    part of the same length on that axis (the targets, per-step weights)."""
    steps = int(_x_of(item).shape[1])

    def cut(leaf: Any) -> Any:
        shape = getattr(leaf, "shape", None)
        if shape is None or len(shape) < 2 or shape[1] != steps:
            return leaf
        return leaf[:, : steps // 2]

    return _cut_parts(item, cut, per_step_targets)


def _halved_spec(spec: Any, steps: int, per_step_targets: bool, any_length: bool = False) -> Any:
    """``spec`` with a second axis of ``steps`` cut to ``steps // 2`` as :func:`_halved` cuts
    the batches, or, with ``any_length``, left unknown (None stays None)."""
    import tensorflow as tf

    def cut(leaf: Any) -> Any:
        if isinstance(leaf, tf.TensorSpec) and leaf.shape.rank and leaf.shape.rank >= 2:
            if leaf.shape[1] == steps:
                dims = leaf.shape.as_list()
                dims[1] = None if any_length else steps // 2
                return tf.TensorSpec(dims, leaf.dtype, leaf.name)
        return leaf

    return None if spec is None else _cut_parts(spec, cut, per_step_targets)


def _cut_parts(item: Any, cut: Callable[[Any], Any], per_step_targets: bool) -> Any:
    """``cut`` applied to a batch's (or its spec's) ``x``, and to every leaf of its other parts
    where the targets are per timestep; ``item`` alone is ``x``."""
    import tensorflow as tf

    if not isinstance(item, tuple):
        return cut(item)
    rest = tuple(tf.nest.map_structure(cut, p) if per_step_targets else p for p in item[1:])
    return (cut(item[0]), *rest)


def _length_probe(
    session: CaptureSession, model: Any, probes: ProbeFacts, batches: Batches, saved: dict
) -> None:
    """The compute-only step at the sampled batches' length and at half of it, in interleaved
    bursts (``probes.length_probe``: ``[full, half]``, ``value`` the mean padded length and the
    mean halved length, timesteps; ``length_probe[1].paired``: A = full over B = half). Each
    arm runs its own train function, traced for its own shapes (the full length the window's;
    the half a new one, built by Keras on its first burst), swapped in before each burst: one
    function for both would be traced again for an unknown length (``reduce_retracing``), which
    runs slower on CPU than a trace for one length, and the share would read low. Each arm's
    first burst is its warm-up. Where the window's function is traced for one length and the
    model trains on lengths mixed (:func:`_mixed_lengths`), a third arm times the halved
    batches on a function traced for any length, which RD501's and RD502's fixes run
    (:func:`_any_length_arm`). Run only where :func:`_length_skip` says so."""
    budget = session.budget(Phase.LENGTH_PROBE)
    record = session.facts.sequences.inputs[0]
    per_step = bool(record.targets_per_step)
    lengths = [int(_x_of(b).shape[1]) for b in batches.raw]
    half_raw = [_halved(b, per_step) for b in batches.raw]
    uniform = len(set(lengths)) == 1
    spec = _halved_spec(batches.element_spec, lengths[0], per_step) if uniform else None
    full = round(statistics.fmean(lengths))
    half = round(statistics.fmean(n // 2 for n in lengths))
    datasets = (
        (full, _cached_dataset(batches.raw, batches.element_spec)),
        (half, _cached_dataset(half_raw, spec)),
    )
    functions: dict[int, Any] = {}  # each point's train function (id of the point)

    def set_up(point: ProbePoint) -> None:
        model.train_function = functions.get(id(point))  # None: Keras builds it

    arms: list[tuple[ProbePoint, pairs.ArmRecord]] = []
    for value, dataset in datasets:
        point = ProbePoint(value=value)
        probes.length_probe.append(point)
        if value == full:
            functions[id(point)] = saved["train_function"] or model.train_function
        if _out_of_budget(session, budget, point, f"{value} timesteps"):
            break
        set_up(point)
        # one step a burst at least (and _PAIR_BURST_S): the demo's are 0.14-0.28 s
        arm = _time_point(session, model, point, dataset, budget, f"{value} timesteps", 1)
        if arm is None:
            if point.stopped:
                probes.length_probe_not_measured = f"{value} timesteps: {point.stopped}"[:300]
            if value == half and (point.stopped or "").startswith("failed"):
                probes.length_rejected = half  # the model trains on one length only
            break
        functions[id(point)] = model.train_function
        arms.append((point, arm))
    if len(arms) == 2:  # before the pairs, whose allowance starts after it
        if budget.expired():
            probes.length_mixed_not_tried = f"out of its {budget.seconds:g} s time budget"
        else:
            _mixed_lengths(session, model, probes, [half_raw[0], batches.raw[0]])
        any_arm = _any_length_arm(session, model, probes, budget, batches.element_spec,
                                  half_raw, per_step, lengths[0] if uniform else None)  # fmt: skip
        if any_arm is not None:
            functions[id(any_arm[0])] = model.train_function
            arms.append(any_arm)
    why = _pair_points(arms, paired_left(budget, len(arms) / 2), Phase.LENGTH_PROBE,
                       before_burst=set_up, phase_left=budget.left)  # fmt: skip
    if len(arms) == 3:  # the function for any length against the half's own, A = the half's
        arms[2][0].paired = pairs.pair(arms[1][1], arms[2][1], phase=Phase.LENGTH_PROBE,
                                       cut_short=why)  # fmt: skip


def _any_length_arm(
    session: CaptureSession,
    model: Any,
    probes: ProbeFacts,
    budget: Budget,
    spec: Any,
    half_raw: list[Any],
    per_step: bool,
    steps: int | None,
) -> tuple[ProbePoint, pairs.ArmRecord] | None:
    """The halved batches (``half_raw``) on a train function traced for any length
    (``probes.length_any``, paired with ``length_probe[1]`` by the caller: A = the half on its
    own function, B = this one), or None where it is not run (``probes.length_any_not_measured``
    says why, where a reason is worth saying). ``spec``: the window's element spec; ``steps``:
    the sampled batches' one length (None: several).

    Why: RD501's bucketing and RD502's per-batch padding feed ``fit`` a dataset whose time axis
    is None, so Keras traces its train function once, for any length, and the fix runs that
    function, not the fixed-length ones of the other arms. How much slower it runs depends on
    the model and the device, so it is measured rather than assumed: a new user's tagger
    (Embedding(mask_zero) -> LSTM(32, return_sequences) -> Dense, batch 16) took 8.2 ms a step
    at 60 timesteps on one for any length against 7.5 ms on one for 60 (one run each); the
    same, interleaved in one process (10 rounds of 30 steps), 0.98x, and this probe gave 1.08x
    (0.93-1.11x, 3 pairs) at 30 timesteps. Run where the window's batches have
    one length (a per-batch padded input's function is for any length already) and the model
    trained on lengths mixed in one function. Where ``fit`` took arrays and no GPU runs the
    step (``Facts.fix_pipeline_on_step_cores``), the batches come through a pipeline of the
    fix's kind, one sequence at a time (:func:`_fix_pipeline`, ``probes.length_any_pipeline``),
    so that the ratio holds that pipeline's cost on the cores that run the step as well; where that
    pipeline cannot be built (``probes.length_any_pipeline_error``), cached batches."""
    if steps is None or probes.length_mixed_error is not None:
        return None
    if _time_axis(spec) != steps:  # the window's function is for any length already
        return None
    if probes.length_mixed_not_tried is not None:
        probes.length_any_not_measured = probes.length_mixed_not_tried
        return None
    point = ProbePoint(value=steps // 2)
    probes.length_any = point
    if _out_of_budget(session, budget, point, "any length"):
        probes.length_any_not_measured = point.stopped
        return None
    model.train_function = None  # Keras traces one for the dataset's unknown length
    any_spec = _halved_spec(spec, steps, per_step, any_length=True)
    dataset = None
    if session.facts.fix_pipeline_on_step_cores():
        try:
            dataset = _fix_pipeline(half_raw, steps // 2, any_spec)
        except Exception as exc:  # parts that are not one row per sequence, say: cached batches
            probes.length_any_pipeline_error = error_gist(exc)
    piped = dataset is not None
    if not piped:
        dataset = _cached_dataset(half_raw, any_spec)
    fed = ", fed per sequence" if piped else ""
    what = f"{point.value} timesteps, traced for any length{fed}"
    arm = _time_point(session, model, point, dataset, budget, what, 1)
    if arm is not None and piped:
        probes.length_any_pipeline = FIX_PIPELINE
    if arm is None:
        probes.length_any_not_measured = point.stopped or "no step timed"
        return None
    return point, arm


# The fix's pipeline as the third arm of the length probe runs it (probes.length_any_pipeline):
# RD501's and RD502's fixes over arrays, their map(unpad) cached after the first epoch.
FIX_PIPELINE = (
    "from_tensor_slices -> shuffle -> bucket_by_sequence_length (one bucket) -> prefetch(2)"
)


def _fix_pipeline(raw: list[Any], steps: int, spec: Any) -> Any:
    """The sampled batches ``raw`` (each of ``steps`` timesteps) cut into single sequences and
    batched again the way RD501's and RD502's fixes batch them
    (:data:`FIX_PIPELINE`): ``from_tensor_slices`` over the arrays, ``shuffle`` over all of them
    (as the fixes do under Keras' default ``shuffle=True``; with ``shuffle=False`` they leave it
    out, and its cost is counted in excess), ``bucket_by_sequence_length`` (``group_by_window``
    and ``padded_batch``) into batches of the sampled size (the most common), ``prefetch``.
    Every sequence has the same length here, so the batches are the cached arm's, in another
    order, and their time axis is relaxed to ``spec``'s (unknown), as the fix's ``unpad``
    leaves it. Left out: the fix's ``map(unpad)``, whose ``cache()`` keeps its results after
    the first epoch, and tf.data's autotuning (a fixed buffer of 2, as every probe dataset has:
    :func:`_prefetched`). RD502's fix batches with ``padded_batch`` alone, a part of these
    ops (``group_by_window`` ends in it), so its cost is counted in full or more.

    Why: on 2 CPU cores, tests/scripts/padded_lstm.py's model (LSTM(8), batch 32, 20 timesteps)
    took 5.5-6.0 ms a step fed by this pipeline against 4.2-5.6 ms on the same batches cached
    by :func:`_cached_dataset`, both on a function traced for any length and any batch size
    (1.18x, 1.04-1.30x over 8 interleaved rounds of 60 steps, end to end); the window's array
    adapter slices whole batches instead, and this cost is new with the fix.
    """
    import tensorflow as tf

    batch = stats.most_common_batch_size([int(_x_of(item).shape[0]) for item in raw])
    rows = tf.nest.map_structure(lambda *parts: tf.concat(parts, 0), *raw)
    count = int(_x_of(rows).shape[0])
    dataset = tf.data.Dataset.from_tensor_slices(rows).shuffle(count)
    dataset = dataset.bucket_by_sequence_length(
        lambda *parts: tf.shape(parts[0])[0], [steps + 1], [batch, batch]
    )
    return _prefetched(_shaped(dataset.repeat(), spec))


def _mixed_lengths(
    session: CaptureSession, model: Any, probes: ProbeFacts, items: list[Any]
) -> None:
    """Two training steps through one new train function on batches of two lengths (``items``:
    a halved batch, then the full one, in a dataset whose time axis is unknown, as a bucketed
    pipeline's or a per-batch padded one's is), as RD501's and RD502's fixes would feed the
    model; ``probes.length_mixed_error`` says how it failed, where it did (an error other than
    out of memory).

    Why: each arm of :func:`_length_probe` runs a function traced for its own length, and a
    model can train at either length alone and fail on lengths mixed in one trace. A new
    user's tagger (``Input(shape=(60,))``, two LSTMs with ``return_sequences=True``,
    ``TimeDistributed(Dense)``) trained at 60 and at 30 timesteps in the probe, and the
    bucketing fix, pasted, failed at its first batch: traced for an unknown length,
    ``TimeDistributed`` gave logits of ``[16 16]`` against labels of ``[16 30]`` (with
    ``Dense`` in its place, which applies to the last axis, both lengths train through one
    function). Costs one trace and two steps, within the probe's phase."""
    spe = int(getattr(model, "steps_per_execution", 1) or 1)  # tf_keras': a variable
    model.train_function = None  # Keras builds one for the dataset's unknown length
    model.steps_per_execution = 1  # two steps, not one call of N (Keras runs N at least)
    dataset = _cached_dataset(items, None)  # two lengths concatenated: the time axis is None
    fit = session.original_fit()
    try:
        fit(model, x=dataset, epochs=1, verbose=0, shuffle=False, steps_per_epoch=len(items))
    except Exception as exc:
        if not _is_oom(exc):
            probes.length_mixed_error = error_gist(exc)
    finally:
        model.steps_per_execution = spe
        model.stop_training = False
        _collect_fit_garbage()


def error_gist(exc: BaseException) -> str:
    """``exc`` in one line, at most 300 characters: its type and the last line of its message
    that says what failed. A TensorFlow graph error's message starts with "Graph execution
    error:" and the op's Python stack; its last line names the check that failed (``assertion
    failed: [Condition x == y did not hold element-wise:] [x = ] [16 30] [y = ] [16 16]``), with
    the tensors' and the node's names taken out. An autograph error ("in user code:", the
    frames, then ``ValueError: Input 0 of layer ... expected shape=(None, 60), found
    shape=(16, 30)``) gives its last line as it is: cut at 300 characters, its first lines had
    said only where (a new user's length probe on tf_keras)."""
    text = str(getattr(exc, "message", None) or exc)
    text = text.split("Arguments received by")[0]  # Keras 3's layer-call wrapper: its arguments
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    said = [
        line for line in lines
        if not line.startswith(("File ", "[[", "Detected at node", "Graph execution error",
                                "Exception encountered when calling"))
    ]  # fmt: skip
    gist = said[-1] if said else (lines[0] if lines else "")
    gist = re.sub(r"\s*\[\[\{\{node [^}]*\}\}\]\]|\s*\[Op:[^\]]*\]", "", gist)
    gist = re.sub(r" \([\w.-]*[/:][\w/:.-]*\)", "", gist)  # a tensor's name: (loss/Shape_1:0)
    name = type(exc).__name__
    # autograph's "in user code:" error ends in the raised error's own "ValueError: ..." line
    return (gist if gist.startswith(f"{name}: ") else f"{name}: {gist}")[:300]
