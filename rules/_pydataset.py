"""The parallel-loading fix of a PyDataset or a tf_keras Sequence, shared by RD206 (which
reports the single worker) and RD201 (whose input-bound finding points at the same change).

Keras 3 takes ``workers`` and ``use_multiprocessing`` in ``PyDataset.__init__`` (keras/src/
trainers/data_adapters/py_dataset_adapter.py: ``PyDataset.__init__(self, workers=1,
use_multiprocessing=False, max_queue_size=10)``); Keras 2 takes them as ``fit``'s arguments
(tf_keras/src/engine/training.py: ``Model.fit``). The fix is written where the user's code
sets them, every other argument as written. Pure: no TensorFlow, no I/O.
"""

from __future__ import annotations

import ast

from rnndoctor import rewrite as rw
from rnndoctor.facts import Facts, SourceLocation
from rnndoctor.findings import Fix, FixSafety, Location
from rnndoctor.rules import _measured as m

PY_DATASET = "keras.PyDataset"
TF_KERAS_SEQUENCE = "tf_keras.Sequence"  # Keras 2: workers are fit's arguments
# PyDataset.__init__'s parameters in order (after self): a positional value sets them too
_INIT_PARAMETERS = ("workers", "use_multiprocessing", "max_queue_size")
TITLE = "Load batches in parallel worker processes"
MAX_SUGGESTED_WORKERS = 8  # RD206's max_suggested_workers default, which RD201 uses too


def single_worker(facts: Facts) -> bool:
    """Whether the PyDataset or Sequence loads one batch at a time: Keras starts its
    ``OrderedEnqueuer`` only for ``workers > 1``, or ``workers > 0`` with
    ``use_multiprocessing`` (``PyDatasetAdapter.__init__``; tf_keras'
    ``KerasSequenceAdapter._handle_multiprocessing``)."""
    data = facts.data
    workers = data.workers if data.workers is not None else 1
    return not (workers > 1 or (workers > 0 and data.use_multiprocessing))


def suggested_workers(facts: Facts, most: int) -> int:
    """The workers the fix suggests: the machine's CPU cores (``environment.cpu_count``; 4
    where unknown), at least 2, at most ``most``."""
    cpus = facts.environment.cpu_count if facts.environment else None
    return max(2, min(most, cpus or 4))


def parallel_fix(facts: Facts, workers: int) -> tuple[Fix, Location | None, str]:
    """The fix that loads batches on ``workers`` processes, where it goes, and what holds the
    settings (``PyDataset`` or ``fit``). A Keras 3 PyDataset: its class's call to
    ``PyDataset.__init__`` (``data.init_location``) with ``workers`` and
    ``use_multiprocessing`` set, else, where keywords given there reach it
    (``data.built_with_keywords``), the call that builds the dataset (``data.location``); a
    display-only note where neither can be written (the call passes ``**kwargs`` it does not
    take from its caller, or reads the value from a name). A tf_keras Sequence: the ``fit``
    call."""
    if facts.data.kind == PY_DATASET:
        fix, location = _py_dataset_fix(facts, workers)
        return fix, location or m.fit_location(facts), "PyDataset"
    return _fit_fix(facts, workers), m.fit_location(facts), "fit"


def _py_dataset_fix(facts: Facts, workers: int) -> tuple[Fix, Location | None]:
    data = facts.data
    values = {"workers": str(workers), "use_multiprocessing": "True"}
    init = data.init_location
    init_call = init.call_source if init else None
    order = _positions(init_call)
    read = rw.read_values(init_call, tuple(values), order)
    if init_call and not read and not rw.splats(init_call):
        code = _with_values(init_call, values, order)
        if code is not None:
            title = f"{TITLE} (in your PyDataset's __init__)"
            fix = Fix(title, code, FixSafety.UNSAFE, before=init_call)
            return fix, m.to_location(init)
    built = data.location.call_source if data.location else None
    passed = [n for n in values if rw.argument(init_call, _index(order, n), n) is not None]
    if data.built_with_keywords and not read and not passed:  # they reach PyDataset.__init__
        code = _with_values(built, values, ())
        if code is not None:
            title = f"{TITLE} (where you build your PyDataset, passed on to PyDataset.__init__)"
            fix = Fix(title, code, FixSafety.UNSAFE, before=built)
            return fix, m.to_location(data.location)
    return _py_dataset_note(init, init_call, read, workers), m.to_location(init or data.location)


