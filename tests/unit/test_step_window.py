"""StepWindow's logic with a fake clock and a fake profiler: no TensorFlow."""

from __future__ import annotations

import sys
from contextlib import contextmanager

import pytest

from rnndoctor.capture.step_window import FIT_PHASES, LOOP_PHASES, StepWindow, WindowOptions
from rnndoctor.facts import Phase


class FakeClock:
    """Seconds that advance only when a test says so."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now

    def advance(self, ms: float) -> None:
        self.now += ms / 1000.0


class FakeProfiler:
    """Records the calls; ``start`` raises ``fail_start`` when set."""

    def __init__(self, fail_start: Exception | None = None) -> None:
        self.fail_start = fail_start
        self.events: list[str] = []

    def start(self, logdir: str) -> None:
        if self.fail_start is not None:
            raise self.fail_start
        self.events.append(f"start {logdir}")

    def stop(self) -> None:
        self.events.append("stop")

    @contextmanager
    def step_marker(self, step: int):
        self.events.append(f"enter {step}")
        yield
        self.events.append(f"exit {step}")


def make(
    warmup=2, measured=3, profile=2, profile_dir="/tmp/prof", fail_start=None, phases=FIT_PHASES
):
    clock, profiler, announced = FakeClock(), FakeProfiler(fail_start), []
    options = WindowOptions(
        warmup_steps=warmup, measured_steps=measured, profile_steps=profile,
        profile_dir=profile_dir,
    )  # fmt: skip
    window = StepWindow(options, phases, announced.append, clock, profiler)
    return window, clock, profiler, announced


def fit_step(window: StepWindow, clock: FakeClock, wait_ms: float, run_ms: float, steps=1) -> bool:
    """One ``fit`` batch: ``wait_ms`` before its begin (input), ``run_ms`` inside it."""
    clock.advance(wait_ms)
    window.begin_step()
    clock.advance(run_ms)
    window.end_step(steps)
    return window.complete()


def loop_step(window: StepWindow, clock: FakeClock, ms: float) -> bool:
    """One custom-loop step of ``ms``, ended as ``loop.CustomLoop.step_end`` ends it."""
    clock.advance(ms)
    window.end_step()
    if window.complete():
        return True
    if window.profile_due():
        window.begin_profiled_step()
    window.announce()
    window.restart_clock()
    return False


def test_warmup_is_not_timed_and_measured_count_is_kept():
    window, clock, _, _ = make(warmup=2, measured=3, profile=0)
    window.epoch_begin()
    done = [fit_step(window, clock, 1.0, 10.0 * (i + 1)) for i in range(5)]
    assert done == [False, False, False, False, True]
    assert window.steps_done == 5
    assert window.step_ms == pytest.approx([31.0, 41.0, 51.0])  # wait + run, warm-up excluded
    assert window.train_function_ms == pytest.approx([30.0, 40.0, 50.0])  # begin to end only


def test_first_step_of_an_epoch_is_excluded():
    window, clock, _, _ = make(warmup=1, measured=2, profile=0)
    window.epoch_begin()
    fit_step(window, clock, 0.0, 5.0)  # warm-up
    window.epoch_begin()  # a new epoch: the next step also starts the iterator
    fit_step(window, clock, 50.0, 5.0)
    assert window.step_ms == []
    fit_step(window, clock, 1.0, 5.0)
    fit_step(window, clock, 2.0, 5.0)
    assert window.step_ms == pytest.approx([6.0, 7.0])
    assert window.steps_done == 4 and window.complete()


def test_time_is_divided_by_the_steps_of_one_execution():
    window, clock, _, _ = make(warmup=1, measured=2, profile=0)
    window.epoch_begin()
    fit_step(window, clock, 0.0, 10.0, steps=4)  # warm-up: one execution of 4 steps
    fit_step(window, clock, 0.0, 40.0, steps=4)
    fit_step(window, clock, 0.0, 80.0, steps=4)
    assert window.steps_done == 12
    assert window.step_ms == pytest.approx([10.0, 20.0])
    assert window.train_function_ms == pytest.approx([10.0, 20.0])


def test_profiler_stops_after_the_profiled_steps_with_one_marker_each():
    window, clock, profiler, _ = make(warmup=1, measured=1, profile=2)
    window.epoch_begin()
    done = [fit_step(window, clock, 0.0, 5.0) for _ in range(4)]
    assert done == [False, False, False, True]
    assert window.profiled == 2
    window.stop_profiler()
    window.stop_profiler()  # idempotent
    assert profiler.events == ["start /tmp/prof", "enter 2", "exit 2", "enter 3", "exit 3", "stop"]
    assert window.profile_error is None


def test_profile_steps_of_one_execution_count_as_many():
    window, clock, profiler, _ = make(warmup=1, measured=1, profile=3)
    window.epoch_begin()
    fit_step(window, clock, 0.0, 5.0)
    fit_step(window, clock, 0.0, 5.0)
    assert fit_step(window, clock, 0.0, 5.0, steps=4)  # one marker covered 4 >= 3 steps
    assert window.profiled == 4 and profiler.events.count("enter 2") == 1


def test_profile_error_is_recorded_and_ends_the_window():
    window, clock, profiler, _ = make(
        warmup=1, measured=1, profile=2, fail_start=RuntimeError("busy")
    )
    window.epoch_begin()
    assert not fit_step(window, clock, 0.0, 5.0)
    assert not fit_step(window, clock, 0.0, 5.0)
    assert window.profile_due() and not window.complete()
    assert fit_step(window, clock, 0.0, 5.0)  # the start failed: no marker, and done
    assert window.profile_error == "RuntimeError: busy"
    assert window.profiled == 0 and profiler.events == []


def test_no_profile_dir_means_no_profile():
    window, clock, profiler, _ = make(warmup=0, measured=1, profile=3, profile_dir=None)
    window.epoch_begin()
    fit_step(window, clock, 0.0, 1.0)
    assert fit_step(window, clock, 0.0, 1.0)
    assert profiler.events == [] and window.profiled == 0


def test_phases_are_announced_once_each_in_order():
    window, clock, _, announced = make(warmup=2, measured=2, profile=1)
    window.epoch_begin()
    while not fit_step(window, clock, 0.0, 1.0):
        pass
    assert announced == [Phase.WARMUP, Phase.MEASURED, Phase.PROFILED]
    assert [str(p) for p in announced] == ["warm-up steps", "measured steps", "profiled steps"]


def test_custom_loop_phases_and_step_times():
    window, clock, profiler, announced = make(warmup=1, measured=2, profile=1, phases=LOOP_PHASES)
    window.announce()  # the loop announces at its first gradient application
    done = [loop_step(window, clock, ms) for ms in (50.0, 10.0, 12.0, 14.0)]
    assert done == [False, False, False, True]
    assert window.step_ms == pytest.approx([10.0, 12.0])
    assert window.train_function_ms == []  # the loop has no begin
    assert announced == [Phase.LOOP_WARMUP, Phase.LOOP_MEASURED, Phase.LOOP_PROFILED]
    assert profiler.events == ["start /tmp/prof", "enter 3", "exit 3"]
    times = window.step_times(batch_size=8, source="custom loop")
    assert times.source == "custom loop" and times.measured_steps == 2
    assert times.median_train_function_ms is None


def test_step_times_assembles_medians_and_throughput():
    window, clock, _, _ = make(warmup=0, measured=4, profile=0)
    window.epoch_begin()
    for run_ms in (0.0, 10.0, 20.0, 30.0, 40.0):
        fit_step(window, clock, 0.0, run_ms)
    times = window.step_times(batch_size=32)
    assert times.step_time_ms == [10.0, 20.0, 30.0, 40.0]
    assert times.median_step_time_ms == 25.0
    assert times.p90_step_time_ms == pytest.approx(37.0)
    assert times.median_train_function_ms == 25.0
    assert times.samples_per_s == pytest.approx(1280.0)
    assert (times.warmup_steps, times.measured_steps, times.requested_steps) == (0, 4, 4)
    assert times.source == "fit"
    empty = make()[0].step_times(batch_size=None)
    assert empty.measured_steps == 0 and empty.median_step_time_ms is None


def test_step_window_needs_no_tensorflow():
    import subprocess

    code = (
        "import sys, rnndoctor.capture.step_window; "
        "sys.exit(1 if 'tensorflow' in sys.modules or 'keras' in sys.modules else 0)"
    )
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


def test_a_window_of_tiny_steps_measures_on_to_its_floor_while_the_fit_has_steps():
    """The default window also times 1 s (min_measured_s): 20 steps of 2.5 ms are 50 ms, too few
    for the median every probe is checked against (issue 11). It stops at the floor, and never
    eats the steps the fit needs for its profiled steps."""

    def window_of(available: int | None, floor: float = 1.0) -> StepWindow:
        options = WindowOptions(warmup_steps=1, measured_steps=3, profile_steps=2,
                                profile_dir="/tmp/prof", min_measured_s=floor)  # fmt: skip
        window = StepWindow(options, FIT_PHASES, None, clock, FakeProfiler())
        window.steps_available = available
        window.epoch_begin()
        return window

    clock = FakeClock()
    window = window_of(10_000)
    while not fit_step(window, clock, 0.0, 10.0):
        pass
    assert len(window.step_ms) == 100 and window.measured_s == pytest.approx(1.0)
    assert window.profiled == 2  # the profiled steps still ran after the longer window
    window = window_of(40)  # the fit runs 40 steps: 1 warm-up, measured, 2 profiled, 1 spare
    while not fit_step(window, clock, 0.0, 10.0):
        pass
    assert len(window.step_ms) == 36 and window.profiled == 2 and window.steps_done == 39
    for available, floor in ((None, 1.0), (10_000, 0.0)):  # steps unknown; --steps as asked
        window = window_of(available, floor)
        while not fit_step(window, clock, 0.0, 10.0):
            pass
        assert len(window.step_ms) == 3
    window = window_of(10_000)
    while not fit_step(window, clock, 0.0, 160.0, steps=16):  # 160 ms a call of 16 steps
        pass
    assert len(window.step_ms) == 7  # 7 calls: 1.12 s of timed steps
    # near the fit's end with 16 steps a call: the profiled steps still get whole calls
    window = window_of(9 * 16)  # 9 calls in all: 1 warm-up, 3 requested, then the floor's
    calls = 0
    while not fit_step(window, clock, 0.0, 10.0, steps=16) and calls < 9:
        calls += 1
    assert window.profiled >= 2 and window.steps_done <= 9 * 16
