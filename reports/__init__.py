"""Renderers (importable as ``rnndoctor.reports``): one mapping, all fed by the same Report.

Renderers only render: every number they show is in the Facts or the Findings already.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from rnndoctor.engine import Report
from rnndoctor.reports.html import render_html
from rnndoctor.reports.markdown import render_markdown
from rnndoctor.reports.sarif import render_sarif


def render_json(report: Report) -> str:
    """``report.json``: facts, findings (``rule_id``, ``name``, ``severity``, ``message``,
    ``location`` {file, line, code}, ``layer``, ``evidence``, ``fix``, ``gain``,
    ``fast_path_after_fix``) and each rule's outcome."""
    return json.dumps(report.to_dict(), indent=2, default=repr)


RENDERERS: dict[str, Callable[[Report], str]] = {
    "html": render_html,
    "json": render_json,
    "md": render_markdown,
    "sarif": render_sarif,
}
FILENAMES = {fmt: f"report.{fmt}" for fmt in RENDERERS}


def write_reports(report: Report, out_dir: str | Path, formats: list[str]) -> dict[str, Path]:
    """Renders ``report`` in each format into ``out_dir``; returns the written paths by format.

    Raises:
        KeyError: an unknown format.
        OSError: the directory cannot be written.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = {}
    for fmt in dict.fromkeys(formats):
        path = out / FILENAMES[fmt]
        path.write_text(RENDERERS[fmt](report), encoding="utf-8")
        written[fmt] = path
    return written
