"""Executions of ``steps_per_execution`` steps counted right in every Keras: Keras 3.0-3.10 pass
one index to both batch hooks (the execution's first step; in 3.0-3.6 its last where the epoch's
length is unknown), Keras >= 3.11 and tf_keras the first and the last step
(rnndoctor.capture.step_window.BatchIndex). Under Keras 3.6 a ``steps_per_execution=8`` window
counted every execution as 1 step and measured 343.6 ms a step where the real step was 41 ms.
Pure: the window callback, the interleaved rounds' clock and the index, driven as each Keras
drives them, with no TensorFlow."""

from __future__ import annotations

import pytest
from test_interleave import _feed
from test_window_samples import _Clock, _Window

from rnndoctor.capture import interleave
from rnndoctor.capture.step_window import BatchIndex, WindowOptions

NEW, SHARED, SHARED_OLD = BatchIndex(), BatchIndex(shared=True), BatchIndex(True, True)


@pytest.mark.parametrize(
    ("version", "tf_keras", "expected"),
    [
        ("3.15.1", False, NEW),
        ("3.11.0", False, NEW),
        ("3.10.0", False, SHARED),
        ("3.7.0", False, SHARED),
        ("3.6.0", False, SHARED_OLD),
        ("3.0.5", False, SHARED_OLD),
        ("2.21.0", True, NEW),  # tf_keras: step and step + step_increment
        (None, False, NEW),
        ("nightly", False, NEW),
    ],
)
def test_the_numbering_follows_the_installed_keras(version, tf_keras, expected):
    assert BatchIndex.of(version, tf_keras) == expected


def test_an_execution_counts_its_steps_under_each_numbering():
    # 8 steps per execution, the execution of steps 16-23 of a 100-step epoch
    assert NEW.steps(16, 23, 8, 100) == 8 and NEW.last_step(16, 23, 8, 100) == 24
    assert SHARED.steps(16, 16, 8, 100) == 8 and SHARED.last_step(16, 16, 8, 100) == 24
    # the epoch's last execution holds 4 steps (96-99): partial
    assert NEW.steps(96, 99, 8, 100) == 4
    assert SHARED.steps(96, 96, 8, 100) == 4 and SHARED.last_step(96, 96, 8, 100) == 100
    # an epoch of unknown length: 3.7-3.10 pass the first step, 3.0-3.6 the last
    assert SHARED.steps(16, 16, 8, None) == 8 and SHARED.last_step(16, 16, 8, None) == 24
    assert SHARED_OLD.steps(23, 23, 8, None) == 8
    assert SHARED_OLD.last_step(23, 23, 8, None) == 24
    # one step per execution: the same everywhere
    assert {i.steps(5, 5, 1, 100) for i in (NEW, SHARED, SHARED_OLD)} == {1}


class _Model:
    steps_per_execution = 4


@pytest.mark.parametrize("index", [NEW, SHARED])
def test_the_window_measures_the_step_not_the_execution(index):
    """16 executions of 4 steps, 10 ms a step: 10 ms a step and 64 steps under either
    numbering (before, 40 ms a step and 16 steps under the shared one)."""
    clock = _Clock()
    window = _Window(WindowOptions(warmup_steps=0, measured_steps=100, profile_steps=0), clock)
    window.batch_index, window.model, window.params = index, _Model(), {"steps": 64}
    window.batch_size = 32
    window.on_epoch_begin(0)
    for first in range(0, 64, 4):
        window.on_train_batch_begin(first)
        clock.t += 0.040
        window.on_train_batch_end(first if index.shared else first + 3, {"loss": 1.0})
    times = window.step_times(32)
    assert times.median_step_time_ms == pytest.approx(10.0)
    assert window.steps_done == 64 and times.final_loss_step == 64