def _py_dataset_note(
    init: SourceLocation | None, call: str | None, read: dict[str, str], workers: int
) -> Fix:
    """A display-only note where the settings cannot be written as a rewrite: the call reads
    them from a name (a literal would make it do nothing), passes ``**kwargs`` that do not come
    from where the dataset is built, or was not found."""
    wanted = f"workers={workers}, use_multiprocessing=True"
    if read:
        lines = [
            f"# your PyDataset's __init__ passes {name}={text}: set that where its value is set"
            for name, text in read.items()
        ]
        lines.append(f"# ({wanted})")
        why = "it reads the value from a name"
    elif call and rw.splats(call):
        splat = rw.splats(call)[0]
        lines = [
            f"# your PyDataset's __init__ passes **{splat} on to PyDataset.__init__: put "
            f"{wanted} in it",
            "# (a keyword beside the splat could clash with one it holds)",
        ]
        why = f"its __init__ passes **{splat}, which may hold them"
    else:
        lines = [f"# pass {wanted} to PyDataset.__init__ (super().__init__(...) in your class)"]
        why = "the call to PyDataset.__init__ was not found in your source"
    return Fix(f"{TITLE}; display-only: {why}", "\n".join(lines), FixSafety.DISPLAY_ONLY)


def _positions(call: str | None) -> tuple[str, ...]:
    """``PyDataset.__init__``'s parameter order as ``call`` passes positional arguments:
    ``super().__init__(4)`` from ``workers``, ``PyDataset.__init__(self, 4)`` after ``self``."""
    parsed = rw.parse_call(call)
    if parsed is None:
        return ()
    owner = parsed.func.value if isinstance(parsed.func, ast.Attribute) else None
    is_super = isinstance(owner, ast.Call) and ast.unparse(owner.func) == "super"
    return _INIT_PARAMETERS if is_super else ("self", *_INIT_PARAMETERS)


def _index(order: tuple[str, ...], name: str) -> int | None:
    return order.index(name) if name in order else None


def _with_values(
    call: str | None, values: dict[str, str], positions: tuple[str, ...]
) -> str | None:
    """``call`` with each of ``values`` set (positional where it passes one there, else the
    keyword, replaced or added; :func:`rnndoctor.rewrite.set_argument`); None where any cannot
    be."""
    code = call
    for name, value in values.items():
        position = _index(positions, name)
        if position is not None:
            code = rw.set_argument(code, position, name, value)
        else:
            code = rw.set_keyword(code, name, value)
        if code is None:
            return None
    return code


def _fit_fix(facts: Facts, workers: int) -> Fix:
    """Keras 2: the ``fit`` call with ``workers`` and ``use_multiprocessing`` set, every other
    argument as written; a display-only note where it passes them from a name, or ``**kwargs``."""
    call = facts.fit.location.call_source if facts.fit and facts.fit.location else None
    code = rw.set_keyword(call, "workers", str(workers))
    code = rw.set_keyword(code, "use_multiprocessing", "True")
    title = f"{TITLE} (fit's arguments in Keras 2)"
    if code is not None:
        return Fix(title=title, code=code, safety=FixSafety.UNSAFE, before=call)
    sketch = f"model.fit(..., workers={workers}, use_multiprocessing=True)"
    values = {"workers": workers, "use_multiprocessing": True}
    read = rw.read_values(call, tuple(values))
    notes = [
        f"# your fit call passes {name}={text}: set that to {values[name]!r} where it is set"
        for name, text in read.items()
    ]
    rest = [f"{name}={value!r}" for name, value in values.items() if name not in read]
    if notes:  # no literal beside the note that says not to write one
        sketch = f"# and pass {', '.join(rest)} to fit" if rest else ""
    code = "\n".join(line for line in [*notes, sketch] if line)
    return Fix(title=title, code=code, safety=FixSafety.DISPLAY_ONLY)
