"""The folder a check's paths are relative to (``facts.run.source_root``: SARIF locations, and
``--verify``'s ``fixes.patch``): the git work tree that holds the script, else the working
directory where it holds the script, else the script's folder. A new user's
``rnndoctor check ../scripts/s2_tfdata.py --verify``, run from a folder beside the scripts,
confirmed RD301+RD202 and wrote an empty patch: the script was "outside the work tree"."""

from __future__ import annotations

from rnndoctor.capture.__main__ import _source_root


def _script(folder, name="train.py"):
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text("print('hi')\n")
    return str(path)


def test_the_git_work_tree_holding_the_script(tmp_path, monkeypatch):
    (tmp_path / "repo" / ".git").mkdir(parents=True)
    script = _script(tmp_path / "repo" / "src")
    monkeypatch.chdir(tmp_path)
    assert _source_root(script) == str(tmp_path / "repo")


def test_the_working_directory_where_it_holds_the_script(tmp_path, monkeypatch):
    script = _script(tmp_path / "work" / "sub")
    monkeypatch.chdir(tmp_path / "work")
    assert _source_root(script) == str(tmp_path / "work")


def test_the_scripts_folder_where_the_working_directory_does_not_hold_it(tmp_path, monkeypatch):
    script = _script(tmp_path / "scripts")
    (tmp_path / "work").mkdir()
    monkeypatch.chdir(tmp_path / "work")
    assert _source_root(script) == str(tmp_path / "scripts")


def test_a_symlinked_working_directory_keeps_the_scripts_own_form(tmp_path, monkeypatch):
    """The cwd through a symlink (a home folder linked elsewhere) and the script given by that
    link's path: the root is in the script path's form, so that the script's folder relative
    to it is ``.`` (SARIF's locations), not a walk through the real path."""
    import os

    real = tmp_path / "real" / "proj"
    script = _script(real)
    (tmp_path / "home").symlink_to(tmp_path / "real")
    linked = tmp_path / "home" / "proj"
    monkeypatch.chdir(linked)
    root = _source_root(str(linked / "train.py"))
    assert root == str(linked) and os.path.relpath(str(linked), root) == "."
    assert _source_root(script) == str(real)  # the real path's form for a real path
