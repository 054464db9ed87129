"""Batches of the user's data, sampled and timed without a model: the input-only probe.

- tf.data: a fresh iterator over the user's own dataset (``iter(dataset)`` again).
- numpy arrays and tensors: Keras' own array data adapter, as ``fit`` builds it
  (``keras.src.trainers.data_adapters.get_data_adapter``), iterated afresh.
- ``keras.utils.PyDataset`` and Keras 2's ``tf_keras.utils.Sequence``: indexed
  (``__getitem__``), as one worker would.
- a Python generator passed to ``fit``: it cannot be iterated twice, so :class:`Tee` wraps it
  before ``fit`` and keeps and times its batches as they flow (``flowed``).

Iteration runs in a daemon thread joined with the phase budget, so that a pipeline that blocks
(a hanging generator) cannot stall the session.
"""

from __future__ import annotations

import functools
import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rnndoctor.capture.budget import Budget

if TYPE_CHECKING:
    from rnndoctor.capture.session import CaptureSession

K_BATCHES = 16  # batches sampled and cached for the compute-only probe
_INPUT_WARMUP_BATCHES = 2  # first batches of a fresh iterator: iterator start, buffers filling
_INPUT_TARGET_S = 2.0  # stop sampling after this long once _MIN_BATCHES are in
_MIN_BATCHES = 4
_MAX_CACHE_BYTES = 256 * 2**20  # sampled batches kept in memory, at most


@dataclass
class Batches:
    """Batches sampled from the user's data.

    ``items``: each batch as Keras' data adapters yield it, converted to numpy (``x``, or
    ``(x, y)``, or ``(x, y, sample_weight)``; dicts for named inputs); ``method``: ``fresh
    iterator`` or ``as they flowed through fit``; ``not_measured``: why there are none.
    ``times_ms``: the time each batch took to arrive, in order; ``input_only_ms`` the input-only
    time per batch derived from them (see :class:`~rnndoctor.facts.ProbeFacts`). ``raw``: the
    same batches as the pipeline yielded them (tensors; ragged stays ragged), and
    ``element_spec`` the spec ``fit`` iterated: the compute-only probe rebuilds a dataset from
    them.
    """

    items: list[Any] = field(default_factory=list)
    method: str | None = None
    not_measured: str | None = None
    times_ms: list[float] = field(default_factory=list)
    input_only_ms: float | None = None
    raw: list[Any] = field(default_factory=list, repr=False)
    element_spec: Any = field(default=None, repr=False)


class Tee:
    """Times each ``next()`` of the user's generator and keeps the first ``keep`` batches."""

    def __init__(self, generator: Any, keep: int = K_BATCHES):
        self.generator = generator
        self.keep = keep
        self.items: list[Any] = []
        self.times_ms: list[float] = []
        self.kept_bytes = 0

    def __iter__(self):
        while True:
            start = time.perf_counter()
            try:
                item = next(self.generator)
            except StopIteration:
                return
            self.times_ms.append((time.perf_counter() - start) * 1000.0)
            if len(self.items) < self.keep and self.kept_bytes < _MAX_CACHE_BYTES:
                self.items.append(item)
                self.kept_bytes += nbytes(item)
            yield item


def nbytes(item: Any) -> int:
    """Bytes held by the arrays of one batch structure (numpy leaves; others count 0)."""
    import keras

    return sum(int(getattr(leaf, "nbytes", 0) or 0) for leaf in keras.tree.flatten(item))


def nbytes_tf(item: Any) -> int:
    """Bytes of one batch structure of tensors, from their static shapes and dtypes (a ragged
    dimension counts as 1)."""
    import keras

    total = 0
    for leaf in keras.tree.flatten(item):
        shape, dtype = getattr(leaf, "shape", None), getattr(leaf, "dtype", None)
        if shape is None:
            continue
        count = 1
        for dim in shape:
            count *= int(dim) if dim is not None else 1
        total += count * int(getattr(dtype, "size", None) or 4)
    return total


def to_numpy(item: Any) -> Any:
    """The batch structure with every tensor converted to numpy (``.numpy()``)."""
    import keras
    import numpy as np

    def convert(leaf: Any) -> Any:
        if leaf is None or isinstance(leaf, np.ndarray):
            return leaf
        if hasattr(leaf, "numpy"):
            return leaf.numpy()
        return np.asarray(leaf)

    return keras.tree.map_structure(convert, item)


def _tensor_spec(items: list[Any]) -> Any:
    """The element spec Keras' generator and PyDataset adapters compute from the first batches
    (``data_adapter_utils.get_tensor_spec``), or None."""
    from keras.src.trainers.data_adapters import data_adapter_utils

    try:
        return data_adapter_utils.get_tensor_spec(
            items[: data_adapter_utils.NUM_BATCHES_FOR_TENSOR_SPEC]
        )
    except Exception:
        return None


