"""In a notebook, locations name the cell as IPython does (``cell In[3]:5``), not ipykernel's
file of it (``/tmp/ipykernel_41/1284195517.py``), which a fresh user's report showed as
``Where: 1284195517.py:3`` and in its title (``rnndoctor/capture/sites.py: notebook_cells``,
``facts.run.cells``; the reports' ``located``). Pure: no TensorFlow, no IPython."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace

from rnndoctor.capture import sites
from rnndoctor.engine import evaluate
from rnndoctor.facts import Facts
from rnndoctor.reports import RENDERERS
from rnndoctor.reports.terminal import summary_lines

RULES = Path(__file__).parents[1] / "data" / "rules"
CELL = "/tmp/ipykernel_41/1284195517.py"


def _facts_in_a_cell() -> Facts:
    facts = Facts.from_dict(json.loads((RULES / "RD101-offending.json").read_text())["facts"])
    (layer,) = facts.model.rnn_layers
    layer.location.file = CELL
    facts.run.script = CELL
    return facts


def test_the_capture_names_each_cell_as_the_shell_does(monkeypatch):
    shell = SimpleNamespace(
        compile=SimpleNamespace(
            format_code_name=lambda name: ("Cell", "In[3]") if name == CELL else None
        )
    )
    monkeypatch.setitem(sys.modules, "IPython", SimpleNamespace(get_ipython=lambda: shell))
    assert sites.notebook_cells(_facts_in_a_cell()) == {CELL: "In[3]"}
    monkeypatch.setitem(sys.modules, "IPython", SimpleNamespace(get_ipython=lambda: None))
    assert sites.notebook_cells(_facts_in_a_cell()) == {}  # IPython imported, no shell
    monkeypatch.delitem(sys.modules, "IPython")
    assert sites.notebook_cells(_facts_in_a_cell()) == {}  # a plain script


def test_the_reports_show_the_cell_not_the_kernels_file():
    facts = _facts_in_a_cell()
    facts.run.cells = {CELL: "In[3]"}
    report = evaluate(facts, select=["RD101"])
    line = next(x for x in summary_lines(report) if x.startswith("RD101"))
    assert " cell In[3]:" in line and "1284195517" not in line
    md = RENDERERS["md"](report)
    assert md.startswith("# rnndoctor report: `cell In[3]`")
    assert "- Where: `cell In[3]:" in md and "1284195517.py:" not in md
    html = RENDERERS["html"](report)
    assert "<title>rnndoctor report: cell In[3]</title>" in html
    assert "script <code>cell In[3]</code>" in html and "1284195517" not in html  # the header
    assert "cell In[3]:" in html
    plain = evaluate(_facts_in_a_cell(), select=["RD101"])  # no cells recorded: as before
    assert "1284195517.py:" in RENDERERS["md"](plain)
