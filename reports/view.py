"""The report's view model: everything the renderers show beyond the Facts' and Findings' own
fields, computed once from a :class:`rnndoctor.engine.Report` by :func:`build_view`.

The HTML and Markdown templates, the terminal summary and SARIF all read a :class:`ReportView`,
so that a share, an ordering or a verdict is computed in one place and every output agrees. The
view adds no measurement: shares are of measured times, chart geometry places measured values.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from rnndoctor.engine import Forecast, Report, RuleOutcome, Status
from rnndoctor.facts import (
    COMPUTE_SKIPPED_FOR_INPUT_BOUND,
    PROBE_NOT_MEASURED_FIELDS,
    Facts,
    Outcome,
    PairedRatio,
    SequenceInput,
    StepTimes,
)
from rnndoctor.findings import Finding, Severity
from rnndoctor.reports import charts
from rnndoctor.reports.shares import Breakdown, breakdown_shares
from rnndoctor.reports.verified import VerifiedRow, VerifyView, build_verify_view
from rnndoctor.rules._outside import estimate_words
from rnndoctor.verify.patch import fix_ids
from rnndoctor.verify.result import Status as VerifyStatus
from rnndoctor.verify.summary import ALL

if TYPE_CHECKING:
    from rnndoctor.rules import Rule

_PADDING_RULE = "RD501"  # the rule whose bucket boundaries the length histograms mark


@dataclass(frozen=True)
class ContextLine:
    """A numbered source line around a finding's location; ``hit`` marks the finding's line."""

    number: int
    text: str
    hit: bool


@dataclass(frozen=True)
class FindingView:
    """A finding with its source context numbered, its fix's verification (``--verify``; None
    when it was not verified) and that of the rewrite merging the fix with other fixes of its
    call (:func:`merged_row`; None: none measured)."""

    finding: Finding
    context: tuple[ContextLine, ...]
    verified: VerifiedRow | None = None
    together: VerifiedRow | None = None


def _context(finding: Finding) -> tuple[ContextLine, ...]:
    loc = finding.location
    if loc is None or not loc.context or not loc.context_start:
        return ()
    return tuple(
        ContextLine(n, text, n == loc.line) for n, text in enumerate(loc.context, loc.context_start)
    )


@dataclass(frozen=True)
class RuleTally:
    """The rules by what they did, as the terminal summary groups them (rule IDs)."""

    need_gpu: tuple[str, ...]  # not evaluated (or failed) because the facts they read need a GPU
    not_evaluated: tuple[str, ...]  # the other rules not evaluated or failed
    skipped: tuple[str, ...]  # --select / --ignore
    evaluated: int  # fired or passed


def _tally(outcomes: Sequence[RuleOutcome]) -> RuleTally:
    unevaluated = [o for o in outcomes if o.status in (Status.NOT_EVALUATED, Status.FAILED)]
    need_gpu = tuple(o.rule.id for o in unevaluated if o.needs_gpu)
    skipped = tuple(o.rule.id for o in outcomes if o.status == Status.SKIPPED)
    return RuleTally(
        need_gpu=need_gpu,
        not_evaluated=tuple(o.rule.id for o in unevaluated if o.rule.id not in need_gpu),
        skipped=skipped,
        evaluated=len(outcomes) - len(unevaluated) - len(skipped),
    )


def bucket_boundaries(findings: Sequence[Finding], seq: SequenceInput) -> list[int]:
    """The bucket boundaries an RD501 finding suggests for ``seq`` (its ``bucket_plan``), to mark
    them on the length histogram; [] if none."""
    for finding in findings:
        if finding.rule_id != _PADDING_RULE:
            continue
        if finding.layer and seq.rnn_layers and finding.layer not in seq.rnn_layers:
            continue
        if finding.bucket_plan is not None:
            return list(finding.bucket_plan.boundaries)
    return []


def _measured_sentence(facts: Facts, breakdown: Breakdown | None) -> str:
    """The verdict's measured context: the step-time breakdown from the probes, else the
    profile's top op type."""
    if breakdown is not None and breakdown.step_ms > 0:
        shares = {p.key: (p.share or 0.0) * 100 for p in breakdown.parts}
        return (
            f" Of the {breakdown.step_ms:.1f} ms median step, {shares['input']:.0f}% is "
            f"waiting for input{_explained(facts, shares['input'])}, {shares['compute']:.0f}% "
            "compute and "
            f"{shares['host']:.0f}% per-batch callbacks (measured)" + _unexplained(facts, shares)
        )
    profile = facts.profile
    top = profile.top_op_types[0] if profile and profile.top_op_types else None
    if top is None:
        return _input_bound(facts)
    return _input_bound(facts) + (
        f" In the profiled steps, the op type {top.op_type} took {top.share * 100:.0f}% of the "
        f"{top.host_or_device.lower()}'s op time (xprof's op statistics)."
    )


