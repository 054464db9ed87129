"""The report inline in a notebook cell (``Report._repr_html_``).

The cell shows report.html itself, rendered by :func:`rnndoctor.reports.html.render_html`, inside
an ``<iframe srcdoc=...>``: the report's own stylesheet stays inside the frame (it would restyle
the whole notebook page otherwise), and, like report.html, it holds no script and loads nothing
from the network (the frame is ``sandbox``-ed without ``allow-scripts`` as well).

Importing this module registers :func:`render_notebook_html` as ``Report.notebook_renderer``,
which ``Report._repr_html_`` calls (the engine cannot import the reports package: it is below it).
"""

from __future__ import annotations

import html

from rnndoctor.engine import Report
from rnndoctor.reports.html import render_html

_FRAME_HEIGHT_PX = 900  # tall enough for the verdict, the breakdown and the first findings


def render_notebook_html(report: Report) -> str:
    """report.html as one notebook output: an iframe whose ``srcdoc`` is the whole document."""
    document = render_html(report)
    return (
        '<iframe class="rnndoctor-report" sandbox="allow-same-origin" '
        f'style="width:100%;height:{_FRAME_HEIGHT_PX}px;border:1px solid #ccc" '
        f'title="rnndoctor report" srcdoc="{html.escape(document, quote=True)}"></iframe>'
    )


Report.notebook_renderer = render_notebook_html
