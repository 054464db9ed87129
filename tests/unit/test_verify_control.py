"""The window-only child's side of a warm --verify arm: its options and its pipe protocol (no
TensorFlow)."""

from __future__ import annotations

import json
import os

import pytest

from rnndoctor.capture.control import Control, window_result
from rnndoctor.options import Options, parse_child_args


def test_window_only_and_control_go_to_the_child_and_back():
    options = Options(out="o", window_only=True, control="5,6", no_probes=True, profile_steps=0)
    parsed, script, args = parse_child_args([*options.child_argv(), "train.py", "--epochs", "1"])
    assert parsed.window_only and parsed.control == "5,6"
    assert (script, args) == ("train.py", ["--epochs", "1"])
    plain, _, _ = parse_child_args([*Options(out="o").child_argv(), "train.py"])
    assert not plain.window_only and plain.control is None


def test_control_without_window_only_is_a_usage_error():
    with pytest.raises(SystemExit):
        parse_child_args(["--out", "o", "--control", "5,6", "train.py"])


def test_a_window_is_its_samples_over_its_steps_time():
    line = window_result([100.0, 300.0], samples=128, final_loss=2.5, index=3)
    assert line["samples_per_s"] == pytest.approx(128 / 0.4)
    assert line["steps"] == 2 and line["window"] == 3 and line["final_loss"] == 2.5
    assert window_result([100.0], samples=None, final_loss=None, index=0)["samples_per_s"] is None
    assert line["loss_step"] is None  # not given
    assert window_result([100.0], 8, 2.5, 0, loss_step=96)["loss_step"] == 96


def test_the_child_reports_and_waits_for_go_or_stop_through_its_pipes():
    command_r, command_w = os.pipe()
    result_r, result_w = os.pipe()
    control = Control(f"{command_r},{result_w}")
    with os.fdopen(command_w, "w") as commands, os.fdopen(result_r) as results:
        control.send({"ready": True})
        assert json.loads(results.readline()) == {"ready": True}
        commands.write("go\nstop\n")
        commands.flush()
        assert control.wait() is True
        assert control.wait() is False
    assert control.wait() is False  # the parent closed its end: stop


class _FakeControl:
    """The parent's side: the lines sent, and the commands to answer with."""

    def __init__(self, commands):
        self.sent = []
        self.commands = list(commands)

    def send(self, message):
        self.sent.append(message)

    def wait(self):
        return bool(self.commands) and self.commands.pop(0) == "go"


def _steps(warmup=2, measured=3, min_s=0.0, step_s=1.0, window_only=False):
    """A window whose clock moves ``step_s`` per call, with a time floor of ``min_s``."""
    from rnndoctor.capture.step_window import StepWindow, WindowOptions

    clock = iter(i * step_s for i in range(10_000))
    options = WindowOptions(warmup_steps=warmup, measured_steps=measured, profile_steps=0,
                            min_measured_s=min_s, window_only=window_only)  # fmt: skip
    return StepWindow(options, clock=lambda: next(clock))


def test_warm_windows_say_ready_after_the_warm_up_then_send_each_window_until_stop():
    from rnndoctor.capture.control import WarmWindows

    control = _FakeControl(["go", "go", "stop"])
    warm, steps = WarmWindows(control), _steps()
    answers = []
    for _ in range(20):
        steps.end_step()
        answer = warm.after_step(steps, 12 if steps.step_ms else None, None)
        answers.append(answer)
        if answer is False:
            break
    assert answers[:2] == [None, True]  # warm-up steps, then ready and the first go
    assert control.sent[0] == {"ready": True}
    windows = control.sent[1:]
    assert [w["window"] for w in windows] == [0, 1] and answers[-1] is False
    assert all(w["steps"] == 3 and w["step_time_ms"] == [1000.0] * 3 for w in windows)
    assert windows[0]["samples_per_s"] == pytest.approx(12 / 3.0)
    assert answers.count(True) == 2 and len(answers) == 2 + 3 + 3