def _input_bound(facts: Facts) -> str:
    """Where the compute-only probe was not run because the input-only probe bounds the input
    wait (``COMPUTE_SKIPPED_FOR_INPUT_BOUND``: data in memory, where a fresh iterator's time
    per batch, no model, is a bound on the window's wait), that bound over the median step;
    "" else. A new user's demo verdict named only "_MklMatMul took 39% of the host op time"."""
    probes, steps = facts.probes, facts.steps
    step = steps.median_step_time_ms if steps is not None else None
    skipped = (probes.compute_only_not_measured or "") if probes is not None else ""
    if not skipped.startswith(COMPUTE_SKIPPED_FOR_INPUT_BOUND) or not step:
        return ""
    if probes.input_only_ms is None:  # never with that reason, which quotes it
        return ""
    share = probes.input_only_ms / step * 100
    return (
        f" Of the {step:.1f} ms median step, at most {share:.2f}% is waiting for input (the "
        f"input-only probe produced a batch in {probes.input_only_ms:.2f} ms, from data in "
        "memory); the rest is not split further (the compute-only probe was not needed)."
    )


def _unexplained(facts: Facts, shares: dict[str, float]) -> str:
    """The sentence's end: where the parts fall short of the step by more than the window's
    own noise allows, that remainder (``other``, %) and, where the window's steps drifted,
    that they did; else ".". The capture's consistency check lets the parts exceed the step
    by the window's noise allowance ``a`` (:meth:`rnndoctor.facts.StepTimes.noise_allowance`:
    p90 / median, at least ``1 + CONSISTENCY_FLOOR``); the same pace difference the other way
    leaves ``1 - 1 / a`` of the step unexplained, the share below which the remainder is not
    named. A new user's verdict read "0% is waiting for input, 62% compute and 0% per-batch
    callbacks" of a window whose first 16 steps ran at 11.5 ms and the rest at 17.2 ms, and
    left the other 38% unsaid."""
    other, steps = shares["other"], facts.steps
    if steps is None:
        return "."
    allowance = steps.noise_allowance()
    allowed = (1.0 - 1.0 / allowance) * 100.0
    if other <= allowed:
        return "."
    why = (
        "the window's steps drifted (the noisy-machine line says how) and the probes ran after it"
        if steps.drifted
        else "Keras' per-step overhead, or the machine's pace between the window and the probes"
    )
    return (
        f"; the other {other:.0f}% is not explained by the probes (more than the {allowed:.0f}% "
        f"the window's own noise allows: {_noise_words(steps, allowance)}): {why}."
    )


def _noise_words(steps: StepTimes, allowance: float) -> str:
    """The window's noise allowance in words: its p90 / median, or, where that is under the
    consistency checks' least allowance (``rnndoctor.facts.CONSISTENCY_FLOOR``) or was not
    measured, that least allowance."""
    step, p90 = steps.median_step_time_ms, steps.p90_step_time_ms
    if step and p90 and p90 / step >= allowance:
        return f"p90 / median {allowance:.2f}"
    measured = f"p90 / median {p90 / step:.2f}, " if step and p90 else ""
    return f"{measured}the least allowance {allowance:.2f}"


