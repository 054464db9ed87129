"""No rewrite writes a literal over a value the user's call reads (``padding=pad_mode``,
``dropout=args.dropout``, ``workers=n_workers``): pasted, it would make the name, option or
config that sets the value do nothing. Such a fix is display-only and says to set the value
where it is set; a literal is still rewritten in place. Pure: rules on facts, no TensorFlow."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_fastpath_flavour_wording import _facts as fastpath_facts
from test_rules_input_batch import facts, loc, run, tf_keras_sequence

from rnndoctor import rewrite as rw
from rnndoctor.engine import evaluate
from rnndoctor.facts import Facts
from rnndoctor.rules import _fastpath as fp

RULES = Path(__file__).parents[1] / "data" / "rules"
PAD_PARAMS = ("sequences", "maxlen", "dtype", "padding", "truncating", "value")


@pytest.mark.parametrize(
    ("call", "expected"),
    [
        ("pad_sequences(seqs, maxlen=T, padding=pad_mode)", {"padding": "pad_mode"}),
        ("pad_sequences(seqs, T, 'int32', args.padding)", {"padding": "args.padding"}),
        ("pad_sequences(seqs, padding=cfg['pad'])", {"padding": "cfg['pad']"}),
        ("pad_sequences(seqs, padding='pre')", {}),
        ("pad_sequences(seqs, T, 'int32', 'pre')", {}),
        ("pad_sequences(seqs, maxlen=T)", {}),  # not passed: nothing read
        ("pad_sequences(*parts, padding='pre')", {}),
    ],
)
def test_read_values_finds_what_the_call_reads_by_keyword_or_position(call, expected):
    assert rw.read_values(call, ("padding",), PAD_PARAMS) == expected


def test_set_keyword_never_writes_a_literal_over_a_name_but_replaces_a_literal():
    assert rw.set_keyword("f(x, padding=pad_mode)", "padding", "'post'") is None
    assert rw.set_keyword("f(x, workers=args.workers)", "workers", "2") is None
    assert rw.set_keyword("f(x, padding='pre')", "padding", "'post'") == "f(x, padding='post')"
    assert rw.set_keyword("f(x, n=-1)", "n", "4") == "f(x, n=4)"  # -1 is a literal
    assert rw.set_keyword("f(x)", "padding", "'post'") == "f(x, padding='post')"
    # a rewrite that means to replace the expression (fit's x becoming the dataset) says so
    assert rw.set_keyword("f(x=x_train)", "x", "ds", over_expression=True) == "f(x=ds)"
    assert rw.set_argument("ds.batch(bs)", 0, "batch_size", "32") is None
    assert rw.set_argument("ds.batch(8)", 0, "batch_size", "32") == "ds.batch(32)"


def _rd110(call: str) -> Facts:
    facts = Facts.from_dict(json.loads((RULES / "RD110-offending.json").read_text())["facts"])
    (record,) = facts.sequences.inputs
    record.padding_location.call_source = call
    record.padding_location.code = f"x = {call}"
    return facts


@pytest.mark.parametrize(
    "call",
    [
        "keras.utils.pad_sequences(seqs, maxlen=T, padding=pad_mode)",
        "keras.utils.pad_sequences(seqs, T, 'int32', pad_mode)",
    ],
)
def test_rd110_says_where_to_set_a_padding_the_call_reads(call):
    (finding,) = evaluate(_rd110(call), select=["RD110"]).findings
    fix = finding.fix
    assert fix.safety == "display-only" and fix.before is None  # nothing replaced
    assert fix.code == (
        "# your pad_sequences call passes padding=pad_mode: set pad_mode to 'post' where it "
        "is set (a literal in the call would make it do nothing)"
    )
    assert "'pre'" not in fix.code and "pad_mode" in fix.title
    # the same call with a literal is rewritten in place, every other argument kept
    (finding,) = evaluate(_rd110(call.replace("pad_mode", "'pre'")), select=["RD110"]).findings
    assert finding.fix.safety == "unsafe" and "'post'" in finding.fix.code
    assert finding.fix.code.startswith("x = keras.utils.pad_sequences(seqs, ")


def test_rd101_never_sets_dropout_over_the_option_that_sets_it():
    """RD101 keeps regularisation by setting ``dropout=<the recurrent rate>`` where the probe
    saw input dropout keep the fast path; ``dropout=args.dropout`` (0 in this run) would lose
    its option to that literal."""
    facts = fastpath_facts("RD101-offending", None)
    (layer,) = facts.model.rnn_layers
    assert layer.fast_path.dropout_keeps_fast_path and not layer.args.get("dropout")
    layer.location.call_source = "layers.LSTM(4, dropout=args.dropout, recurrent_dropout=0.25)"
    (finding,) = evaluate(facts, select=["RD101"]).findings
    fix = finding.fix
    assert fix.safety == "display-only" and fix.before is None
    assert fix.code.splitlines()[0] == (
        "# display-only: your call passes dropout=args.dropout: set that to 0.25 where it is "
        "set. The call below is written from this run's values: a name of yours"
    )
    assert "passes dropout=args.dropout" in fix.title
    assert fp.rewrite_call(layer.location.call_source, set_args={"dropout": 0.25}) is None
    layer.location.call_source = "layers.LSTM(4, dropout=0.0, recurrent_dropout=0.25)"
    (finding,) = evaluate(facts, select=["RD101"]).findings
    assert finding.fix.code == "layers.LSTM(4, dropout=0.25)" and finding.fix.safety == "unsafe"


def test_rd206_says_where_to_set_the_workers_a_tf_keras_fit_reads():
    f = facts(step=10.0, compute=3.0, data=tf_keras_sequence())
    f.fit.location = loc(40, "model.fit(seqs, epochs=3, workers=n_workers)")
    _, (finding,) = run(f, "RD206")
    assert finding.fix.safety == "display-only" and finding.fix.before is None
    assert finding.fix.code.splitlines() == [
        "# your fit call passes workers=n_workers: set that to 2 where it is set",
        "# and pass use_multiprocessing=True to fit",
    ]


def test_rd110_keeps_the_targets_call_beside_an_inputs_call_that_reads_its_padding():
    """A review: inputs ``pad_sequences(seqs, maxlen=T, padding=pad_mode)`` and per-step targets
    ``pad_sequences(tgts, maxlen=T)``: the note must still move the targets with the inputs."""
    from dataclasses import replace

    facts = _rd110("keras.utils.pad_sequences(seqs, maxlen=T, padding=pad_mode)")
    (record,) = facts.sequences.inputs
    target = "keras.utils.pad_sequences(tgts, maxlen=T)"
    record.target_padding_location = replace(
        record.padding_location, line=64, code=f"y = {target}", call_source=target
    )
    (finding,) = evaluate(facts, select=["RD110"]).findings
    assert finding.fix.safety == "display-only" and finding.fix.before is None
    assert finding.fix.code.splitlines()[1:] == [
        "# and your other pad_sequences call, padded at the end:",
        "y = keras.utils.pad_sequences(tgts, maxlen=T, padding='post')",
    ]
    assert finding.fix.title.endswith("and pad the other call at the end too")


def test_no_fast_path_fix_removes_an_argument_the_call_reads():
    """A review: ``LSTM(4, recurrent_dropout=args.rd)`` became an in-place ``LSTM(4,
    dropout=0.25)`` (the rate copied from the option), and ``unroll=args.unroll`` was removed
    in place (marked safe): either way the option silently stopped reaching the layer."""
    facts = fastpath_facts("RD101-offending", None)
    (layer,) = facts.model.rnn_layers
    layer.location.call_source = "layers.LSTM(4, recurrent_dropout=args.rd)"
    (finding,) = evaluate(facts, select=["RD101"]).findings
    assert finding.fix.safety == "display-only" and finding.fix.before is None
    assert finding.fix.code.splitlines()[0] == (
        "# display-only: your call passes recurrent_dropout=args.rd: remove it, or set that to "
        "0.0 (the default) where it is set. The call below is written from this run's values: a "
        "name of yours"
    )
    assert fp.rewrite_call("LSTM(4, unroll=args.unroll)", drop=("unroll",)) is None
    assert fp.rewrite_call("LSTM(4, unroll=True)", drop=("unroll",)) == "LSTM(4)"
