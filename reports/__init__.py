"""Renderers (importable as ``rnndoctor.reports``): one mapping, all fed by the same Report.

What this package owns: turning a :class:`rnndoctor.engine.Report` into what a person or a tool
reads: the HTML report, the Markdown report, ``report.json``, SARIF, the terminal summary and
the comparison page. It renders only: every number it shows is in the Facts or the Findings
already. Whatever the outputs share beyond those fields (the verdict, the breakdown's shares,
orderings, counts, chart geometry) is computed once, in :mod:`rnndoctor.reports.view`, and
written the same way everywhere by the filters of :mod:`rnndoctor.reports.formatting`.

Layout:
    ``view.py``: the view model (:func:`~rnndoctor.reports.view.build_view`).
    ``verified.py``: the verified fixes' view (``check --verify``) and terminal table.
    ``shares.py``: the breakdown-share formula. ``charts.py``: the SVG charts' geometry.
    ``formatting.py``: how values, percentages and Markdown-safe text are written.
    ``templating.py``: the one jinja2 environment. ``templates/``: ``report.html.j2``,
    ``report.md.j2``, ``verify.md.j2``, ``compare.html.j2``, the shared ``_base.css.j2``,
    ``_macros.j2``, ``_macros.md.j2`` and ``_verified.html.j2``.
    ``html.py``, ``markdown.py`` (``report.md`` and ``verify.md``), ``sarif.py``,
    ``terminal.py``, ``compare.py``: the renderers. ``progress.py``: the live phase display,
    which loads no renderer.

What it may import: :mod:`rnndoctor.engine` (the Report), :mod:`rnndoctor.facts`,
:mod:`rnndoctor.findings`, :mod:`rnndoctor.compare`, rule metadata (:class:`rnndoctor.rules.Rule`
for types), the verification's saved form (:mod:`rnndoctor.verify.summary`,
:mod:`rnndoctor.verify.result`, and :func:`rnndoctor.verify.patch.fix_ids` for the fixes'
names), and its own libraries (jinja2, networkx, rich). Never :mod:`rnndoctor.capture`,
TensorFlow or Keras: ``rnndoctor report`` re-renders saved facts without them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from rnndoctor.engine import Report

if TYPE_CHECKING:
    from rnndoctor.reports.view import ReportView


class Renderer(Protocol):
    """Renders a report as text; ``view``: the report's view, when the caller built it already."""

    def __call__(self, report: Report, view: ReportView | None = None) -> str: ...


# The renderers import their modules (jinja2, networkx) when first called, not when this package
# is: ``rnndoctor check`` imports the package while the capture child runs (the report folder's
# file names, the phase display), and the renderers' memory would add to the check's peak, which
# is the child's largest probe point (README, "Benchmarks": overhead).


def render_html(report: Report, view: ReportView | None = None) -> str:
    """``report.html`` (:func:`rnndoctor.reports.html.render_html`)."""
    from rnndoctor.reports.html import render_html as render

    return render(report, view)


def render_markdown(report: Report, view: ReportView | None = None) -> str:
    """``report.md`` (:func:`rnndoctor.reports.markdown.render_markdown`)."""
    from rnndoctor.reports.markdown import render_markdown as render

    return render(report, view)


def render_sarif(report: Report, view: ReportView | None = None) -> str:
    """``report.sarif`` (:func:`rnndoctor.reports.sarif.render_sarif`)."""
    from rnndoctor.reports.sarif import render_sarif as render

    return render(report, view)


def render_json(report: Report, view: ReportView | None = None) -> str:
    """``report.json``: facts, findings (``rule_id``, ``name``, ``severity``, ``message``,
    ``location`` {file, line, code}, ``layer``, ``evidence``, ``fix``, ``gain``,
    ``fast_path_after_fix``) and each rule's outcome. The view is not needed."""
    return json.dumps(report.to_dict(), indent=2, default=repr)


RENDERERS: dict[str, Renderer] = {
    "html": render_html,
    "json": render_json,
    "md": render_markdown,
    "sarif": render_sarif,
}
FILENAMES = {fmt: f"report.{fmt}" for fmt in RENDERERS}


def write_reports(report: Report, out_dir: str | Path, formats: list[str]) -> dict[str, Path]:
    """Renders ``report`` in each format into ``out_dir`` (from one view); returns the written
    paths by format.

    Raises:
        KeyError: an unknown format.
        OSError: the directory cannot be written.
    """
    from rnndoctor.reports.view import build_view

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    # one view for every format that reads it (report.json is the report's own dict)
    view = build_view(report) if set(formats) - {"json"} else None
    written = {}
    for fmt in dict.fromkeys(formats):
        path = out / FILENAMES[fmt]
        path.write_text(RENDERERS[fmt](report, view), encoding="utf-8")
        written[fmt] = path
    return written
