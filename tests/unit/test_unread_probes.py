"""`rnndoctor.engine.unread_probes`: the batch-size and steps_per_execution probes run only when
a rule that reads them runs (`--select` / `--ignore`)."""

from __future__ import annotations

import re
from pathlib import Path

from rnndoctor.engine import PROBE_READERS, unread_probes
from rnndoctor.options import SKIPPABLE_PROBES

RULES = Path(__file__).parents[2] / "rules"
FIELDS = {
    "batch-size": "batch_probe",
    "steps-per-execution": "spe_probe",
    "sequence-length": "length_probe",
}


def test_every_probe_runs_for_all_rules_and_for_a_reader():
    assert unread_probes() == ()
    assert unread_probes(["RD301", "RD403", "RD501"]) == ()
    assert unread_probes(["RD301", "RD403"]) == ("sequence-length",)
    # a rule's name works too
    assert unread_probes(["small-batch"]) == ("steps-per-execution", "sequence-length")
    assert unread_probes(["RD702", "RD502"], None) == ("steps-per-execution",)


def test_a_selection_without_readers_runs_neither():
    assert unread_probes(["RD101", "RD110"]) == SKIPPABLE_PROBES
    assert unread_probes(None, ["RD301", "RD702", "RD403"]) == ("batch-size", "steps-per-execution")
    assert unread_probes(None, ["RD501", "RD502"]) == ("sequence-length",)
    assert unread_probes(None, ["RD301"]) == ()  # RD702 still reads the batch-size probe
    assert unread_probes(["RD301", "RD403"], ["rd403"]) == (
        "steps-per-execution",
        "sequence-length",
    )


def test_the_readers_are_the_rules_whose_source_reads_the_probe():
    assert set(PROBE_READERS) == set(SKIPPABLE_PROBES) == set(FIELDS)
    for probe, field in FIELDS.items():
        reads = re.compile(rf"\b{field}")  # any access: probes.batch_probe, *_not_measured
        readers = {
            path.name[:5].upper() for path in RULES.glob("rd*.py") if reads.search(path.read_text())
        }
        assert readers == set(PROBE_READERS[probe]), (probe, readers)
    # the shared helpers read neither: a rule could reach the probe only through them
    for helper in RULES.glob("_*.py"):
        text = helper.read_text()
        assert not any(re.search(rf"\b{f}", text) for f in FIELDS.values()), helper


def test_facts_of_a_check_that_left_a_probe_out_do_not_pass_its_rules_later():
    """``rnndoctor report`` / ``compare`` evaluate every rule over saved facts: a rule whose
    probe the check left out is "not evaluated", never a pass (and never "fixed")."""
    from test_rules_input_batch import facts

    from rnndoctor.engine import Status, evaluate
    from rnndoctor.facts import PROBE_UNREAD

    f = facts()
    f.probes.batch_probe_not_measured = f.probes.spe_probe_not_measured = PROBE_UNREAD
    outcomes = {o.rule.id: o for o in evaluate(f).outcomes}
    for rule_id, probe in (("RD301", "batch-size"), ("RD403", "steps_per_execution")):
        assert outcomes[rule_id].status is Status.NOT_EVALUATED, outcomes[rule_id]
        assert f"the {probe} probe did not run in this check" in outcomes[rule_id].reason


def test_facts_of_a_check_that_ran_no_probes_leave_the_measured_rules_not_evaluated():
    """``--no-probes``, or a worker of ``--workers``: the probes' facts are empty, and the rules
    that rest on them are "not evaluated" with the reason, never a pass."""
    from test_rules_input_batch import facts

    from rnndoctor.engine import Status, evaluate
    from rnndoctor.facts import PROBES_NOT_RUN, ProbeFacts

    f = facts()
    why = f"{PROBES_NOT_RUN}: turned off (--no-probes)"
    f.probes = ProbeFacts(input_only_not_measured=why, compute_only_not_measured=why,
                          batch_probe_not_measured=why, spe_probe_not_measured=why)  # fmt: skip
    outcomes = {o.rule.id: o for o in evaluate(f).outcomes}
    for rule_id in ("RD201", "RD301", "RD403", "RD404"):
        assert outcomes[rule_id].status is Status.NOT_EVALUATED, outcomes[rule_id]
        assert "the probes did not run: this check ran no probes" in outcomes[rule_id].reason


def test_the_terminal_and_markdown_say_which_probes_measured_nothing_and_why():
    from rnndoctor.engine import evaluate
    from rnndoctor.facts import PROBE_UNREAD, PROBES_NOT_RUN, Facts, ProbeFacts, RunInfo
    from rnndoctor.reports.markdown import render_markdown
    from rnndoctor.reports.terminal import summary_lines
    from rnndoctor.reports.view import probes_not_measured

    facts = Facts(run=RunInfo("train.py", [], "."), probes=ProbeFacts(input_only_ms=0.3))
    facts.probes.compute_only_ms = 4.0
    facts.probes.batch_probe_not_measured = PROBE_UNREAD
    facts.probes.spe_probe_not_measured = PROBE_UNREAD
    assert probes_not_measured(facts) == (
        f"batch-size probe: {PROBE_UNREAD}",
        f"steps_per_execution probe: {PROBE_UNREAD}",
    )
    report = evaluate(facts, select=["RD101"])
    lines = summary_lines(report)
    assert f"not measured: batch-size probe: {PROBE_UNREAD}" in lines
    md = render_markdown(report).replace("\\", "")  # md_text backslashes "_" and "-"
    assert f"- steps_per_execution probe: {PROBE_UNREAD}" in md
    facts.probes.compute_only_not_measured = "failed: InternalError: a\n  multi-line error"
    assert "not measured: compute-only probe: failed: InternalError: a multi-line error" in (
        summary_lines(evaluate(facts, select=["RD101"]))
    )
    why = f"{PROBES_NOT_RUN}: turned off (--no-probes)"
    names = ("input_only", "compute_only", "batch_probe", "spe_probe", "length_probe")
    facts.probes = ProbeFacts(**{f"{n}_not_measured": why for n in names})
    assert probes_not_measured(facts) == (f"probes: {why}",)  # one line, not four
    facts.probes = ProbeFacts(input_only_ms=0.3, compute_only_ms=4.0)
    assert probes_not_measured(facts) == ()
