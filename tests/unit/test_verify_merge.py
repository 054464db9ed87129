"""--verify: fixes that change different keywords of one call merged into one rewrite
(rnndoctor.verify.patch.merge_same_call), so the all-fixes copy and the patch hold them all.

A layer with ``recurrent_dropout=0.2`` and ``activation="relu"`` gets RD101 and RD102, each of
which alone leaves it off the cuDNN kernel; before, the two rewrites overlapped and the patch
held only one of them."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from verify_helpers import FakeRunner, facts_for, finding

from rnndoctor.rules import _fastpath as fp
from rnndoctor.verify import Job, verify
from rnndoctor.verify import patch as px
from rnndoctor.verify.result import Status
from rnndoctor.verify.summary import VerifySummary

LSTM_PARAMS = ("units", "activation", "recurrent_activation", "use_bias")

ONE_LINE = 'layers.LSTM(16, activation="relu", recurrent_dropout=0.2, return_sequences=True)'
MULTI = (
    "layers.LSTM(\n"
    "        16,\n"
    '        activation="relu",  # the paper\'s choice\n'
    "        recurrent_dropout=0.2,\n"
    "        return_sequences=True,\n"
    "    )"
)


def _script(tmp_path: Path, call: str) -> Path:
    path = tmp_path / "proj" / "train.py"
    path.parent.mkdir()
    path.write_text(f"from keras import layers\nlayer = {call}\nprint(layer)\n")
    return path


def _rewrites(script: Path, call: str, rd101: dict | None = None) -> list[px.Rewrite]:
    """RD101 (recurrent_dropout moved to dropout) and RD102 (activation removed), written by the
    rules' own rewriter."""
    rd101 = rd101 if rd101 is not None else {"dropout": 0.2}
    drop = () if "recurrent_dropout" in rd101 else ("recurrent_dropout",)
    code_101 = fp.rewrite_call(call, drop=drop, set_args=rd101, positional_names=LSTM_PARAMS)
    code_102 = fp.rewrite_call(call, drop=("activation",), positional_names=LSTM_PARAMS)
    assert code_101 and code_102
    found = [
        finding("RD101", script, 2, call, code_101, safety="unsafe"),
        finding("RD102", script, 2, call, code_102, safety="unsafe"),
    ]
    return [px.locate(f, i, script.parent) for f, i in zip(found, ("RD101", "RD102"), strict=True)]


@pytest.mark.parametrize("call", [ONE_LINE, MULTI], ids=["one-line", "multi-line"])
def test_two_fixes_of_one_calls_keywords_are_merged(tmp_path, call):
    script = _script(tmp_path, call)
    kept, dropped = px.compatible(_rewrites(script, call))
    assert dropped == {}
    assert [r.fix_id for r in kept] == ["RD101+RD102"] and kept[0].members == ("RD101", "RD102")
    new = px.apply_rewrites(script.read_text(), kept)
    compile(new, "train.py", "exec")
    assert "recurrent_dropout" not in new and "relu" not in new
    assert "dropout=0.2" in new and "return_sequences=True" in new


def test_a_multi_line_call_keeps_its_lines_and_comments_as_written(tmp_path):
    script = _script(tmp_path, MULTI)
    kept, _ = px.compatible(_rewrites(script, MULTI))
    new = px.apply_rewrites(script.read_text(), kept)
    assert new.splitlines()[1:5] == [
        "layer = layers.LSTM(",
        "        16,",
        "        return_sequences=True,",
        "        dropout=0.2,",
    ]


