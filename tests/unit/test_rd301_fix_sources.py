"""RD301's fix where the batch is made (a fresh user's two reports): ``fit``'s ``batch_size``
is rewritten only for arrays, the one input Keras batches by it; a generator, a PyDataset or an
already batched ``tf.data`` dataset gets a display-only sketch that says where the batch is
made; and ``fit(..., batch_size=args.batch_size)`` run with ``--batch-size`` given keeps the
option, the fix being to the command line. Pure: rules on facts, no TensorFlow.
"""

from __future__ import annotations

import ast

import pytest
from test_rules_input_batch import check_finding, facts, loc, pipeline, run, with_batch_probe

from rnndoctor import rewrite as rw
from rnndoctor.facts import DataFacts, DataNode, Facts, SourceLocation
from rnndoctor.findings import Severity

GEN_FIT = "model.fit(batch_gen(32), steps_per_epoch=100, epochs=2, verbose=2)"


def _code_lines(code: str) -> list[str]:
    """The fix's lines that are code, not comments."""
    lines = (line.strip() for line in code.splitlines())
    return [line for line in lines if line and not line.startswith("#")]


def _source_facts(kind: str, fit_call: str, location: SourceLocation | None = None) -> Facts:
    """A run whose ``fit`` got ``kind`` (not arrays) at batch 32, with the probe measuring
    2.5x samples/s at batch 128 (a warning)."""
    data = DataFacts(kind=kind, reiterable=kind != "python_generator", location=location)
    f = with_batch_probe(facts(data=data), [(32, 2.0, None), (64, 2.4, None), (128, 3.2, None)])
    f.fit.location = loc(33, fit_call)
    f.fit.batch_size = None  # what the capture records for a source that makes its batches
    return f


def _rd301(f: Facts):
    _, findings = run(f, "RD301")
    (finding,) = findings
    check_finding(finding, "RD301")
    ast.parse(finding.fix.code)  # the sketch parses, comments and all
    return finding


# -- defect 1: no fit(batch_size=) rewrite where the source makes the batch ------------------


def test_a_generator_call_with_the_batch_literal_is_changed_in_a_display_only_sketch():
    f = _source_facts("python_generator", GEN_FIT, loc(17, None))
    f.fit.steps_per_epoch = 100
    finding = _rd301(f)
    assert finding.severity is Severity.WARNING  # the finding itself is unchanged
    fix = finding.fix
    assert fix.safety == "display-only" and fix.before is None
    assert "batch_size" not in _code_lines(fix.code)[0]  # no fit(batch_size=) that does nothing
    assert _code_lines(fix.code) == [
        "model.fit(batch_gen(128), steps_per_epoch=100, epochs=2, verbose=2)"
    ]  # the one literal changed, every other argument as written
    assert "fit's batch_size does not apply to a generator" in fix.code
    assert "display-only" in fix.title and "batch_gen(32)" in fix.title
    assert "steps_per_epoch=100 counts batches" in fix.code  # 4x the samples per epoch now
    assert "steps_per_epoch=25 keeps them" in fix.code
    assert finding.location.line == 33  # the fit line it sketches


def test_a_generator_passed_by_name_gets_a_note_at_its_def():
    f = _source_facts("python_generator", "model.fit(gen, epochs=2)", loc(17, None))
    fix = (finding := _rd301(f)).fix
    assert fix.safety == "display-only" and fix.before is None
    assert _code_lines(fix.code) == []  # a note, no code to paste
    assert "your generator yields batches of 32: make it yield batches of 128" in fix.code
    assert "fit's batch_size does not apply to a generator" in fix.code
    assert finding.location.line == 17  # the generator's def: where the batch is made
    assert "steps_per_epoch" not in fix.code  # fit does not set it here


@pytest.mark.parametrize(
    "call",
    [
        "model.fit(batch_gen(32, 32), epochs=2)",  # two literals equal to the batch: which one?
        "model.fit(batch_gen(16), epochs=2)",  # no literal equal to the batch
        "model.fit(batch_gen(size=32, seq=32), epochs=2)",
        "model.fit(batch_gen(True), epochs=2)",  # not an integer literal
    ],
)
def test_no_literal_is_changed_unless_exactly_one_equals_the_batch_size(call):
    f = _source_facts("python_generator", call, loc(17, None))
    fix = _rd301(f).fix
    assert fix.safety == "display-only"
    assert _code_lines(fix.code) == []
    assert "make it yield batches of 128" in fix.code