def flowed(tee: Tee) -> Batches:
    """The batches a :class:`Tee` kept while ``fit`` ran; input-only time is the median time
    per ``next()`` after the first ``_INPUT_WARMUP_BATCHES``."""
    times = tee.times_ms
    steady = times[_INPUT_WARMUP_BATCHES:] or times
    batches = Batches(
        items=[to_numpy(i) for i in tee.items],
        method="as they flowed through fit",
        times_ms=[round(t, 4) for t in times],
        input_only_ms=statistics.median(steady) if steady else None,
        raw=list(tee.items),
        element_spec=_tensor_spec(tee.items),
    )
    if not tee.items:
        batches.not_measured = "the generator yielded no batch during fit"
    return batches


@dataclass
class _Collected:
    times_ms: list[float]
    items: list[Any]
    error: BaseException | None


def _collect(
    session: CaptureSession,
    budget: Budget,
    produce: Callable[[], Any],
    what: str,
    keep: int = K_BATCHES,
) -> _Collected:
    """Runs ``produce()`` (an iterable of batches) in a daemon thread and keeps each batch with
    the milliseconds it took to arrive, until ``keep`` batches (``K_BATCHES``),
    ``_INPUT_TARGET_S`` (once ``_MIN_BATCHES`` are in), ``_MAX_CACHE_BYTES`` or the budget. A
    producer still blocked when the budget runs out is left behind, and a ``CutShort`` says
    so."""
    lock = threading.Lock()
    times: list[float] = []
    items: list[Any] = []
    errors: list[BaseException] = []
    done, stop = threading.Event(), threading.Event()

    def run() -> None:
        try:
            started = last = time.perf_counter()
            kept = 0
            for item in produce():
                now = time.perf_counter()
                kept += nbytes_tf(item)
                with lock:
                    times.append((now - last) * 1000.0)
                    items.append(item)
                last = now
                full = len(items) >= keep or (kept > _MAX_CACHE_BYTES and len(items) >= 2)
                late = now - started > _INPUT_TARGET_S and len(items) >= _MIN_BATCHES
                if full or late or stop.is_set():
                    break
        except BaseException as exc:  # reported to the caller
            errors.append(exc)
        finally:
            done.set()

    threading.Thread(target=run, name="rnndoctor input-only probe", daemon=True).start()
    if not done.wait(budget.left()):
        stop.set()
        session.cut_short(
            budget,
            f"{what} delivered {len(items)} batches within the {budget.seconds:g} s budget; the "
            "probe moved on (a blocked call is left behind)",
        )
    with lock:
        return _Collected(list(times), list(items), errors[0] if errors else None)


def fresh_iterator(
    session: CaptureSession,
    budget: Budget,
    make_iterator: Callable[[], Any],
    element_spec: Any,
    keep: int = K_BATCHES,
) -> Batches:
    """Samples up to ``keep`` batches of a fresh iterator (``make_iterator()``), timed.

    Input-only time is a rate: the wall time of the batches after the first
    ``_INPUT_WARMUP_BATCHES`` divided by their number (a prefetching or parallel pipeline hands
    out batches in bursts, which a per-call median would misread).

    Raises:
        BaseException: what the iterator raised, when it delivered no batch at all.
    """
    got = _collect(session, budget, make_iterator, "the input pipeline", keep)
    if got.error is not None and not got.items:
        raise got.error
    batches = Batches(
        items=[to_numpy(i) for i in got.items],
        method="fresh iterator",
        times_ms=[round(t, 4) for t in got.times_ms],
        raw=got.items,
        element_spec=element_spec,
    )
    steady = got.times_ms[_INPUT_WARMUP_BATCHES:]
    if len(steady) >= 2:
        batches.input_only_ms = sum(steady) / len(steady)
    elif got.times_ms:
        batches.input_only_ms = statistics.median(got.times_ms)
    else:
        batches.not_measured = "the input pipeline delivered no batch"
    return batches


def index_pydataset(session: CaptureSession, budget: Budget, x: Any) -> Batches:
    """Samples a ``keras.utils.PyDataset`` by indexing it (``__getitem__``) on one thread, as
    one worker would; each batch is standardised as Keras' ``PyDatasetAdapter`` does (no worker
    is started). Input-only time is the median per ``__getitem__``.

    Raises:
        BaseException: what ``__getitem__`` raised, when it delivered no batch at all.
    """
    from keras.src.trainers.data_adapters.py_dataset_adapter import PyDatasetAdapter

    adapter = PyDatasetAdapter(x, shuffle=False)
    try:
        count = x.num_batches
    except Exception:
        count = None
    return _index(
        session, budget, x, count, adapter._standardize_batch,
        "the PyDataset", "fresh indexing (PyDataset.__getitem__, one worker)",
    )  # fmt: skip


