"""``rnndoctor check --verify`` end to end: real capture children, real TF (slow; about two
minutes together on two shared cores)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from verify_helpers import tree_hashes

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("git") is None, reason="needs git"),
]

SCRIPTS = Path(__file__).parents[1] / "scripts"
WINDOW = ["--steps", "8", "--warmup", "2", "--profile-steps", "0", "--timeout", "240"]
STATUSES = {"confirmed", "within noise", "slower", "failed", "not verifiable",
            "unsafe: loss diverged"}  # fmt: skip


def _work_tree(tmp_path: Path, script: str) -> Path:
    """A git work tree holding the script and the module it imports."""
    work = tmp_path / "work"
    work.mkdir()
    for name in (script, "verify_data.py"):
        shutil.copy(SCRIPTS / name, work)
    subprocess.run(["git", "init", "-q"], cwd=work, check=True)
    return work


def _check(work: Path, script: str, out: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "rnndoctor", "check", script, "--out", str(out), *WINDOW,
         "--format", "json", "--verify", *extra],
        cwd=work, capture_output=True, text=True, timeout=600,
        env=dict(os.environ, COLUMNS="200"),
    )  # fmt: skip


@pytest.fixture(scope="module")
def lstm(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("verify")
    work = _work_tree(tmp, "verify_lstm.py")
    before = tree_hashes(work)
    out = tmp / "out"
    # RD301 alone is run (RD201's fix is display-only): its 5 pairs fit in the budget, so it can
    # be decided and patched; RD101 (and the all-fixes copy) are in the unit tests and below.
    result = _check(work, "verify_lstm.py", out, "--select", "RD301,RD201",
                    "--fail-on", "warning", "--verify-budget", "90")  # fmt: skip
    return work, out, before, result


def test_each_source_rewrite_has_a_verified_entry_with_a_status(lstm):
    work, out, _, result = lstm
    assert result.returncode == 1, result.stdout + result.stderr  # RD301 is a warning: unchanged
    report = json.loads((out / "report.json").read_text())
    rewrites = {
        f["rule_id"]
        for f in report["findings"]
        if f["fix"] and f["fix"]["before"] and f["fix"]["safety"] != "display-only"
    }
    assert rewrites == {"RD301"}, report["findings"]
    verified = {v["fix"]: v for v in report["verified"]}
    assert rewrites <= set(verified)
    assert all(v["status"] in STATUSES for v in verified.values())
    assert json.loads((out / "verify.json").read_text())["verified"] == report["verified"]
    rd301 = verified["RD301"]
    assert rd301["pairs"] >= 2 and rd301["low"] <= rd301["measured"] <= rd301["high"]
    assert rd301["cpu_label"] is None  # a batch-size gain is no cuDNN gain
    if "RD201" in verified:
        assert verified["RD201"]["reason"] == "display-only fix"
    assert "verify: fix, status, estimate, measured" in result.stdout
    print(result.stdout[result.stdout.index("verify: fix") :])  # the figures, with pytest -s


def test_the_users_tree_is_byte_identical(lstm):
    work, _, before, _ = lstm
    assert tree_hashes(work) == before


def test_the_patch_applies_to_a_fresh_copy_and_holds_the_confirmed_fixes(lstm, tmp_path):
    work, out, _, result = lstm
    report = json.loads((out / "report.json").read_text())
    confirmed = {v["fix"] for v in report["verified"] if v["status"] == "confirmed"}
    patch = (out / "fixes.patch").read_text()
    assert {line.split()[1] for line in patch.splitlines() if line.startswith("# RD")} == {
        c for c in confirmed if c != "all"
    }
    if confirmed - {"all"}:
        assert "git apply" in result.stdout
        fresh = tmp_path / "fresh"
        shutil.copytree(work, fresh)
        check = subprocess.run(["git", "apply", "--check", str(out / "fixes.patch")], cwd=fresh,
                               capture_output=True, text=True)  # fmt: skip
        assert check.returncode == 0, check.stderr + patch
    else:  # a loaded machine can leave too few pairs in the budget to decide each fix alone
        empty = "fixes.patch is empty: all (" if confirmed else "No fix confirmed: fixes.patch is"
        assert patch == "" and empty in result.stdout


def test_a_fix_that_breaks_the_script_is_failed_with_its_error_line_and_not_patched(tmp_path):
    work = _work_tree(tmp_path, "verify_fails.py")
    before = tree_hashes(work)
    out = tmp_path / "out"
    # RD101 is a model rule: no probe or sequence sampling is needed to find it
    result = _check(work, "verify_fails.py", out, "--select", "RD101", "--no-probes")
    assert result.returncode == 0, result.stdout + result.stderr
    verified = json.loads((out / "verify.json").read_text())["verified"]
    assert [v["fix"] for v in verified] == ["RD101"]
    rd101 = verified[0]
    assert rd101["status"] == "failed"
    assert "AssertionError: this job needs recurrent_dropout=0.2" in rd101["error"]
    assert "verify_fails.py:11" in rd101["error"]
    assert (out / "fixes.patch").read_text() == ""
    assert tree_hashes(work) == before