def test_a_pydataset_built_in_the_fit_line_has_its_batch_literal_changed():
    call = "model.fit(\n    Windows(x, y, batch_size=32),  # ours\n    epochs=2,\n)"
    fix = _rd301(_source_facts("keras.PyDataset", call, loc(15, None))).fix
    assert fix.safety == "display-only" and fix.before is None
    assert fix.code.startswith(
        "model.fit(\n    Windows(x, y, batch_size=128),  # ours\n    epochs=2,\n)"
    )
    assert "fit's batch_size does not apply to a PyDataset" in fix.code


def test_a_pydataset_built_elsewhere_gets_a_note_at_its_construction():
    f = _source_facts("keras.PyDataset", "model.fit(train, epochs=2)", loc(15, None))
    finding = _rd301(f)
    assert finding.fix.safety == "display-only" and _code_lines(finding.fix.code) == []
    assert "your PyDataset's __getitem__ returns batches of 32" in finding.fix.code
    assert "make it return batches of 128" in finding.fix.code
    assert finding.location.line == 15


def test_a_tf_keras_sequence_is_never_given_fit_batch_size():
    f = _source_facts("tf_keras.Sequence", "model.fit(train, epochs=2, batch_size=32)", None)
    finding = _rd301(f)
    assert finding.fix.safety == "display-only" and _code_lines(finding.fix.code) == []
    assert "fit's batch_size does not apply to a Sequence" in finding.fix.code
    assert finding.location.line == 33  # no construction site: the fit line


def test_a_torch_dataloader_gets_no_fit_batch_size_rewrite():
    fix = _rd301(_source_facts("DataLoader", "model.fit(loader, epochs=2)")).fix
    assert fix.safety == "display-only" and _code_lines(fix.code) == []
    assert "your DataLoader yields batches of 32: give it batch_size for batches of 128" in (
        fix.code
    )
    assert "fit's batch_size does not apply to a DataLoader" in fix.code


@pytest.mark.parametrize("kind", ["DataFrame", "Tensor", "csr_matrix", None])
def test_other_array_like_inputs_keep_the_fit_batch_size_rewrite(kind):
    """Keras' array adapter batches a pandas DataFrame, a torch or jax tensor and a scipy sparse
    matrix by fit's batch_size (the capture records them by type name), and facts without a
    kind took this path before: the review of c85466c found them sent to a display-only note."""
    f = _source_facts(kind, "model.fit(frame, labels, epochs=2)")
    f.data = None if kind is None else f.data
    f.fit.data_kind = kind
    fix = _rd301(f).fix
    assert fix.code == "model.fit(frame, labels, epochs=2, batch_size=128)"
    assert fix.safety == "unsafe"


def test_an_already_batched_dataset_whose_batch_line_is_unknown_gets_a_note_not_ds_batch():
    batch = DataNode(name="BatchDatasetV2/_3", op="BatchDatasetV2", kind="batch",
                     attrs={"batch_size": 32})  # fmt: skip
    data = pipeline(
        DataNode(name="TensorSliceDataset/_1", op="TensorSliceDataset", kind="source",
                 location=loc(20, "tf.data.Dataset.from_tensor_slices((x, y))")),
        batch,
    )  # fmt: skip
    data.location, data.batch_kind = loc(22, None), "batch"
    f = with_batch_probe(facts(data=data), [(32, 2.0, None), (128, 3.2, None)])
    finding = _rd301(f)
    fix = finding.fix
    assert fix.safety == "display-only" and fix.before is None
    assert _code_lines(fix.code) == []  # neither ds.batch(128) (batches of batches) nor fit's
    assert "batch step makes batches of 32: set its batch size to 128" in fix.code
    assert "fit's batch_size does not apply to a dataset" in fix.code
    assert finding.location.line == 22


def test_a_dataset_with_no_batch_op_says_its_source_makes_the_batches():
    data = pipeline(
        DataNode(name="FlatMapDataset/_2", op="FlatMapDataset", kind="source",
                 location=loc(20, "tf.data.Dataset.from_generator(gen)"), python=True),
    )  # fmt: skip
    f = with_batch_probe(facts(data=data), [(32, 2.0, None), (128, 3.2, None)])
    fix = _rd301(f).fix
    assert fix.safety == "display-only" and _code_lines(fix.code) == []
    assert "your dataset's source yields batches of 32" in fix.code


