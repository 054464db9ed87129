"""Where a report shows itself (rnndoctor/api.py: show_in_ipython): a notebook's kernel only."""

from __future__ import annotations

import types

import pytest

from rnndoctor import api

IPython = pytest.importorskip("IPython")


@pytest.mark.parametrize(
    ("shell", "shown"),
    [
        (None, False),  # plain Python
        (types.SimpleNamespace(), False),  # terminal IPython: display() would print the repr
        (types.SimpleNamespace(kernel=object()), True),  # a notebook's kernel
    ],
)
def test_only_a_notebook_kernel_displays_the_report(monkeypatch, shell, shown):
    displayed = []
    monkeypatch.setattr(IPython, "get_ipython", lambda: shell)
    monkeypatch.setattr("IPython.display.display", displayed.append)
    assert api.show_in_ipython("the report") is shown
    assert displayed == (["the report"] if shown else [])