def _explained(facts: Facts, quoted: float) -> str:
    """Where the input-only probe explains less of the step (``probes.input_share_check``)
    than the verdict quotes (``quoted``, %, the breakdown's input part): how much it explains,
    the share the input rules count (``rules/_measured.py: corroborated_share``). A new user's
    verdict read "55% is waiting for input" above RD201's "26% (12–26%)" of the same check;
    else ""."""
    probes = facts.probes
    check = probes.input_share_check if probes is not None else None
    if check is None or round(check * 100) >= round(quoted):
        return ""
    return (
        f" by the step on cached batches (the input-only probe explains {check * 100:.0f}%, "
        "what the input rules count)"
    )


def verdict(
    facts: Facts,
    findings: Sequence[Finding],
    breakdown: Breakdown | None,
    verified: VerifyView | None = None,
) -> str:
    """The report's one-sentence headline, from the run's outcome, the findings (the first is
    the main issue), the main issue's fix as ``--verify`` measured it (``verified``: the
    verification, None where the check did not verify) and the measured breakdown or profile.

    After ``--verify`` the estimate is followed by the measurement and its status
    (:func:`main_fix_row`): a new user's headline read "an estimated 1.3x the samples/s" for
    RD501 where ``--verify`` had measured 0.98x, "within noise", in the same report."""
    run = facts.run
    if run.outcome != Outcome.COMPLETED:
        return f"The run ended early ({run.outcome}, during {run.phase}): {run.message or ''}"
    measured = _measured_sentence(facts, breakdown)
    if not findings:
        return "No finding." + measured
    first = findings[0]
    where = (
        f" at {cell_name(facts, first.location.file) or first.location.file.rsplit('/', 1)[-1]}:"
        f"{first.location.line}"
        if first.location
        else ""
    )
    speed = f", an estimated {estimate_words(first)}" if first.speedup else ""
    name = fix_ids(findings)[0]
    row = main_fix_row(verified, name) if verified is not None else None
    return (
        f"Main issue: {first.rule_id} {first.name}{where}{speed}." + _verified(row, name) + measured
    )


def merged_row(verified: VerifyView, name: str) -> VerifiedRow | None:
    """The row of the rewrite that merged fix ``name`` (``RD301``, ``RD301-2``) with other
    fixes of its call (``RD301+RD401``: :func:`rnndoctor.verify.patch.merge_same_call`), where
    ``--verify`` measured one; the one ``fixes.patch`` holds first. None: no such rewrite."""
    rows = [
        r for r in verified.rows
        if r.item.fix != ALL and len(r.item.rules) > 1 and name in r.item.rules
        and r.item.measured is not None
    ]  # fmt: skip
    rows.sort(key=lambda r: not (r.item.in_patch and r.item.status == VerifyStatus.CONFIRMED))
    return rows[0] if rows else None


def main_fix_row(verified: VerifyView, name: str) -> VerifiedRow | None:
    """The verification row that speaks for fix ``name``: the rewrite that merged it with
    other fixes of its call, where that rewrite was confirmed and ``fixes.patch`` holds it (as
    the forecast takes it; alone, the part may leave the layer off the cuDNN kernel:
    ``rnndoctor.engine._refuted``); else its own row (None: not verified)."""
    together = merged_row(verified, name)
    if together is not None and together.item.in_patch:
        return together  # merged_row puts the confirmed rewrite in fixes.patch first
    return verified.row_for(name)


def _verified(row: VerifiedRow | None, name: str) -> str:
    """The main issue's fix as ``--verify`` measured it (B's samples/s over A's: "1.02x the
    samples/s (90% interval 0.95–1.08x)"), with its status, or why it was not measured; ""
    where the check did not verify it."""
    if row is None:
        return ""
    item = row.item
    if item.measured is None:
        return f" --verify: {_sentence(row.status_text)}"
    others = [r for r in item.rules if r != name]
    what = f"its rewrite together with {', '.join(others)} (one call)" if others else ""
    inside = [f"90% interval {item.low:.2f}–{item.high:.2f}x"] if item.low and item.high else []
    inside += [item.cpu_label] if item.cpu_label else []
    bounds = f" ({'; '.join(inside)})" if inside else ""
    measured = f"{item.measured:.2f}x the samples/s{bounds}"
    if what:
        return f" --verify measured {what}: {measured}: {_sentence(row.status_text)}"
    return f" --verify measured {measured}: {_sentence(row.status_text)}"


