"""The padding rules' display-only code where the user's own line is not known: RD110's fix where
no ``pad_sequences`` call was seen (a fresh user's generator did ``out[-len(ids):] = ids``), which
says so rather than offering a ``pad_sequences`` line as if it applied; and RD501's mask advice,
which rewrites the user's ``Embedding`` call where it can."""

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


def test_the_mask_advice_rewrites_the_users_embedding_call_where_id_0_pads():
    """RD501 on an unmasked, zero-padded token input (a fresh user's ``Embedding(VOCAB, 64)``):
    the mask advice was ``Embedding(vocab_size + 1, dim, mask_zero=True)``, a vocabulary one
    too large and none of the user's arguments; with id 0 already the pad id nothing shifts."""
    from rnndoctor.facts import SequenceInput
    from rnndoctor.rules._sequences import mask_advice

    record = SequenceInput(input="tokens", length_source="pad_value", mask_used=False,
                           input_rank=2, pad_value=0, mask_value=0)  # fmt: skip
    sentence, code = mask_advice(record, "layers.Embedding(VOCAB, 64, name='emb')")
    assert sentence == "Add mask_zero=True to the Embedding (id 0 pads)"
    assert code == ["layers.Embedding(VOCAB, 64, name='emb', mask_zero=True)"]
    assert mask_advice(record)[1] == ["layers.Embedding(vocab_size, dim, mask_zero=True)"]
    record.mask_value = record.pad_value = 5  # another pad id: remapped, ids shift by one
    _, remapped = mask_advice(record, "layers.Embedding(VOCAB, 64)")
    assert remapped[-1] == "layers.Embedding(vocab_size + 1, dim, mask_zero=True)"
