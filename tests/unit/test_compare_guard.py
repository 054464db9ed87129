"""`rnndoctor compare`: it replaces only a page of its own at its --html path (a user's file is
refused, untouched), and its step-time ratio carries a 90% interval that says "within noise"
where it holds 1. On saved real facts, no TF."""

from __future__ import annotations

import json
import random
import re
import statistics
from dataclasses import replace
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rnndoctor.cli import app
from rnndoctor.compare import compare_facts
from rnndoctor.facts import Facts
from rnndoctor.options import ExitCode
from rnndoctor.reports.compare import is_comparison_page, ratio_text, render_comparison_html

DATA = Path(__file__).parents[1] / "data" / "rules"
runner = CliRunner(env={"COLUMNS": "160", "NO_COLOR": "1", "TERM": "dumb"})
MARKER = '<meta name="generator" content="rnndoctor compare">'


def _facts(name: str = "RD101-offending") -> Facts:
    return Facts.from_dict(json.loads((DATA / f"{name}.json").read_text())["facts"])


def _with_steps(facts: Facts, step_ms: list[float]) -> Facts:
    steps = replace(
        facts.steps,
        step_time_ms=list(step_ms),
        measured_steps=len(step_ms),
        median_step_time_ms=statistics.median(step_ms) if step_ms else None,
    )
    return replace(facts, steps=steps)


def _noisy(centre: float, n: int, seed: int, spread: float = 0.05) -> list[float]:
    """``n`` step times around ``centre`` (uniform noise of +-``spread`` of it)."""
    rng = random.Random(seed)
    return [centre * (1.0 + rng.uniform(-spread, spread)) for _ in range(n)]


@pytest.fixture
def runs(tmp_path) -> tuple[Path, Path]:
    before, after = tmp_path / "b.json", tmp_path / "a.json"
    _facts("RD101-offending").save(before)
    _facts("RD101-compliant").save(after)
    return before, after


# --- the --html guard ---------------------------------------------------------------------------


