"""Without ``out``, ``rnndoctor.diagnose`` and ``DoctorCallback`` profile into a temporary folder
that lives as long as the report (and the callback) and is removed after them, or when Python
exits (``rnndoctor/api.py: TemporaryFolder``): no diagnosis leaves a folder in the temporary
directory behind (before, every call left one, about 4 MB of profile each)."""

from __future__ import annotations

import gc
import glob
import os
import subprocess
import sys
import tempfile

import keras
import numpy as np
import pytest

import rnndoctor
from rnndoctor.keras import DoctorCallback

_WINDOW = dict(steps=2, warmup_steps=1, profile_steps=1, run_probes=False, display=False)


@pytest.fixture
def scratch(tmp_path, monkeypatch):
    """The temporary directory, for this test alone (``tempfile.mkdtemp`` makes folders here)."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return tmp_path


def _model_and_data(compiled: bool = True):
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((6, 3)), keras.layers.LSTM(4), keras.layers.Dense(1)])
    if compiled:
        model.compile(optimizer="adam", loss="mse")
    rng = np.random.default_rng(0)
    x = rng.normal(size=(64, 6, 3)).astype("float32")
    return model, x, rng.normal(size=(64, 1)).astype("float32")


def _folders(scratch) -> list[str]:
    return glob.glob(os.path.join(str(scratch), "rnndoctor-profile-*"))


def test_diagnose_keeps_its_profile_while_the_report_lives(scratch):
    model, x, y = _model_and_data()
    report = rnndoctor.diagnose(model, x, y=y, batch_size=16, epochs=1, verbose=0, **_WINDOW)
    (folder,) = _folders(scratch)
    assert report.facts.profile.logdir == folder
    assert glob.glob(os.path.join(folder, "plugins", "profile", "*", "*.xplane.pb"))
    del report
    gc.collect()
    assert not os.path.exists(folder)


def test_a_diagnose_that_raises_leaves_no_folder(scratch):
    model, x, y = _model_and_data(compiled=False)  # fit raises: the model is not compiled
    with pytest.raises(Exception, match="compile"):
        rnndoctor.diagnose(model, x, y=y, batch_size=16, epochs=1, verbose=0, **_WINDOW)
    assert _folders(scratch) == []


def test_the_callbacks_profile_lives_as_long_as_the_callback(scratch):
    model, x, y = _model_and_data()
    doctor = DoctorCallback(out=None, **_WINDOW)
    model.fit(x, y, batch_size=16, epochs=1, verbose=0, callbacks=[doctor])
    (folder,) = _folders(scratch)
    assert doctor.report.facts.profile.logdir == folder
    del doctor
    gc.collect()
    assert not os.path.exists(folder)


def test_the_callbacks_report_keeps_the_profile_after_the_callback_is_gone(scratch):
    """The usual inline form: Keras holds no reference to the callback once fit returns, and the
    report's tensorboard command names the folder, so the report alone keeps it."""
    model, x, y = _model_and_data()
    callbacks = [DoctorCallback(out=None, **_WINDOW)]
    model.fit(x, y, batch_size=16, epochs=1, verbose=0, callbacks=callbacks)
    report = callbacks.pop().report
    gc.collect()
    (folder,) = _folders(scratch)
    assert report.facts.profile.logdir == folder
    assert any("temporary folder" in note for note in report.facts.run.notes)
    del report
    gc.collect()
    assert not os.path.exists(folder)


def test_the_inline_callback_outside_a_notebook_prints_its_summary(scratch, capsys):
    """``callbacks=[DoctorCallback(out=None)]`` in a plain script: nothing holds the callback
    once fit returns and nothing is written, so the summary goes to stdout (before: nothing at
    all); ``display=False`` keeps it quiet."""
    model, x, y = _model_and_data()
    window = dict(_WINDOW, display=None)
    model.fit(
        x, y, batch_size=16, epochs=1, verbose=0, callbacks=[DoctorCallback(out=None, **window)]
    )
    printed = capsys.readouterr().out
    assert printed.startswith("rnndoctor: the diagnosis (DoctorCallback(out=None): not saved")
    assert "  step time: median " in printed
    model.fit(
        x, y, batch_size=16, epochs=1, verbose=0, callbacks=[DoctorCallback(out=None, **_WINDOW)]
    )
    assert "rnndoctor" not in capsys.readouterr().out


_USER_SCRIPT = """
import sys, keras, numpy as np, rnndoctor
keras.utils.set_random_seed(0)
model = keras.Sequential([keras.Input((6, 3)), keras.layers.LSTM(4), keras.layers.Dense(1)])
model.compile(optimizer="adam", loss="mse")
x = np.zeros((64, 6, 3), "float32")
y = np.zeros((64, 1), "float32")
print("=== diagnose", file=sys.stderr, flush=True)
report = rnndoctor.diagnose(model, x, y=y, batch_size=16, epochs=1, verbose=0, steps=2,
                            warmup_steps=1, profile_steps=1, run_probes=False, display=False)
print("=== converted:", report.facts.profile.error is None, file=sys.stderr, flush=True)
"""


def test_diagnose_prints_none_of_xprofs_native_logging(scratch):
    """A fresh user's ``diagnose()`` printed about 40 of xprof's ``I0000 ...`` lines (``serving
    tool: overview_page``, ``ConvertMultiXSpacesToCombinedOpStats``...) into their script's
    output; the converter process now keeps them in its own log file. A user's script of its
    own, with TensorFlow's default logging (this suite sets ``TF_CPP_MIN_LOG_LEVEL``, which
    TensorFlow reads once per process)."""
    script = scratch / "user.py"
    script.write_text(_USER_SCRIPT)
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    env["TMPDIR"] = str(scratch)
    done = subprocess.run(
        [sys.executable, str(script)], cwd=scratch, env=env, capture_output=True, text=True,
        timeout=300, check=False,
    )  # fmt: skip
    printed = done.stdout + done.stderr
    assert done.returncode == 0, printed[-3000:]
    during = printed[printed.index("=== diagnose") :]
    assert "=== converted: True" in during
    assert "serving tool" not in during and "OpStats" not in during, during[-3000:]
    assert "Profiler session started" in during  # TensorFlow's own logging is on