def test_a_located_batch_call_is_still_rewritten():
    f = with_batch_probe(facts(), [(32, 2.0, None), (128, 3.2, None)])  # ds.batch(32), line 24
    fix = _rd301(f).fix
    assert (fix.code, fix.before, fix.safety) == ("ds.batch(128)", "ds.batch(32)", "unsafe")


@pytest.mark.parametrize("kind", ["numpy", "numpy (multi-input)", "tensor"])
def test_arrays_keep_the_fit_batch_size_rewrite(kind):
    f = with_batch_probe(facts(data=DataFacts(kind=kind)), [(32, 2.0, None), (128, 3.2, None)])
    f.fit.location = loc(33, "model.fit(x, y, epochs=2, verbose=2)")
    fix = _rd301(f).fix
    assert fix.code == "model.fit(x, y, epochs=2, verbose=2, batch_size=128)"
    assert fix.before == "model.fit(x, y, epochs=2, verbose=2)" and fix.safety == "unsafe"


def test_the_gpu_fix_without_a_probe_changes_the_generator_literal_too():
    f = _source_facts("python_generator", GEN_FIT, loc(17, None))
    f.environment.gpu_count = 1
    f.probes.batch_probe = []
    f.probes.batch_probe_not_measured = "the compute-only probe did not run"
    finding = _rd301(f)
    assert finding.severity is Severity.INFO
    assert finding.fix.safety == "display-only"
    assert _code_lines(finding.fix.code) == [
        "model.fit(batch_gen(64), steps_per_epoch=100, epochs=2, verbose=2)"
    ]


# -- defect 2: --batch-size given on the command line keeps working ---------------------------

ARGS_FIT = (
    "model.fit(x, y, epochs=args.epochs, batch_size=args.batch_size, validation_split=0.2,\n"
    "          callbacks=cbs, verbose=2)"
)


def _argv_facts(*args: str, used: int = 8) -> Facts:
    """``fit(..., batch_size=args.batch_size)`` on arrays, run as ``train.py ARGS``, ``fit`` at
    batch ``used``; no ``add_argument`` site (the capture records none when argv may set the
    option); the probe measures 3.7x samples/s at 4x the batch."""
    f = with_batch_probe(
        facts(data=DataFacts(kind="numpy")), [(used, 2.0, None), (used * 2, 2.0, None),
                                              (used * 4, 2.2, None)]
    )  # fmt: skip
    f.run.argv = [f.run.script, *args]
    f.fit.location = loc(31, ARGS_FIT)
    f.fit.batch_size = f.steps.batch_size = used
    f.fit.batch_size_location = None
    return f


def test_an_explicit_batch_size_option_is_kept_and_the_fix_is_to_the_command_line():
    f = _argv_facts("--batch-size", "8", "--outdir", "/tmp/runs")
    finding = _rd301(f)
    fix = finding.fix
    assert fix.safety == "display-only" and fix.before is None  # not a rewrite of the code
    assert _code_lines(fix.code) == []  # no fit(batch_size=32): a note about the command
    assert "batch_size=args.batch_size" in fix.code  # the fit call stays as it is
    assert "run the script with --batch-size 32 in place of --batch-size 8" in fix.code
    assert "command line" in fix.title and "learning rate" in fix.title
    assert finding.location.line == 31


@pytest.mark.parametrize(
    ("argv", "ran", "run_with"),
    [
        (["--batch-size=8"], "--batch-size=8", "--batch-size=32"),
        (["--batch_size", "8"], "--batch_size 8", "--batch_size 32"),
        (["--epochs", "3", "--batch", "8"], "--batch 8", "--batch 32"),  # argparse abbreviation
    ],
)
def test_the_option_is_quoted_as_the_command_line_typed_it(argv, ran, run_with):
    fix = _rd301(_argv_facts(*argv)).fix
    assert fix.safety == "display-only"
    assert f"run the script with {run_with} in place of {ran}" in fix.code


def test_an_option_given_with_another_value_than_fit_used_is_still_not_overridden():
    fix = _rd301(_argv_facts("--batch-size", "16")).fix  # the script halved it after parsing
    assert fix.safety == "display-only" and fix.before is None
    assert "ran with --batch-size 16 and fit's batch was 8" in fix.code
    assert "args.batch_size = 32" in fix.code