def _sentence(text: str) -> str:
    """``text`` ended with one full stop (a status or an error line may end with its own)."""
    text = text.rstrip()
    return text if text.endswith((".", "!", "?")) else text + "."


def _forecast_gap(facts: Facts) -> str:
    """Why the engine gives no job forecast (read when it gives none)."""
    if not facts.steps or facts.steps.median_step_time_ms is None:
        return "no step time was measured"
    if facts.loop:
        return "a custom training loop: rnndoctor does not know how many steps it runs"
    return (
        "the number of steps per epoch or of epochs is unknown (an infinite or unsized dataset "
        "with no steps_per_epoch)"
    )


@dataclass(frozen=True)
class ReportView:
    """What the renderers show, computed once (:func:`build_view`).

    Attributes:
        report: the report rendered.
        facts: its facts.
        findings: the findings in the report's order (largest estimated speedup first), each
            with its numbered source context.
        outcomes: every rule's outcome, in registry order.
        rules: the rules, in registry order.
        docs: the rules' docs, those that fired first.
        docs_open: how many of ``docs`` (the first ones) fired, shown expanded.
        counts: the number of findings by severity label.
        tally: the rules grouped by what they did.
        verdict: the one-sentence headline.
        forecast: the job forecast, or None.
        forecast_gap: why there is no forecast (when ``forecast`` is None).
        breakdown: the step-time breakdown's shares, or None.
        step_chart, breakdown_bar, probe_curve, data_graph: chart geometry
            (:mod:`rnndoctor.reports.charts`), None when there is nothing to draw.
        histograms: per sequence input (in the facts' order), its length histogram, or None.
        base_dir: the script's folder, that :meth:`short` writes paths relative to.
        noisy: the ``noisy machine: ...`` line (:func:`noisy_line`), or None.
        intervals: the probes' paired comparisons with their intervals
            (:func:`probe_intervals`).
        unmeasured: each probe that measured nothing, with why (:func:`probes_not_measured`).
        verified: the verified fixes (``--verify``), or None when the check did not verify.
    """

    report: Report
    facts: Facts
    findings: tuple[FindingView, ...]
    outcomes: tuple[RuleOutcome, ...]
    rules: tuple[Rule, ...]
    docs: tuple[Rule, ...]
    docs_open: int
    counts: dict[str, int]
    tally: RuleTally
    verdict: str
    forecast: Forecast | None
    forecast_gap: str
    breakdown: Breakdown | None
    step_chart: dict | None = None
    breakdown_bar: dict | None = None
    probe_curve: dict | None = None
    data_graph: dict | None = None
    histograms: tuple[dict | None, ...] = field(default=())
    base_dir: str | None = None
    noisy: str | None = None
    intervals: tuple[str, ...] = field(default=())
    unmeasured: tuple[str, ...] = field(default=())
    verified: VerifyView | None = None

    @property
    def sampled_batch(self) -> int | None:
        """Where ``fit`` does not know its input's batch size (a tf_keras ``Sequence``, a
        ``PyDataset``: ``steps.batch_size`` None, no samples counted), the rows of the sampled
        batches the batch-size probe starts from (``probes.batch_probe[0]``), so the step-time
        section gives the throughput that RD301's figures rest on, marked as from them (a new
        user's report read "batch size unknown" above RD301's "2,484 samples/s at 64"); else
        None."""
        steps, probes = self.facts.steps, self.facts.probes
        if steps is None or steps.batch_size is not None or steps.samples_per_s:
            return None
        if probes is None or not probes.batch_probe or not steps.median_step_time_ms:
            return None
        return probes.batch_probe[0].value

    @property
    def sampled_samples_per_s(self) -> float | None:
        """The throughput at :attr:`sampled_batch` rows a step and the window's median step
        (samples/s), or None where it is None."""
        batch = self.sampled_batch
        return batch * 1000.0 / self.facts.steps.median_step_time_ms if batch else None

    def located(self, path: str | None) -> str:
        """``path`` as the user knows it: a notebook cell's name (:func:`cell_name`) for
        ipykernel's file of that cell, else ``path`` as given."""
        if not path:
            return ""
        return cell_name(self.facts, path) or path

    def short(self, path: str | None) -> str:
        """``path`` relative to the script's folder when it lies inside it, a notebook cell's
        name (:meth:`located`), else as given."""
        if not path:
            return ""
        if self.located(path) != path:
            return self.located(path)
        if self.base_dir:
            try:
                rel = os.path.relpath(path, self.base_dir)
                if not rel.startswith(".."):
                    return rel
            except ValueError:
                pass
        return path


