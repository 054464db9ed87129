"""RD1xx on a call with several arguments that block the fast path: each finding's own fix
changes only its argument, and each says how the call reads with all of them fixed together
(``rules/_fastpath.py: fixed_together``), since the layer takes the cuDNN kernel only then.
Pure: rules on fixture facts, no TensorFlow."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rnndoctor.engine import evaluate
from rnndoctor.facts import Facts
from rnndoctor.rules import _fastpath as fp

RULES = Path(__file__).parents[1] / "data" / "rules"


def _two_blockers(call: str, dropout: float = 0.0, keeps: bool = True) -> Facts:
    """RD101's fixture layer, whose call also sets activation='relu' (probed: both block)."""
    facts = Facts.from_dict(json.loads((RULES / "RD101-offending.json").read_text())["facts"])
    (layer,) = facts.model.rnn_layers
    layer.args.update(activation="relu", dropout=dropout)
    layer.fast_path.blocking_args = ["activation", "recurrent_dropout"]  # as the probe lists them
    layer.fast_path.dropout_keeps_fast_path = keeps
    layer.location.call_source = call
    return facts


def _messages(facts: Facts) -> dict[str, str]:
    report = evaluate(facts, select=["RD101", "RD102"])
    return {f.rule_id: f.message for f in report.findings}


def test_each_finding_gives_the_call_with_every_blocker_fixed():
    facts = _two_blockers('layers.LSTM(4, activation="relu", recurrent_dropout=0.25)')
    messages = _messages(facts)
    together = "With RD101, RD102 fixed together, the call reads: layers.LSTM(4, dropout=0.25)"
    assert set(messages) == {"RD101", "RD102"}
    assert all(together in m for m in messages.values())
    assert "blocked by activation='relu' (RD102)" in messages["RD101"]


def test_without_input_dropout_to_move_to_the_blockers_are_removed():
    facts = _two_blockers('layers.LSTM(4, activation="relu", recurrent_dropout=0.25)', keeps=False)
    assert "the call reads: layers.LSTM(4)" in _messages(facts)["RD102"]


def test_a_multi_line_call_is_given_on_one_line():
    call = 'layers.LSTM(\n    4,\n    activation="relu",  # paper\n    recurrent_dropout=0.25,\n)'
    facts = _two_blockers(call)
    assert "the call reads: layers.LSTM(4, dropout=0.25)" in _messages(facts)["RD101"]


@pytest.mark.parametrize(
    "call",
    [
        "layers.LSTM(4, activation=act, recurrent_dropout=0.25)",  # a value the call reads
        "layers.LSTM(4, **kwargs)",  # a splat that holds them
    ],
)
def test_no_combined_call_where_the_call_cannot_be_rewritten_in_place(call):
    facts = _two_blockers(call)
    assert fp.fixed_together(facts.model.rnn_layers[0]) is None
    assert all("fixed together" not in m for m in _messages(facts).values())


def test_one_blocker_gives_no_combined_call():
    facts = Facts.from_dict(json.loads((RULES / "RD101-offending.json").read_text())["facts"])
    assert fp.fixed_together(facts.model.rnn_layers[0]) is None
    assert "fixed together" not in _messages(facts)["RD101"]


def test_two_arguments_of_one_rule_give_no_combined_call():
    """Review: recurrent_dropout and dropout both blocking (a Keras whose fast path rejects
    input dropout) are RD101's own fix; a "fixed together" sentence only repeated it."""
    facts = _two_blockers("layers.LSTM(4, dropout=0.1, recurrent_dropout=0.25)", dropout=0.1)
    facts.model.rnn_layers[0].fast_path.blocking_args = ["dropout", "recurrent_dropout"]
    assert fp.fixed_together(facts.model.rnn_layers[0]) is None


def test_no_combined_call_where_the_probe_saw_the_fixed_layer_miss_the_kernel_too():
    facts = _two_blockers('layers.LSTM(4, activation="relu", recurrent_dropout=0.25)')
    facts.model.rnn_layers[0].fast_path.fixed_takes_fast_path = False
    assert all("fixed together" not in m for m in _messages(facts).values())