@pytest.mark.parametrize(
    "call",
    [
        "layers.LSTM(64, unroll=True, use_bias=False)",
        "keras.layers.GRU(64, unroll=True, use_bias=False)",
        "layers.GRU(\n        64,\n        unroll=True,\n        use_bias=False\n    )",
        "layers.LSTM(64, use_bias=False, unroll=True, name='a, b)')",
    ],
    ids=["lstm", "keras-gru", "multi-line-no-trailing-comma", "string-with-comma"],
)
def test_neighbouring_keywords_merge_whatever_the_class_name(tmp_path, call):
    """Review: a character diff gave the comma between two neighbouring keywords to both
    deletions, and the merge was refused depending on the length of the class's name."""
    script = _script(tmp_path, call)
    found = [
        finding(rule, script, 2, call, fp.rewrite_call(call, drop=(arg,)), safety="unsafe")
        for rule, arg in (("RD104", "unroll"), ("RD105", "use_bias"))
    ]
    kept, dropped = px.compatible([px.locate(f, f.rule_id, script.parent) for f in found])
    assert dropped == {} and [r.members for r in kept] == [("RD104", "RD105")]
    new = px.apply_rewrites(script.read_text(), kept)
    compile(new, "train.py", "exec")
    assert "unroll" not in new and "use_bias" not in new and "64" in new


def test_a_comment_between_the_arguments_is_kept_as_written(tmp_path):
    """Review: the character diff's two deletions took the comma that ends a comment."""
    call = (
        'layers.LSTM(\n        64,  # units=128,\n        activation="relu",\n'
        '        recurrent_activation="hard_sigmoid"\n    )'
    )
    script = _script(tmp_path, call)
    found = [
        finding(rule, script, 2, call, fp.rewrite_call(call, drop=(arg,)), safety="unsafe")
        for rule, arg in (("RD102", "activation"), ("RD103", "recurrent_activation"))
    ]
    kept, _ = px.compatible([px.locate(f, f.rule_id, script.parent) for f in found])
    new = px.apply_rewrites(script.read_text(), kept)
    # the comment as written; 64 loses its comma as the last argument, as one fix would make it
    assert "        64  # units=128,\n    )" in new and "activation" not in new
    compile(new, "train.py", "exec")


def test_two_fixes_that_set_one_keyword_differently_are_not_merged(tmp_path):
    script = _script(tmp_path, ONE_LINE)
    a, b = _rewrites(script, ONE_LINE)
    clash = fp.rewrite_call(ONE_LINE, set_args={"return_sequences": False})
    other = px.locate(finding("RD999", script, 2, ONE_LINE, clash), "RD999", script.parent)
    mine = fp.rewrite_call(ONE_LINE, set_args={"return_sequences": "no"})
    c = px.locate(finding("RD998", script, 2, ONE_LINE, mine), "RD998", script.parent)
    assert px.merge_same_call([other, c]) is None
    kept, dropped = px.compatible([a, b, other, c])
    assert [r.members for r in kept] == [("RD101", "RD102", "RD999")]
    assert dropped == {"RD998": "RD101+RD102+RD999"}


@pytest.mark.parametrize(
    "code",
    [
        'layers.GRU(16, activation="relu", recurrent_dropout=0.2, return_sequences=True)',
        'layers.LSTM(32, activation="relu", recurrent_dropout=0.2, return_sequences=True)',
        "x = 1\n" + ONE_LINE,
    ],
    ids=["callee", "positional", "statements"],
)
def test_a_fix_that_changes_more_than_keywords_is_not_merged(tmp_path, code):
    script = _script(tmp_path, ONE_LINE)
    a, _ = _rewrites(script, ONE_LINE)
    other = px.locate(finding("RD107", script, 2, ONE_LINE, code, speedup=1.2), "RD107",
                      script.parent)  # fmt: skip
    assert px.merge_same_call([a, other]) is None
    kept, dropped = px.compatible([a, other])
    assert [r.fix_id for r in kept] == ["RD107"] and dropped == {"RD101": "RD107"}


def test_the_merged_rewrite_carries_the_larger_estimate(tmp_path):
    script = _script(tmp_path, ONE_LINE)
    a, b = _rewrites(script, ONE_LINE)
    larger = finding("RD102", script, 2, ONE_LINE, b.finding.fix.code, speedup=1.4)
    b = dataclasses.replace(b, finding=larger)
    merged = px.merge_same_call([a, b])
    assert merged is not None and merged.speedup == 1.4 and merged.finding.rule_id == "RD102"


