"""--verify: a fix's rewrite located and applied to a copy (rnndoctor.verify.patch)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from verify_helpers import finding, tree_hashes

from rnndoctor.verify import patch as px

SCRIPT = """import keras
from keras import layers

def build():
    model = keras.Sequential(
        [
            layers.LSTM(
                16,
                recurrent_dropout=0.2,
            ),
            layers.Dense(1),
        ]
    )
    return model

ds = make().map(f).batch(8)
model = build()
model.fit(x, y, batch_size=8, epochs=2)
"""
MULTI = "layers.LSTM(\n                16,\n                recurrent_dropout=0.2,\n            )"


@pytest.fixture
def script(tmp_path: Path) -> Path:
    path = tmp_path / "proj" / "train.py"
    path.parent.mkdir()
    path.write_text(SCRIPT)
    return path


def _apply(rewrite: px.Rewrite) -> str:
    return px.apply_rewrites(rewrite.file.read_text(), [rewrite])


def test_a_multi_line_call_is_replaced_where_the_location_says(script):
    f = finding("RD101", script, 7, MULTI, "layers.LSTM(16, dropout=0.2)", safety="unsafe")
    rewrite = px.locate(f, "RD101", script.parent)
    assert (rewrite.first_line, rewrite.last_line) == (7, 10)
    new = _apply(rewrite)
    assert "            layers.LSTM(16, dropout=0.2),\n            layers.Dense(1)," in new
    assert "recurrent_dropout" not in new
    compile(new, "train.py", "exec")


def test_the_later_lines_of_a_multi_line_fix_get_the_first_lines_indentation(script):
    code = "layers.LSTM(\n    16,\n    dropout=0.2,\n)"
    f = finding("RD101", script, 8, MULTI, code)  # the location inside the call still matches
    new = _apply(px.locate(f, "RD101", script.parent))
    assert "            layers.LSTM(\n                16,\n                dropout=0.2,\n" in new
    assert "            ),\n            layers.Dense(1)," in new
    compile(new, "train.py", "exec")


def test_a_change_spliced_into_an_indented_call_keeps_its_continuation_lines(tmp_path):
    """A fresh user's fixes.patch: RD101 removed ``recurrent_dropout`` from the first line of
    an LSTM call inside a list at indent 4, and the kept continuation line moved from 16 to 20
    spaces: the rule splices into the call as the file has it, so its later lines are already
    where they belong."""
    path = tmp_path / "t.py"
    path.write_text(
        "model = keras.Sequential([\n"
        "    layers.LSTM(32, recurrent_dropout=0.25, dropout=0.1,\n"
        '                kernel_regularizer=reg, name="enc"),\n'
        "])\n"
    )
    before = (
        "layers.LSTM(32, recurrent_dropout=0.25, dropout=0.1,\n"
        '                kernel_regularizer=reg, name="enc")'
    )
    code = 'layers.LSTM(32, dropout=0.1,\n                kernel_regularizer=reg, name="enc")'
    f = finding("RD101", path, 2, before, code)
    new = _apply(px.locate(f, "RD101", tmp_path))
    assert new == (
        "model = keras.Sequential([\n"
        "    layers.LSTM(32, dropout=0.1,\n"
        '                kernel_regularizer=reg, name="enc"),\n'
        "])\n"
    )
    compile(new, "t.py", "exec")


def test_a_literal_changed_on_the_only_continuation_line_stays_where_it_was(tmp_path):
    """RD301 rewriting the batch a caller passes (``train(model, x, y,\n 8, epochs=2)``): its
    one continuation line is the changed one, so no line of the original was kept as written,
    and the line was indented once more (14 spaces for 10) in the first patch."""
    path = tmp_path / "t.py"
    path.write_text("def main():\n    train(model, x, y,\n          8, epochs=2)\n")
    before = "train(model, x, y,\n          8, epochs=2)"
    code = "train(model, x, y,\n          32, epochs=2)"
    new = _apply(px.locate(finding("RD301", path, 2, before, code), "RD301", tmp_path))
    assert new == "def main():\n    train(model, x, y,\n          32, epochs=2)\n"
    # new statements of as many lines and the same leading whitespace are still indented
    path.write_text("def main():\n    model.fit(x, y,\n    batch_size=8)\n")
    before = "model.fit(x, y,\n    batch_size=8)"
    code = "with strategy.scope():\n    model.fit(x, y, batch_size=32)"
    new = _apply(px.locate(finding("RD301", path, 2, before, code), "RD301", tmp_path))
    assert new == (
        "def main():\n    with strategy.scope():\n        model.fit(x, y, batch_size=32)\n"
    )


def test_new_statements_before_the_users_multi_line_fit_inside_a_function(tmp_path):
    """RD501's fix: new statements, then the user's Black-style ``fit`` call with its data
    moved, its other continuation lines as the file has them. A review found the first version
    of the fix above left the new statements at column 0 inside ``main`` (SyntaxError)."""
    path = tmp_path / "t.py"
    call = "history = model.fit(\n        x,\n        y,\n        epochs=10,\n    )"
    path.write_text(f"def main():\n    x, y = load()\n    {call}\n    return history\n")
    code = (
        "def rd501_unpad(x, y):\n    return x, y\n\n"
        "history = model.fit(\n        rd501_bucketed(x, y),\n        epochs=10,\n    )"
    )
    new = _apply(px.locate(finding("RD501", path, 3, call, code), "RD501", tmp_path))
    assert new == (
        "def main():\n    x, y = load()\n"
        "    def rd501_unpad(x, y):\n        return x, y\n\n"
        "    history = model.fit(\n        rd501_bucketed(x, y),\n        epochs=10,\n    )\n"
        "    return history\n"
    )
    compile(new, "t.py", "exec")


def test_a_statement_fix_indents_each_line_inside_a_function(tmp_path):
    path = tmp_path / "t.py"
    path.write_text("def step(x):\n    y = x + 1\n    return y\n")
    f = finding("RD405", path, 2, "y = x + 1", "# shapes vary\ny = x + 1")
    new = _apply(px.locate(f, "RD405", tmp_path))
    assert new == "def step(x):\n    # shapes vary\n    y = x + 1\n    return y\n"


def test_a_trailing_comment_is_dropped_when_code_follows_on_the_line(script):
    f = finding("RD205", script, 16, "make().map(f)", "make().map(f).cache()  # then batch")
    new = _apply(px.locate(f, "RD205", script.parent))
    assert "ds = make().map(f).cache().batch(8)\n" in new


def test_a_trailing_comment_is_kept_at_the_end_of_a_line(script):
    line = "model.fit(x, y, batch_size=8, epochs=2)"
    f = finding("RD301", script, 18, line, "model.fit(x, y, batch_size=32, epochs=2)  # x4 lr")
    assert _apply(px.locate(f, "RD301", script.parent)).endswith("epochs=2)  # x4 lr\n")


def test_before_not_at_the_location_is_not_verifiable(script):
    f = finding("RD301", script, 3, "model.fit(x, y, batch_size=8, epochs=2)", "model.fit(x, y)")
    with pytest.raises(px.NotVerifiable, match=r"'before' text is not at .*train.py:3"):
        px.locate(f, "RD301", script.parent)
    g = finding("RD301", script, 18, "model.fit(x, y, batch_size=64)", "model.fit(x, y)")
    with pytest.raises(px.NotVerifiable, match="not at"):
        px.locate(g, "RD301", script.parent)


@pytest.mark.parametrize(
    ("safety", "before", "reason"),
    [
        ("display-only", "model = build()", "display-only fix"),
        ("safe", None, "not a source rewrite"),
    ],
)
def test_fixes_that_are_not_source_rewrites_are_not_verifiable(script, safety, before, reason):
    f = finding("RD201", script, 17, before, "model = build2()", safety=safety)
    with pytest.raises(px.NotVerifiable, match=reason):
        px.locate(f, "RD201", script.parent)


def test_a_rewrite_outside_the_scripts_folder_is_not_verifiable(script, tmp_path):
    other = tmp_path / "lib.py"
    other.write_text("x = 1\n")
    with pytest.raises(px.NotVerifiable, match="outside the script's folder"):
        px.locate(finding("RD101", other, 1, "x = 1", "x = 2"), "RD101", script.parent)


def test_overlapping_fixes_are_incompatible_and_the_larger_estimate_wins(script):
    fit = "model.fit(x, y, batch_size=8, epochs=2)"
    a = px.locate(finding("RD403", script, 18, fit, "model.fit(x, y)", speedup=1.3), "RD403",
                  script.parent)  # fmt: skip
    b = px.locate(finding("RD301", script, 18, "batch_size=8", "batch_size=32", speedup=2.4),
                  "RD301", script.parent)  # fmt: skip
    c = px.locate(finding("RD101", script, 7, MULTI, "layers.LSTM(16)"), "RD101", script.parent)
    kept, dropped = px.compatible([a, b, c])
    assert [r.fix_id for r in kept] == ["RD301", "RD101"]
    assert dropped == {"RD403": "RD301"}
    with pytest.raises(ValueError, match="overlap"):
        px.apply_rewrites(SCRIPT, [a, b])


def test_fix_ids_number_a_rules_later_findings(script):
    fs = [finding(r, script, 1, "x", "y") for r in ("RD101", "RD301", "RD101")]
    assert px.fix_ids(fs) == ["RD101", "RD301", "RD101-2"]


def test_the_copy_mirrors_the_folder_and_leaves_the_users_tree_alone(script, tmp_path):
    root = script.parent
    (root / "helpers.py").write_text("VALUE = 1\n")
    (root / "pkg").mkdir()
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "model.py").write_text("UNITS = 16\n")
    (root / "data.txt").write_text("abc")
    out = root / "report"
    out.mkdir()
    before = tree_hashes(root, skip=out)
    r1 = px.locate(finding("RD101", script, 7, MULTI, "layers.LSTM(16)"), "RD101", root)
    r2 = px.locate(finding("RD602", root / "pkg" / "model.py", 1, "UNITS = 16", "UNITS = 32"),
                   "RD602", root)  # fmt: skip
    copy = px.build_copy(out / "verify" / "all", script, tmp_path, [r1, r2], [out])
    assert copy == out / "verify" / "all" / "proj" / "train.py"
    assert "layers.LSTM(16)" in copy.read_text() and not copy.is_symlink()
    folder = copy.parent
    assert (folder / "helpers.py").is_symlink() and (folder / "data.txt").read_text() == "abc"
    assert not (folder / "pkg").is_symlink()
    assert (folder / "pkg" / "model.py").read_text() == "UNITS = 32\n"
    assert (folder / "pkg" / "__init__.py").is_symlink()
    assert not (folder / "report").exists()  # the report folder is not mirrored into itself
    assert tree_hashes(root, skip=out) == before
    assert os.path.realpath(folder / "helpers.py") == str((root / "helpers.py").resolve())


def test_an_unpatched_script_is_copied_not_linked(script, tmp_path):
    (script.parent / "helpers.py").write_text("VALUE = 1\n")
    r = px.locate(finding("RD1", script.parent / "helpers.py", 1, "VALUE = 1", "VALUE = 2"),
                  "RD1", script.parent)  # fmt: skip
    copy = px.build_copy(tmp_path / "v", script, tmp_path, [r], [])
    assert not copy.is_symlink() and copy.read_text() == SCRIPT
    assert (copy.parent / "helpers.py").read_text() == "VALUE = 2\n"


def test_a_rewrite_that_does_not_compile_is_not_verifiable(script, tmp_path):
    f = finding("RD301", script, 18, "model.fit(x, y, batch_size=8, epochs=2)", "model.fit(x,")
    r = px.locate(f, "RD301", script.parent)
    with pytest.raises(px.NotVerifiable, match="does not compile"):
        px.build_copy(tmp_path / "v", script, tmp_path, [r], [])
