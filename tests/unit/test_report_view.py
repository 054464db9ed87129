"""The reports' view model, share formula, filters and template environment (no TF)."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import jinja2
import pytest

from rnndoctor.compare import compare_facts
from rnndoctor.engine import RuleOutcome, Status, evaluate
from rnndoctor.facts import (
    COMPUTE_SKIPPED_FOR_INPUT_BOUND,
    Facts,
    OpStat,
    ProbeFacts,
    ProfileSummary,
    SequenceInput,
    StepBreakdown,
)
from rnndoctor.findings import BucketPlan, Evidence, Finding, Severity
from rnndoctor.reports import RENDERERS, write_reports
from rnndoctor.reports.compare import render_comparison_html
from rnndoctor.reports.formatting import md_numbered, ms, pct
from rnndoctor.reports.shares import breakdown_shares
from rnndoctor.reports.templating import environment
from rnndoctor.reports.view import bucket_boundaries, build_view, verdict

DATA = Path(__file__).parents[1] / "data" / "rules"


def _facts(name: str = "RD101-offending") -> Facts:
    return Facts.from_dict(json.loads((DATA / f"{name}.json").read_text())["facts"])


def _with_breakdown(facts: Facts, **parts: float) -> Facts:
    facts.probes = ProbeFacts(breakdown=StepBreakdown(**parts))
    return facts


def test_shares_are_of_the_step_or_of_the_probes_larger_sum():
    within = breakdown_shares(StepBreakdown(50.0, 25.0, 20.0, 5.0))
    assert within.total_ms == 50.0 and within.over_ms == 0.0
    assert [(p.key, p.share) for p in within.shown] == [
        ("input", 0.5), ("compute", 0.4), ("host", 0.1)
    ]  # fmt: skip
    over = breakdown_shares(StepBreakdown(40.0, 25.0, 20.0, 5.0, other_ms=-10.0))
    assert over.total_ms == 50.0 and over.over_ms == 10.0
    assert [p.key for p in over.shown] == ["input", "compute", "host"]
    assert over.part("other").ms == -10.0
    assert breakdown_shares(None) is None


def test_every_output_shows_the_same_shares():
    facts = _with_breakdown(
        _facts(), step_ms=40.0, input_ms=25.0, compute_ms=20.0, host_ms=5.0, other_ms=-10.0
    )
    report = evaluate(facts)
    view = build_view(report)
    assert view.verdict.endswith(
        " Of the 40.0 ms median step, 50% is waiting for input, 40% compute and 10% per-batch "
        "callbacks (measured)."
    )
    html = RENDERERS["html"](report)
    assert "<td>50.0 %</td>" in html and "<td>40.0 %</td>" in html and "<td>10.0 %</td>" in html
    widths = re.findall(r'class="seg \w+" x="[\d.]+" y="2" width="([\d.]+)"', html)
    assert [float(w) for w in widths] == [300.0, 240.0, 60.0]
    md = RENDERERS["md"](report)
    assert "| input (waiting for the next batch) | 25.00 | 50.0 % |" in md
    assert "| host overhead (per-batch callbacks) | 5.00 | 10.0 % |" in md
    assert f"**Verdict:** {view.verdict}" in md.replace("\\_", "_")
    # the parts exceed the step by 10 ms: every output says so beside its table (report.md
    # showed "compute 17.14 ms, 100%" of a 14.47 ms step with no word why)
    note = "The parts add up to 10.00 ms more than the 40.00 ms median step (the probes ran"
    assert note in md and "The parts add up to 10 ms more than the median step" in html


def test_the_verdict_says_how_much_of_the_input_wait_the_input_only_probe_explains():
    """A new user's verdict: "55% is waiting for input" above RD201's "inconclusive: 26%
    (90% interval 12–26%)" of the same check, which counts the share only as far as the
    input-only probe explains it."""
    facts = _with_breakdown(
        _facts(), step_ms=22.2, input_ms=12.5, compute_ms=10.2, host_ms=0.0, other_ms=-0.5
    )
    facts.probes.input_bound_share, facts.probes.input_share_check = 0.54, 0.26
    verdict = build_view(evaluate(facts)).verdict
    assert " 55% is waiting for input by the step on cached batches (the input-only probe " in (
        verdict
    )
    assert "explains 26%, what the input rules count), 45% compute" in verdict
    facts.probes.input_share_check = 0.6  # it explains all of it: the plain sentence
    assert "55% is waiting for input, 45% compute" in build_view(evaluate(facts)).verdict


def test_the_verdict_names_what_the_probes_leave_unexplained_and_a_drifting_window():
    """A new user's verdict read "0% is waiting for input, 62% compute and 0% per-batch
    callbacks (measured)" and left the other 38% unsaid; its window's first 16 steps ran at
    11.5 ms, the rest at 17.2 ms (p90 21.2 ms)."""
    facts = _with_breakdown(
        _facts(), step_ms=16.9, input_ms=0.0, compute_ms=10.5, host_ms=0.0, other_ms=6.4
    )
    facts.steps.median_step_time_ms, facts.steps.p90_step_time_ms = 16.9, 21.2
    text = build_view(evaluate(facts)).verdict
    assert text.endswith(
        "62% compute and 0% per-batch callbacks (measured); the other 38% is not explained by "
        "the probes (more than the 20% the window's own noise allows: p90 / median 1.25): "
        "Keras' per-step overhead, or the machine's pace between the window and the probes."
    ), text
    facts.steps.drifted, facts.steps.drift = True, "a level shift at step 16"
    assert build_view(evaluate(facts)).verdict.endswith(
        "allows: p90 / median 1.25): the window's steps drifted (the noisy-machine line says how) "
        "and the probes ran after it."
    )
    # a remainder within the window's noise (a pace 1.7x slower leaves 1 - 1 / 1.7 = 41% of the
    # step unexplained): the plain sentence, as when the parts add up
    facts.steps.p90_step_time_ms = 16.9 * 1.70
    assert build_view(evaluate(facts)).verdict.endswith("0% per-batch callbacks (measured).")
    facts.steps.p90_step_time_ms = 16.9 * 1.50  # 33% allowed: 38% is beyond it
    assert "the other 38% is not explained by the probes (more than the 33% " in (
        build_view(evaluate(facts)).verdict
    )
    facts.steps.p90_step_time_ms = 17.0  # the 5% floor, not the p90 / median 1.01: 9% is beyond
    facts.probes.breakdown = StepBreakdown(16.9, 0.0, 15.4, 0.0, other_ms=1.5)
    assert (
        "the other 9% is not explained by the probes (more than the 5% the window's own noise "
        "allows: p90 / median 1.01, the least allowance 1.05): "
    ) in build_view(evaluate(facts)).verdict


def test_verdict_names_the_main_issue_or_the_profiles_top_op():
    view = build_view(evaluate(_facts()))
    first = view.findings[0].finding
    assert view.verdict.startswith(f"Main issue: {first.rule_id} {first.name} at ")
    facts = _facts("RD101-compliant")
    facts.profile = ProfileSummary("profile", top_op_types=[OpStat("MatMul", "Host", 420.0, 0.42)])
    clean = build_view(evaluate(facts, select=["RD101"]))
    assert clean.verdict == (
        "No finding. In the profiled steps, the op type MatMul took 42% of the host's op time "
        "(xprof's op statistics)."
    )
    # the compute-only probe skipped, the input-only probe run: the input wait's bound first
    skip = f"{COMPUTE_SKIPPED_FOR_INPUT_BOUND} 0.36 ms, 0.18% of the 196.6 ms step, ..."
    facts.probes = ProbeFacts(input_only_ms=0.36, compute_only_not_measured=skip)
    facts.steps.median_step_time_ms = 196.6
    bounded = build_view(evaluate(facts, select=["RD101"]))
    assert bounded.verdict == (
        "No finding. Of the 196.6 ms median step, at most 0.18% is waiting for input (the "
        "input-only probe produced a batch in 0.36 ms, from data in memory); the rest is not "
        "split further (the compute-only probe was not needed). In the profiled steps, the op "
        "type MatMul took 42% of the host's op time (xprof's op statistics)."
    )
    # the compute-only probe failed (or the data is not in memory): no bound claimed
    facts.probes.compute_only_not_measured = "failed: ValueError: no batch"
    assert build_view(evaluate(facts, select=["RD101"])).verdict == clean.verdict


def test_the_verdict_words_each_speedup_as_what_it_is_of():
    """RD301's speedup is a samples/s ratio: its step gets longer (issue 11: never "faster step");
    RD501's too (bucketing adds partial batches to an epoch: its estimate is the epoch's);
    RD406's is of the fit loop's iteration; the rest, of the step."""
    facts = _facts()

    def main(rule_id: str) -> str:
        finding = Finding(rule_id, "n", Severity.WARNING, "m", speedup=2.04)
        return verdict(facts, [finding], None)

    assert main("RD301").startswith("Main issue: RD301 n, an estimated 2.04x the samples/s.")
    assert "faster" not in main("RD301")
    assert main("RD501").startswith("Main issue: RD501 n, an estimated 2.04x the samples/s.")
    assert main("RD502").startswith("Main issue: RD502 n, an estimated 2.04x faster step.")
    assert main("RD406").startswith(
        "Main issue: RD406 n, an estimated 2.04x faster iteration of the fit loop."
    )


def test_the_partial_run_verdict():
    facts = _facts()
    facts.run.outcome, facts.run.phase, facts.run.message = "timeout", "measured steps", "killed"
    assert build_view(evaluate(facts)).verdict == (
        "The run ended early (timeout, during measured steps): killed"
    )


def _padding_finding(**extra) -> Finding:
    return Finding("RD501", "padding-waste", Severity.ERROR, "padding", layer="seq/lstm", **extra)


def test_histogram_boundaries_come_from_the_bucket_plan_only():
    seq = SequenceInput(input="x", rnn_layers=["seq/lstm"])
    labelled = (Evidence("suggested bucket boundaries", [1, 2], "timesteps"),)
    planned = _padding_finding(evidence=labelled, bucket_plan=BucketPlan((3, 6), (64, 64, 32)))
    assert bucket_boundaries([planned], seq) == [3, 6]
    # an evidence label is never parsed for structure: no plan, no boundaries drawn
    assert bucket_boundaries([_padding_finding(evidence=labelled)], seq) == []
    other_layer = replace(planned, layer="other/gru")
    assert bucket_boundaries([other_layer], seq) == []
    assert bucket_boundaries([replace(planned, rule_id="RD502")], seq) == []


def test_view_orders_docs_fired_first_and_counts_by_severity():
    report = evaluate(_facts())
    view = build_view(report)
    fired = [o.rule.id for o in report.outcomes if o.status == Status.FIRED]
    assert [r.id for r in view.docs[: len(fired)]] == fired
    assert view.docs_open == len(fired) == 1
    assert view.counts == {"error": 0, "warning": 1, "info": 0}
    assert [item.finding for item in view.findings] == report.findings


def test_tally_puts_gpu_rules_on_their_own():
    report = evaluate(_facts())
    rule = report.outcomes[0].rule
    report.outcomes.append(RuleOutcome(rule, Status.NOT_EVALUATED, "needs a GPU", needs_gpu=True))
    tally = build_view(report).tally
    assert rule.id in tally.need_gpu and rule.id not in tally.not_evaluated


@pytest.mark.parametrize("fraction", [0.0, 0.00049, 0.1234, 0.12345, 0.5, 0.99951, 1.0, 1.5])
def test_pct_writes_what_the_templates_rounded_before(fraction):
    old = jinja2.Environment().from_string("{{ (x * 100)|round(1) }} %").render(x=fraction)
    assert pct(fraction) == old
    assert pct(None) == "not measured" and pct(None, missing="—") == "—"


def test_ms_and_numbered_context():
    assert ms(250.04) == "250.0 ms" and ms(None) == "not measured"
    view = build_view(evaluate(_facts()))
    (item,) = view.findings
    text = md_numbered(item.context)
    assert sum(line.startswith(">") for line in text.splitlines()) == 1


def test_one_environment_escapes_all_but_markdown():
    env = environment()
    assert env is environment()
    assert env.autoescape("report.html.j2") and env.autoescape("_macros.j2")
    assert env.autoescape("compare.html.j2") and not env.autoescape("report.md.j2")
    for name in ("fmt", "pct", "ms", "duration", "md_text", "md_code", "md_block"):
        assert name in env.filters


def test_both_pages_share_one_style_sheet(tmp_path):
    css = environment().loader.get_source(environment(), "_base.css.j2")[0]
    first_rule = next(line for line in css.splitlines() if line.startswith("html {"))
    html = write_reports(evaluate(_facts()), tmp_path, ["html"])["html"].read_text()
    page = render_comparison_html(compare_facts(_facts(), _facts("RD101-compliant")), "a", "b")
    assert first_rule in html and first_rule in page
    assert '<p class="muted">Findings are matched' in page


def test_xprofs_cpu_verdict_is_explained_beside_rnndoctors_own_step_times():
    """A new user: "xprof overview verdict: No step time measured..." sat beside the step time
    rnndoctor measured, and read as a contradiction; the HTML's profile table explained it, the
    breakdown's row and report.md did not."""
    from rnndoctor.reports.html import render_html
    from rnndoctor.reports.markdown import render_markdown

    facts = _facts()
    facts.probes = ProbeFacts()
    facts.profile = ProfileSummary(
        logdir="/tmp/p", profiled_steps=3, tensorboard_command="tensorboard --logdir /tmp/p",
        xprof_verdict="No step time measured. Therefore we cannot tell where the performance "
        "bottleneck is.", xprof_step_time_measured=False,
    )  # fmt: skip
    report = evaluate(facts)
    said = "xprof gave no step-time analysis for this run (it gives none on CPU-only runs)"
    assert said in render_markdown(report)
    assert render_html(report).count(said) == 1  # the breakdown's row; the table says it its way
    facts.profile = replace(facts.profile, xprof_step_time_measured=True)
    assert said not in render_markdown(evaluate(facts))
