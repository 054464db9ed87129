"""Options: defaults, ``[tool.rnndoctor]`` over them, the command line over both, validation, the
rules' option tables, and the capture child's arguments (no TF, no child process)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rnndoctor.cli import app
from rnndoctor.facts import Facts
from rnndoctor.options import (
    DEFAULTS,
    ConfigFile,
    ExitCode,
    Options,
    OptionsError,
    load_config,
    parse_child_args,
    resolve,
)

DATA = Path(__file__).parents[1] / "data" / "rules"
runner = CliRunner(env={"COLUMNS": "160", "NO_COLOR": "1", "TERM": "dumb"})
_META = {"config_file", "from_config", "rule_options"}


def _pyproject(folder: Path, table: str) -> Path:
    path = folder / "pyproject.toml"
    path.write_text(f"[tool.rnndoctor]\n{table}")
    return path


def _settings(options: Options) -> dict:
    return {k: v for k, v in dataclasses.asdict(options).items() if k not in _META}


def test_without_a_table_every_option_is_its_default(tmp_path):
    config = load_config(tmp_path)
    assert config == ConfigFile()
    options = resolve({}, config)
    assert _settings(options) == _settings(DEFAULTS)
    assert options.config_file is None and options.from_config == frozenset()
    assert options.rule_options == {}
    assert options.label("fail_on") == "--fail-on"


def test_the_table_overrides_the_defaults_and_is_named_in_labels(tmp_path):
    path = _pyproject(tmp_path, 'steps = 30\nfail-on = "warning"\ntimeout = 90\nout = "rep"\n')
    (tmp_path / "sub").mkdir()
    config = load_config(tmp_path / "sub")  # found in a parent folder
    assert config.path == path
    options = resolve({}, config)
    assert (options.steps, options.fail_on, options.timeout) == (30, "warning", 90.0)
    assert isinstance(options.timeout, float)
    assert options.out == str(tmp_path / "rep")  # relative to the pyproject's folder
    assert options.warmup == DEFAULTS.warmup
    assert options.from_config == {"steps", "fail_on", "timeout", "out"}
    assert options.label("fail_on") == f"fail-on in {path} [tool.rnndoctor]"


def test_the_command_line_overrides_the_table(tmp_path):
    _pyproject(tmp_path, 'steps = 30\nformat = ["md"]\nselect = "RD101, RD104"\n')
    options = resolve({"steps": 5, "format": [], "select": None}, load_config(tmp_path))
    assert options.steps == 5 and options.label("steps") == "--steps"
    assert options.format == ["md"] and options.select == ["RD101", "RD104"]
    assert resolve({"format": ["html,json", "sarif"]}).format == ["html", "json", "sarif"]


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ("stepz = 3\n", "unknown key 'stepz' in [tool.rnndoctor]"),
        ('steps = "ten"\n', "[tool.rnndoctor] steps must be an integer, not 'ten'"),
        ("steps = true\n", "[tool.rnndoctor] steps must not be a boolean"),
        ("redact = 1\n", "[tool.rnndoctor] redact must be true or false, not 1"),
        ('timeout = "1m"\n', "timeout must be an integer or a number, not '1m'"),
        ("format = 3\n", "format must be a list or a string, not 3"),
        ("no-probes = true\n", "unknown key 'no-probes'"),  # command line only, as before
        ("rules = 3\n", "[tool.rnndoctor] rules must be a table of tables"),
        ("rules.RD201 = 3\n", "[tool.rnndoctor.rules] RD201 must be a table, not 3"),
        ("steps = = 3\n", "pyproject.toml: "),
    ],
)
def test_a_bad_table_is_one_error_naming_the_file(tmp_path, table, message):
    path = _pyproject(tmp_path, table)
    with pytest.raises(OptionsError) as info:
        load_config(tmp_path)
    assert message in str(info.value) and str(info.value).startswith(f"{path}: ")
    assert "\n" not in str(info.value)


def test_values_are_validated_with_the_option_named(tmp_path):
    with pytest.raises(OptionsError, match=r"unknown --format pdf: choose from html, json, md"):
        resolve({"format": ["html,pdf"]}).validate()
    path = _pyproject(tmp_path, 'fail-on = "warn"\n')
    with pytest.raises(OptionsError) as info:
        resolve({}, load_config(tmp_path)).validate()
    assert str(info.value) == (
        f"unknown fail-on in {path} [tool.rnndoctor] 'warn': "
        "choose from error, warning, info, never"
    )
    with pytest.raises(OptionsError, match=r"unknown rule 'RD999' in --ignore"):
        resolve({"ignore": ["RD999"]}).validate()
    with pytest.raises(OptionsError, match=r"--steps must be at least 1 \(got 0\)"):
        resolve({"steps": 0}).validate_window()
    with pytest.raises(OptionsError, match=r"--timeout must be more than 0 seconds \(got -1\)"):
        resolve({"timeout": -1.0}).validate_window()
    resolve({}).validate_window()


def test_rule_tables_reach_the_options_and_the_rule_check(tmp_path, monkeypatch):
    _pyproject(tmp_path, "steps = 4\n[tool.rnndoctor.rules.RD201]\nmin_share = 0.3\n")
    seen = []
    monkeypatch.setattr("rnndoctor.rules.check_rule_options", seen.append)
    options = resolve({}, load_config(tmp_path))
    assert options.rule_options == {"RD201": {"min_share": 0.3}}
    assert options.steps == 4 and "rules" not in options.from_config
    options.validate()
    assert seen == [{"RD201": {"min_share": 0.3}}]


def test_a_bad_rule_table_is_a_usage_error_naming_the_pyproject(tmp_path):
    path = _pyproject(tmp_path, "[tool.rnndoctor.rules.RD999]\nlimit = 1\n")
    with pytest.raises(OptionsError) as info:
        resolve({}, load_config(tmp_path)).validate()
    assert str(info.value).startswith(f"{path}: ") and "RD999" in str(info.value)
    facts = tmp_path / "facts.json"
    Facts.from_dict(json.loads((DATA / "RD101-offending.json").read_text())["facts"]).save(facts)
    result = runner.invoke(app, ["report", str(facts)])
    assert result.exit_code == ExitCode.USAGE
    assert result.output.strip().splitlines() == [f"rnndoctor: error: {info.value}"]


def test_report_and_compare_pass_the_rule_options_to_the_engine(tmp_path, monkeypatch):
    _pyproject(tmp_path, "[tool.rnndoctor.rules.retracing]\nmin_tracing_calls = 8\n")
    import rnndoctor.engine

    real, calls = rnndoctor.engine.evaluate, []

    def spy(facts, **kwargs):
        calls.append(kwargs["rule_options"])
        return real(facts, **kwargs)

    monkeypatch.setattr(rnndoctor.engine, "evaluate", spy)
    monkeypatch.setattr("rnndoctor.compare.evaluate", spy)
    facts = tmp_path / "facts.json"
    Facts.from_dict(json.loads((DATA / "RD101-offending.json").read_text())["facts"]).save(facts)
    assert runner.invoke(app, ["report", str(facts), "--format", "json"]).exit_code == 0
    html = tmp_path / "cmp.html"
    compared = runner.invoke(app, ["compare", str(facts), str(facts), "--html", str(html)])
    assert compared.exit_code == 0, compared.output
    assert calls == [{"retracing": {"min_tracing_calls": 8}}] * 3


def test_the_child_reads_back_the_window_options():
    options = Options(out="/o", steps=7, warmup=0, profile_steps=1, timeout=12.5, no_probes=True,
                      skip_probes=("batch-size", "steps-per-execution"))  # fmt: skip
    parsed, script, args = parse_child_args([*options.child_argv(), "train.py", "--lr", "1"])
    assert (script, args) == ("train.py", ["--lr", "1"])
    window = ("out", "steps", "warmup", "profile_steps", "timeout", "no_probes", "probe_fast_path",
              "skip_probes")  # fmt: skip
    assert [getattr(parsed, k) for k in window] == [getattr(options, k) for k in window]
    assert parse_child_args(["--out", "/o", "t.py"])[0].steps == DEFAULTS.steps
    assert "--timeout" not in Options(timeout=None).child_argv()


def test_exit_status_70_is_the_childs_internal_error():
    assert ExitCode.CHILD_INTERNAL == 70 and ExitCode.USAGE == 2 and ExitCode.INTERRUPTED == 130