def test_warm_windows_stop_at_once_when_the_parent_closes_before_any_window():
    from rnndoctor.capture.control import WarmWindows

    control = _FakeControl([])
    warm, steps = WarmWindows(control), _steps(warmup=1)
    steps.end_step()
    assert warm.after_step(steps, None, None) is False
    assert control.sent == [{"ready": True}]


def test_a_custom_loop_serves_warm_windows_through_its_pipes():
    """The custom-loop hook (not only fit's callback) says ready, sends a window per ``go`` and
    finishes on ``stop`` (real pipes, a fake session and optimizer: no step runs)."""
    from types import SimpleNamespace

    from rnndoctor.capture.loop import CustomLoop
    from rnndoctor.capture.step_window import WindowOptions

    command_r, command_w = os.pipe()
    result_r, result_w = os.pipe()
    options = WindowOptions(warmup_steps=1, measured_steps=2, profile_steps=0, window_only=True,
                            control=f"{command_r},{result_w}")  # fmt: skip
    session = SimpleNamespace(loop_state=SimpleNamespace(functions={}), options=options,
                              set_phase=lambda phase: None)  # fmt: skip
    loop = CustomLoop(session, SimpleNamespace(name="adam"), eager=True, location=None)
    finished = []
    loop.finish = lambda stop_script, note=None: finished.append(stop_script)
    with os.fdopen(command_w, "w") as commands:
        commands.write("go\ngo\nstop\n")
    for _ in range(20):
        loop.step_end()
        if finished:
            break
    loop.warm.control._results.close()  # the child's ends: the parent then reads to the end
    loop.warm.control._commands.close()
    with os.fdopen(result_r) as results:
        lines = [json.loads(line) for line in results]
    assert lines[0] == {"ready": True}
    assert [line["window"] for line in lines[1:]] == [0, 1]
    assert all(line["steps"] == 2 for line in lines[1:]) and finished == [True]
    assert loop.window.steps_done == 1 + 2 + 2


def _timed_steps(min_s=0.5, window_only=True):
    """An arm's window: one warm-up step, 3 measured, steps of 0.1 s, a time floor of ``min_s``."""
    return _steps(warmup=1, min_s=min_s, step_s=0.1, window_only=window_only)


def test_an_arms_window_of_short_steps_goes_on_to_its_time_floor_each_window_afresh():
    """Each window has its 3 steps and then goes on until they time 0.5 s (5 steps of 0.1 s),
    where the fit's steps are not known (a bucketed dataset), and the next window counts its
    time from nothing again."""
    from rnndoctor.capture.control import WarmWindows

    control = _FakeControl(["go", "go", "stop"])
    warm, steps = WarmWindows(control), _timed_steps()
    for _ in range(40):
        steps.end_step()
        if warm.after_step(steps, len(steps.step_ms) * 8 or None, None) is False:
            break
    windows = control.sent[1:]
    assert [w["steps"] for w in windows] == [5, 5]
    assert all(sum(w["step_time_ms"]) == pytest.approx(500.0) for w in windows)
    assert windows[0]["samples_per_s"] == pytest.approx(40 / 0.5)


def test_a_plain_checks_window_of_unknown_length_does_not_go_past_its_steps():
    steps = _timed_steps(window_only=False)
    for _ in range(10):
        steps.end_step()
    assert len(steps.step_ms) == 3  # its profiled steps are still to come: no time floor


def test_an_arms_window_goes_past_its_steps_only_while_the_fit_keeps_steps_for_those_to_come():
    """Past its 3 steps, a window takes one more only while the fit keeps a spare step and 5
    windows of 3 steps (VERIFY_PAIRS) for the windows to come: a short fit serves its pairs
    from one warm child instead of starting it again for each."""
    from rnndoctor.paired import VERIFY_PAIRS

    for available, measured in ((1 + 3 + 1 + 1 + VERIFY_PAIRS * 3, 4), (20, 3)):
        steps = _timed_steps()
        steps.steps_available = available  # the warm-up, 3 measured, one more and a spare
        for _ in range(available):
            steps.end_step()
        assert len(steps.step_ms) == measured, available


