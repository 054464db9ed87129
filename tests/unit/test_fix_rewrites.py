"""Fixes you can paste (issue 12): lossless rewrites at the call they change, semantic safety,
the float64 rule and the epoch-weighted input cost. Pure: rules on facts, no TensorFlow.

The property test runs every rule on the saved fixtures (``tests/data``) and on facts built here
with realistic call sources, and checks each rewrite: the code parses, and equals the user's
call except for the keywords (or the appended method) the rule means to change.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
from test_rules_input_batch import (
    facts,
    loc,
    map_pipeline,
    node,
    pipeline,
    run,
    with_batch_probe,
    with_spe,
)

from rnndoctor import rewrite as rw
from rnndoctor.engine import evaluate
from rnndoctor.facts import DataFacts, Facts, FitConfig, RNNLayer, SourceLocation
from rnndoctor.findings import Severity

DATA = Path(__file__).parents[1] / "data"

# What each rule's rewrite may change: keywords by name, positional arguments as "arg<i>", a
# method appended to the call as ".<name>", the callable's name as "func".
INTENDED = {
    "RD101": {"dropout", "recurrent_dropout"},
    "RD102": {"activation"},
    "RD103": {"recurrent_activation"},
    "RD104": {"unroll"},
    "RD105": {"use_bias"},
    "RD106": {"reset_after"},
    "RD107": {"func", "arg0", "cell"},  # RNN(LSTMCell(n), ...) -> LSTM(n, ...)
    "RD108": {"func"},
    "RD109": {"use_cudnn"},
    "RD110": {"padding"},
    "RD113": {"jit_compile"},
    "RD202": {".prefetch"},
    "RD203": {"num_parallel_calls"},
    "RD205": {".cache"},
    "RD207": {".astype"},
    # "default": an argparse option's default (fit(..., batch_size=args.batch_size))
    "RD301": {"batch_size", "arg0", "bucket_batch_sizes", "arg2", "default"},
    "RD401": {"run_eagerly", "arg0"},
    "RD403": {"steps_per_execution"},
}
# Rewrites of a statement, not of one call: a decorator added above a ``def`` line.
STATEMENT_REWRITES = {"RD402", "RD405"}
# Rewrites whose code defines what the call needs above it: the last statement is the call.
BLOCK_REWRITES = {
    "RD501": {"arg0", "arg1", "x", "y", "batch_size", "validation_split", "validation_data",
              "shuffle"},
}  # fmt: skip


def _fixture_facts() -> list[Facts]:
    found = []
    for path in sorted(DATA.rglob("*.json")):
        doc = json.loads(path.read_text())
        doc = doc.get("facts", doc) if isinstance(doc, dict) else None
        if isinstance(doc, dict) and "run" in doc:
            found.append(Facts.from_dict(doc))
    return found


def _changes(before: str, after: str) -> set[str] | None:
    """What ``after`` changes in the call ``before`` (see INTENDED); None when ``after`` is not
    that call with only such changes."""
    old, new = rw.parse_call(before), rw.parse_call(after)
    if new is None:
        return None
    if isinstance(new.func, ast.Attribute):  # a method appended to the user's expression
        whole = ast.parse(before.strip(), mode="eval").body  # a call, or ``df[cols].values``
        if ast.dump(new.func.value) == ast.dump(whole):
            return {f".{new.func.attr}"}
    if old is None:
        return None
    changed: set[str] = set()
    if ast.dump(old.func) != ast.dump(new.func):
        changed.add("func")
    for i in range(max(len(old.args), len(new.args))):
        a = old.args[i] if i < len(old.args) else None
        b = new.args[i] if i < len(new.args) else None
        if a is None or b is None or ast.dump(a) != ast.dump(b):
            changed.add(f"arg{i}")
    olds = {k.arg: ast.dump(k.value) for k in old.keywords}
    news = {k.arg: ast.dump(k.value) for k in new.keywords}
    changed |= {k for k in olds.keys() | news.keys() if olds.get(k) != news.get(k)}
    return changed


def _assert_lossless(finding) -> None:
    fix = finding.fix
    body = "\n    ..." if fix.code.rstrip().endswith(":") else ""  # a `def` line and its decorator
    ast.parse(fix.code + body)  # every fix's code parses (comments and all)
    if fix.before is None:
        return
    if finding.rule_id in STATEMENT_REWRITES:
        assert fix.before.strip().splitlines()[0] in fix.code, finding.rule_id
        return
    before, after = fix.before, fix.code
    if finding.rule_id in BLOCK_REWRITES:
        last = ast.parse(after).body[-1]
        after = ast.get_source_segment(after, last)
        assert after is not None and before.strip().startswith(after.split("(")[0].split("=")[0])
        expression = rw.assigned_name(before) is not None
        if expression:
            before = ast.get_source_segment(before, ast.parse(before).body[0].value)
            after = ast.get_source_segment(after, ast.parse(after).body[0].value)
        changes = _changes(before, after)
        assert changes is not None, (finding.rule_id, fix.before, fix.code)
        assert changes <= BLOCK_REWRITES[finding.rule_id], (finding.rule_id, changes)
        return
    expression = rw.assigned_name(fix.before) is not None
    if expression:  # an assignment rewritten: compare the assigned values
        before = ast.get_source_segment(before, ast.parse(before).body[0].value)
        after = ast.get_source_segment(after.strip(), ast.parse(after.strip()).body[0].value)
    changes = _changes(before, after)
    if changes is None and expression:
        changes = {"value"} if finding.rule_id == "RD301" else None
    assert changes is not None, (finding.rule_id, fix.before, fix.code)
    assert changes <= INTENDED[finding.rule_id] | {"value"}, (finding.rule_id, changes)


def _rd501_on_arrays() -> Facts:
    """A padded, masked token input (the sequence fixture, every batch padded to 64) fed by the
    user's own multi-line ``fit`` on arrays: RD501 rewrites that call."""
    from rnndoctor import stats as bk

    doc = json.loads((DATA / "rules" / "RD110-compliant.json").read_text())["facts"]
    f = Facts.from_dict(doc)
    (record,) = f.sequences.inputs
    lengths = [4, 5, 6, 7] * 8 + [30, 31, 40, 60] * 8
    dist = bk.LengthDistribution.of(lengths)
    record.length_values, record.length_counts = list(dist.values), list(dist.counts)
    record.lengths, record.sequences = list(lengths), len(lengths)
    record.batch_sizes, record.padded_lengths = [16] * 4, [64] * 4
    record.padded_fraction = bk.padded_fraction(sum(lengths), 64 * len(lengths))
    call = ("model.fit(\n    x_train,\n    y_train,  # next ids\n    batch_size=64,\n"
            "    epochs=2,\n    shuffle=False,\n    callbacks=[stop],\n)")  # fmt: skip
    f.fit.location = SourceLocation("/w/train.py", 30, "history = model.fit(", call_source=call)
    f.fit.y_kind = "array"  # one target array, as the capture records it
    return f


