"""Where a PyDataset's workers are set, read from the user's class (``capture/data.py``:
``DataFacts.init_location`` and ``built_with_keywords``), and RD206's fix on those facts pasted
back into the class: real Keras classes, no fit."""

from __future__ import annotations

import ast
import inspect
import textwrap

import pytest

keras = pytest.importorskip("keras")

import numpy as np  # noqa: E402

from rnndoctor.capture import data  # noqa: E402


class Items:
    def __len__(self):
        return 2

    def __getitem__(self, i):
        return np.zeros((2, 3, 1), "float32"), np.zeros((2, 1), "float32")


class Plain(Items, keras.utils.PyDataset):
    def __init__(self, n):
        self.n = n
        super().__init__(max_queue_size=4)  # marker:plain


class Forwards(Items, keras.utils.PyDataset):
    def __init__(self, n, **kw):
        self.n = n
        keras.utils.PyDataset.__init__(self, **kw)  # marker:forwards


class Keeps(Items, keras.utils.PyDataset):
    def __init__(self, n, **kw):
        self.options = kw
        super().__init__()  # marker:keeps


class Inherits(Forwards):
    pass


class NoInit(Items, keras.utils.PyDataset):
    pass


class SizedBase(Items, keras.utils.PyDataset):
    def __init__(self, batch_size, **kw):
        self.batch_size = batch_size
        super().__init__(**kw)


class Sized(SizedBase):
    def __init__(self):
        super().__init__(64)  # the base's batch size, not PyDataset's workers


@pytest.mark.parametrize(
    ("dataset", "marker", "forwards"),
    [
        (Plain(1), "plain", False),
        (Forwards(1, workers=1), "forwards", True),
        (Keeps(1, workers=1), "keeps", False),
        (Inherits(1), "forwards", True),  # the __init__ its class runs, a base's
    ],
)
def test_the_call_to_pydataset_init_is_found_in_the_users_class(dataset, marker, forwards):
    location, passes_on = data._pydataset_init(dataset)
    assert location.file == __file__ and f"# marker:{marker}" in location.code
    assert location.call_source.endswith(")") and "__init__(" in location.call_source
    assert ast.parse(location.call_source)  # one call, as written
    assert passes_on is forwards


def test_a_class_without_its_own_init_takes_the_keywords_where_it_is_built():
    assert data._pydataset_init(NoInit()) == (None, True)


def test_a_base_call_that_reaches_a_users_base_class_first_is_not_taken():
    """A review: ``super().__init__(64)`` in a subclass of the user's own base, whose first
    parameter is its batch size, read as PyDataset's ``workers`` would rewrite the batch size."""
    assert data._pydataset_init(Sized()) == (None, None)


def test_described_pydataset_carries_the_sites():
    facts = data.describe(Plain(1))
    assert facts.kind == "keras.PyDataset" and facts.built_with_keywords is False
    assert "# marker:plain" in facts.init_location.code


def test_the_rewritten_call_runs_and_sets_the_workers():
    """RD206's rewrite of ``Plain``'s call, pasted into the class's source: the new class
    builds a dataset with 2 workers on processes and keeps its other argument."""
    from rnndoctor.facts import Facts, RunInfo, SourceLocation
    from rnndoctor.rules import _pydataset as pd

    location, _ = data._pydataset_init(Plain(1))
    facts = Facts(run=RunInfo(script=__file__, argv=[], cwd="."))
    facts.data = data.describe(Plain(1))
    facts.data.location = SourceLocation(__file__, 1, call_source="Plain(1)")
    fix, where, _ = pd.parallel_fix(facts, 2)
    assert fix.before == location.call_source and where.line == location.line
    source = textwrap.dedent(inspect.getsource(Plain)).replace(fix.before, fix.code)
    namespace = {"keras": keras, "np": np, "Items": Items}
    exec(compile(source, "<fixed>", "exec"), namespace)  # noqa: S102 - the test's own class
    fixed = namespace["Plain"](1)
    assert (fixed.workers, fixed.use_multiprocessing, fixed.max_queue_size) == (2, True, 4)