def test_a_window_under_way_when_the_data_ends_is_sent_if_it_has_its_steps():
    from rnndoctor.capture.control import WarmWindows

    control = _FakeControl(["go", "go"])
    warm, steps = WarmWindows(control), _timed_steps(min_s=5.0)
    warm.ended(steps, None, None)  # before any window: nothing to send
    for _ in range(5):  # the warm-up, then 4 measured steps of the first window's 3 and on
        steps.end_step()
        warm.after_step(steps, 8 * len(steps.step_ms) or None, 2.5, 7)
    warm.ended(steps, 32, 2.5, 7)
    warm.ended(steps, 32, 2.5, 7)  # sent once
    assert control.sent[0] == {"ready": True} and len(control.sent) == 2
    sent = control.sent[1]
    assert sent["window"] == 0 and sent["steps"] == 4 and sent["loss_step"] == 7
    assert sent["samples_per_s"] == pytest.approx(32 / 0.4)

    control = _FakeControl(["go"])
    warm, steps = WarmWindows(control), _timed_steps(min_s=5.0)
    for _ in range(3):  # the warm-up, then 2 of its 3 steps
        steps.end_step()
        warm.after_step(steps, None, None)
    warm.ended(steps, 16, None)
    assert control.sent == [{"ready": True}]  # too short: the parent starts a fresh child


def test_a_window_sent_before_the_parents_stop_is_not_sent_again_as_the_loop_ends():
    """The custom loop's ``finish`` calls ``ended`` after ``after_step`` sent the last window
    and read ``stop``: that window goes to the parent once."""
    from rnndoctor.capture.control import WarmWindows

    control = _FakeControl(["go"])  # then the end of the commands: stop
    warm, steps = WarmWindows(control), _timed_steps(min_s=0.0)
    for _ in range(10):
        steps.end_step()
        if warm.after_step(steps, 8 * len(steps.step_ms) or None, None) is False:
            break
    warm.ended(steps, 24, None)
    assert [m.get("window") for m in control.sent] == [None, 0]


def test_the_fit_callbacks_end_of_training_sends_the_window_under_way():
    """``on_train_end`` of the window callback (the data ran out) hands the window to
    ``WarmWindows.ended`` with its samples and last loss."""
    from rnndoctor.capture.control import WarmWindows
    from rnndoctor.capture.window import DiagnosisWindow

    control = _FakeControl(["go"])
    steps = _timed_steps(min_s=5.0)
    window = DiagnosisWindow.__new__(DiagnosisWindow)
    window.control, window.steps = WarmWindows(control), steps
    window._samples, window._last_loss, window._loss_step = 0.0, 2.5, 9
    for _ in range(5):  # the warm-up, then 4 measured steps
        steps.end_step()
        window.control.after_step(steps, None, None)
        window._samples = 8.0 * len(steps.step_ms)
    window.on_train_end()
    sent = control.sent[-1]
    assert sent["steps"] == 4 and sent["samples"] == 32 and sent["final_loss"] == 2.5
    assert sent["loss_step"] == 9


def test_an_arms_window_has_its_time_floor_and_a_plain_checks_default_window_its_own(
    monkeypatch,
):
    from rnndoctor.capture.__main__ import _min_measured_s
    from rnndoctor.options import DEFAULTS
    from rnndoctor.paired import ARM_WINDOW_S, MIN_SECONDS
    from rnndoctor.verify.run import MAX_PAIRS

    monkeypatch.delenv("TF_CONFIG", raising=False)
    arm = Options(out="o", window_only=True, control="5,6", no_probes=True, steps=5)
    assert _min_measured_s(arm) == ARM_WINDOW_S and ARM_WINDOW_S * MAX_PAIRS >= MIN_SECONDS
    assert _min_measured_s(Options(out="o")) == MIN_SECONDS and DEFAULTS.steps == 20
    assert _min_measured_s(Options(out="o", steps=8)) == 0.0  # --steps as asked
    monkeypatch.setenv("TF_CONFIG", "{}")  # a worker ends fit with the others: no floor
    assert _min_measured_s(arm) == 0.0
