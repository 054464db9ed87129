"""The short terminal summary of ``rnndoctor check``: one line per finding, then the reports'
paths. The live phase display is :mod:`rnndoctor.reports.progress`."""

from __future__ import annotations

import os

from rnndoctor.engine import Report
from rnndoctor.facts import Facts
from rnndoctor.reports.formatting import ms
from rnndoctor.reports.view import ReportView, build_view, cell_name


def summary_lines(
    report: Report, written: dict[str, os.PathLike] | None = None, view: ReportView | None = None
) -> list[str]:
    """Plain lines (no colour codes), in the report's order of findings, then the paths of the
    ``written`` reports (from ``view`` if given)."""
    view = view or build_view(report)
    facts = view.facts
    lines = []
    steps = facts.steps
    if steps and steps.median_step_time_ms is not None:
        n = steps.measured_steps
        lines.append(
            f"step time: median {ms(steps.median_step_time_ms)}, p90 "
            f"{ms(steps.p90_step_time_ms)} over {n} step{'' if n == 1 else 's'}"
            + (f" ({steps.samples_per_s:.0f} samples/s)" if steps.samples_per_s else "")
        )
    if facts.strategy is not None:
        lines.append(_strategy_line(facts))
    if view.noisy:
        lines.append(view.noisy)
    lines += [f"probe: {line}" for line in view.intervals]
    lines += [f"not measured: {' '.join(line.split())}" for line in view.unmeasured]  # one line
    if facts.model is not None and not facts.model.rnn_layers:
        lines.append(f"model '{facts.model.name}' has no RNN layer: the RD1xx rules found nothing")
    for item in view.findings:
        f = item.finding
        where = f"{_rel(f.location.file, facts)}:{f.location.line}" if f.location else "-"
        lines.append(f"{f.rule_id} {f.severity.label:<7} {where}  {f.message}")
    lines += _rule_lines(view, facts)
    lines += _run_lines(facts)
    for fmt, path in (written or {}).items():
        lines.append(f"{fmt} report: {path}")
    return lines


def _strategy_line(facts: Facts) -> str:
    """``strategy: MirroredStrategy, 2 replicas, 1 worker, per-replica batch 16 (global 32)``."""
    st = facts.strategy
    if st.not_measured and st.strategy == "not seen":
        return f"strategy: not seen ({st.not_measured})"

    def count(n: int, word: str) -> str:
        return f"{n} {word}{'' if n == 1 else 's'}"

    batch = (
        f"per-replica batch {st.per_replica_batch_size}"
        if st.per_replica_batch_size is not None
        else "per-replica batch not measured"
    )
    if st.global_batch_size is not None:
        batch += f" (global {st.global_batch_size})"
    return f"strategy: {st.strategy}, {count(st.replicas, 'replica')}, " + (
        f"{count(st.workers, 'worker')}, {batch}"
    )


def _rule_lines(view: ReportView, facts: Facts) -> list[str]:
    """The rules that did not run (for a custom training loop, why most of them did not), and
    the clean-run line."""
    tally = view.tally
    lines = []
    if tally.need_gpu:
        lines.append(f"not evaluated, need a GPU: {', '.join(tally.need_gpu)}")
    if tally.not_evaluated:
        why = (
            "a custom training loop: they read Model.fit's input, or facts missing; see the report"
            if facts.loop is not None and facts.fit is None
            else "a probe not run or facts missing: each rule's reason is in the report"
        )
        lines.append(f"not evaluated: {', '.join(tally.not_evaluated)} ({why})")
    if tally.skipped:
        lines.append(f"skipped: {', '.join(tally.skipped)} (--select / --ignore)")
    if not view.findings:
        lines.append(
            f"no findings from the {tally.evaluated} "
            f"{'rule' if tally.evaluated == 1 else 'rules'} evaluated"
            + (": the rules not evaluated could still fire" if tally.not_evaluated else "")
        )
    return lines


def _run_lines(facts: Facts) -> list[str]:
    """What the check turned off, the probes that stopped, the phases cut short, the notes."""
    lines = []
    for n in facts.run.neutralised:
        target = f" (would have written {_rel(n.detail)})" if n.detail else ""
        where = f" at {_rel(n.location.file, facts)}:{n.location.line}" if n.location else ""
        calls = f", {n.calls} calls" if n.calls > 1 else ""
        lines.append(f"neutralised: {n.what}{target}{where}{calls}")
    probes = facts.probes
    for label, points in (
        ("batch-size probe stopped at batch size", probes.batch_probe if probes else []),
        ("steps_per_execution probe stopped at", probes.spe_probe if probes else []),
    ):
        for p in points:
            if p.stopped and "budget" not in p.stopped:  # budget stops are listed as cut short
                lines.append(f"{label} {p.value}: {p.stopped}")
    for c in facts.run.cut_short:
        budget = f" (budget {c.budget_s:g} s)" if c.budget_s is not None else ""
        lines.append(f"cut short: {c.phase}{budget}: {c.reason}")
    for note in facts.run.notes:
        lines.append(f"note: {note}")
    return lines


def _rel(path: str, facts: Facts | None = None) -> str:
    """``path`` relative to the working directory when it lies below it; a notebook cell's name
    (``cell In[3]``, ``facts.run.cells``) for ipykernel's file of that cell."""
    cell = cell_name(facts, path)
    if cell:
        return cell
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return path
    return path if rel.startswith("..") else rel
