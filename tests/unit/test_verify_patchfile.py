"""--verify: fixes.patch, checked with ``git apply`` in a temporary repository."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from verify_helpers import finding

from rnndoctor.verify import patch as px
from rnndoctor.verify.patchfile import OutsideRoot, build_patch

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")

TRAIN = "".join(f"line_{i} = {i}\n" for i in range(1, 31))


def _git(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=False)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "src").mkdir(parents=True)
    (root / "src" / "train.py").write_text(TRAIN)
    assert _git(root, "init", "-q").returncode == 0
    return root


def _rewrite(root: Path, rule: str, line: int, code: str, file: str = "src/train.py"):
    path = root / file
    before = path.read_text().splitlines()[line - 1]
    return px.locate(finding(rule, path, line, before, code), rule, root)


def _check_and_apply(root: Path, patch: str, tmp_path: Path) -> str:
    """``git apply --check``, then apply to a fresh copy of the repo; the patched train.py."""
    patch_file = tmp_path / "fixes.patch"
    patch_file.write_text(patch)
    check = _git(root, "apply", "--check", str(patch_file))
    assert check.returncode == 0, check.stderr + patch
    fresh = tmp_path / "fresh"
    shutil.copytree(root, fresh)
    applied = _git(fresh, "apply", str(patch_file))
    assert applied.returncode == 0, applied.stderr
    return (fresh / "src" / "train.py").read_text()


def test_one_hunk_per_fix_with_the_rule_id_above_it(repo, tmp_path):
    rewrites = [
        _rewrite(repo, "RD301", 10, "line_10 = 'ten'"),
        _rewrite(repo, "RD101", 20, "line_20 = (\n    'twenty'\n)"),
    ]
    patch = build_patch(rewrites, repo)
    assert (
        patch.count("\n@@ ") == 2 and patch.count("diff --git a/src/train.py b/src/train.py") == 2
    )
    lines = patch.splitlines()
    for rule in ("RD301", "RD101"):
        at = next(i for i, t in enumerate(lines) if t.startswith(f"# {rule} "))
        assert lines[at + 1].startswith("diff --git")  # the comment comes before the section
    assert not any(t.startswith("+#") for t in lines)  # no comment added to the code
    new = _check_and_apply(repo, patch, tmp_path)
    assert new == px.apply_rewrites(TRAIN, rewrites)


def test_fixes_on_neighbouring_lines_apply(repo, tmp_path):
    rewrites = [_rewrite(repo, "RD1", 5, "line_5 = 'a'"), _rewrite(repo, "RD2", 6, "x = 6\ny = 6")]
    new = _check_and_apply(repo, build_patch(rewrites, repo), tmp_path)
    assert new == px.apply_rewrites(TRAIN, rewrites)


def test_first_and_last_lines_and_no_newline_at_the_end(repo, tmp_path):
    (repo / "src" / "train.py").write_text(TRAIN + "last = 0")  # no final newline
    rewrites = [_rewrite(repo, "RD1", 1, "first = 1"), _rewrite(repo, "RD2", 31, "last = 1")]
    patch = build_patch(rewrites, repo)
    assert "\\ No newline at end of file" in patch
    new = _check_and_apply(repo, patch, tmp_path)
    assert new.startswith("first = 1\n") and new.endswith("\nlast = 1")


def test_no_rewrite_gives_an_empty_patch(repo):
    assert build_patch([], repo) == ""


def test_a_file_outside_the_root_is_refused(repo, tmp_path):
    other = tmp_path / "elsewhere.py"
    other.write_text("a = 1\n")
    rewrite = px.locate(finding("RD1", other, 1, "a = 1", "a = 2"), "RD1", tmp_path)
    with pytest.raises(OutsideRoot):
        build_patch([rewrite], repo)
