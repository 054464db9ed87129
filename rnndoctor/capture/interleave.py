"""Interleaved rounds inside one ``fit``: the batch-size probe's paired bursts without a ``fit``
call per burst.

The paired rounds of :mod:`rnndoctor.capture.pairs` run one Keras ``fit`` per burst, and every
``fit`` costs its own set-up and an untimed first step (the iterator starts). For the bundled
demo (a 256-unit LSTM on CPU, steps of 0.4–1 s on a loaded machine) the batch-size probe's 6
bursts of 1–2 timed steps took 13.2 s of ``fit`` calls, of which 8.3 s were timed steps
(per-burst wall times, load average 2–5, issue 11). Here one ``fit`` runs every round: its
dataset is the arms' cached datasets chosen in a fixed schedule
(``tf.data.Dataset.choose_from_datasets``), a burst of arm 0, then of arm 1, ... per round; a
callback times each execution, from one ``on_train_batch_end`` to the next, and hands each
completed round to the caller, which adds the bursts to the arms' records and says when to
stop. The first execution of the ``fit`` (one
``steps_per_execution`` of arm 0) is its warm-up: it starts the iterator and is not timed.

The pairs stay interleaved (a burst of each arm per round, back to back) and each burst's
per-step time is still its timed time over its steps, so :func:`rnndoctor.capture.pairs.pair`
compares the arms as before. All arms share one traced train function: their batches differ in
size only and the datasets' element spec leaves the batch dimension unknown.

:class:`RoundClock` (which arm and round each execution belongs to) is pure Python and
unit-tested without TensorFlow.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from rnndoctor.capture.step_window import read_back

# Timed seconds per burst of an arm inside a round: with no per-burst set-up, a burst only has
# to be long enough that the switch from one arm to the next (a different batch shape) is a
# small part of it; for steps of 100 ms and more a burst is one execution. Source: rnndoctor's
# choice, a tenth of the 1 s floor per arm (rnndoctor.paired.MIN_SECONDS), so that an
# arm reaches the floor in about 10 rounds.
BURST_S = 0.1
MAX_STEPS = 100_000  # steps_per_epoch of the interleaved fit (the callback stops it)
# The most rounds of one interleaved fit. pairs.MAX_ROUNDS (24) bounds the fit calls of rounds
# run one fit per burst; here a round costs no set-up, only its steps, and the comparison's
# time allowance (budget.PAIRED_WALL_S) bounds them. Bursts are planned from step times taken
# elsewhere (the window's, a first burst's): when those were too long, bursts are short and an
# arm needs more rounds to reach its 1 s. Source: rnndoctor's choice.
MAX_ROUNDS = 200

# A completed round: per arm, its burst's timed intervals as (ms per step, steps covered).
Round = list[list[tuple[float, int]]]


@dataclass(frozen=True)
class RoundPlan:
    """The schedule of one interleaved ``fit``: ``bursts[i]`` steps of arm ``i`` per round (each
    a multiple of ``steps_per_execution``), after ``warmup`` untimed steps of arm 0."""

    bursts: tuple[int, ...]
    warmup: int

    @property
    def length(self) -> int:
        """Steps per round."""
        return sum(self.bursts)

    def arm_of(self, position: int) -> int:
        """The arm of the step at ``position`` (0-based) inside a round."""
        for arm, steps in enumerate(self.bursts):
            if position < steps:
                return arm
            position -= steps
        raise ValueError(f"position {position} is past the round's {self.length} steps")

    def choices(self) -> list[int]:
        """The arm of every step of one round, in order (``choose_from_datasets``' schedule)."""
        return [arm for arm, steps in enumerate(self.bursts) for _ in range(steps)]


def plan(step_ms: Sequence[float], steps_per_execution: int = 1) -> RoundPlan:
    """Bursts of about :data:`BURST_S` timed seconds per arm, from each arm's step time (ms, its
    first burst's median), rounded up to whole executions.

    Raises:
        ValueError: no arm, a step time that is not positive, or ``steps_per_execution`` < 1.
    """
    if not step_ms or min(step_ms) <= 0.0 or steps_per_execution < 1:
        raise ValueError(f"need positive step times and steps_per_execution >= 1: {step_ms}")
    spe = steps_per_execution
    bursts = tuple(
        spe * max(1, math.ceil(BURST_S * 1000.0 / ms / spe)) for ms in step_ms
    )  # e.g. 250 ms -> 1 step; 2 ms -> 50 steps
    return RoundPlan(bursts, spe)


@dataclass
class RoundClock:
    """Attributes each timed execution of an interleaved ``fit`` to its arm and round.

    ``feed(batch, now_s)`` is called at every ``on_train_batch_end``: ``batch`` is Keras' index
    of the execution's last step (``end_step`` in keras/src/backend/tensorflow/trainer.py
    ``fit``, Keras >= 3.11; ``step + step_increment`` in tf_keras), or, with ``shared_index``,
    of its first (Keras 3.0-3.10 pass one index to both batch hooks, the first step's where
    the epoch's length is known, as it is here:
    :class:`rnndoctor.capture.step_window.BatchIndex`); ``now_s`` a clock in seconds. The
    first call only sets the clock (the warm-up execution).
    """

    plan: RoundPlan
    shared_index: bool = False
    last: tuple[int, float] | None = None
    current: Round = field(default_factory=list)
    round_started_s: float | None = None  # when the running round began (``now_s``)
    last_round_s: float = 0.0  # the wall time of the last completed round, in seconds

    def __post_init__(self) -> None:
        self.current = [[] for _ in self.plan.bursts]

    def feed(self, batch: int, now_s: float) -> Round | None:
        """Records one execution; returns the round it completes, or None."""
        if self.last is None:
            self.last = (batch, now_s)
            self.round_started_s = now_s
            return None
        last_batch, last_s = self.last
        self.last = (batch, now_s)
        covered = batch - last_batch  # the steps between two last (or two first) steps
        first = batch if self.shared_index else last_batch + 1  # the execution's first step
        position = first - self.plan.warmup  # after the warm-up
        if covered < 1 or position < 0:
            return None
        within = position % self.plan.length
        arm = self.plan.arm_of(within)
        self.current[arm].append(((now_s - last_s) * 1000.0 / covered, covered))
        if (within + covered) % self.plan.length:
            return None
        done, self.current = self.current, [[] for _ in self.plan.bursts]
        self.last_round_s = now_s - (self.round_started_s or now_s)
        self.round_started_s = now_s
        return done


def dataset(arms: Sequence[Any], round_plan: RoundPlan) -> Any:
    """One dataset: ``round_plan.warmup`` elements of ``arms[0]``, then rounds of bursts of each
    arm's dataset in turn, forever (each arm's dataset repeats its cached batches)."""
    import tensorflow as tf

    warm = tf.data.Dataset.from_tensor_slices(tf.zeros([round_plan.warmup], tf.int64))
    rounds = tf.data.Dataset.from_tensor_slices(tf.constant(round_plan.choices(), tf.int64))
    return tf.data.Dataset.choose_from_datasets(list(arms), warm.concatenate(rounds.repeat()))


def without_autotune(dataset: Any) -> Any:
    """``dataset`` with tf.data's autotuning off (``tf.data.Options().autotune.enabled``), for
    a probe's own datasets only: tf.data merges the options of a dataset's inputs, so a
    pipeline built on this one (:func:`dataset` over its arms) has it off too.

    A probe's datasets hold batches cached in memory, prefetched by a fixed buffer: nothing to
    tune. With autotuning on, the iterator's root owns a background thread
    (``tensorflow::data::RootDataset``, its ``UnboundedThreadPool``), and destroying the
    iterator waits for that thread: 3 to 4.6 s at the end of the demo's batch-size probe, with
    no CPU used (a native stack taken with gdb during the wait showed
    ``RootDataset::Iterator::~Iterator`` in ``LogicalThreadWrapper::~LogicalThreadWrapper``,
    reached from the garbage collection of Keras' epoch iterator)."""
    import tensorflow as tf

    options = tf.data.Options()
    options.autotune.enabled = False
    return dataset.with_options(options)


def round_timer(clock: RoundClock, on_round: Callable[[Round], bool], deadline: float) -> Any:
    """A Keras callback that feeds ``clock`` at each ``on_train_batch_end`` (after reading the
    step's logs back, so that the step's work has finished) and stops its ``fit`` when
    ``on_round`` returns True for a completed round, or at ``deadline`` (``time.monotonic()``)."""
    import keras

    class RoundTimer(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            read_back(logs)  # the step's work has finished
            done = clock.feed(int(batch), time.perf_counter())
            if (done is not None and on_round(done)) or time.monotonic() >= deadline:
                self.model.stop_training = True

    return RoundTimer()
