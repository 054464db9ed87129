"""The run-on stops before TensorFlow's C++ file-system writes, which raise no audit event
(``tf.io.gfile.makedirs``, ``tf.io.write_file``, ...): the wrappers ``neutralise`` puts on them,
applied here to the real functions without ``install()`` (which would patch this test process
for good), with a real session whose run-on is running."""

from __future__ import annotations

import os
import time

import pytest
import tensorflow as tf

from rnndoctor.capture import neutralise
from rnndoctor.capture.session import AfterWindowState, CaptureSession, NeutraliseState
from rnndoctor.capture.step_window import WindowOptions
from rnndoctor.facts import Facts, OutsideWindowFacts, RunInfo


class Stopped(Exception):
    """Stands in for ``end_script``'s StopScript, whose unwinding tracer would end pytest."""


def _session(tmp_path, running: bool) -> tuple[neutralise._Hooks, CaptureSession]:
    out = tmp_path / "out"
    out.mkdir()
    facts = Facts(run=RunInfo(script="train.py", argv=["train.py"], cwd=str(tmp_path)))
    session = CaptureSession(facts, WindowOptions(), None)
    session.neutralise_state = NeutraliseState(skip_dirs=neutralise._skip_dirs(out / "f.json"))
    if running:
        session.after_window = AfterWindowState(running=True, started=time.perf_counter())
        session.after_window.facts = OutsideWindowFacts(ended="running")
        facts.outside_window = session.after_window.facts

    def end_script():
        raise Stopped

    session.end_script = end_script
    hooks = neutralise._Hooks()
    hooks.session = session
    return hooks, session


def _wrapped(hooks):
    makedirs = neutralise._stopping(
        hooks, tf.io.gfile.makedirs, "tf.io.gfile.makedirs", (neutralise._arg(0, "path"),)
    )
    write_file = neutralise._stopping(
        hooks, tf.io.write_file, "tf.io.write_file", (neutralise._arg(0, "filename"),)
    )
    return makedirs, write_file


def _tree(root) -> list[str]:
    """Every file and folder under ``root``, relative."""
    return sorted(
        os.path.relpath(os.path.join(d, name), root)
        for d, dirs, files in os.walk(root)
        for name in files + dirs
    )


def test_the_run_on_stops_before_tf_gfile_makedirs_and_write_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    hooks, session = _session(tmp_path, running=True)
    makedirs, write_file = _wrapped(hooks)
    before = _tree(tmp_path)
    with pytest.raises(Stopped):
        makedirs("made/deeper")  # the code after fit
    with pytest.raises(Stopped):
        write_file("made/x.txt", "hi")
    assert _tree(tmp_path) == before  # nothing written under the working directory
    ow = session.facts.outside_window
    assert ow.ended == "a write"
    assert "tf.io.gfile.makedirs" in ow.detail and str(tmp_path / "made") in ow.detail


def test_before_the_run_on_the_tf_writes_happen_and_are_recorded(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    hooks, session = _session(tmp_path, running=False)
    makedirs, write_file = _wrapped(hooks)
    makedirs("made")
    write_file("made/x.txt", "hi")
    assert (tmp_path / "made" / "x.txt").read_text() == "hi"  # never blocked before the run-on
    written = session.neutralise_state.writes
    assert written[os.path.realpath(tmp_path / "made")][0] == "tf.io.gfile.makedirs"
    assert written[os.path.realpath(tmp_path / "made" / "x.txt")][0] == "tf.io.write_file"
    assert "tf.io.write_file" in session.facts.run.notes[-1]


def test_writes_into_out_do_not_stop_the_run_on(tmp_path):
    hooks, session = _session(tmp_path, running=True)
    makedirs, _ = _wrapped(hooks)
    makedirs(str(tmp_path / "out" / "profile"))
    assert session.after_window.running and (tmp_path / "out" / "profile").is_dir()