def cell_name(facts: Facts | None, path: str) -> str | None:
    """``cell In[3]`` where ``path`` is ipykernel's file of a notebook cell that the capture
    named (``facts.run.cells``), else None: how every report names such a location."""
    cell = facts.run.cells.get(path) if facts is not None and facts.run else None
    return f"cell {cell}" if cell else None


def noisy_line(facts: Facts) -> str | None:
    """``noisy machine: ...`` with the figures of the noisiest phase, the phases that were noisy
    by name (the terminal of a ``--workers`` check shows no phase list to count against), and
    the window's drift; None on a quiet machine with a steady window."""
    noisy = [m for m in facts.run.machine if m.noisy]
    parts = []
    if noisy:
        worst = max(noisy, key=lambda m: m.foreign_cpu_share)
        phases = ", ".join(dict.fromkeys(m.phase for m in noisy))
        parts.append(
            f"other processes used {worst.foreign_cores:.1f} of {worst.cpus} CPUs "
            f"({worst.foreign_cpu_share * 100:.0f}%) during {worst.phase}, load average "
            f"{worst.load_avg_1m:.1f} (noisy: {phases}); "
            f"intervals widened up to {max(m.widen_factor for m in noisy):.2g}x"
        )
    if facts.steps is not None and facts.steps.drifted and facts.steps.drift:
        parts.append(f"the window's steps drifted: {facts.steps.drift}")
    return "noisy machine: " + "; ".join(parts) if parts else None


def _ratio_text(paired: PairedRatio, scale: float = 1.0) -> str:
    level = f"{paired.level * 100:.0f}%"
    if paired.pairs < 3:  # the rules' MIN_PAIRS (rules/_measured.py): no interval from 1-2 pairs
        plural = "" if paired.pairs == 1 else "s"
        short = ", cut short" if paired.cut_short else ""
        return f"{paired.ratio * scale:.2f}x (no interval: {paired.pairs} pair{plural}{short})"
    return (
        f"{paired.ratio * scale:.2f}x ({level} interval {paired.low * scale:.2f}–"
        f"{paired.high * scale:.2f}x, {paired.pairs} pairs"
        + (f", widened {paired.widen_factor:.2g}x" if paired.widen_factor > 1.0 else "")
        + (", cut short" if paired.cut_short else "")
        + ")"
    )