def _built_facts() -> list[Facts]:
    """Facts with realistic call sources for the rules that rewrite calls."""
    built = []
    f = with_spe(facts(step=4.0, compute=3.8), one=3.8, sixteen=1.6)
    f.fit.compile_location = loc(
        7,
        'model.compile(\n    loss="categorical_crossentropy",\n    optimizer=keras.optimizers.'
        'Adam(1e-3),  # tuned\n    metrics=["accuracy"],\n)',
    )
    built.append(f)
    f = with_batch_probe(facts(), [(4, 2.0, None), (8, 2.2, None), (16, 2.6, None)])
    built.append(f)
    f = with_batch_probe(facts(), [(4, 2.0, None), (16, 2.6, None)])
    f.data = DataFacts(kind="numpy")
    f.fit.location = loc(40, "model.fit(x_train, y_train, batch_size=batch_size, epochs=2)")
    f.fit.batch_size_location = loc(12, "batch_size = 4")
    built.append(f)
    built.append(_argparse_batch_facts())
    built.append(_rd501_on_arrays())
    built.append(facts(step=10.0, compute=6.0, data=map_pipeline(stateful_ops=[])))
    built.append(facts(step=10.0, compute=7.0, data=map_pipeline(stateful_ops=[]), epochs=3))
    return built


def test_every_rewrite_parses_and_changes_only_what_the_rule_intends():
    rewrites = 0
    for f in _fixture_facts() + _built_facts():
        for finding in evaluate(f).findings:
            if finding.fix is None:
                continue
            _assert_lossless(finding)
            rewrites += finding.fix.before is not None
    assert rewrites >= 8  # the property covered real rewrites, not only sketches


