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
import os
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
    pid_file = tmp_path / "pid"
    monkeypatch.setattr(
        sys, "executable", _stand_in(tmp_path, f"echo $$ > {pid_file}; exec sleep 30")
    )
    with pytest.raises(subprocess.TimeoutExpired):
        profile.summarize_in_subprocess(str(tmp_path), 3, 0, timeout_s=1.0)
    pid = int(pid_file.read_text())
    with pytest.raises(ProcessLookupError):  # subprocess.run killed and reaped it before raising
        os.kill(pid, 0)


def test_a_converter_that_cannot_start_gives_a_summary_that_says_so(tmp_path, monkeypatch):
    """Not an exception out of the user's fit: the capture goes on to its probes."""
    monkeypatch.setattr(sys, "executable", str(tmp_path / "no-such-python"))
    summary = profile.summarize_in_subprocess(str(tmp_path), 3, 0, timeout_s=60.0)
    assert summary.error.startswith(
        "xprof conversion failed: the converter could not run: FileNotFoundError: "
    )


def test_a_converter_that_wrote_an_unreadable_result_says_so(tmp_path, monkeypatch):
    # the result file is the converter's last argument
    body = 'for a; do last="$a"; done; echo "[1, 2]" > "$last"; echo "done"'
    monkeypatch.setattr(sys, "executable", _stand_in(tmp_path, body))
    summary = profile.summarize_in_subprocess(str(tmp_path), 3, 0, timeout_s=60.0)
    assert summary.error == (
        "xprof conversion failed: the converter wrote a summary that could not be read "
        "(profile must be an object): done"
    )


def test_the_converter_is_handed_the_childs_import_path(tmp_path, monkeypatch):
    """A relative PYTHONPATH entry is in the child's sys.path made absolute (Python does that at
    start-up); the converter, in its temporary folder, gets those absolute entries appended to
    its own import path (profile._CONVERTER), so it finds what the child found."""
    deps = tmp_path / "deps"
    monkeypatch.setattr(sys, "path", [*sys.path, str(deps), "relative/left/out"])
    seen = tmp_path / "argv4"  # argv: -P -c PROGRAM PATHS LOGDIR STEPS GPUS RESULT
    monkeypatch.setattr(sys, "executable", _stand_in(tmp_path, f'printf %s "$4" > {seen}'))
    profile.summarize_in_subprocess(str(tmp_path), 3, 0, timeout_s=60.0)
    handed = json.loads(seen.read_text())
    assert str(deps) in handed and "relative/left/out" not in handed
    assert handed == [p for p in sys.path if p and os.path.isabs(p)]
    assert "sys.path.extend(" in profile._CONVERTER and "sys.path.insert" not in profile._CONVERTER


def test_the_converter_imports_no_tensorflow():
    done = subprocess.run(
        [sys.executable, "-P", "-c", "import sys, rnndoctor.capture.profile; "
         "print(sorted({'tensorflow', 'keras', 'tf_keras'} & set(sys.modules)))"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert done.stdout.strip() == "[]"


def test_the_converter_writes_nothing_but_its_result_for_malformed_arguments(tmp_path, capsys):
    usage = "usage: python -m rnndoctor.capture.profile LOGDIR STEPS GPUS RESULT"
    assert profile.main(["only", "three", "args"]) == 2
    assert usage in capsys.readouterr().err
    assert profile.main([str(tmp_path), "three", "0", str(tmp_path / "r.json")]) == 2
    assert usage in capsys.readouterr().err
    result = tmp_path / "r.json"
    assert profile.main([str(tmp_path), "2", "0", str(result)]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json"]
    assert json.loads(result.read_text())["error"] == "the profiler wrote no .xplane.pb file"