def test_arguments_that_do_not_set_the_option_leave_the_rewrite_as_it_was():
    # the default gave the value: the capture recorded the add_argument call, rewritten there
    f = _argv_facts("--outdir", "/tmp/runs", "--batch-norm", "1")
    f.fit.batch_size_location = loc(10, 'p.add_argument("--batch-size", type=int, default=8)')
    fix = _rd301(f).fix
    assert fix.code == 'p.add_argument("--batch-size", type=int, default=32)'
    assert fix.safety == "unsafe"
    # an abbreviation whose value is not fit's batch is another option (--b for --beta), and a
    # token after "--" is not an option of the script's parser: neither is read as the option,
    # and args.batch_size, traced to no line, gets a note, not a literal in the fit call
    for argv in (["--b", "0.9"], ["--", "--batch-size", "8"]):
        fix = _rd301(_argv_facts(*argv)).fix
        assert "run the script with" not in fix.code, argv
        assert fix.code.startswith("# fit's batch_size is args.batch_size (8 in this run): set it "
                                   "to 32 where its value is set;"), argv  # fmt: skip
        assert fix.safety == "display-only" and fix.before is None


def test_a_literal_batch_size_is_rewritten_whatever_the_argv():
    f = _argv_facts("--batch-size", "8")
    f.fit.location = loc(31, "model.fit(x, y, batch_size=8)")
    fix = _rd301(f).fix
    assert (fix.code, fix.safety) == ("model.fit(x, y, batch_size=32)", "unsafe")


# -- rnndoctor.rewrite.set_x_call_literal ---------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "expected"),
    [
        (GEN_FIT, ("model.fit(batch_gen(128), steps_per_epoch=100, epochs=2, verbose=2)",
                   "batch_gen(32)")),
        ("model.fit(x=gen(data, bs=32), epochs=2)",
         ("model.fit(x=gen(data, bs=128), epochs=2)", "gen(data, bs=32)")),
        ("model.fit(\n    gen(32),  # keep\n    epochs=2,\n)",
         ("model.fit(\n    gen(128),  # keep\n    epochs=2,\n)", "gen(32)")),
        ("model.fit(gen, epochs=32)", None),  # x is no call
        ("model.fit(gen(32, 32))", None),
        ("model.fit(gen(32.0))", None),
        ("model.fit(gen(True))", None),
        ("model.fit(*xs)", None),
        ("not a call(", None),
    ],
)  # fmt: skip
def test_set_x_call_literal(call, expected):
    assert rw.set_x_call_literal(call, 32, 128) == expected


def test_the_gain_with_steps_per_epoch_holds_for_an_epoch_of_the_same_samples():
    """With ``steps_per_epoch`` set, a larger batch makes each epoch more samples: "an epoch
    takes about 1/x of the time" holds only once steps_per_epoch is scaled down."""
    f = _source_facts("python_generator", GEN_FIT, loc(17, None))
    f.fit.steps_per_epoch = 100
    gain = _rd301(f).gain
    same = "an epoch of the same samples (steps_per_epoch=25; at steps_per_epoch=100 each"
    assert same in gain
    assert "trains 4x the samples and takes longer) takes about 1/" in gain
    f.fit.steps_per_epoch = None
    assert "an epoch takes about 1/" in _rd301(f).gain


@pytest.mark.parametrize(
    ("options", "argv", "ran", "run_with"),
    [
        (["-b", "--batch-size"], ["-b", "8"], "-b 8", "-b 32"),
        (["-b", "--batch-size"], ["-b8"], "-b8", "-b32"),
        (["-b", "--batch-size"], ["-b=8"], "-b=8", "-b=32"),
        (["-b", "--batch-size"], ["--batch", "8"], "--batch 8", "--batch 32"),
        (["--bs"], ["--bs=8", "--epochs", "2"], "--bs=8", "--bs=32"),  # add_argument(dest=)
    ],
)
def test_an_option_is_found_under_the_names_its_add_argument_gives_it(options, argv, ran, run_with):
    """A fresh user's ``-b 8`` was not found in the argv (the rule looked for
    ``--batch-size`` only), and the fix wrote ``batch_size=32`` into the ``fit`` call, where it
    makes ``-b`` do nothing. The capture now records the option's strings from the source."""
    f = _argv_facts(*argv)
    f.fit.batch_size_options = options
    fix = _rd301(f).fix
    assert fix.safety == "display-only" and fix.before is None
    assert f"run the script with {run_with} in place of {ran}" in fix.code
    assert "batch_size=args.batch_size" in fix.code