def _verify_both(tmp_path, speed):
    script = _script(tmp_path, MULTI)
    found = [r.finding for r in _rewrites(script, MULTI)]
    runner = FakeRunner(speed, 5.0)
    job = Job(script=script, out=script.parent / "report", runner=runner, budget_s=1000.0,
              run_timeout_s=60, estimate_s=5.0)  # fmt: skip
    job.out.mkdir()
    result = verify(found, facts_for(script, script.parent), job, clock=runner.clock)
    return result, {i.fix: i for i in result.items}, runner


def _each_helps(script: Path, call: int) -> float:
    text = script.read_text()
    speed = 100.0 + call % 3
    speed *= 1.5 if "recurrent_dropout" not in text else 1.0
    speed *= 1.2 if "relu" not in text else 1.0
    return speed


def _only_both_help(script: Path, call: int) -> float:
    """cuDNN: the layer takes the fused kernel only once neither argument blocks it."""
    text = script.read_text()
    fast = "recurrent_dropout" not in text and "relu" not in text
    return (100.0 + call % 3) * (3.0 if fast else 1.0)


def test_one_calls_fixes_are_measured_together_and_patched_together(tmp_path):
    result, by_fix, runner = _verify_both(tmp_path, _each_helps)
    group = by_fix["RD101+RD102"]
    assert group.rules == ["RD101", "RD102"] and group.status == Status.CONFIRMED
    assert group.measured == pytest.approx(1.8, rel=0.05)
    assert "all" not in by_fix  # the group is every fix: no second copy of the same rewrite
    assert VerifySummary.of(result).all_fixes() is not None
    assert VerifySummary.of(result).all_fixes().fix == "RD101+RD102"
    assert [out.name for _, out in runner.calls][:2] == ["RD101+RD102-1A", "RD101+RD102-1B"]
    assert by_fix["RD101"].status == by_fix["RD102"].status == Status.CONFIRMED
    assert by_fix["RD101"].in_patch and by_fix["RD102"].in_patch
    assert result.notes == []
    comments = [line for line in result.patch.splitlines() if line.startswith("# RD")]
    assert [c.split()[1] for c in comments] == ["RD101", "RD102"]
    assert result.patch.count("diff --git") == 1
    assert "-        recurrent_dropout=0.2,\n" in result.patch
    assert '-        activation="relu",  # the paper\'s choice\n' in result.patch
    assert "+        dropout=0.2,\n" in result.patch


def test_a_group_confirmed_where_neither_fix_alone_is_puts_both_in_the_patch(tmp_path):
    """Review: with only the cuDNN kernel's gain, neither fix alone was confirmed, and the patch
    was empty although the two together were measured 3x faster."""
    result, by_fix, _ = _verify_both(tmp_path, _only_both_help)
    assert by_fix["RD101+RD102"].status == Status.CONFIRMED
    assert by_fix["RD101"].status == by_fix["RD102"].status == Status.WITHIN_NOISE
    assert by_fix["RD101"].in_patch and by_fix["RD102"].in_patch
    assert "-        recurrent_dropout=0.2,\n" in result.patch
    assert '-        activation="relu",  # the paper\'s choice\n' in result.patch
    assert result.patch.count("diff --git") == 1


def test_a_group_measured_slower_keeps_its_confirmed_parts_apart(tmp_path):
    def speed(script: Path, call: int) -> float:
        text = script.read_text()
        rd101, rd102 = "recurrent_dropout" not in text, "relu" not in text
        factor = 0.5 if rd101 and rd102 else 1.5 if rd101 or rd102 else 1.0
        return (100.0 + call % 3) * factor

    result, by_fix, _ = _verify_both(tmp_path, speed)
    assert by_fix["RD101+RD102"].status == Status.SLOWER
    assert by_fix["RD101"].status == by_fix["RD102"].status == Status.CONFIRMED
    assert [by_fix[f].in_patch for f in ("RD101", "RD102")].count(True) == 1
    assert any("is confirmed but not in the patch: it overlaps" in n for n in result.notes)