def test_the_interleaved_rounds_attribute_each_execution_under_the_shared_index():
    """The batch-size probe's one-fit rounds (a known epoch length: each index the execution's
    first step), as test_interleave's multi-step case with Keras 3.0-3.10's indices."""
    clock = interleave.RoundClock(interleave.RoundPlan(bursts=(8, 16), warmup=8), True)
    rounds = _feed(clock, [(0, 0.0), (8, 0.016), (16, 0.048), (24, 0.080)])
    (done,) = rounds
    assert done[0] == [(pytest.approx(2.0), 8)]
    assert [n for _, n in done[1]] == [8, 8] and [ms for ms, _ in done[1]] == pytest.approx([4, 4])


def test_a_callbacks_cost_is_per_step_under_the_shared_index():
    """RD404's callback timing (capture/probes.py: _CallbackTimer): an execution of 4 steps whose
    hooks took 8 ms costs 2 ms a step, whichever index Keras passed."""
    keras = pytest.importorskip("keras")
    from rnndoctor.capture.probes import _CallbackTimer

    class Slow(keras.callbacks.Callback):
        def on_train_batch_begin(self, batch, logs=None):
            pass

    for index, ends in ((NEW, (3, 7)), (SHARED, (0, 4))):
        callback = Slow()
        callback.set_model(keras.Sequential())
        callback.model.steps_per_execution = 4
        callback.set_params({"steps": 8})
        timer = _CallbackTimer(callback)
        timer._index = index
        for first, end in zip((0, 4), ends, strict=True):
            timer._begin_batch = first
            timer._record(end, 8.0)
        assert [steps for steps, _ in timer.samples] == [4, 4], index
        assert timer.per_step_ms(0) == pytest.approx(2.0)


def test_an_epochs_partial_last_execution_counts_only_its_steps():
    """Keras >= 3.11 passes begin + steps_per_execution - 1 for an epoch's last execution even
    where fewer batches are left (epoch_iterator.py): 10 batches at 8 per call, the second call
    runs 2. A review measured 1.67 ms a step under 3.15 where 3.10 gave 6.97 ms."""
    assert NEW.steps(8, 15, 8, 10) == 2 and NEW.last_step(8, 15, 8, 10) == 10
    assert SHARED.steps(8, 8, 8, 10) == 2 and SHARED.last_step(8, 8, 8, 10) == 10
    assert NEW.steps(8, 15, 8, None) == 8  # an epoch of unknown length: nothing says so


def test_keras_3_6_numbers_each_epoch_of_unknown_length_by_its_own_first_index():
    """Keras 3.0-3.6 learn an unknown length at the end of the first epoch and number later
    epochs by first steps, while params["steps"] stays None."""
    assert SHARED_OLD.for_epoch(7, 8) == SHARED_OLD  # epoch 0: 7, 15, ... (last steps)
    later = SHARED_OLD.for_epoch(0, 8)  # epoch 1: 0, 8, ... (first steps)
    assert later.last_step(40, 40, 8, None) == 48 and later.steps(40, 40, 8, None) == 8
    assert SHARED.for_epoch(0, 8) == SHARED and NEW.for_epoch(7, 8) == NEW


def test_the_window_counts_the_partial_execution_at_each_epochs_end():
    clock = _Clock()
    window = _Window(WindowOptions(warmup_steps=0, measured_steps=100, profile_steps=0), clock)
    window.batch_index, window.model, window.params = NEW, _Model(), {"steps": 10}
    window.batch_size = 32
    for epoch in range(4):  # 10 steps an epoch at 4 a call: calls of 4, 4 and 2 steps
        window.on_epoch_begin(epoch)
        for first in (0, 4, 8):
            window.on_train_batch_begin(first)
            clock.t += 0.010 * min(4, 10 - first)
            window.on_train_batch_end(first + 3, {"loss": 1.0})
    times = window.step_times(32)
    assert times.median_step_time_ms == pytest.approx(10.0) and times.final_loss_step == 10
    assert window.steps_done == 40
