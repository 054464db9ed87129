"""The capture child's end: autograph's temporary sources removed, as TensorFlow's exit would."""

from __future__ import annotations

import sys
import tempfile
import types
from pathlib import Path

import pytest

from rnndoctor.capture import ending


@pytest.fixture
def tempdir(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # what gettempdir() returns
    return tmp_path


def _loaded(monkeypatch, name: str, path: Path) -> None:
    path.write_text("x = 1\n")
    module = types.ModuleType(name)
    module.__file__ = str(path)
    monkeypatch.setitem(sys.modules, name, module)


def test_the_sources_autograph_loaded_here_are_removed(tempdir, monkeypatch):
    ours = [tempdir / f"{ending.AUTOGRAPH_PREFIX}{tag}.py" for tag in ("ab12cd34", "zz_9y8x7")]
    for path in ours:
        _loaded(monkeypatch, path.stem, path)
    assert ending.remove_autograph_sources() == 2
    assert not any(path.exists() for path in ours)


def test_files_this_process_did_not_load_are_left_alone(tempdir, monkeypatch):
    # another process's autograph file: the same name, but not a module of this process
    theirs = tempdir / f"{ending.AUTOGRAPH_PREFIX}other123.py"
    theirs.write_text("x = 1\n")
    # a module of that name whose file lies outside the temporary folder (the user's own)
    elsewhere = tempdir / "project"
    elsewhere.mkdir()
    user = elsewhere / f"{ending.AUTOGRAPH_PREFIX}user.py"
    _loaded(monkeypatch, user.stem, user)
    # a module in the temporary folder under another name
    plain = tempdir / "helper.py"
    _loaded(monkeypatch, f"{ending.AUTOGRAPH_PREFIX}alias", plain)
    assert ending.remove_autograph_sources() == 0
    assert theirs.exists() and user.exists() and plain.exists()


def test_a_source_already_gone_is_no_error(tempdir, monkeypatch):
    path = tempdir / f"{ending.AUTOGRAPH_PREFIX}gone0001.py"
    _loaded(monkeypatch, path.stem, path)
    path.unlink()
    assert ending.remove_autograph_sources() == 0


def test_a_temporary_folder_named_with_a_trailing_slash_still_matches(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path) + "/")
    path = tmp_path / f"{ending.AUTOGRAPH_PREFIX}slash001.py"
    _loaded(monkeypatch, path.stem, path)
    assert ending.remove_autograph_sources() == 1 and not path.exists()
