"""Samples per second of the fit window's measured steps, with steps_per_execution 1 and > 1:
the constant batch size path and the counted (dynamic batch size, tf.data) path agree with the
executions' samples over their time."""

from __future__ import annotations

import pytest

from rnndoctor.capture.step_window import WindowOptions
from rnndoctor.capture.window import _WindowCallback


class _Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


class _Counter:
    """A SampleCounter's reading: the samples of every batch fetched so far."""

    def __init__(self):
        self.total = 0

    def read(self):
        return self.total


class _Window(_WindowCallback):
    """The callback without a Keras base class (``super().__init__`` is ``object``'s)."""


def _run(per_execution: int, sizes: list[int], counted: bool, batch_s: float = 0.1):
    """Drives the callback as Keras does with ``steps_per_execution = per_execution``: one
    begin / end call per execution, ``batch`` the execution's first / last step."""
    clock = _Clock()
    window = _Window(WindowOptions(warmup_steps=0, measured_steps=100, profile_steps=0), clock)
    counter = _Counter()
    if counted:
        window.counter = counter
    else:
        window.batch_size = sizes[0]
    window.on_epoch_begin(0)
    seen_samples, seen_s = 0, 0.0
    for first in range(0, len(sizes), per_execution):
        batches = sizes[first : first + per_execution]
        window.on_train_batch_begin(first)
        counter.total += sum(batches)  # the execution fetches its batches
        clock.t += batch_s * len(batches)
        window.on_train_batch_end(first + len(batches) - 1, {"loss": 1.0})
        if first > 0:  # the epoch's first execution is not measured
            seen_samples += sum(batches)
            seen_s += batch_s * len(batches)
    return window, seen_samples / seen_s


@pytest.mark.parametrize("per_execution", [1, 4])
def test_counted_samples_per_s_is_the_executions_samples_over_their_time(per_execution):
    sizes = [32, 8, 16, 24] * 6  # bucket_by_sequence_length: batch sizes vary
    window, expected = _run(per_execution, sizes, counted=True)
    assert window.step_times(None).samples_per_s == pytest.approx(expected, rel=1e-3)


@pytest.mark.parametrize("per_execution", [1, 4])
def test_constant_batch_samples_per_s_is_the_same_with_any_steps_per_execution(per_execution):
    window, expected = _run(per_execution, [16] * 24, counted=False)
    assert expected == pytest.approx(160.0)
    assert window.step_times(16).samples_per_s == pytest.approx(expected, rel=1e-3)
    counted, _ = _run(per_execution, [16] * 24, counted=True)
    assert counted.step_times(None).samples_per_s == pytest.approx(expected, rel=1e-3)
