"""The Markdown report (``--format md``), for pasting into a ticket: ``templates/report.md.j2``;
and ``verify.md`` (``check --verify``): ``templates/verify.md.j2``.

User-controlled text (layer names, paths, messages) goes into code spans or fenced blocks, or is
HTML-escaped, so that a ticket renderer shows it as text (the ``md_*`` filters of
:mod:`rnndoctor.reports.formatting`).
"""

from __future__ import annotations

import json

from rnndoctor.engine import Report
from rnndoctor.reports.templating import environment
from rnndoctor.reports.verified import build_verify_view
from rnndoctor.reports.view import ReportView, build_view
from rnndoctor.verify.summary import VerifySummary


def render_markdown(report: Report, view: ReportView | None = None) -> str:
    """Renders ``report`` as GitHub-flavoured Markdown (from ``view`` if given)."""
    view = view or build_view(report)
    facts_json = json.dumps(view.facts.to_dict(), indent=2, default=repr)
    text = (
        environment()
        .get_template("report.md.j2")
        .render(view=view, facts=view.facts, facts_json=facts_json, located=view.located)
    )
    return text + "\n"  # jinja drops the template's last newline; the report ends with one


def render_verify_markdown(summary: VerifySummary) -> str:
    """``verify.md``: the verified fixes' table (status, estimate, measurement, pairs, loss, in
    patch), failed, slower and unsafe first, then the notes and the patch line; every cell
    escaped (``templates/verify.md.j2``)."""
    view = build_verify_view(summary)
    return environment().get_template("verify.md.j2").render(verify=view).rstrip() + "\n"
