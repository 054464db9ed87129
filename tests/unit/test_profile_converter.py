"""The xprof converter process of the capture child (``rnndoctor.capture.profile``:
``summarize_in_subprocess`` and its ``main``), without TensorFlow.

The converter itself runs for real (a fresh interpreter, ``python -P -m
rnndoctor.capture.profile``); where a test needs xprof to crash or hang, a small shell script
takes the interpreter's place and does that, so the capture's handling of each ending is what
is tested. The conversion of a real profile is checked end to end (tests/e2e/test_check_cli.py
reads the check's ``facts.profile``).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from rnndoctor.capture import profile
from rnndoctor.facts import InputPipelineSummary, OpStat, ProfileSummary


def _stand_in(tmp_path: Path, body: str) -> str:
    """An executable that runs ``body`` (sh) in place of the converter's interpreter."""
    script = tmp_path / "python"
    script.write_text(f"#!/bin/sh\n{body}\n")
    script.chmod(0o755)
    return str(script)


def test_the_converter_process_summarises_a_folder_without_a_profile(tmp_path):
    summary = profile.summarize_in_subprocess(str(tmp_path), 3, 0, timeout_s=60.0)
    assert summary.error == "the profiler wrote no .xplane.pb file"
    assert summary.logdir == str(tmp_path) and summary.profiled_steps == 3
    assert summary.tensorboard_command == f"tensorboard --logdir {tmp_path}"


def test_the_converters_result_reads_back_as_the_summary_it_wrote(tmp_path):
    written = ProfileSummary(
        logdir="/p", profiled_steps=3, xspace_files=["/p/a.xplane.pb"], host_self_time_us=12.5,
        top_op_types=[OpStat("MatMul", "Host", self_time_us=7.0, share=0.56, occurrences=4)],
        input_pipeline=InputPipelineSummary(not_measured="No step time measured."),
    )  # fmt: skip
    assert ProfileSummary.from_dict(json.loads(json.dumps(written.to_dict()))) == written
    with pytest.raises(ValueError, match="profile must be an object"):
        ProfileSummary.from_dict(None)


def test_a_converter_ended_by_a_signal_gives_a_summary_that_says_so(tmp_path, monkeypatch):
    monkeypatch.setattr(
        sys, "executable", _stand_in(tmp_path, "echo 'double free or corruption'; kill -SEGV $$")
    )
    summary = profile.summarize_in_subprocess(str(tmp_path), 3, 0, timeout_s=60.0)
    assert summary.error == (
        "xprof conversion failed: the converter was ended by SIGSEGV: double free or corruption"
    )
    assert summary.top_op_types == [] and summary.logdir == str(tmp_path)


def test_a_converter_that_exits_without_a_result_gives_its_status(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "executable", _stand_in(tmp_path, "exit 3"))
    summary = profile.summarize_in_subprocess(str(tmp_path), 3, 0, timeout_s=60.0)
    assert (
        summary.error
        == "xprof conversion failed: the converter exited with status 3 and no summary"
    )


def test_a_converter_past_its_time_is_killed(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "executable", _stand_in(tmp_path, "exec sleep 30"))
    with pytest.raises(subprocess.TimeoutExpired):
        profile.summarize_in_subprocess(str(tmp_path), 3, 0, timeout_s=0.5)
    ps = subprocess.run(["pgrep", "-f", "sleep 30"], capture_output=True, text=True)
    assert ps.stdout.strip() == ""  # subprocess.run killed it before raising


def test_the_converter_writes_nothing_but_its_result_for_malformed_arguments(tmp_path, capsys):
    assert profile.main(["only", "three", "args"]) == 2
    assert "usage: python -m rnndoctor.capture.profile LOGDIR STEPS GPUS RESULT" in (
        capsys.readouterr().err
    )
    result = tmp_path / "r.json"
    assert profile.main([str(tmp_path), "2", "0", str(result)]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json"]
    assert json.loads(result.read_text())["error"] == "the profiler wrote no .xplane.pb file"