def test_a_group_with_a_part_measured_slower_alone_says_so_beside_the_group(tmp_path):
    """Stop 38: a confirmed group put both fixes in the patch, silently, although one of them
    alone measured slower. The group stays in (together they may take the cuDNN kernel where
    either alone slows the layer), and a note gives both figures."""

    def speed(script: Path, call: int) -> float:
        text = script.read_text()
        rd101, rd102 = "recurrent_dropout" not in text, "relu" not in text
        factor = 3.0 if rd101 and rd102 else 0.7 if rd102 else 1.0
        return (100.0 + call % 3) * factor

    result, by_fix, _ = _verify_both(tmp_path, speed)
    assert by_fix["RD101+RD102"].status == Status.CONFIRMED
    assert by_fix["RD101"].status == Status.WITHIN_NOISE
    assert by_fix["RD102"].status == Status.SLOWER
    assert all(by_fix[f].in_patch for f in ("RD101+RD102", "RD101", "RD102"))
    within, slower = result.notes  # a part within noise alone gets its note too
    assert within.startswith("RD101 alone measured within noise, ")
    assert slower.startswith("RD102 alone measured slower, 0.71x (90% interval")
    assert "it is in the patch as part of RD101+RD102, confirmed together at 3." in slower
    assert '-        activation="relu",' in result.patch


def _three_fixes(tmp_path, unmergeable_speedup=None):
    """RD101 and RD102 (mergeable) and RD602's change of the call's units (a positional
    argument, so it merges with neither), on a GPU run (RD602 is not measured on a CPU)."""
    script = _script(tmp_path, MULTI)
    found = [r.finding for r in _rewrites(script, MULTI)]
    units = MULTI.replace("16,", "24,")
    found.append(finding("RD602", script, 2, MULTI, units, speedup=unmergeable_speedup))
    return script, found


def _run(script, found, speed):
    runner = FakeRunner(speed, 5.0)
    job = Job(script=script, out=script.parent / "report", runner=runner, budget_s=1000.0,
              run_timeout_s=60, estimate_s=5.0)  # fmt: skip
    job.out.mkdir()
    result = verify(found, facts_for(script, script.parent, gpu=True), job, clock=runner.clock)
    return result, {i.fix: i for i in result.items}


def _cudnn_or_units(script: Path, call: int) -> float:
    """Both cuDNN fixes together: 3x; the units fix: 1.1x; either cuDNN fix alone: nothing."""
    text = script.read_text()
    fast = "recurrent_dropout" not in text and "relu" not in text
    return (100.0 + call % 3) * (3.0 if fast else 1.1 if "24," in text else 1.0)


def test_a_confirmed_group_keeps_its_place_on_a_tie_with_an_unmergeable_fix(tmp_path):
    """Review: the patch put a confirmed group last, so an unmergeable fix on the same call won
    the tie (no RD1xx or RD602 finding estimates a gain) and the patch held the 1.1x fix instead
    of the group measured at 3x."""
    result, by_fix = _run(*_three_fixes(tmp_path), _cudnn_or_units)
    assert by_fix["RD101+RD102"].status == Status.CONFIRMED and by_fix["RD602"].in_patch is False
    assert by_fix["RD101+RD102"].in_patch and by_fix["RD101"].in_patch and by_fix["RD102"].in_patch
    assert "RD602 is confirmed but not in the patch: it overlaps RD101+RD102" in result.notes
    assert not any(n.startswith(("RD101 is confirmed", "RD102 is confirmed")) for n in result.notes)
    assert "+        dropout=0.2,\n" in result.patch and "24," not in result.patch


def test_a_group_left_out_of_the_all_fixes_copy_is_still_measured(tmp_path):
    """Review: a group that lost the all-fixes copy's overlap to a larger estimate was never
    measured, and the patch merged its parts anyway."""
    result, by_fix = _run(*_three_fixes(tmp_path, unmergeable_speedup=2.0), _cudnn_or_units)
    assert "all" not in by_fix or by_fix["all"].rules == ["RD602"]
    assert by_fix["RD101+RD102"].pairs >= 2 and by_fix["RD101+RD102"].status == Status.CONFIRMED


