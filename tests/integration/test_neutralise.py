"""filter_callbacks on real Keras callbacks, without install() (as rnndoctor.diagnose runs it in
the user's own process): the callbacks that write user state are dropped and recorded."""

from __future__ import annotations

import os

import keras

from rnndoctor.capture import neutralise
from rnndoctor.capture.session import CaptureSession
from rnndoctor.capture.step_window import WindowOptions
from rnndoctor.facts import Facts, FitConfig, RunInfo, SourceLocation


class MyCheckpoint(keras.callbacks.ModelCheckpoint):
    pass


def test_state_writing_callbacks_are_dropped_and_recorded(tmp_path):
    facts = Facts(run=RunInfo(script="train.py", argv=["train.py"], cwd=str(tmp_path)))
    facts.fit = FitConfig(data_kind="numpy", location=SourceLocation(file="train.py", line=9))
    capture = CaptureSession(facts, WindowOptions(), None)
    history = keras.callbacks.History()
    early = keras.callbacks.EarlyStopping()
    callbacks = [
        keras.callbacks.ModelCheckpoint("ckpt/best.keras"),
        history,
        keras.callbacks.CSVLogger("log.csv"),
        MyCheckpoint("mine.keras"),
        early,
        keras.callbacks.TensorBoard("tb"),
        keras.callbacks.BackupAndRestore("backup"),
    ]
    assert neutralise.filter_callbacks(capture, callbacks) == [history, early]
    recorded = [(n.what, n.detail) for n in facts.run.neutralised]
    assert recorded == [
        ("ModelCheckpoint callback", os.path.abspath("ckpt/best.keras")),
        ("CSVLogger callback", os.path.abspath("log.csv")),
        ("MyCheckpoint callback (a ModelCheckpoint)", os.path.abspath("mine.keras")),
        ("TensorBoard callback", os.path.abspath("tb")),
        ("BackupAndRestore callback", os.path.abspath("backup")),
    ]
    # no construction site without install(): the fit call's line stands in
    assert all(n.location.line == 9 for n in facts.run.neutralised)
