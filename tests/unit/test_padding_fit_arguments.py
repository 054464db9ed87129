"""RD501's and RD502's fixes keep every argument of the user's ``fit``: ``sample_weight`` rides
in the bucketed / padded dataset (``fit`` raises on it with a dataset, and dropping it would
change what the model learns), and an argument the code cannot carry exactly makes the fix
display-only with a comment naming it. Placeholder names are marked as such. Pure: rules on
facts, no TensorFlow (the generated code was run on Keras by hand: see the report of the change).
"""

from __future__ import annotations

import ast

import pytest
from test_sequence_rules import _facts, _findings, _fit_on_arrays, _with_lengths

from rnndoctor.facts import Facts

LENGTHS = [4, 5, 6, 7] * 8 + [30, 31, 40, 60] * 8
# the fresh user's call (scripts/lstm_weights/train_weights.py)
WEIGHTED = (
    "model.fit(x_tr, y_tr, sample_weight=w_tr, batch_size=32, epochs=2,\n"
    "          validation_data=(x_va, y_va), shuffle=True, callbacks=[early], verbose=2)"
)


def _on(call: str, prefix: str = "", kind: str | None = "numpy") -> Facts:
    facts = _fit_on_arrays(_with_lengths(_facts("RD110-compliant"), LENGTHS, 64, 16), call, prefix)
    facts.fit.data_kind = kind
    return facts


def _fix(facts: Facts, rule_id: str):
    (finding,) = _findings(facts, rule_id)
    ast.parse(finding.fix.code)  # the code parses, comments and all
    return finding.fix


def _call(code: str) -> ast.Call:
    last = ast.parse(code).body[-1]
    value = last.value if isinstance(last, (ast.Assign, ast.Expr)) else None
    assert isinstance(value, ast.Call), code
    return value


def _comments(code: str) -> str:
    """The code's comment lines, joined into one text (they are wrapped)."""
    lines = [line.strip()[2:] for line in code.splitlines() if line.strip().startswith("#")]
    return " ".join(lines)


def test_rd501_rewrite_carries_sample_weight_and_keeps_validation_data():
    fix = _fix(_on(WEIGHTED, prefix="history = "), "RD501")
    assert fix.safety == "unsafe" and fix.before == "history = " + WEIGHTED
    assert "def rd501_bucketed(x, y, w, shuffle):" in fix.code
    assert "tf.data.Dataset.from_tensor_slices((x, y, w))" in fix.code
    assert "def rd501_unpad(x, y, w):" in fix.code
    assert "return tf.boolean_mask(x, valid), y, w" in fix.code  # a weight per sample, as it is
    assert "lambda x, y, w: tf.shape(x)[0]" in fix.code  # the bucket length reads x only
    call = _call(fix.code)
    assert ast.unparse(call.args[0]) == "rd501_bucketed(x_tr, y_tr, w_tr, True)"
    keywords = {k.arg: ast.unparse(k.value) for k in call.keywords}
    assert keywords == {
        "epochs": "2",
        "validation_data": "(x_va, y_va)",  # the user's own, as it is
        "callbacks": "[early]",
        "verbose": "2",
        "validation_batch_size": "32",  # Keras validated in batches of batch_size
    }


def test_rd501_rewrite_splits_the_weights_with_the_arrays_as_keras_does():
    call = "model.fit(x, y, sample_weight=w, validation_split=0.2, epochs=3)"
    fix = _fix(_on(call), "RD501")
    new = _call(fix.code)
    assert ast.unparse(new.args[0]) == (
        "rd501_bucketed(x[:rd501_split], y[:rd501_split], w[:rd501_split], True)"
    )
    keywords = {k.arg: ast.unparse(k.value) for k in new.keywords}
    assert keywords == {
        "epochs": "3",
        "validation_data": (
            "rd501_bucketed(x[rd501_split:], y[rd501_split:], w[rd501_split:], False)"
        ),
    }