@pytest.mark.parametrize(
    ("call", "name", "value", "expected"),
    [
        (
            'model.compile(loss="categorical_crossentropy", optimizer="adam", '
            'metrics=["accuracy"])',
            "steps_per_execution",
            "16",
            'model.compile(loss="categorical_crossentropy", optimizer="adam", '
            'metrics=["accuracy"], steps_per_execution=16)',
        ),
        (
            "model.compile('adam', 'mse', steps_per_execution=1)",
            "steps_per_execution",
            "16",
            "model.compile('adam', 'mse', steps_per_execution=16)",
        ),
        ("model.compile()", "steps_per_execution", "16", "model.compile(steps_per_execution=16)"),
        (
            "model.compile(\n    loss='mse',  # keep me\n    optimizer=opt,\n)",
            "steps_per_execution",
            "16",
            "model.compile(\n    loss='mse',  # keep me\n"
            "    optimizer=opt,\n    steps_per_execution=16,\n)",
        ),
        (
            "model.compile(\n    loss='mse',\n    optimizer=opt  # no trailing comma\n)",
            "steps_per_execution",
            "16",
            "model.compile(\n    loss='mse',\n    optimizer=opt,  # no trailing comma\n"
            "    steps_per_execution=16\n)",
        ),
        ("model.compile(**cfg)", "steps_per_execution", "16", None),
    ],
)
def test_set_keyword_keeps_the_users_spelling(call, name, value, expected):
    assert rw.set_keyword(call, name, value) == expected


def test_remove_keyword_keeps_everything_else():
    call = 'model.compile(optimizer="adam", run_eagerly=True, loss="mse", metrics=["mae"])'
    assert rw.remove_keyword(call, "run_eagerly") == (
        'model.compile(optimizer="adam", loss="mse", metrics=["mae"])'
    )
    assert rw.remove_keyword("f(run_eagerly=True, a=1)", "run_eagerly") == "f(a=1)"
    assert rw.remove_keyword("f(run_eagerly=True)", "run_eagerly") == "f()"
    assert rw.remove_keyword("f(a=1)", "run_eagerly") is None


@pytest.mark.parametrize(
    ("call", "expected"),
    [
        (
            'model.compile(\n    optimizer="adam",  # opt\n    run_eagerly=True,  # debug\n'
            '    loss="mse",\n)',
            'model.compile(\n    optimizer="adam",  # opt\n    loss="mse",\n)',
        ),
        (
            'model.compile(\n    optimizer="adam",  # opt\n    run_eagerly=True\n)',
            'model.compile(\n    optimizer="adam"  # opt\n)',
        ),
        ("model.compile(\n    run_eagerly=True\n)", "model.compile(\n)"),
    ],
)
def test_remove_keyword_on_its_own_line_takes_the_line_and_keeps_other_comments(call, expected):
    assert rw.remove_keyword(call, "run_eagerly") == expected


# -- RD401 / RD403: the compile call ------------------------------------------------------------


def test_rd403_keeps_metrics_and_points_at_compile():
    f = _built_facts()[0]
    (finding,) = run(f, "RD403")[1]
    assert finding.location.line == 7
    assert 'metrics=["accuracy"]' in finding.fix.code
    assert "keras.optimizers.Adam(1e-3),  # tuned" in finding.fix.code
    assert finding.fix.code.count("steps_per_execution=16") == 1
    assert rw.same_except(finding.fix.before, finding.fix.code, ("steps_per_execution",))


@pytest.mark.parametrize(
    ("call", "why"),
    [
        ('model.compile(loss="mse", steps_per_execution=args.spe)',
         "your compile call sets steps_per_execution=args.spe"),
        ('model.compile(loss="mse", **compile_kwargs)',
         "your compile call passes **compile_kwargs, which may hold it"),
    ],
)  # fmt: skip
def test_rd403_never_overrides_a_value_the_compile_call_reads(call, why):
    """A literal over ``steps_per_execution=args.spe`` would make the option do nothing, and a
    keyword added beside ``**compile_kwargs`` raises TypeError where the splat holds it."""
    f = _built_facts()[0]
    f.fit.compile_location = loc(7, call)
    (finding,) = run(f, "RD403")[1]
    assert finding.fix.safety == "display-only" and finding.fix.before is None
    assert finding.fix.code == f"# {why}: set steps_per_execution to 16 where its value is set"
    f.fit.compile_location = loc(7, 'model.compile(loss="mse", steps_per_execution=1)')
    (finding,) = run(f, "RD403")[1]
    assert finding.fix.code == 'model.compile(loss="mse", steps_per_execution=16)'