def test_recorded_options_do_not_match_other_arguments():
    for argv in (["-bn", "1"], ["--bias", "8"], ["--", "-b", "8"], ["--batch-size", "8"]):
        f = _argv_facts(*argv)
        f.fit.batch_size_options = ["-b", "--bs"]  # --batch-size is not one of its names
        code = _rd301(f).fix.code
        assert "run the script with" not in code, argv  # no option read from these
        assert "comes from the option -b/--bs" in code, argv  # the note, not a literal


def test_a_gain_measured_on_eager_steps_says_so():
    """A fresh user's ``run_eagerly=True`` model got RD301's gain with no word that the probe
    timed eager steps, whose per-step dispatch a larger batch amortises more than a traced
    step's (RD401's fix)."""
    f = _argv_facts()
    assert "eager" not in _rd301(f).gain
    f.fit.run_eagerly = True
    gain = _rd301(f).gain
    assert "measured on eager steps (run_eagerly=True, RD401)" in gain
    assert "check again once RD401 is fixed" in gain


def test_an_option_whose_value_was_not_traced_gets_a_note_not_a_literal():
    """``-vb 8`` (a grouped short option) or a computed default: the option is known, its value
    came from neither the argv the rule reads nor a literal default; a ``batch_size=32`` in the
    ``fit`` call would make ``-b`` do nothing."""
    f = _argv_facts("-vb", "8")
    f.fit.batch_size_options = ["-b", "--batch-size"]
    fix = _rd301(f).fix
    assert fix.safety == "display-only" and fix.before is None
    assert _code_lines(fix.code) == []
    assert "comes from the option -b/--batch-size: set it to 32 where its value is set" in fix.code


@pytest.mark.parametrize(
    "call",
    [
        "model.fit(x, y, batch_size=args.batch_size)",  # def train(args): parser in main()
        "model.fit(x, y, batch_size=cfg.batch_size)",  # a config object
        "model.fit(x, y, batch_size=bs)",  # a parameter, traced to no assignment
        "model.fit(x, y, args.batch_size)",  # the third positional argument
    ],
)
def test_a_batch_size_traced_to_no_line_is_never_overridden_by_a_literal(call):
    """A review found that ``-b 8`` still got ``fit(..., batch_size=32)`` where the capture
    records no option strings: the parser built in ``main()`` below ``def train(args)``, or a
    ``cfg`` never assigned from ``parse_args``. --verify applied that literal."""
    f = _argv_facts("-b", "8")
    f.fit.location = loc(31, call)
    fix = _rd301(f).fix
    assert fix.safety == "display-only" and fix.before is None
    assert _code_lines(fix.code) == []  # a note, nothing to paste over the call
    assert "set it to 32 where its value is set" in fix.code
    f.fit.location = loc(31, "model.fit(x, y, batch_size=8)")  # a literal: rewritten
    assert _rd301(f).fix.code == "model.fit(x, y, batch_size=32)"


# -- a batch size that fit gets through a parameter: def train(bs), called as train(...) ------

PARAM_FIT = "model.fit(x, y, batch_size=bs, epochs=3, verbose=2)"


def _passed_facts(argument: str, site: SourceLocation | None, *argv: str) -> Facts:
    """``def train(bs): model.fit(x, y, batch_size=bs, ...)`` at batch 8, whose caller passed
    ``argument`` (``facts.fit.batch_size_argument``) traced to ``site``."""
    f = _argv_facts(*argv)
    f.fit.location = loc(31, PARAM_FIT)
    f.fit.batch_size_argument = argument
    f.fit.batch_size_location = site
    return f


def test_a_literal_the_caller_passed_is_rewritten_in_the_callers_call():
    site = loc(52, "train(x_train, y_train, 8, epochs=3)")
    finding = _rd301(_passed_facts("8", site))
    assert finding.fix.code == "train(x_train, y_train, 32, epochs=3)"  # every argument kept
    assert finding.fix.before == "train(x_train, y_train, 8, epochs=3)"
    assert finding.location.line == 52  # the caller's line, where the value is written
    assert "batch_size=32" not in finding.fix.code  # fit's bs stays the parameter


def test_a_name_the_caller_passed_is_rewritten_where_it_is_assigned():
    finding = _rd301(_passed_facts("batch", loc(12, "batch = 8")))
    assert finding.fix.code == "batch = 32" and finding.location.line == 12


