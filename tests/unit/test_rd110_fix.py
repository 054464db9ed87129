"""RD110's fix where no ``pad_sequences`` call was seen: the padding is the user's own code (a
fresh user's generator did ``out[-len(ids):] = ids``), and the display-only sketch says so
rather than offering a ``pad_sequences`` line as if it applied."""

from __future__ import annotations

import json
from pathlib import Path

from rnndoctor.engine import evaluate
from rnndoctor.facts import Facts
from rnndoctor.findings import FixSafety

RULES = Path(__file__).parents[1] / "data" / "rules"


def _rd110(facts: Facts):
    (finding,) = [f for f in evaluate(facts, select=["RD110"]).findings]
    return finding


def test_padding_in_the_users_own_code_is_said_and_the_evidence_names_the_located_line():
    facts = Facts.from_dict(json.loads((RULES / "RD110-offending.json").read_text())["facts"])
    record = facts.sequences.inputs[0]
    record.padding_location = None
    record.padding_function = None
    finding = _rd110(facts)
    assert finding.fix.safety is FixSafety.DISPLAY_ONLY
    assert finding.fix.code.startswith("# no pad_sequences call was seen: your own code pads")
    assert "padding='post'" in finding.fix.code
    (row,) = [e for e in finding.evidence if e.label == "padding call"]
    assert row.value.startswith("not seen: located at")


def test_a_seen_pad_sequences_call_is_still_rewritten_in_place():
    facts = Facts.from_dict(json.loads((RULES / "RD110-offending.json").read_text())["facts"])
    finding = _rd110(facts)
    assert not finding.fix.code.startswith("#")
    assert finding.fix.before == facts.sequences.inputs[0].padding_location.code