def test_rd401_points_at_the_compile_call_and_drops_only_run_eagerly():
    f = facts(step=4.0)
    f.fit.run_eagerly = True
    call = 'model.compile(loss="mse", optimizer="adam", metrics=["mae"], run_eagerly=True)'
    f.fit.compile_location = loc(9, call)
    (finding,) = run(f, "RD401")[1]
    assert finding.location.line == 9
    assert finding.fix.code == 'model.compile(loss="mse", optimizer="adam", metrics=["mae"])'
    assert finding.fix.safety == "safe"


# -- RD205 / RD201 / RD202: the dataset's line ------------------------------------------------


def timeseries_pipeline(shuffle: bool = False, cache: bool = False) -> DataFacts:
    """What keras.utils.timeseries_dataset_from_array builds, every op on the user's line 12."""
    line = "dataset_train = keras.utils.timeseries_dataset_from_array("
    call = "keras.utils.timeseries_dataset_from_array(series, targets, sequence_length=24)"
    site = SourceLocation(file="/work/train.py", line=12, code=line, call_source=call)
    util = {"built_by": "timeseries_dataset_from_array"}
    nodes = [
        node("TensorDataset/_1", "TensorDataset", "source", 12, call, source_kind="tensors"),
        node("ParallelMapDatasetV2/_2", "ParallelMapDatasetV2", "map", 12, call,
             attrs={"stateful_ops": [], **util}, num_parallel_calls=-1),
    ]  # fmt: skip
    if shuffle:
        nodes.append(node("ShuffleDatasetV3/_3", "ShuffleDatasetV3", "shuffle", 12, call))
    nodes.append(node("BatchDatasetV2/_4", "BatchDatasetV2", "batch", 12, call))
    if cache:
        nodes.append(node("CacheDatasetV2/_5", "CacheDatasetV2", "cache", 13, "ds.cache()"))
    for n in nodes[:-1] if cache else nodes:
        n.location = site
        n.attrs.update(util)
    data = pipeline(*nodes, source_kinds=["tensors"], batch_kind="batch", prefetch_last=True,
                    cardinality=47, inject_prefetch=True, map_parallelization=True,
                    batch_bytes=36864, has_cache=cache, has_shuffle=shuffle)  # fmt: skip
    data.location = site
    return data


def test_rd205_on_a_timeseries_pipeline_points_at_its_line_and_caches_the_users_name():
    f = facts(step=10.0, compute=7.0, data=timeseries_pipeline(), epochs=3)
    (finding,) = run(f, "RD205")[1]
    assert finding.location.line == 12
    assert finding.fix.code == "dataset_train = dataset_train.cache()"
    assert "ds.map(preprocess)" not in finding.fix.code
    assert "add after line 12" in finding.fix.title
    assert finding.fix.safety == "safe"


def test_rd205_says_a_shuffle_inside_the_util_is_frozen_by_the_cache():
    f = facts(step=10.0, compute=7.0, data=timeseries_pipeline(shuffle=True), epochs=3)
    (finding,) = run(f, "RD205")[1]
    assert finding.fix.safety == "unsafe"
    assert "shuffle=False" in finding.fix.code


def test_rd201_and_rd202_point_at_the_dataset_not_at_fit():
    data = timeseries_pipeline()
    data.prefetch_last = False
    data.inject_prefetch = False
    f = facts(step=10.0, compute=3.0, data=data)
    for rule_id in ("RD201", "RD202"):
        (finding,) = run(f, rule_id)[1]
        assert finding.location.line == 12, rule_id
    (rd201,) = run(f, "RD201")[1]
    assert rd201.fix.code.startswith("dataset_train = (dataset_train")
    assert rd201.fix.safety == "display-only"


def test_rd201_never_suggests_cache_after_a_random_map():
    data = map_pipeline(stateful_ops=["RandomUniform"])
    (finding,) = run(facts(step=10.0, compute=3.0, data=data), "RD201")[1]
    assert ".cache()" not in finding.fix.code
    assert "only before the random map" in finding.fix.code


# -- epoch-weighted input cost -----------------------------------------------------------------


def generator_then_cache() -> DataFacts:
    return pipeline(
        node("TensorDataset/_1", "TensorDataset", "source", 20, "from_generator(gen)",
             source_kind="tensors"),
        node("FlatMapDataset/_2", "FlatMapDataset", "source", 20, "from_generator(gen)",
             source_kind="generator", python=True),
        node("CacheDatasetV2/_3", "CacheDatasetV2", "cache", 21, "ds.cache()"),
        node("BatchDatasetV2/_4", "BatchDatasetV2", "batch", 22, "ds.batch(32)",
             attrs={"batch_size": 32}),
        source_kinds=["generator"], batch_kind="batch", prefetch_last=False, has_cache=True,
        python_ops=["FlatMapDataset/_2"], cardinality=-2, inject_prefetch=True,
        map_parallelization=True, batch_bytes=2688,
    )  # fmt: skip