def test_rd501_rewrite_drops_a_validation_split_keras_ignores_beside_validation_data():
    call = "model.fit(x, y, validation_split=0.1, validation_data=(xv, yv))"
    fix = _fix(_on(call), "RD501")
    new = _call(fix.code)
    assert ast.unparse(new.args[0]) == "rd501_bucketed(x, y, True)"  # all the arrays train
    assert {k.arg: ast.unparse(k.value) for k in new.keywords} == {"validation_data": "(xv, yv)"}
    assert "rd501_split" not in fix.code


def test_per_step_weights_lose_the_padded_steps_with_per_step_targets():
    facts = _on("model.fit(x, y, sample_weight=w)")
    facts.sequences.inputs[0].targets_per_step = True
    fix = _fix(facts, "RD501")
    assert "return tf.boolean_mask(x, valid), tf.boolean_mask(y, valid), w" in fix.code
    assert "if w.shape.rank and w.shape[0] == valid.shape[0]:" in fix.code
    assert "w = tf.boolean_mask(w, valid)" in fix.code


def test_rd502_pads_the_weights_with_their_sequences():
    fix = _fix(_on(WEIGHTED), "RD502")
    assert fix.safety == "unsafe"
    assert "tf.data.Dataset.from_tensor_slices((x_tr, y_tr, w_tr))" in fix.code
    assert "def unpad(x, y, w):" in fix.code
    said = _comments(fix.code)
    assert "leave out y, batch_size, sample_weight and shuffle" in said
    assert "sample_weight=w_tr rides in the dataset" in said
    assert "add validation_batch_size=32" in said


def test_rd501_sketch_carries_the_weights_where_the_call_is_not_rewritten():
    """An unmasked input keeps the sketch: its pipeline carries the weights all the same."""
    facts = _on("model.fit(x_tr, y_tr, sample_weight=w_tr)")
    facts.sequences.inputs[0].mask_used = False
    fix = _fix(facts, "RD501")
    assert fix.before is None and fix.safety == "unsafe"
    assert "tf.data.Dataset.from_tensor_slices((x_tr, y_tr, w_tr))" in fix.code
    assert "def length(x, y, w):" in fix.code and "def unpad(x, y, w):" in fix.code


@pytest.mark.parametrize("rule_id", ["RD501", "RD502"])
@pytest.mark.parametrize(
    ("call", "named"),
    [
        ("model.fit(x, y, sample_weight=w, class_weight=cw)", "class_weight=cw: keep it in fit"),
        ("model.fit(x, y, steps_per_epoch=10)", "steps_per_epoch=10 is not carried"),
        ("model.fit(x, y, **extra)", "fit also gets **extra, not read here"),
    ],
)
def test_an_argument_not_carried_makes_the_fix_display_only_and_is_named(rule_id, call, named):
    fix = _fix(_on(call), rule_id)
    assert fix.safety == "display-only" and fix.before is None
    said = _comments(fix.code)
    assert named in said
    assert "keep every other argument as it is, but for those below" in said


def test_rd502_says_how_to_carry_validation_split():
    fix = _fix(_on("model.fit(x, y, sample_weight=w, validation_split=0.2)"), "RD502")
    assert fix.safety == "display-only"
    said = _comments(fix.code)
    assert "validation_split=0.2 is not carried" in said
    assert "n = int(len(x) * (1 - 0.2))" in said
    assert "from x[:n], y[:n], w[:n]" in said and "from x[n:], y[n:], w[n:]" in said


@pytest.mark.parametrize("rule_id", ["RD501", "RD502"])
def test_a_generator_fed_fit_gets_a_sketch_with_its_placeholders_marked(rule_id):
    facts = _on("model.fit(batch_gen(32), steps_per_epoch=100, epochs=2)", kind="python_generator")
    fix = _fix(facts, rule_id)
    assert fix.safety == "display-only"
    assert "tf.data.Dataset.from_tensor_slices((x, y))" in fix.code
    said = _comments(fix.code)
    assert "placeholders, not names from your script: x (your padded input array) and y" in said
    assert "fit takes batch_gen(32), a python_generator" in said
    head, _ = fix.code.split("dataset = (", 1)
    assert "placeholders" in _comments(head)  # said before the code that uses them


