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