def test_parts_confirmed_alone_are_not_merged_unless_their_group_was_confirmed(tmp_path):
    """Review: a group whose copy did not decide (here it fails) had its parts merged in the
    patch anyway, a combination no confirmed copy held."""

    def speed(script: Path, call: int) -> float | None:
        text = script.read_text()
        rd101, rd102 = "recurrent_dropout" not in text, "relu" not in text
        if rd101 and rd102:
            return None  # the merged copy raises
        return (100.0 + call % 3) * (1.5 if rd101 or rd102 else 1.0)

    result, by_fix = _verify_both(tmp_path, speed)[:2]
    assert by_fix["RD101+RD102"].status == Status.FAILED
    assert by_fix["RD101"].status == by_fix["RD102"].status == Status.CONFIRMED
    assert [by_fix[f].in_patch for f in ("RD101", "RD102")].count(True) == 1
    assert result.patch.count("# RD") == 1


# -- a fix that appends a method call to an expression another fix changes --------------------
CHAIN = "tf.data.Dataset.from_tensor_slices((x, y)).shuffle(1024).batch(32)"


def _chain_script(tmp_path: Path) -> Path:
    path = tmp_path / "proj" / "train.py"
    path.parent.mkdir()
    path.write_text(
        "import tensorflow as tf\nx = y = [[0.0]] * 256\n"
        f"train_ds = {CHAIN}  # the pipeline\nprint(train_ds)\n"
    )
    return path


def _chain_fixes(script: Path) -> list:
    """RD301's batch 32 -> 128 and RD202's appended prefetch, as the rules write them (each
    replaces the batch op's call source: the whole chain)."""
    return [
        finding("RD301", script, 3, CHAIN, CHAIN.replace("batch(32)", "batch(128)"),
                safety="unsafe", speedup=2.0),
        finding("RD202", script, 3, CHAIN, f"{CHAIN}.prefetch(tf.data.AUTOTUNE)", speedup=1.3),
    ]  # fmt: skip


def test_a_fix_appending_to_a_chain_another_fix_changes_is_merged(tmp_path):
    """A new user's trial: RD301 and RD202 on one tf.data line, and the all-fixes copy held only
    RD301 ("RD202 is not in the all-fixes copy: it overlaps RD301, estimated larger")."""
    script = _chain_script(tmp_path)
    rewrites = [px.locate(f, f.rule_id, script.parent) for f in _chain_fixes(script)]
    kept, dropped = px.compatible(rewrites)
    assert dropped == {} and [r.members for r in kept] == [("RD301", "RD202")]
    assert kept[0].fix_id == "RD301+RD202" and kept[0].speedup == 2.0
    new = px.apply_rewrites(script.read_text(), kept)
    assert (
        "train_ds = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(1024).batch(128)"
        ".prefetch(tf.data.AUTOTUNE)  # the pipeline\n"
    ) in new
    compile(new, "train.py", "exec")


def test_two_appends_or_two_changes_inside_are_not_merged(tmp_path):
    script = _chain_script(tmp_path)
    rd301, rd202 = (px.locate(f, f.rule_id, script.parent) for f in _chain_fixes(script))
    cache = finding("RD205", script, 3, CHAIN, f"{CHAIN}.cache()", speedup=1.1)
    rd205 = px.locate(cache, "RD205", script.parent)
    assert px.merge_independent([rd202, rd205]) is None  # both append at one place: order?
    shuffle = finding("RD999", script, 3, CHAIN, CHAIN.replace("1024", "4096"), speedup=1.1)
    inside = px.locate(shuffle, "RD999", script.parent)
    assert px.merge_independent([rd301, inside]) is None  # neither only appends
    assert px.merge_independent([rd301, inside, rd202]) is None  # two change inside
    # a change inside the last call's parentheses and an append after them: apart
    drop = finding("RD998", script, 3, CHAIN, CHAIN.replace("batch(32)", "batch(32, True)"))
    merged = px.merge_independent([px.locate(drop, "RD998", script.parent), rd202])
    assert merged is not None and merged.replacement.endswith(
        "batch(32, True).prefetch(tf.data.AUTOTUNE)"
    )
    kept, dropped = px.compatible([rd301, rd202, rd205])
    assert [r.members for r in kept] == [("RD301", "RD202")] and dropped == {"RD205": "RD301+RD202"}


