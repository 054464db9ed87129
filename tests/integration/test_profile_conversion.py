"""Where the capture converts the profile (``capture/diagnosis.py: convert_profile``): the
capture child in the xprof converter process, the user's own process (``rnndoctor.diagnose``,
``DoctorCallback``) in a thread; a converter past its budget leaves a note and a cut-short
phase, and the capture goes on. The conversion of a real profile is checked end to end
(tests/e2e/test_check_cli.py)."""

from __future__ import annotations

import sys

import pytest

pytest.importorskip("tensorflow")

from rnndoctor.capture import diagnosis, profile  # noqa: E402
from rnndoctor.capture.session import CaptureSession  # noqa: E402
from rnndoctor.capture.step_window import WindowOptions  # noqa: E402
from rnndoctor.facts import Facts, RunInfo  # noqa: E402

_NO_PROFILE = "the profiler wrote no .xplane.pb file"


def _session(tmp_path, child: bool, timeout_s: float = 600.0) -> CaptureSession:
    facts = Facts(run=RunInfo(script="x.py", argv=[], cwd="."))
    options = WindowOptions(profile_dir=str(tmp_path / "profile"), timeout_s=timeout_s)
    return CaptureSession(facts, options, None, child=child)


def test_the_capture_child_converts_in_the_converter_process(tmp_path, monkeypatch):
    calls = []

    def recorded(*args):
        calls.append(args)
        return profile.summarize_in_subprocess(*args)

    def in_process(*args):
        raise AssertionError("the capture child converted in its own process")

    monkeypatch.setattr(diagnosis, "summarize_in_subprocess", recorded)
    monkeypatch.setattr(diagnosis, "summarize_profile", in_process)
    session = _session(tmp_path, child=True)
    diagnosis.convert_profile(session, 3, None)
    assert len(calls) == 1 and calls[0][:3] == (str(tmp_path / "profile"), 3, 0)
    assert session.facts.profile.error == _NO_PROFILE  # the converter's own answer
    assert session.facts.run.phase == "profile conversion (xprof)"


def test_the_users_own_process_converts_in_a_thread(tmp_path, monkeypatch):
    def converter(*args):
        raise AssertionError("a converter process was started from the user's own process")

    monkeypatch.setattr(diagnosis, "summarize_in_subprocess", converter)
    session = _session(tmp_path, child=False)
    diagnosis.convert_profile(session, 3, None)
    assert session.facts.profile.error == _NO_PROFILE


def test_a_converter_past_its_budget_leaves_a_note_and_a_cut_short_phase(tmp_path, monkeypatch):
    hangs = tmp_path / "python"  # in place of the converter's interpreter: xprof hanging
    hangs.write_text("#!/bin/sh\nexec sleep 60\n")
    hangs.chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(hangs))
    session = _session(tmp_path, child=True, timeout_s=10.0)  # the phase gets its 2 s floor
    diagnosis.convert_profile(session, 3, None)
    assert session.facts.profile is None
    assert session.facts.run.notes == [
        "profile not converted: profile conversion did not finish within its 2 s budget"
    ]
    (cut,) = session.facts.run.cut_short
    assert cut.phase == "profile conversion" and cut.budget_s == 2.0
    assert cut.reason == "the xprof conversion did not finish"
