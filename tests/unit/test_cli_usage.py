"""CLI usage, version and exit codes that need no child process (typer's CliRunner)."""

from __future__ import annotations

import re

from typer.testing import CliRunner

from rnndoctor import __version__
from rnndoctor.cli import app, example_path
from rnndoctor.options import ExitCode

runner = CliRunner(env={"COLUMNS": "120", "NO_COLOR": "1", "TERM": "dumb"})


def test_version():
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0
    assert result.output.strip() == f"rnndoctor {__version__}"


def test_missing_script_is_a_usage_error_with_one_line(tmp_path):
    result = runner.invoke(app, ["check", str(tmp_path / "nope.py"), "--out", str(tmp_path)])
    assert result.exit_code == ExitCode.USAGE
    assert "script not found" in result.output
    assert "Traceback" not in result.output


def test_directory_instead_of_script_is_a_usage_error(tmp_path):
    result = runner.invoke(app, ["check", str(tmp_path), "--out", str(tmp_path / "o")])
    assert result.exit_code == ExitCode.USAGE
    assert "not a file" in result.output


def test_a_notebook_is_a_usage_error_that_points_at_the_callback(tmp_path):
    """A fresh user's ``rnndoctor check train_gru.ipynb`` ran the notebook's JSON as Python:
    exit 3, ``NameError: name 'null' is not defined at train_gru.ipynb:5``."""
    notebook = tmp_path / "train_gru.ipynb"
    notebook.write_text('{"cells": [], "metadata": null, "nbformat": 4, "nbformat_minor": 5}')
    out = tmp_path / "o"
    result = runner.invoke(app, ["check", str(notebook), "--out", str(out)])
    assert result.exit_code == ExitCode.USAGE
    assert "is a notebook: rnndoctor check runs a Python script" in result.output
    assert "DoctorCallback" in result.output and "Traceback" not in result.output
    assert not out.exists()  # nothing ran, nothing written


def test_bad_option_value_is_a_usage_error(tmp_path):
    script = tmp_path / "t.py"
    script.write_text("")
    result = runner.invoke(app, ["check", str(script), "--fail-on", "sometimes"])
    assert result.exit_code == ExitCode.USAGE


def test_help_documents_the_exit_codes():
    result = runner.invoke(app, ["check", "--help"])
    assert result.exit_code == 0
    text = re.sub(r"\s+", " ", result.output)
    for code in (
        "0 nothing at or above --fail-on",
        "1 findings at or above --fail-on",
        "2 usage error",
        "3 the script failed",
        "4 timeout",
    ):
        assert code in text


def test_the_bundled_example_is_installed():
    assert example_path().is_file() and example_path(fixed=True).is_file()


def test_unknown_format_and_bad_numbers_name_the_option(tmp_path):
    script = tmp_path / "t.py"
    script.write_text("")
    result = runner.invoke(app, ["check", str(script), "--format", "html,pdf"])
    assert result.exit_code == ExitCode.USAGE
    assert "rnndoctor: error: unknown --format pdf" in result.output
    result = runner.invoke(app, ["check", str(script), "--steps", "0"])
    assert result.exit_code == ExitCode.USAGE
    assert "--steps must be at least 1 (got 0)" in result.output
