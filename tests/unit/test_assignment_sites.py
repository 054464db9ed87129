"""``sites.assignment_site``: where the name ``fit`` receives (``batch_size=batch_size``) was
last assigned before the call, in the scope of the call (issue 12). Pure: no TensorFlow."""

from __future__ import annotations

import textwrap

from rnndoctor.capture import sites

SOURCE = textwrap.dedent(
    """\
    batch_size = 16
    x_train, y_train = load()
    batch_size = 32  # the one in force

    def main():
        batch_size = 8
        model.fit(x, y, batch_size=batch_size)

    model.fit(x_train, y_train, batch_size=batch_size)
    batch_size = 64  # after the call: not the one fit received
    """
)


def write(tmp_path):
    path = tmp_path / "train.py"
    path.write_text(SOURCE)
    return str(path)


def test_the_last_module_level_assignment_before_the_call(tmp_path):
    site = sites.assignment_site(write(tmp_path), "batch_size", 9)
    assert site.line == 3
    assert site.call_source == "batch_size = 32"
    assert site.code == "batch_size = 32  # the one in force"


def test_inside_a_function_its_own_assignment(tmp_path):
    site = sites.assignment_site(write(tmp_path), "batch_size", 7)
    assert site.line == 6 and site.call_source == "batch_size = 8"


def test_a_global_name_used_in_a_function_and_a_parameter(tmp_path):
    path = tmp_path / "train.py"
    path.write_text(
        "epochs_size = 4\n"
        "def train(batch_size):\n"
        "    model.fit(x, y, batch_size=batch_size, epochs=epochs_size)\n"
    )
    assert sites.assignment_site(str(path), "epochs_size", 3).line == 1
    assert sites.assignment_site(str(path), "batch_size", 3) is None  # a parameter


def test_tuple_targets_and_unknown_names(tmp_path):
    path = write(tmp_path)
    assert sites.assignment_site(path, "x_train", 9).line == 2
    assert sites.assignment_site(path, "nowhere", 9) is None


# -- fit(..., batch_size=args.batch_size): the add_argument whose default gave the value -----

ARGPARSE = textwrap.dedent(
    """\
    import argparse
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument(
        "-b", "--batch-size", type=int, default=64,
    )
    parser.add_argument("--units", dest="hidden", type=int, default=128)
    args = parser.parse_args()
    model.fit(x, y, batch_size=args.batch_size, epochs=args.epochs)
    """
)


def argparse_script(tmp_path, source=ARGPARSE, name="train.py"):
    path = tmp_path / name  # a new name per source: the sites read files through linecache
    path.write_text(source)
    return str(path)


def site(path, dest="batch_size", value=64, argv=(), line=9, namespace="args"):
    return sites.argparse_default_site(path, namespace, dest, line, value, list(argv))


def test_the_add_argument_call_whose_default_the_script_used(tmp_path):
    found = site(argparse_script(tmp_path))
    assert found.line == 4  # the call's first line
    assert found.call_source == (
        'parser.add_argument(\n    "-b", "--batch-size", type=int, default=64,\n)'
    )
    # dest= wins over the option string; other options on the command line leave it alone
    hidden = site(argparse_script(tmp_path), "hidden", 128, ["--epochs", "2", "-e", "-1"])
    assert hidden.line == 7


def test_no_site_when_the_command_line_may_have_set_the_option(tmp_path):
    path = argparse_script(tmp_path)
    for argv in (
        ["--batch-size", "64"], ["--batch-size=64"], ["--batch", "64"], ["--b", "64"],
        ["-b", "64"], ["-b64"], ["-b=64"],
        ["-vb", "64"], ["-vb64"],  # grouped single-dash flags: -v -b 64
    ):  # fmt: skip
        assert site(path, argv=argv) is None, argv
    single_dash = ARGPARSE.replace('"-b", "--batch-size"', '"-batch-size"')
    path = argparse_script(tmp_path, single_dash, "single_dash.py")
    assert site(path).line == 4
    assert site(path, argv=["-bat", "64"]) is None  # argparse abbreviates -batch-size too


def test_no_site_when_the_value_is_not_the_literal_default(tmp_path):
    path = argparse_script(tmp_path)
    assert site(path, value=32) is None  # another value
    assert site(path, value=64.0) is None  # another type
    assert site(path, line=3) is None  # the call comes after the fit line
    assert site(path, "units", 128) is None  # its dest is "hidden"
    assert site(path, namespace="cfg") is None  # cfg.batch_size: not from parse_args
    for name, default in (("computed.py", "default=2 ** 6"), ("kwargs.py", "**common, default=64"),
                          ("choices.py", "default=64, choices=[32, 64]")):  # fmt: skip
        path = argparse_script(tmp_path, ARGPARSE.replace("default=64", default), name)
        assert site(path) is None, default