def test_rd201_weighs_a_cost_only_epoch_1_pays_by_the_jobs_steps():
    f = facts(step=10.0, compute=7.8, data=generator_then_cache(), epochs=3)
    (finding,) = run(f, "RD201")[1]
    assert "Epoch 1 only: 22% of its steps; about 7% of a 3-epoch job" in finding.message
    assert "line 21" in finding.message
    assert finding.severity is Severity.INFO  # 7% of the job, though 22% of epoch 1
    rows = {e.label: e.value for e in finding.evidence}
    assert rows["job-wide input share"] == pytest.approx(7.3, abs=0.1)
    assert finding.speedup == pytest.approx(1 / (1 - 0.22 / 3), rel=0.01)


def test_rd204_says_a_cached_generator_costs_epoch_1_only():
    f = facts(step=10.0, compute=7.0, data=generator_then_cache(), epochs=4)
    (finding,) = run(f, "RD204")[1]
    assert "Epoch 1 only" in finding.message and "of the 4-epoch job" in finding.message
    assert finding.severity is Severity.INFO  # 30% of epoch 1, about 8% of the job


def test_rd201_keeps_the_full_share_when_every_epoch_pays_it():
    data = generator_then_cache()
    data.nodes.insert(3, node("MapDataset/_9", "MapDataset", "map", 23, "ds.map(augment)"))
    f = facts(step=10.0, compute=7.8, data=data, epochs=3)
    (finding,) = run(f, "RD201")[1]
    assert "epoch 1 only" not in finding.message
    assert finding.severity is Severity.WARNING  # 22%, paid by every epoch


# -- RD301: the batch size's own line, and stateful RNNs ----------------------------------------


def test_rd301_rewrites_the_batch_size_assignment_line():
    f = _built_facts()[2]
    (finding,) = run(f, "RD301")[1]
    assert finding.location.line == 12
    assert finding.fix.before == "batch_size = 4"
    assert finding.fix.code == "batch_size = 16"
    assert finding.fix.safety == "unsafe"
    assert "learning rate" in finding.fix.title


def _argparse_batch_facts() -> Facts:
    """``fit(..., batch_size=args.batch_size)`` run with the option's default: the capture
    records the ``add_argument`` call as the batch size's site."""
    f = with_batch_probe(facts(), [(64, 2.0, None), (256, 2.6, None)])
    f.data = DataFacts(kind="numpy")
    f.fit.location = loc(42, "model.fit(x, y, batch_size=args.batch_size, epochs=args.epochs)")
    f.fit.batch_size_location = loc(
        21, 'parser.add_argument("--batch-size", type=int, default=64, help="per step")'
    )
    return f


def test_rd301_rewrites_the_options_default_for_an_argparse_batch_size():
    (finding,) = run(_argparse_batch_facts(), "RD301")[1]
    assert finding.location.line == 21  # the add_argument line, not the fit call
    assert finding.fix.before == (
        'parser.add_argument("--batch-size", type=int, default=64, help="per step")'
    )
    assert finding.fix.code == (
        'parser.add_argument("--batch-size", type=int, default=256, help="per step")'
    )  # the option still sets the batch: no literal in the fit call
    assert finding.fix.safety == "unsafe"


@pytest.mark.parametrize(
    ("call", "reason"),
    [
        ("model.fit(x, y, **fit_kwargs)",
         "your fit call passes **fit_kwargs, which may hold batch_size"),
        (None, "the fit call was not recorded as one call"),  # a notebook cell's %%time
    ],
)  # fmt: skip
def test_rd301_is_a_note_where_the_fit_call_cannot_take_the_keyword(call, reason):
    """A new user's ``fit(x, y, **fit_kwargs)`` got ``model.fit(..., batch_size=32)``, "unsafe",
    which drops every argument of the call and, pasted beside the splat, raises TypeError."""
    f = with_batch_probe(facts(), [(64, 2.0, None), (256, 2.6, None)])
    f.data = DataFacts(kind="numpy")
    f.fit.location = loc(42, call or "get_ipython().run_cell_magic('time', '', '...')")
    f.fit.location.call_source = call
    (finding,) = run(f, "RD301")[1]
    assert finding.fix.safety == "display-only" and finding.fix.before is None
    assert finding.fix.code == f"# {reason}: set batch_size to 256 where its value is set"
    assert finding.fix.title.endswith(f"; display-only: {reason}")
    assert finding.location.line == 42


