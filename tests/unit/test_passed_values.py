"""Following a parameter up the live call stack (``rnndoctor.capture.passed``), and the sites
the capture records from it for ``fit``'s batch size (``window._batch_size_sites``): the user's
script is a real file, run with its real frames."""

from __future__ import annotations

import ast
import importlib.util
import sys

import pytest

from rnndoctor.capture import passed

SCRIPT = """
import sys
from rnndoctor.capture import passed

def inner(bs, other=1, *, only=0):
    return passed.follow(sys._getframe(), "bs")

def middle(size):
    return inner(size)

def changed(size):
    size = size * 2
    return inner(size)

def outer():
    n = 64
    return middle(n)

class Trainer:
    def run(self, n):
        return inner(n)

def through_the_class():
    trainer = Trainer()
    return Trainer.run(trainer, 16)

class Runner:
    def run(self, epochs, bs):
        return inner(bs)

def epochs_then_batch():
    runner, n = Runner(), 8
    return Runner.run(runner, 8, n)

def splat(*a):
    return inner(*a)

def both(a, b):
    return [inner(a), inner(b, 2)]
"""


def _load(tmp_path, text: str, name: str):
    path = tmp_path / f"{name}.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def script(tmp_path):
    yield _load(tmp_path, SCRIPT, "passed_script")
    sys.modules.pop("passed_script", None)


def _values(chain):
    return [ast.unparse(step.value) for step in chain]


def test_a_parameter_is_followed_through_every_caller_to_the_name_it_came_from(script):
    chain = script.outer()
    assert _values(chain) == ["size", "n"]  # inner(size) in middle, middle(n) in outer
    assert chain[-1].call_source() == "middle(n)"
    assert chain[-1].line == SCRIPT.splitlines().index("    return middle(n)") + 1


def test_a_literal_a_keyword_and_a_method_call_bind_as_python_binds_them(script):
    assert _values(script.inner(32)) == ["32"]  # this test's own call, a file of its own
    assert _values(script.inner(other=2, bs=7)) == ["7"]
    assert _values(script.inner(5, 2, only=1)) == ["5"]
    assert _values(script.Trainer().run(16)) == ["n", "16"]  # self bound: run(16) gives n
    # Trainer.run(trainer, 16) looks like a method call; the run's values say n is not trainer
    assert _values(script.through_the_class()) == ["n", "16"]  # trainer is self, n is 16
    assert _values(script.epochs_then_batch()) == ["bs", "n"]  # not the 8 of epochs


def test_two_calls_on_one_line_are_told_apart_by_the_running_instruction(script):
    first, second = script.both(1, 2)
    assert _values(first) == ["a", "1"] and _values(second) == ["b", "2"]


def test_a_splat_or_a_reassigned_parameter_stops_the_chain(script):
    assert script.splat(8) == []  # *a may hold it anywhere
    assert _values(script.changed(8)) == ["size"]  # size = size * 2 in changed: its line


def test_only_named_parameters_are_followed(script):
    import sys as _sys

    frame = _sys._getframe()
    assert passed.passed_argument(frame, "script") is None  # a fixture's frame, not user code
    assert not passed.is_parameter(frame, "nothing")


TRAIN = """
import argparse
import sys
from rnndoctor.capture import sites, window

def fit(x=None, y=None, batch_size=None):
    location = sites.user_frame_location(skip=1, call_names=("fit",))
    return window._batch_size_sites(location, batch_size)

def train(bs):
    return fit(None, None, batch_size=bs)

def main(args):
    return fit(batch_size=args.batch_size)

def twice(n):
    return train(n)

def run(args):
    return train(args.batch_size)

def if_none(bs=None):
    if bs is None:
        bs = 32
    return fit(batch_size=bs)

def loop():
    bs = 64
    for bs in (8,):
        return train(bs)

def enclosing():
    size = 8
    def go():
        return train(size)
    return go()

b = 64

batch = 64
by_name = train(batch)
by_literal = twice(32)
parser = argparse.ArgumentParser()
parser.add_argument("-b", "--batch-size", type=int, default=128)
namespace = main(parser.parse_args(sys.argv[1:2] and []))
two_hops = run(parser.parse_args(sys.argv[1:2] and []))
defaulted = if_none(8)
looped = loop()
comprehended = [train(b) for b in [8]][0]
closed = enclosing()
"""


def test_the_sites_of_a_batch_size_passed_in(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "argv", ["train.py"])
    module = _load(tmp_path, TRAIN.replace("sys.argv[1:2] and []", ""), "passed_train")
    try:
        lines = TRAIN.splitlines()
        found = module.by_name
        assert found["batch_size_argument"] == "batch"
        assert found["batch_size_location"].line == lines.index("batch = 64") + 1
        found = module.by_literal
        assert found["batch_size_argument"] == "32"
        assert found["batch_size_location"].call_source == "twice(32)"  # RD301 rewrites 32
        found = module.namespace  # main(parser.parse_args()): def main(args)
        assert found["batch_size_argument"] == "args.batch_size"
        assert found["batch_size_options"] == ["-b", "--batch-size"]
        assert found["batch_size_location"].call_source.startswith('parser.add_argument("-b"')
        # train(bs) <- run(args) passing args.batch_size <- run(parser.parse_args())
        assert module.two_hops == found
        # an assignment the run did not take: the caller's literal instead
        assert module.defaulted["batch_size_location"].call_source == "if_none(8)"
        # bs = 64 and b = 64 are not what the loop, the comprehension or the closure passed
        for found, name in ((module.looped, "bs"), (module.comprehended, "b"),
                            (module.closed, "size")):  # fmt: skip
            assert found["batch_size_argument"] == name
            assert found["batch_size_location"] is None
    finally:
        sys.modules.pop("passed_train", None)


def test_a_batch_size_option_given_on_the_command_line_keeps_its_options_only(
    tmp_path, monkeypatch
):
    monkeypatch.setattr(sys, "argv", ["train.py", "-b", "128"])
    module = _load(tmp_path, TRAIN.replace("sys.argv[1:2] and []", ""), "passed_given")
    try:
        found = module.namespace
        assert found["batch_size_location"] is None  # the command line may have set it
        assert found["batch_size_options"] == ["-b", "--batch-size"]  # for the argv fix
    finally:
        sys.modules.pop("passed_given", None)
