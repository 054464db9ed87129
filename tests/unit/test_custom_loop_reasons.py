"""A custom training loop (no ``Model.fit``): the rules that read fit's input are "not
evaluated" with that reason, not "facts section 'data' was not gathered (the run ended with
outcome 'completed' ...)", which a fresh user read as a failed run."""

from __future__ import annotations

import json
from pathlib import Path

from rnndoctor.engine import Status, evaluate
from rnndoctor.facts import CustomLoopFacts, Facts, SourceLocation
from rnndoctor.reports.terminal import summary_lines

DATA = Path(__file__).parents[1] / "data" / "rules"


def _loop_facts() -> Facts:
    facts = Facts.from_dict(json.loads((DATA / "RD101-offending.json").read_text())["facts"])
    facts.fit = facts.data = facts.sequences = facts.probes = None
    facts.loop = CustomLoopFacts(eager=True, location=SourceLocation(file="/w/loop.py", line=24))
    return facts


def test_the_rules_on_fits_input_say_the_loop_calls_no_fit():
    report = evaluate(_loop_facts())
    outcomes = {o.rule.id: o for o in report.outcomes}
    for rule_id in ("RD201", "RD301", "RD501"):
        assert outcomes[rule_id].status is Status.NOT_EVALUATED
        assert outcomes[rule_id].reason.startswith("a custom training loop at loop.py:24: "), (
            outcomes[rule_id].reason
        )
        assert "the loop calls no fit" in outcomes[rule_id].reason
    (line,) = [s for s in summary_lines(report) if s.startswith("not evaluated:")]
    assert "(a custom training loop: they read Model.fit's input, or facts missing;" in line


def test_a_fit_run_that_ended_early_keeps_the_outcome_reason():
    facts = _loop_facts()
    facts.loop = None
    report = evaluate(facts)
    (outcome,) = [o for o in report.outcomes if o.rule.id == "RD201"]
    assert outcome.reason.startswith("facts section 'probes' was not gathered (the run ended")
    (line,) = [s for s in summary_lines(report) if s.startswith("not evaluated:")]
    assert line.endswith("(a probe not run or facts missing: each rule's reason is in the report)")