def test_no_site_when_something_else_may_set_the_value(tmp_path):
    cases = {
        "twice.py": ("args = ", 'other.add_argument("--batch-size", default=64)\nargs = '),
        "listed.py": ("parser.parse_args()", 'parser.parse_args(["--epochs", "1"])'),
        "argv.py": ("parser.parse_args()", "parser.parse_args(sys.argv[1:])"),
        "intermixed.py": ("parser.parse_args()", 'parser.parse_intermixed_args(["-b", "8"])'),
        "set_defaults.py": ("args = ", "parser.set_defaults(batch_size=64)\nargs = "),
        "set_defaults_kw.py": ("args = ", "parser.set_defaults(**config)\nargs = "),
        "fromfile.py": ("ArgumentParser()", 'ArgumentParser(fromfile_prefix_chars="@")'),
        # the namespace changed after parsing: a config, a sweep, a cap, another namespace
        "vars.py": ("model.fit", "vars(args).update(json.load(f))\nmodel.fit"),
        "setattr.py": ("model.fit", "setattr(args, key, value)\nmodel.fit"),
        "dict.py": ("model.fit", "args.__dict__.update(cfg)\nmodel.fit"),
        "cap.py": ("model.fit", "args.batch_size = min(args.batch_size, 64)\nmodel.fit"),
        "sweep.py": ("model.fit", "for args.batch_size in (64, 128): pass\nmodel.fit"),
        "renamed.py": ("model.fit", "args = argparse.Namespace(**{**vars(cfg)})\nmodel.fit"),
        "action.py": ("args = ", "for action in parser._actions: action.default = 1\nargs = "),
        # another library's parser: values from config files or the environment
        "configargparse.py": ("import argparse", "import configargparse as argparse"),
        "env_var.py": ("default=64,", 'default=64, env_var="BATCH_SIZE",'),
        "parser_kw.py": ("ArgumentParser()", 'ArgumentParser(default_config_files=["a.yml"])'),
    }
    for name, (old, new) in cases.items():
        path = argparse_script(tmp_path, ARGPARSE.replace(old, new), name)
        assert site(path, line=10) is None, name
    # other stores leave the site: another name's attribute, a parameter named like it
    other = ARGPARSE.replace("model.fit", "cfg.batch_size = 8\ndef main(args): pass\nmodel.fit")
    assert site(argparse_script(tmp_path, other, "other.py"), line=11).line == 4


def test_a_namespace_whose_state_is_only_saved_or_logged_keeps_its_site(tmp_path):
    """A new user's ``json.dump(vars(args), f)`` (the run's config, saved) left RD301's fix
    display-only; a call that only reads the whole state changes nothing of it. One that
    takes it as its receiver, or a call not known to only read it, still does."""
    for name, read in (("dump.py", "json.dump(vars(args), f)"), ("log.py", "print(args.__dict__)"),
                       ("mlflow.py", "mlflow.log_params(vars(args))"),
                       ("wandb.py", "wandb.config.update(vars(args))")):  # fmt: skip
        path = argparse_script(tmp_path, ARGPARSE.replace("model.fit", f"{read}\nmodel.fit"), name)
        assert site(path, line=10).line == 4, name
    for name, changed in (("merge.py", "vars(args).update(cfg)"),
                          ("mine.py", "override(vars(args))"), ("bare.py", "update(vars(args))"),
                          ("dict.py", "dict.update(vars(args), batch_size=8)")):  # fmt: skip
        path = argparse_script(tmp_path, ARGPARSE.replace("model.fit", f"{changed}\nmodel.fit"),
                               name)  # fmt: skip
        assert site(path, line=10) is None, name


def test_parse_known_args_gives_the_namespace_its_first_target(tmp_path):
    known = ARGPARSE.replace("args = parser.parse_args()", "args, rest = parser.parse_known_args()")
    assert site(argparse_script(tmp_path, known, "known.py")).line == 4


# -- sites.argparse_options: the option's strings, whatever the command line ------------------


def test_the_options_strings_are_recorded_whether_or_not_the_command_line_gave_them(tmp_path):
    """RD301 finds ``-b 8`` in the script's argv by the strings of the ``add_argument`` call
    (``FitConfig.batch_size_options``); before, a fix for ``-b 8`` wrote a literal into the
    ``fit`` call, which made ``-b`` do nothing."""
    path = argparse_script(tmp_path)
    assert sites.argparse_options(path, "args", "batch_size", 9) == ["-b", "--batch-size"]
    assert sites.argparse_options(path, "args", "hidden", 9) == ["--units"]  # dest=
    assert sites.argparse_options(path, "args", "units", 9) is None  # its dest is "hidden"
    assert sites.argparse_options(path, "cfg", "batch_size", 9) is None  # not from parse_args
    assert sites.argparse_options(path, "args", "batch_size", 3) is None  # after the fit line
    twice = ARGPARSE.replace("args = ", 'other.add_argument("-n", dest="batch_size")\nargs = ')
    path = argparse_script(tmp_path, twice, "twice_options.py")
    assert sites.argparse_options(path, "args", "batch_size", 10) is None  # which one?


def test_a_name_a_loop_or_a_comprehension_binds_has_no_assignment_site(tmp_path):
    """``bs = 64`` then ``for bs in (8, 16): fit(..., batch_size=bs)``: the assignment is not what
    fit reads, and RD301 rewrote it (a review)."""
    path = tmp_path / "train.py"
    path.write_text(
        "bs = 64\n"
        "for bs in (8, 16):\n"
        "    model.fit(x, y, batch_size=bs)\n"
        "size = 64\n"
        "runs = [model.fit(x, y, batch_size=size) for size in (8, 16)]\n"
        "with open(p) as n:\n"
        "    n = 8\n"
        "model.fit(x, y, batch_size=n)\n"
        "if (k := 8):\n"
        "    k = 9\n"
        "model.fit(x, y, batch_size=k)\n"
    )
    assert sites.assignment_site(str(path), "bs", 3) is None
    assert sites.assignment_site(str(path), "size", 5) is None
    assert sites.assignment_site(str(path), "n", 8) is None
    assert sites.assignment_site(str(path), "k", 11) is None
    assert sites.assignment_site(str(path), "bs", 2).line == 1  # before the loop: the line
