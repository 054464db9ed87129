"""``rnndoctor report`` reads ``[tool.rnndoctor]`` from the checked script's project, as the check
did, not from wherever the facts were saved (a fresh user's report folder outside the project
lost its ``ignore`` and a rule's cut-off: RD201 went from warning to error, RD207 came back)."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from rnndoctor.cli import app
from rnndoctor.facts import Facts

DATA = Path(__file__).parents[1] / "data" / "rules"
runner = CliRunner(env={"COLUMNS": "200", "NO_COLOR": "1", "TERM": "dumb"})


def _saved_outside(tmp_path: Path, script: Path) -> Path:
    facts = Facts.from_dict(json.loads((DATA / "RD101-offending.json").read_text())["facts"])
    facts.run.script, facts.run.cwd = str(script), str(script.parent)
    out = tmp_path / "reports" / "run1"
    out.mkdir(parents=True)
    facts.save(out / "facts.json")
    return out / "facts.json"


def _project(tmp_path: Path) -> tuple[Path, Path]:
    """A project whose ``[tool.rnndoctor]`` ignores RD101, and its script."""
    project = tmp_path / "proj"
    project.mkdir()
    (project / "pyproject.toml").write_text('[tool.rnndoctor]\nignore = ["RD101"]\n')
    script = project / "train.py"
    script.write_text("print('train')\n")
    return project, script


def test_report_uses_the_scripts_pyproject_table(tmp_path):
    project, script = _project(tmp_path)
    facts_file = _saved_outside(tmp_path, script)
    result = runner.invoke(app, ["report", str(facts_file), "--format", "json"])
    assert result.exit_code in (0, 1), result.output
    assert f"options from {project / 'pyproject.toml'}" in result.output
    report = json.loads((facts_file.parent / "report.json").read_text())
    assert "RD101" not in {f["rule_id"] for f in report["findings"]}
    # the project gone (facts from another machine): the facts file's folder, as before
    script.unlink()
    project.joinpath("pyproject.toml").unlink()
    project.rmdir()
    result = runner.invoke(app, ["report", str(facts_file), "--format", "json"])
    assert result.exit_code in (0, 1), result.output
    report = json.loads((facts_file.parent / "report.json").read_text())
    assert "RD101" in {f["rule_id"] for f in report["findings"]}


def test_compare_uses_the_scripts_pyproject_table_too(tmp_path, monkeypatch):
    project, script = _project(tmp_path)
    facts_file = _saved_outside(tmp_path, script)
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["compare", str(facts_file), str(facts_file)])
    assert result.exit_code == 0, result.output
    assert f"options from {project / 'pyproject.toml'}" in result.output
    assert "RD101" not in result.output
