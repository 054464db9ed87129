"""``--out``: a check replaces its own files there and never the user's (rnndoctor/cli/check.py:
prepare_out). A fresh user ran ``rnndoctor check train.py --out .`` in a folder holding their own
``report.md`` and ``facts.json``: the first was deleted and the second overwritten."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path

from typer.testing import CliRunner

from rnndoctor.cli import app
from rnndoctor.cli.check import prepare_out
from rnndoctor.cli.console import Console
from rnndoctor.options import ExitCode, Options
from rnndoctor.outdir import MARKER as OUT_MARKER

runner = CliRunner()


def _listing(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` by relative path, with its content's digest."""
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def _users_folder(folder: Path) -> None:
    (folder / "train.py").write_text("print('training')\n")
    (folder / "report.md").write_text("# my own notes\n")
    (folder / "facts.json").write_text('{"experiment": 3}\n')


def test_a_folder_with_the_users_files_of_our_names_is_refused_and_left_as_it_was(tmp_path):
    _users_folder(tmp_path)
    before = _listing(tmp_path)
    options = dataclasses.replace(Options(), out=str(tmp_path))
    assert prepare_out(options, Console()) is None
    assert _listing(tmp_path) == before  # nothing removed, overwritten or added


def test_the_check_command_says_so_in_one_line_with_the_usage_exit_code(tmp_path):
    _users_folder(tmp_path)
    before = _listing(tmp_path)
    result = runner.invoke(app, ["check", str(tmp_path / "train.py"), "--out", str(tmp_path)])
    assert result.exit_code == ExitCode.USAGE, result.output
    errors = [line for line in result.output.splitlines() if "rnndoctor: error:" in line]
    assert len(errors) == 1, result.output
    assert "facts.json, report.md" in errors[0]
    assert "not marked as rnndoctor's output" in errors[0]
    assert "Traceback" not in result.output
    assert _listing(tmp_path) == before


def test_a_checks_own_folder_is_marked_and_its_files_replaced_on_the_next_check(tmp_path):
    (tmp_path / "train.py").write_text("print('training')\n")
    options = dataclasses.replace(Options(), out=str(tmp_path))
    assert prepare_out(options, Console()) is not None  # only the user's train.py there
    assert (tmp_path / OUT_MARKER).is_file()
    for name in ("report.md", "report.html", "facts.json", "script.log"):
        (tmp_path / name).write_text("from the first check")  # what that check wrote
    assert prepare_out(options, Console()) is not None
    names = sorted(p.name for p in tmp_path.iterdir())
    # the earlier reports and facts are removed (script.log is rewritten by the capture)
    assert names == [OUT_MARKER, "script.log", "train.py"]
    assert (tmp_path / "train.py").read_text() == "print('training')\n"


def test_a_folder_from_a_version_without_the_marker_is_recognised_by_its_facts(tmp_path):
    facts = {"schema_version": "1.4", "run": {"outcome": "completed"}}
    (tmp_path / "facts.json").write_text(json.dumps(facts))
    (tmp_path / "report.md").write_text("an earlier check's report")
    options = dataclasses.replace(Options(), out=str(tmp_path))
    assert prepare_out(options, Console()) is not None
    assert sorted(p.name for p in tmp_path.iterdir()) == [OUT_MARKER]


def test_verify_outputs_of_the_users_are_refused_only_with_verify(tmp_path):
    (tmp_path / "verify.md").write_text("my verification notes")
    plain = dataclasses.replace(Options(), out=str(tmp_path))
    assert prepare_out(plain, Console()) is not None  # a plain check writes no verify.md
    assert (tmp_path / "verify.md").read_text() == "my verification notes"
    (tmp_path / OUT_MARKER).unlink()
    verify = dataclasses.replace(plain, verify=True)
    assert prepare_out(verify, Console()) is None
    assert (tmp_path / "verify.md").read_text() == "my verification notes"


def test_claim_marks_a_new_folder_and_refuses_a_foreign_one_without_writing(tmp_path):
    from rnndoctor import outdir

    fresh = tmp_path / "new" / "reports"
    outdir.claim(fresh, ("report.html",))
    assert (fresh / OUT_MARKER).is_file()
    outdir.claim(fresh, ("report.html",))  # again: the folder is ours
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "report.html").write_text("mine")
    try:
        outdir.claim(theirs, ("report.html", "facts.json"), option="out=")
    except outdir.ForeignFiles as exc:
        assert str(exc).startswith(f"out= {theirs} holds report.html, not marked as rnndoctor")
        assert "\n" not in str(exc)
    else:
        raise AssertionError("a folder with the user's report.html was claimed")
    assert sorted(p.name for p in theirs.iterdir()) == ["report.html"]


def test_a_profile_folder_of_the_users_is_refused_and_the_workers_names_with_workers(tmp_path):
    from rnndoctor.cli.workers import out_names

    (tmp_path / "profile").mkdir()  # the user's own TensorBoard logs: a check writes in there
    options = dataclasses.replace(Options(), out=str(tmp_path))
    assert prepare_out(options, Console()) is None
    (tmp_path / "profile").rmdir()
    (tmp_path / "workers").mkdir()
    (tmp_path / "attempt.json").write_text("{}")
    assert prepare_out(options, Console()) is not None  # a plain check writes neither
    (tmp_path / OUT_MARKER).unlink()
    names = out_names(2)
    assert {"workers", "attempt.json", "facts-worker-1.json", "workers-attempt-3"} <= set(names)
    assert prepare_out(options, Console(), names) is None  # a --workers check replaces them


def test_report_and_merge_never_replace_the_users_report_files(tmp_path):
    from rnndoctor.facts import Facts, RunInfo

    facts = Facts(run=RunInfo(script="t.py", argv=["t.py"], cwd="/w", outcome="completed"))
    facts_file = tmp_path / "in" / "facts-worker-0.json"
    facts_file.parent.mkdir()
    facts.save(facts_file)
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "report.md").write_text("my notes")
    for command in (["report", str(facts_file)], ["merge", str(facts_file)]):
        result = runner.invoke(app, [*command, "--out", str(theirs)])
        assert result.exit_code == ExitCode.USAGE, result.output
        assert "holds report.md, not marked as rnndoctor's output" in result.output
        assert sorted(p.name for p in theirs.iterdir()) == ["report.md"]
    # a report.json of rnndoctor's (a report attached to a ticket) is re-rendered beside itself
    result = runner.invoke(app, ["report", str(facts_file), "--out", str(tmp_path / "new")])
    assert result.exit_code in (ExitCode.OK, ExitCode.FINDINGS), result.output
    (tmp_path / "new" / OUT_MARKER).unlink()
    report_json = tmp_path / "new" / "report.json"
    result = runner.invoke(app, ["report", str(report_json), "--format", "md"])
    assert result.exit_code in (ExitCode.OK, ExitCode.FINDINGS), result.output
