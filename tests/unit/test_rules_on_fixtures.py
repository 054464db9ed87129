"""RD1xx rules on saved real facts (tests/data/rules/*.json): pure, no TensorFlow needed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rnndoctor.engine import evaluate
from rnndoctor.facts import Facts
from rnndoctor.findings import Severity
from rnndoctor.rules import _fastpath as fp
from rnndoctor.rules import all_rules, get_rule

# Findings that mean the GPU job (RD110, RD111) or any job (RD114, Keras 3) fails: `error` even
# in CPU-only facts (see each rule's docstring).
_FAILS_ON_ANY_MACHINE = ("RD110", "RD111", "RD114")
FIXTURES = sorted((Path(__file__).parents[1] / "data" / "rules").glob("*.json"))


def _load(path: Path) -> tuple[Facts, list[dict]]:
    doc = json.loads(path.read_text())
    return Facts.from_dict(doc["facts"]), doc["expected"]


def test_there_is_an_offending_and_a_compliant_fixture_per_rd1_rule():
    names = {p.stem for p in FIXTURES}
    for rule in all_rules():
        if rule.id.startswith("RD1"):
            assert {f"{rule.id}-offending", f"{rule.id}-compliant"} <= names


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.stem)
def test_rules_give_exactly_the_expected_rd1_findings(path: Path):
    facts, expected = _load(path)
    report = evaluate(facts)
    got = [{"rule_id": f.rule_id, "layer": f.layer} for f in report.findings if f.rule_id < "RD2"]
    assert got == expected
    for finding in report.findings:
        assert finding.location is not None and finding.location.line > 0
        assert finding.fix is not None and finding.fix.code
        assert finding.evidence
        if finding.rule_id in _FAILS_ON_ANY_MACHINE:
            assert finding.severity is Severity.ERROR
        else:
            assert finding.severity in (Severity.INFO, Severity.WARNING)  # CPU-only facts


def test_severity_is_error_when_a_gpu_was_visible():
    facts, _ = _load(FIXTURES[[p.stem for p in FIXTURES].index("RD101-offending")])
    facts.environment.gpu_count = 1
    (finding,) = evaluate(facts, select=["RD101"]).findings
    assert finding.severity is Severity.ERROR


def test_without_model_facts_the_rules_are_not_evaluated_never_passed():
    facts, _ = _load(FIXTURES[0])
    facts.model = None
    facts.run.outcome = "script_error"
    report = evaluate(facts)
    needing_model = [o for o in report.outcomes if "model" in o.rule.needs]
    assert {o.rule.id for o in needing_model} >= {f"RD10{i}" for i in range(1, 10)}
    assert {o.status for o in needing_model} == {"not_evaluated"}
    assert all("'model'" in o.reason for o in needing_model)


def test_static_criterion_is_used_when_the_probe_did_not_run():
    facts, _ = _load(FIXTURES[[p.stem for p in FIXTURES].index("RD104-offending")])
    layer = facts.model.rnn_layers[0]
    layer.fast_path.probed = False
    layer.fast_path.not_probed_reason = "clone failed"
    (finding,) = evaluate(facts, select=["unroll"]).findings
    assert any("static criterion" in e.source for e in finding.evidence)
    assert finding.fast_path_after_fix is None


def test_select_and_ignore_take_ids_and_names():
    facts, _ = _load(FIXTURES[[p.stem for p in FIXTURES].index("RD101-offending")])
    selected = {o.rule.id: o for o in evaluate(facts, select=["recurrent-dropout"]).outcomes}
    assert selected.pop("RD101").status == "fired"
    assert {o.status for o in selected.values()} == {"skipped"}  # listed, never silently gone
    ignored = {o.rule.id: o for o in evaluate(facts, ignore=["rd101"]).outcomes}
    assert (ignored["RD101"].status, ignored["RD101"].reason) == ("skipped", "ignored (--ignore)")
    assert ignored["RD101"].findings == []


def test_get_rule_and_docs_have_the_style_sections():
    assert get_rule("recurrent-dropout").id == "RD101"
    for rule in all_rules():
        for section in (
            "What it detects",
            "Why it slows training",
            "Evidence",
            "Example",
            "Use instead",
            "Fix safety",
            "References",
        ):
            assert f"{section}:" in rule.doc, (rule.id, section)
        references = rule.doc.split("References:", 1)[1].strip()
        assert references, rule.id
        if rule.id.startswith("RD1"):  # the fast-path criteria come from the installed Keras
            assert "keras/src/" in rule.doc, rule.id
        else:  # measured rules cite where their thresholds and fixes come from
            assert any(
                src in references
                for src in ("keras/src/", "tensorflow/", "xprof", "guide", "NVIDIA")
            ), rule.id


LSTM_PARAMS = ("units", "activation", "recurrent_activation", "use_bias")


@pytest.mark.parametrize(
    ("source", "drop", "set_args", "expected"),
    [
        (  # the activation is read from an option (a.act): removed, the option would do
            # nothing, so the call is not rewritten (the rule gives a display-only note)
            "LSTM(a.units, a.act, use_bias=False)",
            ("activation",),
            None,
            None,
        ),
        (
            "LSTM(a.units, 'relu', use_bias=False)",
            ("activation",),
            None,
            "LSTM(a.units, use_bias=False)",
        ),
        (
            "layers.LSTM(n, 'relu', 'hard_sigmoid')",
            ("activation",),
            None,
            "layers.LSTM(n, recurrent_activation='hard_sigmoid')",
        ),
        (
            "layers.LSTM(8, recurrent_dropout=0.2)",
            ("recurrent_dropout",),
            {"dropout": 0.2},
            "layers.LSTM(8, dropout=0.2)",
        ),
        # Lossless: the user's line breaks and trailing comma stay, only unroll=True goes.
        ("LSTM(\n    8,\n    unroll=True,\n)", ("unroll",), None, "LSTM(\n    8,\n)"),
        (
            "layers.LSTM(8, return_sequences=True, unroll=True)",
            ("unroll",),
            None,
            "layers.LSTM(8, return_sequences=True)",
        ),
        ("LSTM(8, 'relu')", ("activation",), None, None),  # positional: cannot rewrite
        ("LSTM(8, **cfg)", ("unroll",), None, None),
        ("not a call", ("unroll",), None, None),
    ],
)
def test_rewrite_call(source, drop, set_args, expected):
    positional = LSTM_PARAMS if "a.units" in source or "(n," in source else ()
    rewritten = fp.rewrite_call(source, drop=drop, set_args=set_args, positional_names=positional)
    assert rewritten == expected


def test_rebuilt_call_names_the_class_as_the_user_did():
    args = {"units": 8, "unroll": True}
    assert fp.build_call("LSTM", args, {}, "L.LSTM(n, **cfg)") == "L.LSTM(8, unroll=True)"
    assert fp.build_call("LSTM", args, {}, "LSTM(n, **cfg)") == "LSTM(8, unroll=True)"
    assert fp.build_call("LSTM", args, {}, None) == "keras.layers.LSTM(8, unroll=True)"


def test_build_call_writes_only_non_default_arguments():
    args = {"units": 8, "activation": "tanh", "return_sequences": True, "unroll": True}
    assert fp.build_call("LSTM", args, {"unroll": None}) == (
        "keras.layers.LSTM(8, return_sequences=True)"
    )