@pytest.mark.parametrize(
    ("call", "fixed"),
    [
        ("model.fit(x, y, batch_size=64, **fit_kwargs)",
         "model.fit(x, y, batch_size=256, **fit_kwargs)"),  # a written keyword: not in the splat
        ("model.fit(x, y, 64, epochs=2)", "model.fit(x, y, 256, epochs=2)"),  # no second value
    ],
)  # fmt: skip
def test_rd301_replaces_the_batch_size_the_fit_call_writes_in_place(call, fixed):
    """Review: ``fit(x, y, batch_size=64, **kw)`` got the splat's note, though a splat cannot
    hold a keyword the call writes; ``fit(x, y, 64)`` got ``batch_size=256`` added beside its
    positional 64 (``TypeError``: two values)."""
    f = with_batch_probe(facts(), [(64, 2.0, None), (256, 2.6, None)])
    f.data = DataFacts(kind="numpy")
    f.fit.location = loc(42, call)
    (finding,) = run(f, "RD301")[1]
    assert finding.fix.code == fixed and finding.fix.before == call
    assert finding.fix.safety == "unsafe"


def _variable_batch_facts(batch_call: str, *argv: str) -> Facts:
    """A tf.data pipeline whose batch call reads a value (``batch(args.batch_size)``), run as
    ``train.py ARGV`` at batch 8; the probe measures 3.6x samples/s at 32."""
    chain = "tf.data.Dataset.from_tensor_slices((x, y)).shuffle(4096, seed=1)"
    data = pipeline(
        node("TensorSliceDataset/_1", "TensorSliceDataset", "source", 16,
             "tf.data.Dataset.from_tensor_slices((x, y))", source_kind="tensors"),
        node("BatchDatasetV2/_2", "BatchDatasetV2", "batch", 16, f"{chain}.{batch_call}",
             attrs={"batch_size": 8}),
        batch_kind="batch", prefetch_last=True,
    )  # fmt: skip
    f = with_batch_probe(facts(data=data), [(8, 2.0, None), (32, 2.2, None)])
    f.run.argv = [f.run.script, *argv]
    f.fit.batch_size = 8
    return f


@pytest.mark.parametrize(
    ("batch_call", "argv", "first_line"),
    [
        ("batch(args.batch_size)", ["--batch-size", "8"],
         "# run the script with --batch-size 32 in place of --batch-size 8 "
         "(args.batch_size = 32);"),
        ("batch(args.batch_size)", ["--batch-size=8", "--epochs", "2"],
         "# run the script with --batch-size=32 in place of --batch-size=8 "
         "(args.batch_size = 32);"),
        ("batch(args.batch_size)", [],
         "# your pipeline batches by args.batch_size (8 in this run): set it to 32 where its "
         "value is set;"),
        ("batch(batch_size=bs, drop_remainder=True)", [],
         "# your pipeline batches by bs (8 in this run): set it to 32 where its value is set;"),
    ],
)  # fmt: skip
def test_rd301_keeps_a_pipeline_batch_that_reads_a_value(batch_call, argv, first_line):
    """A fresh user's ``--verify`` patch turned ``.batch(args.batch_size)`` into ``.batch(32)``
    after a run with ``--batch-size 8``: the option no longer set the batch, and a run at its
    default (64) got slower. A variable batch argument now gets a display-only note."""
    (finding,) = run(_variable_batch_facts(batch_call, *argv), "RD301")[1]
    assert finding.fix.safety == "display-only" and finding.fix.before is None
    assert finding.location.line == 16  # the batch call's line
    code_lines = finding.fix.code.splitlines()
    assert code_lines[0] == first_line
    assert code_lines[1].startswith("# keep the batch call as it is: a literal there would")
    assert all(line.startswith("#") for line in code_lines)  # nothing to paste over the code


def test_rd301_still_rewrites_a_literal_pipeline_batch():
    (finding,) = run(_variable_batch_facts("batch(8)"), "RD301")[1]
    assert finding.fix.code.endswith(".shuffle(4096, seed=1).batch(32)")
    assert finding.fix.safety == "unsafe" and finding.fix.before is not None


