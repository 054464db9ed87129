"""``rnndoctor check --verify`` on the bundled demo (issue 13's acceptance): one verification,
module-scoped, shared by every assert (slow: a plain check, the warm A/B arms and a check of the
all-fixes copy, about two and a half minutes on two shared cores).

The check selects the demo's three findings (``DEMO_RULES``): RD301's and RD502's fixes would
add two more fixes' arms and pairs, and the batch-size probe, about 50 s of a suite that must
stay under 20 minutes; ``--verify`` of RD301 (a batch-size rewrite) and of merged fixes is
tested on their own scripts (tests/e2e/test_verify_e2e.py, tests/unit/test_verify_merge.py)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from verify_helpers import tree_hashes

from rnndoctor.cli import example_path

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("git") is None, reason="needs git"),
]

WINDOW = ["--steps", "10", "--warmup", "2", "--profile-steps", "0", "--timeout", "300"]
SCRIPT_ARGS = ["--", "--lines", "6000"]
DEMO_RULES = ("RD101", "RD110", "RD501")
STATUSES = {"confirmed", "within noise", "slower", "failed", "not verifiable",
            "unsafe: loss diverged"}  # fmt: skip


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "rnndoctor", "check", *args], cwd=cwd, capture_output=True,
        text=True, timeout=900, env=dict(os.environ, COLUMNS="200"),
    )  # fmt: skip


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("verify-demo")
    work = tmp / "examples"
    shutil.copytree(example_path().parent, work, ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run(["git", "init", "-q"], cwd=work, check=True)
    before = tree_hashes(work)
    out = tmp / "out"
    result = _run(["charlm_stdlib.py", "--out", str(out), *WINDOW, "--format", "json",
                   "--fail-on", "never", "--select", ",".join(DEMO_RULES), "--verify",
                   "--verify-budget", "150", *SCRIPT_ARGS], work)  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads((out / "report.json").read_text())
    return work, out, before, result, report


def test_each_demo_finding_has_a_verified_entry_with_a_status(demo):
    _, out, _, result, report = demo
    verified = {v["fix"]: v for v in report["verified"]}
    fired = {f["rule_id"] for f in report["findings"]}
    wanted = set(DEMO_RULES)
    assert wanted == fired, fired
    for rule_id in wanted | {"all"}:
        assert verified[rule_id]["status"] in STATUSES, verified[rule_id]
    assert set(verified["all"]["rules"]) >= set(DEMO_RULES)
    # RD501's fix is a rewrite of the demo's fit line, measured on the bucketed pipeline
    rd501 = verified["RD501"]
    assert rd501["safety"] == "unsafe"
    lines = example_path().read_text().splitlines()
    assert lines[rd501["line"] - 1].startswith("model.fit(")
    # RD110's CPU effect: never a gain invented for the cuDNN fix
    rd110 = verified["RD110"]
    assert rd110["cpu_label"] == "measured on CPU: the cuDNN gain needs a GPU"
    if rd110["measured_text"]:
        assert rd110["measured_text"].endswith("(measured on CPU: the cuDNN gain needs a GPU)")
    for item in verified.values():
        if item["status"] in ("confirmed", "within noise", "slower"):
            assert item["pairs"] >= 5 and item["low"] <= item["measured"] <= item["high"]
    print(result.stdout[result.stdout.index("verify: fix") :])  # the figures, with pytest -s


def test_the_users_tree_is_byte_identical(demo):
    work, _, before, _, _ = demo
    assert tree_hashes(work) == before


def test_the_patch_applies_to_a_fresh_copy_of_the_examples(demo, tmp_path):
    work, out, _, result, report = demo
    patched = {v["fix"] for v in report["verified"] if v["in_patch"]}
    assert all(v["status"] == "confirmed" for v in report["verified"] if v["in_patch"])
    patch = (out / "fixes.patch").read_text()
    assert {line.split()[1] for line in patch.splitlines() if line.startswith("# RD")} == patched
    if not patch:  # a loaded machine can leave every interval holding 1
        confirmed = [v for v in report["verified"] if v["status"] == "confirmed"]
        empty = "fixes.patch is empty: " if confirmed else "No fix confirmed: fixes.patch is empty."
        assert empty in result.stdout
        return
    fresh = tmp_path / "examples"
    shutil.copytree(example_path().parent, fresh, ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run(["git", "init", "-q"], cwd=fresh, check=True)
    check = subprocess.run(["git", "apply", "--check", str(out / "fixes.patch")], cwd=fresh,
                           capture_output=True, text=True)  # fmt: skip
    assert check.returncode == 0, check.stderr + patch


def test_a_check_of_the_all_fixes_copy_has_no_rd101_rd110_or_rd501(demo):
    _, out, _, _, _ = demo
    copy = out / "verify" / "all" / "charlm_stdlib.py"
    assert copy.is_file()
    again = out.parent / "again"
    # the three rules alone: the batch-size and steps_per_execution probes, which no selected
    # rule reads, do not run (about 10 s)
    result = _run([str(copy), "--out", str(again), *WINDOW, "--format", "json",
                   "--fail-on", "never", "--select", ",".join(DEMO_RULES), *SCRIPT_ARGS],
                  copy.parent)  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads((again / "report.json").read_text())
    outcomes = {o["rule_id"]: o["status"] for o in report["rules"]}
    for rule_id in DEMO_RULES:
        assert outcomes[rule_id] == "passed", (rule_id, report["findings"])
