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


def _pct(value: float | None) -> str:
    return "not measured" if value is None else f"{value * 100:.1f} %"


def _probes(report: Report) -> list[str]:
    pr = report.facts.probes
    if pr is None:
        return []
    out = ["## Where the step time goes", ""]
    b = pr.breakdown
    if b is not None:
        total = max(b.step_ms, b.input_ms + b.compute_ms + b.host_ms)  # as the HTML's shares
        out += ["| part of the median step | ms | share |", "|---|---|---|"]
        for label, ms in (("input (waiting for the next batch)", b.input_ms),
                          ("compute (train step on cached batches)", b.compute_ms),
                          ("host overhead (per-batch callbacks)", b.host_ms),
                          ("unaccounted", b.other_ms)):  # fmt: skip
            if ms > 0:
                out += [f"| {label} | {ms:.2f} | {_pct(ms / total if total else None)} |"]
        out += [""]
    rows = [
        ("input-only time per batch", f"{pr.input_only_ms} ms ({pr.input_only_method})"
         if pr.input_only_ms is not None else f"not measured: {pr.input_only_not_measured}"),
        ("compute-only step time", f"{pr.compute_only_ms} ms"
         if pr.compute_only_ms is not None else f"not measured: {pr.compute_only_not_measured}"),
        ("input-bound share", _pct(pr.input_bound_share)),
        ("cross-check (input-only / step)", _pct(pr.input_share_check)),
    ]  # fmt: skip
    profile = report.facts.profile
    if profile and profile.xprof_verdict:
        rows.append(("xprof overview verdict", profile.xprof_verdict))
    if profile and profile.input_pipeline:
        ip = profile.input_pipeline
        share = _pct(ip.input_share) if ip.input_share is not None else None
        rows.append(("xprof input-pipeline analysis", share or f"not measured: {ip.not_measured}"))
    out += [f"- {name}: {_text(value)}" for name, value in rows]
    for c in pr.callbacks:
        out += [f"- callback {_code(c.name)}: {c.per_step_ms} ms per step"]
    if pr.batch_probe:
        out += ["", "| batch size | compute-only step (ms) | samples/s | note |",
                "|---|---|---|---|"]  # fmt: skip
        out += [f"| {p.value} | {p.step_time_ms if p.step_time_ms is not None else '—'} | "
                f"{p.samples_per_s if p.samples_per_s is not None else '—'} | "
                f"{_text(p.stopped or '')} |" for p in pr.batch_probe]  # fmt: skip
    if pr.spe_probe:
        out += ["", "| steps_per_execution | compute-only step (ms) | note |", "|---|---|---|"]
        out += [f"| {p.value} | {p.step_time_ms if p.step_time_ms is not None else '—'} | "
                f"{_text(p.stopped or '')} |" for p in pr.spe_probe]  # fmt: skip
    if pr.traces:
        out += ["", "| tf.function | role | traces | calls |", "|---|---|---|---|"]
        out += [f"| {_code(t.name)} | {t.role} | {t.traces} | {t.calls} |" for t in pr.traces]
    return out + [""]


def _data(report: Report) -> list[str]:
    d = report.facts.data
    if d is None:
        return []
    where = f" built at {_code(f'{d.location.file}:{d.location.line}')}" if d.location else ""
    out = ["## Data pipeline", "", f"{_text(d.kind)} input{where}.", ""]
    if d.nodes:
        out += ["| op | kind | parallel calls | Python | line |", "|---|---|---|---|---|"]
        for n in d.nodes:
            parallel = "" if n.num_parallel_calls is None else str(n.num_parallel_calls)
            line = str(n.location.line) if n.location else ""
            out += [f"| {_code(n.op)} | {n.kind} | {parallel} | {'yes' if n.python else ''} | "
                    f"{line} |"]  # fmt: skip
        out += [""]
    return out


def _sequences(report: Report) -> list[str]:
    sq = report.facts.sequences
    if sq is None:
        return []
    out = ["## Sequences and padding", ""]
    if not sq.inputs:
        out += [f"Not measured: {_text(sq.not_measured or 'no sequence input reaches an RNN')}"]
    for si in sq.inputs:
        out += [
            f"- input {_code(si.input)} ({si.sequences} sequences, {si.batches} batches, lengths "
            f"from {_text(si.length_source)}{'' if si.mask_used else ', no mask used'}): padded "
            f"fraction {_pct(si.padded_fraction)}, pad side {_text(si.pad_side)}, "
            f"{si.fully_masked_rows} fully-masked rows, padded lengths "
            f"{_text(', '.join(map(str, si.padded_lengths)))}"
        ]
    return out + [""]


def _run(report: Report) -> list[str]:
    run = report.facts.run
    out = []
    if run.neutralised:
        out += ["## Neutralised during the check", ""]
        out += [f"- {_code(n.what)}" + (f" (would have written {_code(n.detail)})"
                if n.detail else "") for n in run.neutralised]  # fmt: skip
        out += [""]
    if run.cut_short:
        out += ["## Phases cut short", ""]
        out += [f"- {_text(c.phase)}: {_text(c.reason)}" for c in run.cut_short]
        out += [""]
    return out


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
    out += _probes(report)
    out += _data(report)
    out += _sequences(report)
    out += _run(report)
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
