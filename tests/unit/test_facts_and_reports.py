"""Facts round trip, report rendering and escaping, on saved real facts (no TensorFlow)."""

from __future__ import annotations

import json
from html.parser import HTMLParser
from pathlib import Path

import pytest

from rnndoctor.engine import evaluate
from rnndoctor.facts import SCHEMA_VERSION, Facts
from rnndoctor.reports import RENDERERS, write_reports
from rnndoctor.reports.terminal import summary_lines

FIXTURE = Path(__file__).parents[1] / "data" / "rules" / "RD101-offending.json"
HOSTILE = "<script>alert(1)</script>"


def _facts() -> Facts:
    return Facts.from_dict(json.loads(FIXTURE.read_text())["facts"])


class _Tags(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags: list[str] = []
        self.external: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        for name, value in attrs:
            if name in ("src", "href") and value and not value.startswith(("#", "data:")):
                self.external.append(value)


def test_facts_round_trip_is_lossless():
    facts = _facts()
    again = Facts.from_dict(json.loads(json.dumps(facts.to_dict())))
    assert again == facts
    assert again.model.rnn_layers[0].fast_path.blocking_args == ["recurrent_dropout"]


def test_other_major_schema_is_refused():
    data = _facts().to_dict()
    data["schema_version"] = "9.0"
    with pytest.raises(ValueError, match="schema"):
        Facts.from_dict(data)
    assert SCHEMA_VERSION.startswith("1.")


def test_report_json_has_the_documented_finding_fields(tmp_path):
    report = evaluate(_facts())
    paths = write_reports(report, tmp_path, ["html", "json", "md"])
    doc = json.loads(paths["json"].read_text())
    (finding,) = doc["findings"]
    for key in ("rule_id", "name", "severity", "message", "location", "layer", "evidence", "fix"):
        assert key in finding
    assert set(finding["location"]) >= {"file", "line"}
    assert doc["facts"]["schema_version"] == SCHEMA_VERSION
    assert {r["status"] for r in doc["rules"]} >= {"fired", "passed"}


def test_html_escapes_hostile_layer_names_and_paths_and_loads_nothing():
    facts = _facts()
    layer = facts.model.rnn_layers[0]
    layer.path = f"seq/{HOSTILE}"
    layer.name = HOSTILE
    layer.location.code = f"x = {HOSTILE}"
    layer.location.context = [HOSTILE]
    facts.run.script = f"/tmp/{HOSTILE}/train.py"
    report = evaluate(facts)
    assert report.findings[0].layer == f"seq/{HOSTILE}"
    html = RENDERERS["html"](report)
    parser = _Tags()
    parser.feed(html)
    assert "script" not in parser.tags
    assert parser.external == []
    assert HOSTILE not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    md = RENDERERS["md"](report)
    prose = [line for line in md.splitlines() if HOSTILE in line]
    # raw only inside code spans / fenced blocks, where Markdown shows it as text
    for line in prose:
        assert line.count("`") >= 2 or line.startswith(('"', " ")), line


def test_html_shows_every_finding_with_evidence_location_and_fix():
    report = evaluate(_facts())
    html = RENDERERS["html"](report)
    finding = report.findings[0]
    assert finding.rule_id in html and 'id="rule-RD101"' in html
    assert f":{finding.location.line}</code>" in html
    assert "recurrent_dropout" in html and "layers.LSTM(4, dropout=0.25)" in html
    assert "tensorboard --logdir" not in html or "profile" in html
    assert "median step time" in html


def test_terminal_summary_has_one_line_per_finding_and_the_paths(tmp_path):
    report = evaluate(_facts())
    lines = summary_lines(report, {"html": tmp_path / "report.html"})
    assert sum(line.startswith("RD101 ") for line in lines) == 1
    assert lines[-1].endswith("report.html")


def test_the_no_findings_line_counts_one_rule_in_the_singular():
    """A new user's --select of one rule that passed read "no findings from the 1 rules
    evaluated"."""
    facts = _facts()
    one = evaluate(facts, select=["RD401"])
    assert "no findings from the 1 rule evaluated" in summary_lines(one)
    two = evaluate(facts, select=["RD401", "RD102"])
    assert "no findings from the 2 rules evaluated" in summary_lines(two)