def test_verify_measures_the_merged_chain_and_patches_both(tmp_path):
    script = _chain_script(tmp_path)

    def speed(path: Path, call: int) -> float:
        text = path.read_text()
        return (
            (100.0 + call % 3)
            * (2.0 if "128" in text else 1.0)
            * (1.2 if "prefetch" in text else 1.0)
        )

    runner = FakeRunner(speed, 5.0)
    job = Job(script=script, out=script.parent / "report", runner=runner, budget_s=1000.0,
              run_timeout_s=60, estimate_s=5.0)  # fmt: skip
    job.out.mkdir()
    result = verify(_chain_fixes(script), facts_for(script, script.parent), job,
                    clock=runner.clock)  # fmt: skip
    by_fix = {i.fix: i for i in result.items}
    assert by_fix["RD301+RD202"].status == Status.CONFIRMED
    assert not any("is not in the all-fixes copy" in n for n in result.notes), result.notes
    assert all(by_fix[f].in_patch for f in ("RD301", "RD202", "RD301+RD202"))
    assert (
        "+train_ds = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(1024).batch(128)"
        ".prefetch(tf.data.AUTOTUNE)  # the pipeline\n" in result.patch
    )


# -- changes to different calls of one method chain -----------------------------------------
MAPPED = "tf.data.Dataset.from_tensor_slices((x, y)).map(augment).batch(64)"
MAP_CALL = "tf.data.Dataset.from_tensor_slices((x, y)).map(augment)"


def _mapped_script(tmp_path: Path) -> Path:
    path = tmp_path / "proj" / "train.py"
    path.parent.mkdir()
    path.write_text(
        f"import tensorflow as tf\nx = y = [[0.0]] * 256\naugment = abs\nds = {MAPPED}\nprint(ds)\n"
    )
    return path


def test_fixes_of_different_calls_of_one_chain_are_merged_a_nested_one_included(tmp_path):
    """A new user's trial: RD203's parallel map (its fix replaces the chain up to the map call)
    was left out of the all-fixes copy beside RD301's batch and RD202's prefetch, which replace
    the whole chain ("RD203 is not in the all-fixes copy: it overlaps RD301+RD202")."""
    script = _mapped_script(tmp_path)
    parallel = MAP_CALL.replace("map(augment)", "map(augment, num_parallel_calls=tf.data.AUTOTUNE)")
    fixes = [
        finding("RD301", script, 4, MAPPED, MAPPED.replace("batch(64)", "batch(256)"),
                safety="unsafe", speedup=2.9),
        finding("RD203", script, 4, MAP_CALL, parallel, safety="unsafe", speedup=1.4),
        finding("RD202", script, 4, MAPPED, f"{MAPPED}.prefetch(tf.data.AUTOTUNE)"),
    ]  # fmt: skip
    rewrites = [px.locate(f, f.rule_id, script.parent) for f in fixes]
    kept, dropped = px.compatible(rewrites)
    assert dropped == {} and [r.members for r in kept] == [("RD301", "RD203", "RD202")]
    new = px.apply_rewrites(script.read_text(), kept)
    assert (
        "ds = tf.data.Dataset.from_tensor_slices((x, y)).map(augment, num_parallel_calls="
        "tf.data.AUTOTUNE).batch(256).prefetch(tf.data.AUTOTUNE)\n"
    ) in new
    compile(new, "train.py", "exec")
    assert [g.fix_id for g in px.merge_groups(rewrites)] == ["RD301+RD203+RD202"]