def test_an_option_the_caller_passed_keeps_the_command_line():
    f = _passed_facts("args.batch_size", None, "--batch-size", "8")
    f.fit.batch_size_options = ["--batch-size"]
    fix = _rd301(f).fix
    assert fix.safety == "display-only" and fix.before is None
    assert "run the script with --batch-size 32 in place of --batch-size 8" in fix.code
    assert "keep fit(..., batch_size=bs) as it is" in fix.code  # the fit call as written


def test_a_passed_value_traced_to_no_line_gets_a_note_naming_both():
    fix = _rd301(_passed_facts("cfg.batch_size", None)).fix
    assert fix.safety == "display-only" and fix.before is None and _code_lines(fix.code) == []
    assert "fit's batch_size is bs, passed in as cfg.batch_size (8 in this run)" in fix.code
    # a literal the capture could not tie to one argument is never written into fit either
    fix = _rd301(_passed_facts("8", None)).fix
    assert fix.safety == "display-only" and "batch_size=32" not in fix.code


@pytest.mark.parametrize(
    ("call", "expected"),
    [
        ("train(x, 8, epochs=3)", "train(x, 32, epochs=3)"),
        ("train(x, epochs=3, bs=8)", "train(x, epochs=3, bs=32)"),
        ("train(x, 8, 8)", None),  # two literals of that value: not told apart
        ("train(x, 16)", None),
        ("batch = 8", None),
    ],
)
def test_set_call_literal(call, expected):
    assert rw.set_call_literal(call, 8, 32) == expected


# -- a batch size computed on its assignment line (a new user's env-var script) ----------------

ARRAY_FIT = "model.fit(x, y, batch_size=BATCH_SIZE, epochs=2)"


def _assigned_facts(statement: str) -> Facts:
    """``fit(..., batch_size=BATCH_SIZE)`` on arrays at batch 8, the name assigned by
    ``statement`` at line 12 (``fit.batch_size_location``)."""
    f = _argv_facts()
    f.fit.location = loc(31, ARRAY_FIT)
    f.fit.batch_size_location = loc(12, statement)
    return f


@pytest.mark.parametrize(
    ("statement", "where"),
    [
        ('BATCH_SIZE = int(os.environ.get("BS", "8"))', "run with BS=32"),
        ('BATCH_SIZE = int(os.getenv("RD_BATCH", 8))', "run with RD_BATCH=32"),
        ('BATCH_SIZE = int(os.environ["BS"])', "run with BS=32"),
        ("BATCH_SIZE = int(sys.argv[1])", "the script's command line (sys.argv)"),
        ('BATCH_SIZE = int(os.getenv("BS")) if os.getenv("BS") else 8', "run with BS=32"),
        (
            'BATCH_SIZE = int(os.getenv("BS")) * int(os.getenv("NGPU"))',  # a review
            "the environment variables BS, NGPU: set them to give 32",
        ),
        ('BATCH_SIZE = cfg["batch"]', "what that expression reads"),
        ("BATCH_SIZE = base * 2", "what that expression reads"),
    ],
)
def test_a_computed_assignment_is_never_replaced_by_a_literal(statement, where):
    finding = _rd301(_assigned_facts(statement))
    fix = finding.fix
    assert fix.safety == "display-only" and fix.before is None  # --verify's patch skips it
    assert _code_lines(fix.code) == []  # no BATCH_SIZE = 32 dropping what sets it
    assert where in fix.code and "(8 in this run)" in fix.code
    assert finding.location.line == 12  # the line that sets it
    assert "BATCH_SIZE is computed" in fix.title


@pytest.mark.parametrize(
    ("statement", "expected"),
    [
        ("BATCH_SIZE = 8", "BATCH_SIZE = 32"),
        ("BATCH_SIZE: int = 4 * 2", "BATCH_SIZE: int = 32"),  # literals alone: nothing lost
    ],
)
def test_an_assignment_of_literals_is_rewritten(statement, expected):
    fix = _rd301(_assigned_facts(statement)).fix
    assert fix.code == expected and fix.before == statement and fix.safety == "unsafe"


def test_constant_expressions():
    def parse(text):
        return ast.parse(text, mode="eval").body

    assert all(rw.is_constant_expression(parse(t)) for t in ("64", "4 * 16", "2**6", "-8"))
    assert not any(
        rw.is_constant_expression(parse(t))
        for t in ("int('8')", "n", "cfg['b']", "a.b", "2 * n", "[8][0]")
    )
    assert rw.assigned_value("bs = 8").value == 8 and rw.assigned_value("fit(x)") is None
