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


def _environment(report: Report) -> list[str]:
    env = report.facts.environment
    if env is None:
        return []
    gpus = ", ".join(
        _text(f"{d.name} {d.details.get('device_name', '')}".strip())
        for d in env.devices
        if d.device_type == "GPU"
    )
    cuda = f"{env.cuda_build} / {env.cudnn_build}" if env.is_cuda_build else "not a CUDA build"
    rows = [
        ("TensorFlow", env.tensorflow), ("Keras", f"{env.keras} ({env.keras_backend})"),
        ("Python", env.python), ("OS", env.platform), ("CUDA / cuDNN (build)", cuda),
        ("GPUs", gpus or "none visible"),
        ("GPU memory (MiB)", ", ".join(map(str, env.gpu_memory_mib)) or "not measured"),
        ("CPU", f"{env.cpu_model or '?'}, {env.cpu_count} logical cores"),
        ("precision policy", env.precision_policy),
    ]  # fmt: skip
    return (
        ["## Environment", "", "| | |", "|---|---|"]
        + [f"| {name} | {_text(value)} |" for name, value in rows]
        + [""]
    )


def _layers(report: Report) -> list[str]:
    model = report.facts.model
    if model is None or not model.rnn_layers:
        return []
    out = [
        "## RNN layers",
        "",
        "| layer | built at | cuDNN on a GPU | blocked by |",
        "|---|---|---|---|",
    ]
    for r in model.rnn_layers:
        site = _code(f"{r.location.file}:{r.location.line}") if r.location else "not recorded"
        probe = r.fast_path
        verdict = (
            ("yes" if probe.takes_fast_path else "no") if probe and probe.probed else "not probed"
        )
        blocked = ", ".join(probe.blocking_args) if probe else ""
        out += [f"| {_code(r.path)} ({r.class_name}) | {site} | {verdict} | {blocked} |"]
    return out + [""]


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
        if f.location and f.location.context and f.location.context_start:
            width = len(str(f.location.context_start + len(f.location.context)))
            numbered = "\n".join(
                f"{'>' if n == f.location.line else ' '} {n:>{width}} {text}"
                for n, text in enumerate(f.location.context, start=f.location.context_start)
            )
            out += ["", _block(numbered, "text"), ""]
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
    out += _environment(report)
    out += _layers(report)
    out += ["## Rules", "", "| rule | status | note |", "|---|---|---|"]
    for o in report.outcomes:
        status = f"fired ({len(o.findings)})" if o.status == "fired" else o.status
        out += [f"| {o.rule.id} {o.rule.name} | {status.replace('_', ' ')} | "
                f"{_text(o.reason or '')} |"]  # fmt: skip
    out += [""]
    out += [
        "<details><summary>Facts (JSON)</summary>",
        "",
        _block(json.dumps(facts.to_dict(), indent=2, default=repr), "json"),
        "",
        "</details>",
        "",
    ]
    return "\n".join(out)
