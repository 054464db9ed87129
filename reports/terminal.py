"""The short terminal summary: one line per finding, then the report's path."""

from __future__ import annotations

import os

from rnndoctor.engine import Report


def summary_lines(report: Report, written: dict[str, os.PathLike] | None = None) -> list[str]:
    """Plain lines (no colour codes), worst finding first."""
    facts = report.facts
    lines = []
    steps = facts.steps
    if steps and steps.median_step_time_ms is not None:
        n = steps.measured_steps
        lines.append(
            f"step time: median {steps.median_step_time_ms:.1f} ms, p90 "
            f"{steps.p90_step_time_ms:.1f} ms over {n} step{'' if n == 1 else 's'}"
            + (f" ({steps.samples_per_s:.0f} samples/s)" if steps.samples_per_s else "")
        )
    if facts.model is not None and not facts.model.rnn_layers:
        lines.append(f"model '{facts.model.name}' has no RNN layer: the RD1xx rules found nothing")
    for f in report.findings:
        where = f"{_rel(f.location.file)}:{f.location.line}" if f.location else "-"
        lines.append(f"{f.rule_id} {f.severity.label:<7} {where}  {f.message}")
    not_evaluated = [o.rule.id for o in report.outcomes if o.status in ("not_evaluated", "failed")]
    evaluated = len(report.outcomes) - len(not_evaluated)
    if not_evaluated:
        lines.append(f"not evaluated: {', '.join(not_evaluated)} (facts missing; see the report)")
    if not report.findings:
        lines.append(
            "no findings"
            if not not_evaluated
            else f"no findings from the {evaluated} rules evaluated: this is not a clean result"
        )
    for note in facts.run.notes:
        lines.append(f"note: {note}")
    for fmt, path in (written or {}).items():
        lines.append(f"{fmt} report: {path}")
    return lines


def _rel(path: str) -> str:
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return path
    return path if rel.startswith("..") else rel