def test_a_chain_merge_needs_each_change_in_its_own_calls_arguments(tmp_path):
    script = _chain_script(tmp_path)
    rd301, rd202 = (px.locate(f, f.rule_id, script.parent) for f in _chain_fixes(script))

    def fix(rule_id: str, code: str):
        return px.locate(finding(rule_id, script, 3, CHAIN, code, speedup=1.1), rule_id,
                         script.parent)  # fmt: skip

    shuffle = fix("RD999", CHAIN.replace("1024", "4096"))
    merged = px.merge_chain([rd301, shuffle])
    assert merged is not None and merged.replacement == CHAIN.replace("1024", "4096").replace(
        "batch(32)", "batch(128)"
    )
    also_batch = fix("RD998", CHAIN.replace("batch(32)", "batch(32, drop_remainder=True)"))
    both = px.merge_chain([rd301, also_batch])  # one call, two of its arguments
    assert both.replacement == CHAIN.replace("batch(32)", "batch(128, drop_remainder=True)")
    other_size = fix("RD995", CHAIN.replace("batch(32)", "batch(64)"))
    assert px.merge_chain([rd301, other_size]) is None  # one argument, two values
    callee = fix("RD997", CHAIN.replace(".shuffle(", ".shuffled("))
    assert px.merge_chain([rd301, callee]) is None  # a callee is no call's argument
    nested = fix("RD996", CHAIN.replace("((x, y))", "((x, y[::-1]))"))
    assert px.merge_chain([rd301, nested]) is not None  # a literal tuple, not a call
    cache = fix("RD205", f"{CHAIN}.cache()")
    assert px.merge_chain([rd202, cache]) is None  # two appends at one place


def test_a_change_inside_a_call_nested_in_the_arguments_is_not_merged(tmp_path):
    path = tmp_path / "proj" / "train.py"
    path.parent.mkdir()
    chain = "keras.layers.Bidirectional(keras.layers.GRU(8, recurrent_dropout=0.2))"
    path.write_text(f"import keras\nlayer = {chain}\n")
    outer = px.locate(finding("RD999", path, 2, chain, chain.replace("Bidirectional(",
                      "Bidirectional(merge_mode='sum', layer=")), "RD999", path.parent)  # fmt: skip
    inner = px.locate(finding("RD101", path, 2, chain, chain.replace("recurrent_dropout=0.2",
                      "dropout=0.2")), "RD101", path.parent)  # fmt: skip
    assert px.merge_chain([outer, inner]) is None  # one call, GRU nested in its arguments


def test_a_copy_of_several_fixes_shows_each_parts_estimate_not_their_product():
    """A new user's trial: the table's estimate column read "none" for RD301+RD202 although
    RD301 estimated 2.9x; the product of the parts would overstate it (their effects overlap)."""
    from rnndoctor.reports.verified import estimate_cell
    from rnndoctor.verify.result import Verified
    from rnndoctor.verify.session import parts_estimate

    parts = [
        Verified(fix="RD301", rules=["RD301"], title="batch", estimate=2.82),
        Verified(fix="RD203", rules=["RD203"], title="map"),
        Verified(fix="RD202", rules=["RD202"], title="prefetch"),
    ]
    text = parts_estimate(parts)
    assert text == "RD301 2.82x; RD203, RD202 none; not combined"
    group = Verified(fix="RD301+RD203+RD202", rules=["RD301", "RD203", "RD202"], title="one call",
                     estimate_text=text)  # fmt: skip
    assert estimate_cell(group) == text
    assert parts_estimate(parts[1:]) is None
    assert estimate_cell(parts[0]) == "2.82x" and estimate_cell(parts[1]) == "none"


def test_two_arguments_of_one_call_are_merged_the_batch_size_and_padded_shapes(tmp_path):
    """RD301's ``padded_batch(64, ...)`` -> ``(256, ...)`` and RD502's ``padded_shapes=None``
    in the same call, confirmed 1.86x alone and left out of the patch for the overlap."""
    path = tmp_path / "proj" / "train.py"
    path.parent.mkdir()
    call = "ds.padded_batch(64, padded_shapes=([200], []))"
    path.write_text(f"ds = None\nds = {call}\n")
    rd301 = px.locate(finding("RD301", path, 2, call, call.replace("64", "256"), speedup=2.1),
                      "RD301", path.parent)  # fmt: skip
    rd502 = px.locate(finding("RD502", path, 2, call, "ds.padded_batch(64, padded_shapes=None)",
                              speedup=1.6), "RD502", path.parent)  # fmt: skip
    kept, dropped = px.compatible([rd301, rd502])
    assert dropped == {} and kept[0].fix_id == "RD301+RD502"
    assert px.apply_rewrites(path.read_text(), kept).endswith(
        "ds = ds.padded_batch(256, padded_shapes=None)\n"
    )
