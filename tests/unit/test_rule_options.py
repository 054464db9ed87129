"""The rule registry's options: declared with each rule, documented in its doc, overridable
per rule through ``evaluate(..., rule_options=...)`` and checked by ``check_rule_options``.

Pure: no TensorFlow.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import rnndoctor.rules as rules_pkg
from rnndoctor.engine import evaluate
from rnndoctor.facts import (
    DataFacts,
    Environment,
    Facts,
    FitConfig,
    ProbeFacts,
    RunInfo,
    SourceLocation,
    StepTimes,
)
from rnndoctor.findings import FixSafety, Severity
from rnndoctor.rules import Option, all_rules, check_rule_options, get_rule

DATA = Path(__file__).resolve().parents[1] / "data"
SCRIPT = "/work/train.py"

# One documented option: ``name`` = default (unit): what it decides. Source: where it is from.
_DOC_OPTION = re.compile(r"^    ``(?P<name>\w+)`` = (?P<default>\S+) \((?P<unit>.+?)\): ", re.M)


def _options_section(doc: str) -> str | None:
    match = re.search(r"^Options:\n(?P<body>.*?)^References:", doc, re.M | re.S)
    return match.group("body") if match else None


# -- docs -------------------------------------------------------------------------------------


@pytest.mark.parametrize("rule", all_rules(), ids=lambda r: r.id)
def test_every_documented_option_is_declared_and_every_declared_option_is_documented(rule):
    section = _options_section(rule.doc)
    if not rule.options:
        assert section is None and "Options:" not in rule.doc, rule.id
        return
    assert section is not None, f"{rule.id} declares options but its doc has no Options section"
    documented = {m["name"]: m for m in _DOC_OPTION.finditer(section)}
    declared = {o.name: o for o in rule.options}
    assert sorted(documented) == sorted(declared), rule.id
    assert list(documented) == list(declared), f"{rule.id}: the doc lists them in another order"
    for name, option in declared.items():
        doc = documented[name]
        assert doc["default"] == repr(option.default), (rule.id, name)
        assert doc["unit"] == option.unit, (rule.id, name)
        paragraph = section[doc.start() :].split("\n\n", 1)[0]
        assert "Source:" in paragraph, (rule.id, name)
        assert option.source and option.help, (rule.id, name)
    # every ``name`` the doc's prose mentions that looks like one of its options is one
    for mention in re.findall(r"``(\w+)``", rule.doc):
        if any(mention.startswith(p) for p in ("min_", "max_", "warning_", "error_")):
            assert mention in declared, (rule.id, mention)


def test_option_defaults_are_the_thresholds_the_rules_always_used():
    defaults = {(r.id, o.name): o.default for r in all_rules() for o in r.options}
    assert defaults == {
        ("RD201", "min_input_share"): 0.05,
        ("RD201", "warning_input_share"): 0.20,
        ("RD201", "error_input_share"): 0.50,
        ("RD202", "warning_input_share"): 0.05,
        **{(r, "min_input_share"): 0.05 for r in ("RD203", "RD204", "RD205", "RD206")},
        **{(r, "warning_input_share"): 0.20 for r in ("RD203", "RD204", "RD205", "RD206")},
        ("RD205", "max_cache_memory_share"): 0.5,
        ("RD206", "max_suggested_workers"): 8,
        ("RD301", "min_speedup"): 1.5,
        ("RD301", "gpu_small_batch"): 64,
        ("RD302", "min_busy_share"): 0.5,
        ("RD302", "input_bound_share"): 0.2,
        ("RD303", "long_sequence_steps"): 500,
        ("RD401", "error_speedup"): 2.0,
        ("RD401", "warning_speedup"): 1.1,
        ("RD402", "error_speedup"): 2.0,
        ("RD402", "warning_speedup"): 1.1,
        ("RD403", "min_dispatch_share"): 0.20,
        ("RD403", "error_dispatch_share"): 0.50,
        ("RD404", "min_callback_share"): 0.10,
        ("RD404", "min_part_share"): 0.02,
        ("RD404", "error_callback_share"): 0.50,
        ("RD405", "min_tracing_calls"): 5,
        ("RD405", "error_tracing_share"): 0.5,
        ("RD406", "min_single_calls"): 10,
        ("RD406", "error_share"): 0.5,
        ("RD501", "min_padded_fraction"): 0.30,
        ("RD501", "error_speedup"): 2.0,
        ("RD502", "min_speedup"): 1.05,
        ("RD502", "error_speedup"): 2.0,
        ("RD602", "alignment"): 8,
        ("RD701", "min_ratio"): 1.2,
        ("RD702", "efficient_share"): 0.9,
        ("RD703", "min_collective_share"): 0.06,
        ("RD705", "min_input_share"): 0.2,
        ("RD705", "min_spread"): 0.1,
    }


def test_no_rule_doc_cites_a_file_outside_the_repository():
    for rule in all_rules():
        assert "RULES.md" not in rule.doc and "shared/" not in rule.doc, rule.id


# -- the registry -----------------------------------------------------------------------------


def test_builtin_rules_are_found_by_module_name_in_sorted_order():
    modules = rules_pkg.builtin_modules()
    assert modules == sorted(modules) and len(modules) == 41  # RD701-RD706 (issue 15)
    assert modules[0] == "rd101_recurrent_dropout" and modules[-1] == "rd706_keras_multiworker_fit"
    ids = [r.id for r in all_rules()]
    assert ids == sorted(ids) and ids == [m[:5].upper() for m in modules]
    assert all(isinstance(r.severity, Severity) for r in all_rules())


def test_the_decorator_rejects_options_the_check_does_not_take():
    option = Option("min_x", 1, unit="things", source="test")
    with pytest.raises(ValueError, match="must take them"):
        rules_pkg.rule("RD999", "test-only", "never registered", options=(option,))(
            lambda facts: []
        )
    with pytest.raises(ValueError, match="declares an option twice"):
        rules_pkg.rule("RD998", "test-only-2", "never registered", options=(option, option))(
            lambda facts, options: []
        )
    assert "RD999" not in rules_pkg._REGISTRY and "RD998" not in rules_pkg._REGISTRY
    with pytest.raises(ValueError, match="snake_case"):
        Option("Min-X", 1, unit="things", source="test")
    with pytest.raises(ValueError, match="must be a bool, int, float or str"):
        Option("min_x", (1, 2), unit="things", source="test")


def test_the_engine_stamps_rule_id_and_name_and_fix_safety_is_typed():
    report = evaluate(_load("host_hw/loop-eager.json"))
    (finding,) = report.findings
    assert (finding.rule_id, finding.name) == ("RD402", "eager-custom-loop")
    assert isinstance(finding.fix.safety, FixSafety)
    # RD108 sets no severity of its own: its findings get the decorator's default (info)
    rd108 = Facts.from_dict(
        json.loads((DATA / "rules" / "RD108-offending.json").read_text())["facts"]
    )
    assert [f.severity for f in evaluate(rd108, select=["RD108"]).findings] == [Severity.INFO]
    assert get_rule("RD108").severity is Severity.INFO
    for path in sorted((DATA / "rules").glob("*-offending.json")):
        facts = Facts.from_dict(json.loads(path.read_text())["facts"])
        findings = evaluate(facts).findings
        assert path.name[:5] in {f.rule_id for f in findings}
        for f in findings:
            assert f.rule_id and f.name == get_rule(f.rule_id).name
            assert f.fix is None or isinstance(f.fix.safety, FixSafety)


# -- overrides --------------------------------------------------------------------------------


def _load(name: str) -> Facts:
    return Facts.load(DATA / name)


def _ids(facts: Facts, **rule_options) -> list[tuple[str, Severity]]:
    report = evaluate(facts, rule_options=rule_options)
    return [(f.rule_id, f.severity) for f in report.findings]


def test_rd405_fires_exactly_from_the_configured_tracing_count():
    facts = _load("host_hw/loop-retrace.json")
    (trace,) = facts.probes.traces
    assert trace.traced_calls == 7  # the fixture's step traced on 7 of its 7 calls
    assert ("RD405", Severity.ERROR) in _ids(facts)  # default: 5
    assert ("RD405", Severity.ERROR) in _ids(facts, RD405={"min_tracing_calls": 7})
    assert "RD405" not in dict(_ids(facts, RD405={"min_tracing_calls": 8}))
    assert "RD405" not in dict(_ids(facts, retracing={"min_tracing_calls": 8}))  # by name
    # a rule run directly: the same findings, stamped, with overrides as a plain mapping
    (direct,) = get_rule("RD405").run(facts)
    assert (direct.rule_id, direct.name, direct.severity) == ("RD405", "retracing", Severity.ERROR)
    assert get_rule("RD405").run(facts, {"min_tracing_calls": 8}) == []
    # the evidence quotes the cut-off in force
    report = evaluate(facts, rule_options={"rd405": {"min_tracing_calls": 6}})
    (finding,) = [f for f in report.findings if f.rule_id == "RD405"]
    values = {e.label: e.value for e in finding.evidence}
    assert values["TensorFlow's retracing warning threshold"] == 6


def test_rd301_fires_exactly_from_the_configured_speedup():
    facts = _load("host_hw/fit-run-eagerly.json")
    points = {p.value: p.samples_per_s for p in facts.probes.batch_probe}
    ratio = points[64] / points[16]
    assert ratio == pytest.approx(3.7416, abs=1e-4)
    assert "RD301" in dict(_ids(facts, RD301={"min_speedup": 3.74}))
    assert "RD301" not in dict(_ids(facts, RD301={"min_speedup": 3.75}))
    assert "RD301" in dict(_ids(facts, RD301={"min_speedup": 3}))  # an int for a float option


def test_rd402_severity_follows_the_configured_speedup_cut_offs():
    facts = _load("host_hw/loop-eager.json")
    (speedup,) = [f.speedup for f in evaluate(facts).findings]
    assert speedup == 4.03
    assert _ids(facts) == [("RD402", Severity.ERROR)]
    assert _ids(facts, RD402={"error_speedup": 4.03}) == [("RD402", Severity.ERROR)]
    assert _ids(facts, RD402={"error_speedup": 4.04}) == [("RD402", Severity.WARNING)]
    assert _ids(facts, RD402={"error_speedup": 5.0, "warning_speedup": 4.04}) == [
        ("RD402", Severity.INFO)
    ]


def _input_bound(share: float) -> Facts:
    """A completed CPU run fed by a Python generator whose step waits ``share`` of 10 ms."""
    where = SourceLocation(file=SCRIPT, line=20, code="gen()", call_source="gen()")
    f = Facts(run=RunInfo(script=SCRIPT, argv=[SCRIPT], cwd="/work", outcome="completed"))
    f.environment = Environment(
        python="3.11", platform="linux", keras="3.15.1", keras_backend="tensorflow",
        tensorflow="2.21.0", gpu_count=0, cpu_count=2,
    )  # fmt: skip
    f.fit = FitConfig(data_kind="python_generator", batch_size=32, epochs=2, location=where)
    f.steps = StepTimes(warmup_steps=1, measured_steps=10, median_step_time_ms=10.0, batch_size=32)
    f.data = DataFacts(kind="python_generator", reiterable=False, location=where)
    f.probes = ProbeFacts(
        compute_only_ms=10.0 * (1 - share), compute_only_batches=16, callback_ms=0.0,
        input_bound_share=share, input_only_ms=10.0 * share, input_share_check=share,
        input_only_method="fresh iterator",
    )  # fmt: skip
    return f


def test_rd201_fires_and_grades_exactly_as_its_configured_shares_say():
    facts = _input_bound(0.30)
    assert ("RD201", Severity.WARNING) in _ids(facts)  # defaults: info 5%, warning 20%
    assert ("RD201", Severity.WARNING) in _ids(facts, RD201={"min_input_share": 0.30})
    assert "RD201" not in dict(_ids(facts, RD201={"min_input_share": 0.31}))
    assert ("RD201", Severity.INFO) in _ids(facts, RD201={"warning_input_share": 0.31})
    assert ("RD201", Severity.ERROR) in _ids(facts, RD201={"error_input_share": 0.30})


def test_an_override_applies_to_its_own_rule_only():
    # RD201 and RD204 declare the same min_input_share option; each reads its own value.
    facts = _input_bound(0.30)
    assert {"RD201", "RD204"} <= set(dict(_ids(facts)))
    found = dict(_ids(facts, RD204={"min_input_share": 0.5}))
    assert "RD201" in found and "RD204" not in found


# -- check_rule_options -------------------------------------------------------------------------


def test_check_rule_options_accepts_ids_names_and_well_typed_values():
    check_rule_options({})
    check_rule_options({"RD201": {"min_input_share": 0.1}, "long-sequence": {}})
    check_rule_options({"rd303": {"long_sequence_steps": 200}, "RD302": {"min_busy_share": 1}})


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"RD999": {}}, "unknown rule 'RD999'"),
        ({"no-such-rule": {"x": 1}}, "unknown rule 'no-such-rule'"),
        ({"RD201": {"min_share": 0.1}}, "unknown option 'min_share' for rule RD201"),
        ({"RD101": {"threshold": 1}}, "its options: none"),
        ({"RD201": {"min_input_share": "5%"}}, "RD201 option 'min_input_share' takes a number"),
        ({"RD201": {"min_input_share": True}}, "takes a number"),
        (
            {"RD303": {"long_sequence_steps": 500.0}},
            "takes an integer (timesteps; default 500), not 500.0",
        ),
        ({"RD201": 0.1}, "must be a table"),
        ({"RD201": {}, "input-bound": {}}, "given twice"),
    ],
)
def test_check_rule_options_names_the_first_problem_in_one_line(table, message):
    with pytest.raises(ValueError, match=re.escape(message)) as caught:
        check_rule_options(table)
    assert "\n" not in str(caught.value)
    with pytest.raises(ValueError, match=re.escape(message)):
        evaluate(_load("host_hw/loop-traced.json"), rule_options=table)
