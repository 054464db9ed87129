"""The single-file HTML report: jinja2 with autoescape on, inline CSS and SVG, no network loads."""

from __future__ import annotations

import os
from typing import Any

import jinja2

from rnndoctor.engine import Report
from rnndoctor.facts import SequenceInput
from rnndoctor.findings import Severity
from rnndoctor.reports import charts

# The one template environment of the reports (the comparison page uses it too).
ENV = jinja2.Environment(
    loader=jinja2.PackageLoader("rnndoctor.reports", "templates"),
    autoescape=True,  # every user-controlled string (layer names, paths, messages) is escaped
    undefined=jinja2.StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)

_CHART_W, _CHART_H = 600, 120  # step-time chart size, px


def format_value(value: Any) -> str:
    """How the report shows a value: floats below 1 with 4 significant digits (``0.0975``),
    below 1000 with up to 3 decimals, above with 1; None as a dash; anything else as ``str``."""
    if isinstance(value, float):
        if abs(value) < 1:
            return f"{value:.4g}"
        text = f"{value:,.3f}" if abs(value) < 1e3 else f"{value:,.1f}"
        return text.rstrip("0").rstrip(".")
    return "—" if value is None else str(value)


def _short(path: str | None, base: str | None) -> str:
    if not path:
        return ""
    if base:
        try:
            rel = os.path.relpath(path, base)
            if not rel.startswith(".."):
                return rel
        except ValueError:
            pass
    return path


def duration(seconds: float) -> str:
    """``5400.0`` -> ``1 h 30 min``; ``95.0`` -> ``1 min 35 s``; ``3.2`` -> ``3.2 s``;
    ``0.032`` -> ``32 ms``."""
    if seconds >= 3600:
        return f"{int(seconds // 3600)} h {int(seconds % 3600 // 60)} min"
    if seconds >= 60:
        return f"{int(seconds // 60)} min {int(seconds % 60)} s"
    if seconds >= 1:
        return f"{seconds:.1f} s"
    return f"{seconds * 1000:.0f} ms"


def step_chart(step_ms: list[float]) -> dict[str, Any] | None:
    """Bar geometry for the per-step times (a layout of measured values, nothing new)."""
    if not step_ms:
        return None
    top = max(step_ms) or 1.0
    width = _CHART_W / len(step_ms)
    bars = [
        {
            "x": round(i * width, 2),
            "w": round(max(width - 1, 1), 2),
            "h": round(v / top * (_CHART_H - 14), 2),
            "y": round(_CHART_H - v / top * (_CHART_H - 14), 2),
            "ms": v,
            "i": i + 1,
        }
        for i, v in enumerate(step_ms)
    ]
    return {"w": _CHART_W, "h": _CHART_H, "bars": bars, "top_ms": top}


ENV.filters["fmt"] = format_value


def bucket_boundaries(report: Report, seq: SequenceInput) -> list[int]:
    """The bucket boundaries an RD501 finding suggests for ``seq`` (its evidence labelled
    ``suggested bucket boundaries``), to mark them on the length histogram; [] if none."""
    for finding in report.findings:
        if finding.rule_id != "RD501":
            continue
        if finding.layer and seq.rnn_layers and finding.layer not in seq.rnn_layers:
            continue
        for e in finding.evidence:
            if e.label.startswith("suggested bucket boundaries") and isinstance(e.value, list):
                return [int(v) for v in e.value]
    return []


def render_html(report: Report) -> str:
    """Renders ``report`` as one self-contained HTML document."""
    facts = report.facts
    base = os.path.dirname(facts.run.script) if facts.run.script else None
    counts = {s.label: sum(f.severity == s for f in report.findings) for s in Severity}
    fired = {o.rule.id for o in report.outcomes if o.status == "fired"}
    return ENV.get_template("report.html.j2").render(
        report=report,
        facts=facts,
        findings=report.findings,
        counts=counts,
        outcomes=report.outcomes,
        docs=[o.rule for o in report.outcomes if o.rule.id in fired]
        + [o.rule for o in report.outcomes if o.rule.id not in fired],
        chart=step_chart(facts.steps.step_time_ms) if facts.steps else None,
        bar=charts.breakdown_bar(facts.probes.breakdown) if facts.probes else None,
        curve=charts.probe_curve(facts.probes.batch_probe) if facts.probes else None,
        graph=charts.data_graph(facts.data),
        histograms=[
            charts.length_histogram(s, bucket_boundaries(report, s))
            for s in (facts.sequences.inputs if facts.sequences else [])
        ],
        short=lambda p: _short(p, base),
        duration=duration,
    )