def test_a_users_file_at_the_default_path_is_refused_and_untouched(runs, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    notes = tmp_path / "rnndoctor-compare.html"
    notes.write_text("my own notes\n")
    result = runner.invoke(app, ["compare", str(runs[0]), str(runs[1])])
    assert result.exit_code == ExitCode.USAGE == 2, result.output
    assert notes.read_text() == "my own notes\n"
    errors = [line for line in result.output.splitlines() if "error" in line]
    assert len(errors) == 1 and "rnndoctor-compare.html" in errors[0]
    assert "not an rnndoctor compare page" in errors[0] and "--html" in errors[0]
    assert "step time" not in result.output  # refused before printing the comparison


def test_a_checks_own_report_is_refused_and_untouched(runs, tmp_path):
    out = tmp_path / "out"
    result = runner.invoke(app, ["report", str(runs[0]), "--out", str(out), "--format", "html"])
    assert result.exit_code in (ExitCode.OK, ExitCode.FINDINGS), result.output
    report = out / "report.html"
    original = report.read_bytes()
    result = runner.invoke(app, ["compare", str(runs[0]), str(runs[1]), "--html", str(report)])
    assert result.exit_code == ExitCode.USAGE, result.output
    assert report.read_bytes() == original
    assert not is_comparison_page(report)


def test_a_marker_in_the_body_or_a_folder_is_no_page_of_ours(runs, tmp_path):
    quoted = tmp_path / "notes.html"
    quoted.write_text(f"<html><head><title>notes</title></head><body>{MARKER}</body></html>")
    assert not is_comparison_page(quoted)
    result = runner.invoke(app, ["compare", str(runs[0]), str(runs[1]), "--html", str(quoted)])
    assert result.exit_code == ExitCode.USAGE and MARKER in quoted.read_text()
    folder = tmp_path / "pages"
    folder.mkdir()
    result = runner.invoke(app, ["compare", str(runs[0]), str(runs[1]), "--html", str(folder)])
    assert result.exit_code == ExitCode.USAGE and "folder" in result.output
    assert list(folder.iterdir()) == []


def test_its_own_page_is_marked_and_replaced(runs, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    page = tmp_path / "rnndoctor-compare.html"
    first = runner.invoke(app, ["compare", str(runs[0]), str(runs[1])])
    assert first.exit_code == ExitCode.OK, first.output
    head = page.read_text().split("</head>")[0]
    assert MARKER in head and "Content-Security-Policy" in head
    assert is_comparison_page(page)
    page.write_text(page.read_text().replace("</main>", "<p>stale</p></main>"))
    again = runner.invoke(app, ["compare", str(runs[1]), str(runs[0])])  # the other way round
    assert again.exit_code == ExitCode.OK, again.output
    text = page.read_text()
    assert "stale" not in text and f"before: <code>{runs[1]}</code>" in text


def test_a_page_of_a_version_before_the_marker_is_replaced(runs, tmp_path):
    page = tmp_path / "old.html"
    html = render_comparison_html(compare_facts(_facts(), _facts("RD101-compliant")), "a", "b")
    page.write_text(html.replace(MARKER + "\n", ""))
    assert MARKER not in page.read_text() and is_comparison_page(page)
    result = runner.invoke(app, ["compare", str(runs[0]), str(runs[1]), "--html", str(page)])
    assert result.exit_code == ExitCode.OK, result.output
    assert MARKER in page.read_text()


# --- the step-time interval ---------------------------------------------------------------------


def test_identical_runs_shifted_by_noise_are_within_noise():
    base = _facts()
    before = _with_steps(base, _noisy(100.0, 20, seed=1))
    after = _with_steps(base, [t * 0.97 for t in _noisy(100.0, 20, seed=2)])
    comparison = compare_facts(before, after)
    low, high = comparison.step_time_interval
    assert low <= 1.0 <= high and comparison.step_time_change == "within noise"
    text = ratio_text(comparison)
    assert re.match(r"\d\.\d\dx \(90% interval \d\.\d\d–\d\.\d\dx\): within noise \(median", text)
    assert "faster" not in text and "slower" not in text
    page = render_comparison_html(comparison, "a", "b")
    assert "within noise" in page and "90% interval" in page


def test_clearly_different_runs_are_faster_or_slower_with_the_interval():
    base = _facts()
    slow, fast = _noisy(100.0, 20, seed=1), _noisy(60.0, 20, seed=2)
    faster = compare_facts(_with_steps(base, slow), _with_steps(base, fast))
    low, high = faster.step_time_interval
    assert 1.0 < low <= faster.step_time_ratio <= high and faster.step_time_change == "faster"
    assert re.match(
        r"1\.\d\dx faster \(90% interval 1\.\d\d–1\.\d\dx; median step", ratio_text(faster)
    )
    slower = compare_facts(_with_steps(base, fast), _with_steps(base, slow))
    assert slower.step_time_change == "slower"
    text = ratio_text(slower)
    shown = re.match(r"(\d\.\d\d)x slower \(90% interval (\d\.\d\d)–(\d\.\d\d)x;", text)
    assert shown and float(shown[2]) <= float(shown[1]) <= float(shown[3])
    assert float(shown[2]) > 1.0  # a slowdown's figures are after / before
    assert compare_facts(_with_steps(base, slow), _with_steps(base, fast)).step_time_interval == (
        low,
        high,
    )  # deterministic


def test_a_run_with_fewer_than_two_step_times_has_no_interval():
    base = _facts()
    comparison = compare_facts(_with_steps(base, [100.0]), _with_steps(base, _noisy(60.0, 20, 2)))
    assert comparison.step_time_interval is None and comparison.step_time_change is None
    text = ratio_text(comparison)
    assert text.startswith("1.") and "x faster (no interval" in text


def test_the_command_prints_within_noise_for_identical_runs(tmp_path):
    base = _facts()
    before, after = tmp_path / "b.json", tmp_path / "a.json"
    _with_steps(base, _noisy(100.0, 20, seed=3)).save(before)
    _with_steps(base, _noisy(100.0, 20, seed=4)).save(after)
    html = tmp_path / "cmp.html"
    result = runner.invoke(app, ["compare", str(before), str(after), "--html", str(html)])
    assert result.exit_code == ExitCode.OK, result.output
    assert re.search(
        r"step time: \d\.\d\dx \(90% interval [\d.]+–[\d.]+x\): within noise", result.output
    )
    assert "within noise" in html.read_text()
