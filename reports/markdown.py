"""The Markdown report (``--format md``), for pasting into a ticket.

User-controlled text (layer names, paths, messages) goes into code spans or fenced blocks, or is
HTML-escaped, so that a ticket renderer shows it as text.
"""

from __future__ import annotations

import html
import json

from rnndoctor.engine import Report
from rnndoctor.reports.html import duration


def _text(value: object) -> str:
    """Escapes text for Markdown prose: HTML is escaped, Markdown punctuation backslashed."""
    escaped = html.escape(str(value), quote=False)
    for ch in "\\`*_[]|#":  # the backslash first, so that added backslashes stay single
        escaped = escaped.replace(ch, "\\" + ch)
    return escaped.replace("\n", " ")


def _code(value: object) -> str:
    text = str(value).replace("\n", " ").replace("`", "'")  # a code span shows HTML as text
    return f"`{text}`"


def _block(text: str, lang: str = "") -> str:
    fence = "```"
    while fence in text:
        fence += "`"
    return f"{fence}{lang}\n{text}\n{fence}"


def render_markdown(report: Report) -> str:
    """Renders ``report`` as GitHub-flavoured Markdown."""
    facts = report.facts
    out = [f"# rnndoctor report: {_code(facts.run.script)}", ""]
    if facts.run.outcome != "completed":
        out += [
            f"> **Partial report**: the run ended with outcome {_code(facts.run.outcome)} during "
            f"phase *{_text(facts.run.phase)}*: {_text(facts.run.message or '')}",
            "",
        ]
    findings = report.findings
    out += [f"**Verdict:** {_text(report.verdict)}", ""]
    forecast = report.forecast
    if forecast is not None:
        after = (
            f"{duration(forecast.after_s)} ({_text(forecast.after_model)})"
            if forecast.after_s is not None
            else f"not estimated: {_text(forecast.after_not_estimated)}"
        )
        out += [
            f"**Job forecast:** {duration(forecast.now_s)} now = "
            f"{forecast.step_time_ms:.1f} ms/step x "
            f"{forecast.steps_per_epoch} steps/epoch x {forecast.epochs} epochs (training steps "
            f"only); after the fixes: {after}",
            "",
        ]
    out += [f"**{len(findings)} finding{'' if len(findings) == 1 else 's'}**", ""]
    for f in findings:
        where = f"{_code(f'{f.location.file}:{f.location.line}')}" if f.location else "not recorded"
        out += [f"## {f.severity.label.upper()} {f.rule_id} {f.name}", "", _text(f.message), ""]
        out += [f"- Where: {where}" + (f" (layer {_code(f.layer)})" if f.layer else "")]
        for e in f.evidence:
            unit = f" {_text(e.unit)}" if e.unit else ""
            out += [f"- {_text(e.label)}: {_code(e.value)}{unit} ({_text(e.source)})"]
        if f.fast_path_after_fix is not None:
            verdict = "yes" if f.fast_path_after_fix else "no"
            if f.fast_path_caveat:
                verdict += f", {_text(f.fast_path_caveat)}"
            out += [f"- cuDNN on a GPU once fixed: {verdict}"]
        if f.gain:
            out += [f"- Estimated gain: {_text(f.gain)}"]
        if f.fix:
            out += ["", f"**Fix** ({_text(f.fix.safety)}): {_text(f.fix.title)}", ""]
            if f.fix.before:
                out += ["Before:", "", _block(f.fix.before, "python"), "", "After:", ""]
            out += [_block(f.fix.code, "python")]
        out += [""]
    if facts.steps and facts.steps.median_step_time_ms is not None:
        s = facts.steps
        out += [
            "## Step time",
            "",
            f"- median {s.median_step_time_ms} ms, p90 {s.p90_step_time_ms} ms over "
            f"{s.measured_steps} measured steps (after {s.warmup_steps} warm-up steps)",
            f"- batch size {s.batch_size}, {s.samples_per_s} samples/s",
            "",
        ]
    if facts.profile and facts.profile.tensorboard_command:
        out += ["## Profile", "", _block(facts.profile.tensorboard_command, "sh"), ""]
    out += [
        "<details><summary>Facts (JSON)</summary>",
        "",
        _block(json.dumps(facts.to_dict(), indent=2, default=repr), "json"),
        "",
        "</details>",
        "",
    ]
    return "\n".join(out)