def index_tf_keras_sequence(session: CaptureSession, budget: Budget, x: Any) -> Batches:
    """Samples a Keras 2 ``tf_keras.utils.Sequence`` by indexing it (``__getitem__``) on one
    thread, as one worker would (no enqueuer is started); each batch is standardised as
    tf_keras' ``KerasSequenceAdapter`` does (``GeneratorDataAdapter._standardize_batch`` in
    tf_keras/src/engine/data_adapter.py: ``None`` parts dropped, lists made tuples, float
    arrays cast to ``floatx``). Input-only time is the median per ``__getitem__``.

    Raises:
        BaseException: what ``__getitem__`` raised, when it delivered no batch at all.
    """
    from tf_keras.src.engine.data_adapter import GeneratorDataAdapter

    try:
        count = len(x)
    except Exception:
        count = None
    # _standardize_batch reads nothing of the adapter: building one would start its enqueuer
    standardise = functools.partial(GeneratorDataAdapter._standardize_batch, None)
    return _index(
        session, budget, x, count, standardise,
        "the Sequence", "fresh indexing (tf_keras Sequence.__getitem__, one worker)",
    )  # fmt: skip


def _index(
    session: CaptureSession,
    budget: Budget,
    x: Any,
    count: int | None,
    standardise: Callable[[Any], Any],
    what: str,
    method: str,
) -> Batches:
    """Up to ``K_BATCHES`` batches ``standardise(x[i])`` for i = 0, 1, ..., timed."""
    total = K_BATCHES if count is None else min(K_BATCHES, int(count))

    def produce():
        for index in range(total):
            yield standardise(x[index])

    got = _collect(session, budget, produce, what)
    if got.error is not None and not got.items:
        raise got.error
    steady = got.times_ms[_INPUT_WARMUP_BATCHES:] or got.times_ms
    batches = Batches(
        items=[to_numpy(i) for i in got.items],
        method=method,
        times_ms=[round(t, 4) for t in got.times_ms],
        input_only_ms=statistics.median(steady) if steady else None,
        raw=got.items,
        element_spec=_tensor_spec(got.items),
    )
    if not got.items:
        batches.not_measured = f"{what} delivered no batch"
    return batches


def training_arrays(x: Any, arguments: dict[str, Any]) -> tuple[Any, Any, Any]:
    """``(x, y, sample_weight)`` as ``fit`` trains on them: with ``validation_split`` and no
    ``validation_data``, the part before the validation share (``array_slicing
    .train_validation_split``, as ``TensorFlowTrainer.fit`` calls it in
    keras/src/backend/tensorflow/trainer.py); else as given in ``fit``'s bound ``arguments``.

    Raises:
        ValueError: what ``train_validation_split`` raises for arrays it cannot split (``fit``
            raises it too)."""
    y, sample_weight = arguments.get("y"), arguments.get("sample_weight")
    split = arguments.get("validation_split")
    if split and arguments.get("validation_data") is None:
        from keras.src.trainers.data_adapters import array_slicing

        (x, y, sample_weight), _ = array_slicing.train_validation_split(
            (x, y, sample_weight), validation_split=split
        )
    return x, y, sample_weight


def array_batches(
    session: CaptureSession,
    budget: Budget,
    x: Any,
    arguments: dict[str, Any],
    keep: int = K_BATCHES,
) -> Batches:
    """Samples up to ``keep`` batches of arrays or tensors through Keras' own array data
    adapter, built as ``fit`` builds it from ``fit``'s bound ``arguments`` (``y``,
    ``sample_weight``, ``batch_size``, ``shuffle``, ``class_weight``), and iterated afresh.

    As ``fit`` does, ``validation_split`` (without ``validation_data``) first takes its share
    off the end of the arrays (``array_slicing.train_validation_split``, called by
    ``TensorFlowTrainer.fit`` in keras/src/backend/tensorflow/trainer.py): the batches are the
    training ones, and the element spec is the one the window's train function was traced for.
    Over the whole arrays, 2048 samples in batches of 32 gave a fixed batch (``float32[32, 50,
    3]``) where ``fit``, training on 1638 of them, traced ``float32[None, 50, 3]``: the probes
    then ran the window's function beside new ones traced for a fixed batch, 25-30% faster for
    a 64-unit LSTM on CPU whatever the setting probed, and RD403 read that as dispatch (a new
    user's tf_keras LSTM: 28% (24-30%), where the steps_per_execution setting saves 6-10%)."""
    from keras.src.trainers.data_adapters import get_data_adapter

    x, y, sample_weight = training_arrays(x, arguments)
    adapter = get_data_adapter(
        x,
        y,
        sample_weight=sample_weight,
        batch_size=arguments.get("batch_size") or 32,  # Keras' default for arrays
        shuffle=bool(arguments.get("shuffle", True)),
        class_weight=arguments.get("class_weight"),
    )
    dataset = adapter.get_tf_dataset()
    batches = fresh_iterator(session, budget, lambda: iter(dataset), dataset.element_spec, keep)
    batches.method = "fresh iterator (Keras' array data adapter, as fit builds it)"
    return batches