def probe_intervals(facts: Facts) -> tuple[str, ...]:
    """One line per paired comparison of the probes, each figure with its interval, and the
    consistency verdicts (``probe inconsistent with the window: ...``)."""
    probes = facts.probes
    if probes is None:
        return ()
    lines = []
    if probes.compute_paired is not None:
        c = probes.compute_paired
        lines.append(
            f"real step {c.median_a_ms:.2f} ms vs compute-only {c.median_b_ms:.2f} ms: "
            + _ratio_text(c)
        )
    points = [p for p in probes.batch_probe if p.paired is not None]
    if points:
        base = probes.batch_probe[0]
        for p in points:
            lines.append(
                f"batch {p.value} vs {base.value}: samples/s "
                + _ratio_text(p.paired, p.value / base.value)
            )
    for p in probes.spe_probe:
        if p.paired is not None:
            lines.append(
                f"steps_per_execution {p.value} vs 1: step time 1 / {p.value} = "
                + _ratio_text(p.paired)
            )
    for what, why in (
        ("compute-only probe", probes.inconsistent),
        ("batch-size probe", probes.batch_probe_inconsistent),
    ):
        if why:
            lines.append(f"{what} inconsistent with the window (measured twice): {why}")
    return tuple(lines)


def probes_not_measured(facts: Facts) -> tuple[str, ...]:
    """One line per probe that measured nothing, with why (its ``ProbeFacts.*_not_measured``):
    ``batch-size probe: not run: every rule that reads it is left out (--select / --ignore)``;
    one line, ``probes: ...``, when every probe gives the same reason (``--no-probes``, a
    worker of a multi-worker job). Empty when the probes did not run at all (no facts)."""
    probes = facts.probes
    if probes is None:
        return ()
    rows = [(name, getattr(probes, attr)) for name, attr in PROBE_NOT_MEASURED_FIELDS]
    whys = {why for _, why in rows}
    if len(whys) == 1 and None not in whys:
        return (f"probes: {whys.pop()}",)
    return tuple(f"{name}: {why}" for name, why in rows if why)


def _charts(facts: Facts, findings: Sequence[Finding], breakdown: Breakdown | None) -> dict:
    steps, probes = facts.steps, facts.probes
    inputs = facts.sequences.inputs if facts.sequences else []
    return {
        "step_chart": charts.step_chart(steps.step_time_ms) if steps else None,
        "breakdown_bar": charts.breakdown_bar(breakdown),
        "probe_curve": charts.probe_curve(probes.batch_probe) if probes else None,
        "data_graph": charts.data_graph(facts.data),
        "histograms": tuple(
            charts.length_histogram(s, bucket_boundaries(findings, s)) for s in inputs
        ),
    }


def _finding_views(
    findings: Sequence[Finding], verified: VerifyView | None
) -> tuple[FindingView, ...]:
    """The findings with their context and, after ``--verify``, their fix's row (matched by the
    fix names the verification gave them: :func:`rnndoctor.verify.patch.fix_ids`)."""
    names = fix_ids(findings)
    return tuple(
        FindingView(
            f,
            _context(f),
            verified.row_for(name) if verified else None,
            merged_row(verified, name) if verified else None,
        )
        for f, name in zip(findings, names, strict=True)
    )


def build_view(report: Report) -> ReportView:
    """The view of ``report``, for every renderer."""
    facts = report.facts
    findings = report.findings  # sorted by the engine on each access: read it once
    outcomes = tuple(report.outcomes)
    fired = [o.rule for o in outcomes if o.status == Status.FIRED]
    breakdown = breakdown_shares(facts.probes.breakdown if facts.probes else None)
    verified = build_verify_view(report.verification) if report.verification else None
    return ReportView(
        report=report,
        facts=facts,
        findings=_finding_views(findings, verified),
        outcomes=outcomes,
        rules=tuple(o.rule for o in outcomes),
        docs=tuple(fired + [o.rule for o in outcomes if o.status != Status.FIRED]),
        docs_open=len({f.rule_id for f in findings}),
        counts={s.label: sum(f.severity == s for f in findings) for s in Severity},
        tally=_tally(outcomes),
        verdict=verdict(facts, findings, breakdown, verified),
        forecast=report.forecast,
        forecast_gap=_forecast_gap(facts),
        breakdown=breakdown,
        base_dir=os.path.dirname(facts.run.script) if facts.run.script else None,
        noisy=noisy_line(facts),
        intervals=probe_intervals(facts),
        unmeasured=probes_not_measured(facts),
        verified=verified,
        **_charts(facts, findings, breakdown),
    )
