"""A real notebook, executed headless (nbclient with an ipykernel kernel): a cell builds a small
LSTM and fits it with rnndoctor.keras.DoctorCallback, and the report shows in that cell's output
as HTML (Report._repr_html_: report.html in a sandboxed frame, no script); the next cell's
rnndoctor.diagnose(...) shows its report the same way (slow)."""

from __future__ import annotations

import html
import json
import re

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

pytestmark = pytest.mark.slow

CELL = """\
import numpy as np
import keras
from rnndoctor.keras import DoctorCallback

rng = np.random.default_rng(0)
x = rng.normal(size=(256, 12, 4)).astype("float32")
y = rng.normal(size=(256, 1)).astype("float32")
model = keras.Sequential([
    keras.Input((12, 4)),
    keras.layers.LSTM(8, recurrent_dropout=0.2),
    keras.layers.Dense(1),
])
model.compile(optimizer="adam", loss="mse")
doctor = DoctorCallback(out={out!r}, steps=3, warmup_steps=1, profile_steps=0, run_probes=False)
history = model.fit(x, y, batch_size=16, epochs=2, verbose=0, callbacks=[doctor])
print("epochs", len(history.history["loss"]))
"""


# rnndoctor.diagnose in the next cell, on the same model: the report shows from inside the call
# (the cell ends in an assignment, so IPython displays nothing of its own).
DIAGNOSE_CELL = """\
import rnndoctor

report = rnndoctor.diagnose(model, x, y=y, steps=2, warmup_steps=1, profile_steps=0,
                            run_probes=False, batch_size=16, epochs=1, verbose=0)
"""


def _frames(outputs: list) -> list[str]:
    return [o["data"]["text/html"] for o in outputs if "text/html" in o.get("data", {})]


def test_the_callback_shows_the_report_in_the_cell(tmp_path):
    out = tmp_path / "report"
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [
        nbformat.v4.new_code_cell(CELL.format(out=str(out))),
        nbformat.v4.new_code_cell(DIAGNOSE_CELL),
    ]
    nbformat.write(notebook, tmp_path / "diagnose.ipynb")
    client = nbclient.NotebookClient(
        nbformat.read(tmp_path / "diagnose.ipynb", as_version=4),
        timeout=240, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}},
    )  # fmt: skip
    executed = client.execute()
    outputs = executed.cells[0].outputs
    frames = _frames(outputs)
    assert len(frames) == 1, outputs
    frame = frames[0]
    assert frame.startswith('<iframe class="rnndoctor-report" sandbox="allow-same-origin"')
    document = html.unescape(re.search(r'srcdoc="([^"]*)"', frame).group(1))
    assert "Verdict" in document and "RD101" in document
    assert "<script" not in document.lower()
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", document)  # nothing fetched
    assert document == (out / "report.html").read_text(encoding="utf-8")  # report.html itself
    text = "".join(o.get("text", "") for o in outputs if o.get("name") == "stdout")
    assert "epochs 2" in text
    # the report names the cell as IPython does, not ipykernel's file of it (a fresh user's
    # read "rnndoctor report: 1284195517.py" and "Where: 1284195517.py:3")
    cells = json.loads((out / "report.json").read_text())["facts"]["run"]["cells"]
    assert list(cells.values()) == ["In[1]"], cells
    assert "<title>rnndoctor report: cell In[1]</title>" in document
    (diagnosed,) = _frames(executed.cells[1].outputs)  # diagnose() displayed its report
    assert diagnosed.startswith('<iframe class="rnndoctor-report" sandbox="allow-same-origin"')
    assert "RD101" in html.unescape(diagnosed)
