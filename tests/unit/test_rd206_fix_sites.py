"""RD206's fix (and RD201's for the same dataset) written where the user's code sets a
PyDataset's workers (a new user's trial: the fix wrote ``super().__init__(..., **kwargs)`` in a
class whose ``__init__`` takes ``**kw``, a NameError once pasted, at the line that built the
dataset, and RD201 suggested 4 workers where RD206 suggested 2). Pure: rules on facts."""

from __future__ import annotations

import ast

import pytest
from test_rules_input_batch import SCRIPT, check_finding, facts, loc, run

from rnndoctor.facts import DataFacts, SourceLocation
from rnndoctor.findings import Severity

BUILT = "Seqs(x, y, batch_size=32)"  # the call, as the capture records it (call_source)


def _pydataset(init: str | None, forwards: bool | None, workers: int = 1) -> DataFacts:
    """A Keras 3 PyDataset built at line 15 (``BUILT``) whose class calls ``init`` (the call to
    ``PyDataset.__init__`` at line 9; None: not found), ``forwards``: keywords given where it is
    built reach ``PyDataset.__init__``."""
    return DataFacts(
        kind="keras.PyDataset", reiterable=True, workers=workers, use_multiprocessing=False,
        max_queue_size=10,
        location=SourceLocation(SCRIPT, 15, code=f"train = {BUILT}", call_source=BUILT),
        init_location=loc(9, init) if init else None, built_with_keywords=forwards,
    )  # fmt: skip


def _rd206(data: DataFacts):
    _, (finding,) = run(facts(step=10.0, compute=3.0, data=data), "RD206")
    check_finding(finding, "RD206")
    ast.parse(finding.fix.code)  # pastes as Python, comments and all
    return finding


@pytest.mark.parametrize(
    ("init", "expected"),
    [
        ("super().__init__()", "super().__init__(workers=2, use_multiprocessing=True)"),
        (
            "super().__init__(max_queue_size=4)",
            "super().__init__(max_queue_size=4, workers=2, use_multiprocessing=True)",
        ),
        ("super().__init__(1)", "super().__init__(2, use_multiprocessing=True)"),  # positional
        (
            "keras.utils.PyDataset.__init__(self, 1, False)",  # after self
            "keras.utils.PyDataset.__init__(self, 2, True)",
        ),
        ("super().__init__(workers=1)", "super().__init__(workers=2, use_multiprocessing=True)"),
    ],
)
def test_the_call_to_pydataset_init_is_rewritten_in_the_users_class(init, expected):
    finding = _rd206(_pydataset(init, forwards=False))
    assert finding.fix.code == expected and finding.fix.before == init
    assert finding.fix.safety == "unsafe" and finding.location.line == 9  # the __init__ line
    assert "in your PyDataset's __init__" in finding.fix.title


@pytest.mark.parametrize(
    "init", ["super().__init__(**kw)", "keras.utils.PyDataset.__init__(self, **kwargs)", None]
)
def test_keywords_that_reach_pydataset_init_are_added_where_the_dataset_is_built(init):
    """The class passes its own ``**kw`` on (or has no ``__init__``: ``init`` None): the call
    that builds the dataset takes them, every argument as written."""
    finding = _rd206(_pydataset(init, forwards=True))
    assert finding.fix.code == "Seqs(x, y, batch_size=32, workers=2, use_multiprocessing=True)"
    assert finding.fix.before == BUILT and finding.location.line == 15


def test_a_splat_that_is_not_passed_on_gets_a_note_with_its_own_name():
    finding = _rd206(_pydataset("super().__init__(**kw)", forwards=False))
    fix = finding.fix
    assert fix.safety == "display-only" and fix.before is None
    assert "**kw on to PyDataset.__init__" in fix.code and "kwargs" not in fix.code
    assert finding.location.line == 9


@pytest.mark.parametrize(
    ("init", "shown"),
    [
        ("super().__init__(workers=args.workers)", "workers=args.workers"),
        ("super().__init__(n_workers, **kw)", "workers=n_workers"),  # positional, by name
    ],
)
def test_a_value_read_from_a_name_is_never_overwritten(init, shown):
    fix = _rd206(_pydataset(init, forwards=True)).fix
    assert fix.safety == "display-only" and fix.before is None
    assert f"passes {shown}: set that where its value is set" in fix.code
    assert [line for line in fix.code.splitlines() if not line.startswith("#")] == []


def test_a_value_passed_beside_a_forwarded_splat_is_not_added_where_it_is_built():
    """``super().__init__(workers=1, **kw)``: a second ``workers`` through ``**kw`` would be a
    TypeError, so the construction call is not rewritten; the literal beside the splat is not
    either (the splat may hold use_multiprocessing)."""
    fix = _rd206(_pydataset("super().__init__(workers=1, **kw)", forwards=True)).fix
    assert fix.safety == "display-only" and "Seqs(" not in fix.code


def test_no_call_found_gives_a_note_at_the_line_that_built_it():
    finding = _rd206(_pydataset(None, forwards=None))
    assert finding.fix.safety == "display-only" and finding.location.line == 15
    assert "pass workers=2, use_multiprocessing=True to PyDataset.__init__" in finding.fix.code


def test_rd201_gives_rd206s_fix_and_no_other_worker_count():
    data = _pydataset("super().__init__()", forwards=False)
    f = facts(step=10.0, compute=3.0, data=data)
    (rd201,) = run(f, "RD201")[1]
    (rd206,) = run(f, "RD206")[1]
    assert rd201.severity >= Severity.WARNING
    assert rd201.fix.code == rd206.fix.code  # the same workers, the same call
    assert rd201.fix.safety == "display-only"  # RD206 carries the rewrite


def test_rd201_on_a_pydataset_already_on_several_workers_says_so():
    f = facts(step=10.0, compute=3.0, data=_pydataset("super().__init__()", False, workers=4))
    (rd201,) = run(f, "RD201")[1]
    assert "already loads on 4 worker threads" in rd201.fix.code
    assert run(f, "RD206")[1] == []