def test_rd301_on_a_keras_util_sets_its_batch_size_keyword():
    data = timeseries_pipeline()
    data.nodes[-1].location = loc(
        12, "keras.utils.timeseries_dataset_from_array(series, targets, batch_size=64)"
    )
    f = with_batch_probe(facts(data=data), [(64, 2.0, None), (256, 2.6, None)])
    (finding,) = run(f, "RD301")[1]
    assert finding.fix.code == (
        "keras.utils.timeseries_dataset_from_array(series, targets, batch_size=256)"
    )


def test_rd301_is_display_only_for_a_stateful_rnn():
    f = _built_facts()[2]
    f.model = _model(stateful=True)
    (finding,) = run(f, "RD301")[1]
    assert finding.fix.safety == "display-only"
    assert finding.fix.before is None
    assert "state layout" in finding.fix.title


def _model(stateful: bool = False, policy: str = "float32"):
    from rnndoctor.facts import ModelFacts

    layer = RNNLayer(path="seq/lstm", name="lstm", class_name="LSTM", kind="lstm",
                     cell_class="LSTMCell", args={"units": 8, "stateful": stateful},
                     dtype_policy=policy)  # fmt: skip
    return ModelFacts(name="seq", class_name="Sequential", model_type="sequential",
                      rnn_layers=[layer])  # fmt: skip


# -- RD207 float64 input -----------------------------------------------------------------------


def test_rd207_casts_a_float64_dataset_after_its_line():
    data = timeseries_pipeline()
    data.input_dtypes = ["float64"]
    data.input_shapes = [[None, 24, 6]]
    f = facts(data=data)
    f.model = _model()
    (finding,) = run(f, "RD207")[1]
    assert finding.location.line == 12
    assert finding.fix.code == (
        "dataset_train = dataset_train.map(lambda x, y: (tf.cast(x, tf.float32), y))"
    )
    assert finding.fix.safety == "safe"
    rows = {e.label: e.value for e in finding.evidence}
    assert rows["float64 bytes per batch"] == 32 * 24 * 6 * 8


def test_rd207_casts_a_float64_array_at_its_assignment():
    f = facts(data=DataFacts(kind="numpy", input_dtypes=["float64"], input_shapes=[[None, 10, 4]]))
    f.fit = FitConfig(data_kind="numpy", batch_size=32, epochs=2,
                      location=loc(40, "model.fit(x_train, y_train)"),
                      x_location=loc(9, "x_train = rng.normal(size=(512, 10, 4))"))  # fmt: skip
    (finding,) = run(f, "RD207")[1]
    assert finding.location.line == 9
    assert finding.fix.before == "x_train = rng.normal(size=(512, 10, 4))"
    assert finding.fix.code == 'x_train = rng.normal(size=(512, 10, 4)).astype("float32")'
    # every later use of x_train gets float32 too (a target computed from it): as for tf.data
    assert finding.fix.safety == "unsafe"
    assert finding.fix.title.endswith("(unsafe: every later use of x_train gets float32 too)")
    _assert_lossless(finding)


def test_rd207_casts_the_array_a_float64_dataset_was_built_from_at_its_assignment():
    data = timeseries_pipeline()
    data.input_dtypes = ["float64"]
    data.input_shapes = [[None, 24, 6]]
    data.array_location = loc(9, "x_train = train_data[[i for i in range(7)]].values")
    f = facts(data=data)
    f.model = _model()
    (finding,) = run(f, "RD207")[1]
    assert finding.location.line == 9  # the array's line, not a map after the dataset's
    assert finding.fix.before == "x_train = train_data[[i for i in range(7)]].values"
    assert finding.fix.code == (
        'x_train = train_data[[i for i in range(7)]].values.astype("float32")'
    )
    assert finding.fix.safety == "unsafe" and "every later use of x_train" in finding.fix.title
    _assert_lossless(finding)
    # several model inputs: the array's cast would reach them all, so the map stays
    data.input_dtypes, data.input_shapes = ["float64", "int32"], [[None, 24, 6], [None, 24]]
    (finding,) = run(facts(data=data), "RD207")[1]
    assert finding.location.line == 12 and "tf.nest.map_structure" in finding.fix.code


def test_rd207_casts_only_the_float64_inputs_of_a_multi_input_dataset():
    data = timeseries_pipeline()
    data.input_dtypes = ["float64", "int32"]
    data.input_shapes = [[None, 24, 6], [None, 24]]
    (finding,) = run(facts(data=data), "RD207")[1]
    assert "tf.nest.map_structure" in finding.fix.code
    assert "1 of 2 model input(s)" in finding.message
    ast.parse(finding.fix.code)