@pytest.mark.parametrize("rule_id", ["RD501", "RD502"])
def test_an_expression_for_x_is_a_marked_placeholder(rule_id):
    fix = _fix(_on("model.fit(data[0], labels)"), rule_id)
    assert fix.safety == "display-only"
    assert "tf.data.Dataset.from_tensor_slices((x, labels))" in fix.code
    assert "placeholders, not names from your script: x (your padded input array)" in (
        _comments(fix.code)
    )


def test_rd502_keeps_shuffle_false():
    fix = _fix(_on("model.fit(x_tr, y_tr, shuffle=False)"), "RD502")
    assert ".shuffle(" not in fix.code and fix.safety == "unsafe"
    assert ".shuffle(len(x_tr))" in _fix(_on("model.fit(x_tr, y_tr)"), "RD502").code


def test_rd502_on_a_tf_data_pipeline_pads_per_batch_in_place():
    fix = _fix(_on("model.fit(train_ds, epochs=2)", kind="tf.data"), "RD502")
    assert fix.safety == "display-only"
    assert "from_tensor_slices" not in fix.code  # no arrays to slice: the user's pipeline
    assert "dataset.map(unpad, num_parallel_calls=tf.data.AUTOTUNE)" in fix.code


def _padded_batch_on(call: str) -> Facts:
    """A ``tf.data`` pipeline whose last op is ``padded_batch`` written as ``call`` (line 17)."""
    from rnndoctor.facts import DataFacts, DataNode, SourceLocation

    facts = _on("model.fit(ds, epochs=2)", kind="tf.data")
    where = SourceLocation("/work/train.py", 17, code=f"ds = {call}", call_source=call)
    facts.data = DataFacts(kind="tf.data", nodes=[
        DataNode(name="PaddedBatchDatasetV2/_1", op="PaddedBatchDatasetV2", kind="padded_batch",
                 location=where),
    ], batch_kind="padded_batch")  # fmt: skip
    facts.sequences.inputs[0].padding_function = "padded_batch"  # the call pads the input
    return facts


def test_rd502_drops_fixed_padded_shapes_in_the_pipelines_padded_batch():
    """A new user's trial: ``padded_batch(64, padded_shapes=([200], []))`` padded every batch to
    200, and RD502's sketch said to use padded_batch without saying to drop the shapes."""
    fix = _fix(_padded_batch_on("ds.padded_batch(64, padded_shapes=([200], []))"), "RD502")
    assert fix.code == "ds.padded_batch(64, padded_shapes=None)" and fix.safety == "unsafe"
    assert fix.before == "ds.padded_batch(64, padded_shapes=([200], []))"
    assert fix.location.line == 17 and "Input must take any length" in fix.title
    positional = _fix(_padded_batch_on("ds.padded_batch(64, ([200], []), (0, 0.0))"), "RD502")
    assert positional.code == "ds.padded_batch(64, None, (0, 0.0))"  # padding_values kept
    named = _fix(_padded_batch_on("ds.padded_batch(64, padded_shapes=SHAPES)"), "RD502")
    assert named.safety == "display-only" and named.before is None  # a name: the sketch
    # a review: no shapes to drop, or elements pad_sequences padded before: the sketch
    per_batch = _fix(_padded_batch_on("ds.padded_batch(64, padded_shapes=None)"), "RD502")
    assert per_batch.before is None and "map(unpad" in per_batch.code
    padded_before = _padded_batch_on("ds.padded_batch(64, padded_shapes=([200], []))")
    padded_before.sequences.inputs[0].padding_function = "pad_sequences"
    assert _fix(padded_before, "RD502").before is None
