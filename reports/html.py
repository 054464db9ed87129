"""The single-file HTML report: jinja2 with autoescape on, inline CSS and SVG, no network loads."""

from __future__ import annotations

from rnndoctor.engine import Report
from rnndoctor.reports.templating import environment
from rnndoctor.reports.view import ReportView, build_view


def render_html(report: Report, view: ReportView | None = None) -> str:
    """Renders ``report`` as one self-contained HTML document (from ``view`` if given)."""
    view = view or build_view(report)
    return (
        environment()
        .get_template("report.html.j2")
        .render(view=view, facts=view.facts, short=view.short, located=view.located)
    )