def test_rd203_does_not_rewrite_a_map_a_keras_util_built():
    data = timeseries_pipeline()
    util_map = data.nodes[1]
    util_map.num_parallel_calls = None
    util_map.attrs["stateful_ops"] = ["RandomUniform"]
    data.sequential_maps = 1
    (finding,) = run(facts(step=10.0, compute=3.0, data=data), "RD203")[1]
    assert finding.fix.before is None
    assert finding.fix.safety == "display-only"
    assert "timeseries_dataset_from_array" not in finding.fix.code


def test_rd207_passes_float32_data_and_float64_models():
    f = facts(data=DataFacts(kind="numpy", input_dtypes=["float32"], input_shapes=[[None, 4]]))
    assert run(f, "RD207")[1] == []
    f.data.input_dtypes = ["float64"]
    f.model = _model(policy="float64")
    assert run(f, "RD207")[1] == []


def test_argument_reads_what_set_argument_would_replace():
    assert ast.unparse(rw.argument("ds.batch(args.bs, True)", 0, "batch_size")) == "args.bs"
    assert ast.unparse(rw.argument("ds.batch(batch_size=bs)", 0, "batch_size")) == "bs"
    assert rw.argument("model.fit(*xs, 8)", 1, "batch_size") is None  # behind a *args
    assert rw.argument("model.fit(x, y)", 2, "batch_size") is None
    assert rw.argument("model.compile(spe)", None, "steps_per_execution") is None  # keyword only
    assert rw.is_int_literal(rw.argument("ds.batch(64)", 0, "batch_size"))
    assert not rw.is_int_literal(rw.argument("ds.batch(True)", 0, "batch_size"))


# -- fixes that write tf.: only where the file binds a name to tensorflow ----------------------


def test_rd202_and_rd203_write_autotune_as_the_file_can_run_it():
    """A new user's trial: RD202's "safe" fix on keras.utils.timeseries_dataset_from_array in a
    script importing only keras raised NameError: name 'tf' is not defined when pasted."""
    data = timeseries_pipeline()
    data.prefetch_last = False
    data.inject_prefetch = False
    f = facts(step=10.0, compute=3.0, data=data)
    call = "keras.utils.timeseries_dataset_from_array(series, targets, sequence_length=24)"
    (rd202,) = run(f, "RD202")[1]
    assert rd202.fix.code == f"{call}.prefetch(tf.data.AUTOTUNE)"  # not known: as before
    f.run.tensorflow_names = {"/work/train.py": []}
    (rd202,) = run(f, "RD202")[1]
    assert rd202.fix.code == f"{call}.prefetch(-1)" and rd202.fix.safety == "safe"
    assert rd202.fix.title.endswith("(written -1, AUTOTUNE's value: this file does not import "
                                    "tensorflow)")  # fmt: skip
    f.run.tensorflow_names = {"/work/train.py": ["tensorflow"]}
    assert run(f, "RD202")[1][0].fix.code == f"{call}.prefetch(tensorflow.data.AUTOTUNE)"
    stateful = map_pipeline(stateful_ops=["RandomUniform"], force_synchronous=False)
    g = facts(step=10.0, compute=6.0, data=stateful)
    g.run.tensorflow_names = {stateful.nodes[1].location.file: []}
    (rd203,) = run(g, "RD203")[1]
    assert rd203.fix.code == "ds.map(augment, num_parallel_calls=-1)"
    assert "AUTOTUNE's value" in rd203.fix.title


def test_rd207_and_rd205_add_their_statement_after_the_statements_last_line():
    """A new user's trial: "add after line 9" of a call spanning lines 9-12 is a SyntaxError."""
    data = timeseries_pipeline()
    data.location.end_line = 15  # the call spans lines 12-15
    (rd205,) = run(facts(step=10.0, compute=7.0, data=data, epochs=3), "RD205")[1]
    assert "add after line 15" in rd205.fix.title
    data.input_dtypes, data.input_shapes = ["float64"], [[None, 24, 6]]
    f = facts(data=data)
    f.model = _model()
    f.run.tensorflow_names = {"/work/train.py": []}
    (rd207,) = run(f, "RD207")[1]
    assert rd207.fix.title.endswith("add after line 15")
    assert rd207.fix.code == (
        "import tensorflow as tf\n"
        "dataset_train = dataset_train.map(lambda x, y: (tf.cast(x, tf.float32), y))"
    )
