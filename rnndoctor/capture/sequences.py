"""Sequence sampling: valid lengths, padding and masks per RNN input (issue 4).

Contract used by :mod:`rnndoctor.capture.diagnosis`: ``sample_sequences(session, model,
batches)`` fills ``session.facts.sequences`` from ``batches`` (a ``probes.Batches``), within
``session.budget("sequence sampling")``. ``install(session)`` runs before the user's script; what
its hooks see goes to ``session.sequence_state``.

How the valid lengths are found:

- **The mask each RNN receives.** The model runs forward once per sampled batch
  (``training=False``) while each RNN layer's ``call`` is replaced, on that instance only, by a
  recorder: it keeps the ``mask`` argument Keras passed (from ``Embedding(mask_zero=True)``,
  ``Masking(mask_value=v)``, an explicit ``mask=`` or anything else the model computes) and the
  sequences it got, and returns zeros of the layer's output shape instead of running the
  recurrence (the masks downstream do not depend on RNN outputs, so sampling stays cheap and a
  ``stateful`` layer's states are not touched). Wrappers (``Bidirectional``,
  ``TimeDistributed``) call the inner layer, so the inner layer's own mask is what is recorded.
  Which layer made the mask (``length_source``) is read from the model graph (networkx):
  the ``Embedding(mask_zero=True)`` or ``Masking`` layers upstream of the RNN.
- **Ragged inputs**: row lengths of a ``tf.RaggedTensor`` that reaches an RNN. Keras 3 rejects
  those at trace time (``RNN.call`` indexes ``sequences[:, 0, :]``), so ``install`` also
  records, during the user's own ``fit``, every RNN that receives one.
- **No mask**: when an RNN receives none but the model input feeding it carries runs of one
  repeated pad step at one end of its rows (an id such as 0, ``-1`` or a tokenizer's pad id, or a
  whole feature vector such as the one-hot vector of a space), the padding is still measured
  (``length_source="pad_value"``, ``mask_used=False``, ``pad_value`` says which step pads). The
  pad step is decided from the data: :func:`detect_padding` states the criterion.

``install`` also remembers where the user's code pads: ``keras.utils.pad_sequences`` (every
``keras`` module that exports it) with its ``padding`` argument, and
``tf.data.Dataset.padded_batch`` / ``bucket_by_sequence_length``. A sampled input is matched to
the ``pad_sequences`` call whose result holds its rows.
"""

from __future__ import annotations

import functools
import inspect
import os
import sys
import time
import weakref
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rnndoctor import stats
from rnndoctor.capture import sites
from rnndoctor.capture.session import SequenceState
from rnndoctor.facts import (
    LengthHistogram,
    ModelFacts,
    Phase,
    SequenceFacts,
    SequenceInput,
    SourceLocation,
)

if TYPE_CHECKING:
    from rnndoctor.capture.session import CaptureSession

_MAX_LENGTHS = 4096  # per-sequence lengths kept in the facts (the exact distribution is kept too)
_HISTOGRAM_BINS = 24  # equal-width bins of the length histogram (at most one per length)
_QUANTILES = (("p10", 10), ("p25", 25), ("p50", 50), ("p75", 75), ("p90", 90), ("p99", 99))
# No mask: how clear the padding must be to be called padding (see detect_padding); the shares are
# rnndoctor's own choice ("clearly padded").
_PAD_ROWS_MIN_SHARE = 0.10  # at least this share of the sampled rows end (or start) with a run
_PAD_SIDE_MIN_SHARE = 0.90  # and at least this share of the runs sit at that same end
_PAD_RUN_LENGTHS_MIN = 2  # and (a pad step other than zero) runs of at least this many lengths
_PAD_RUN_MEAN_MIN = 2.0  # and of at least this mean length (chance repeats of a token are shorter)
_MATCH_ROWS = 32  # sampled rows looked up in each pad_sequences result
_MAX_PAD_CALLS = 32  # pad call sites remembered (the latest call per site)
# A pad_sequences call that pads one batch at a time (in a PyDataset's or Sequence's
# __getitem__, or a generator) leaves only its latest batch alive, which the sampled rows are
# seldom from: the rows of each result up to this many are kept as hashes, one set per dtype and
# width (without maxlen each batch is padded to its own longest row), up to this many in all per
# call site, so the sampled rows are found among any of its batches. Source: rnndoctor's choice
# (a 32-row batch of 200 int32 steps hashes in about 20 us; 65536 hashes hold about 4 MiB).
# Batches padded in the worker processes of a PyDataset with use_multiprocessing=True are not
# seen (the hook records in the process that calls it): their padding line stays unknown.
_HASHED_RESULT_ROWS = 4096
_HASHED_SITE_ROWS = 65536


@dataclass
class PadCall:
    """A call of the user's code that pads sequences.

    ``function``: ``pad_sequences``, ``padded_batch`` or ``bucket_by_sequence_length``;
    ``padding``: pad_sequences' ``padding`` argument (``pre`` by default; padded_batch and
    bucket_by_sequence_length pad at the end: ``post``); ``explicit``: the call gave it;
    ``result``: a weak reference to the padded array (pad_sequences only); ``hashed``: hashes
    of the rows of this site's results of at most :data:`_HASHED_RESULT_ROWS` rows (each batch a
    ``__getitem__`` pads), one set per ``(dtype, width)``.
    """

    function: str
    location: SourceLocation | None
    padding: str | None = None
    explicit: bool = False
    result: Any = None
    hashed: dict[tuple[str, int], set[int]] = field(default_factory=dict, repr=False)
    _rows: set[bytes] | None = field(default=None, repr=False)

    def array(self) -> Any:
        return self.result() if self.result is not None else None

    def hash_rows(self, array: Any, earlier: PadCall | None) -> None:
        """Keeps hashes of ``array``'s rows (a small 2-D result), beside those of the site's
        ``earlier`` calls, up to :data:`_HASHED_SITE_ROWS` in all."""
        import numpy as np

        if earlier is not None:
            self.hashed = earlier.hashed
        if array.ndim != 2 or len(array) > _HASHED_RESULT_ROWS:
            return
        if sum(len(h) for h in self.hashed.values()) >= _HASHED_SITE_ROWS:
            return
        rows = self.hashed.setdefault((array.dtype.str, int(array.shape[1])), set())
        rows.update(hash(r.tobytes()) for r in np.ascontiguousarray(array))

    def holds_rows(self, rows: Any) -> int:
        """How many of ``rows`` (a 2-D array) are rows of this call's result, or of the site's
        earlier small results (:attr:`hashed`)."""
        import numpy as np

        if rows.ndim != 2:
            return 0
        found = 0
        array = self.array()
        if array is not None and array.ndim == 2 and array.shape[1] == rows.shape[1]:
            if self._rows is None:
                self._rows = {r.tobytes() for r in np.ascontiguousarray(array)}
            cast = np.ascontiguousarray(rows[:_MATCH_ROWS], dtype=array.dtype)
            found = sum(r.tobytes() in self._rows for r in cast)
        for (dtype, width), hashed in self.hashed.items():
            if width == rows.shape[1]:
                cast = np.ascontiguousarray(rows[:_MATCH_ROWS], dtype=np.dtype(dtype))
                found = max(found, sum(hash(r.tobytes()) in hashed for r in cast))
        return found


_HOOKS_ATTR = "_rnndoctor_sequence_hooks"  # the _Hooks, on the patched keras.layers.RNN class


class _Hooks:
    """The padding and RNN-call patches' link to the state they record into (one per process,
    kept on the patched ``keras.layers.RNN``; :func:`install` points it at each new state)."""

    def __init__(self) -> None:
        self.state = SequenceState()


def _installed_hooks() -> _Hooks | None:
    keras = sys.modules.get("keras")
    rnn = getattr(getattr(keras, "layers", None), "RNN", None) if keras is not None else None
    return rnn.__dict__.get(_HOOKS_ATTR) if rnn is not None else None


def pad_calls() -> list[PadCall]:
    """The padding calls the installed hooks have seen so far, oldest first."""
    hooks = _installed_hooks()
    return list(hooks.state.calls.values()) if hooks is not None else []


def _remember(state: SequenceState, call: PadCall) -> None:
    if call.location is None:
        return
    key = (call.location.file, call.location.line)
    state.calls.pop(key, None)
    state.calls[key] = call
    while len(state.calls) > _MAX_PAD_CALLS:
        state.calls.pop(next(iter(state.calls)))


def _called_by_user(depth: int = 2) -> bool:
    """Whether the hooked function's caller is the user's code: the first frame above the hook
    that is not rnndoctor's own (other rnndoctor hooks may wrap this one) is a user file, and
    not a library calling the function for the user (TF's bucket_by_sequence_length calls
    padded_batch)."""
    frame = sys._getframe(depth)
    while frame is not None and _is_rnndoctor_file(frame.f_code.co_filename):
        frame = frame.f_back
    return frame is not None and sites.is_user_file(frame.f_code.co_filename)


_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def _is_rnndoctor_file(filename: str) -> bool:
    path = os.path.abspath(filename)
    return path.startswith(_PACKAGE_DIR) and not path.startswith(_PACKAGE_DIR + "examples")


def install(session: CaptureSession | None) -> None:
    """Hooks the padding calls and the RNN layers' ``call`` (for ragged inputs). Idempotent.

    - ``keras.utils.pad_sequences`` (and every ``keras`` module exporting the same function,
      ``keras.preprocessing.sequence`` included), and tf_keras' own when it is installed: the
      user's call site, ``padding`` and result.
    - ``tf.data.Dataset.padded_batch`` / ``bucket_by_sequence_length``: the user's call site.
    - ``keras.layers.RNN.call``: when an RNN receives a ``tf.RaggedTensor`` (Keras 3 then fails
      in ``RNN.call``), ``session.facts.sequences`` records it at once and is saved, so the
      facts hold it even though ``fit`` raises.

    The patches are installed once per process; calling it again only points them at a fresh
    state (they forget what they saw), ``session.sequence_state``.

    Args:
        session: the check's session, whose facts receive ragged inputs; None: record only.
    """
    import keras

    hooks = _installed_hooks()
    if hooks is None:
        hooks = _Hooks()
        _hook_pad_sequences(hooks)
        _hook_datasets(hooks)
        _hook_rnn_call(hooks)
        setattr(keras.layers.RNN, _HOOKS_ATTR, hooks)
    hooks.state = SequenceState(session=session)
    if session is not None:
        session.sequence_state = hooks.state


def _hook_pad_sequences(hooks: _Hooks) -> None:
    """Hooks ``pad_sequences`` of Keras 3 (``keras/src/utils/sequence_utils.py``) and, when it
    is installed, of tf_keras (``tf_keras/src/utils/data_utils.py``), in every module of that
    package that exports it."""
    from keras.src.utils import sequence_utils

    from rnndoctor.capture import flavour

    _hook_pad_function(hooks, "keras", sequence_utils.pad_sequences)
    legacy = flavour.tf_keras()
    if legacy is not None:
        from tf_keras.src.utils import data_utils

        _hook_pad_function(hooks, flavour.TF_KERAS, data_utils.pad_sequences)


def _hook_pad_function(hooks: _Hooks, package: str, original: Callable[..., Any]) -> None:
    signature = inspect.signature(original)

    @functools.wraps(original)
    def pad_sequences(*args, **kwargs):
        result = original(*args, **kwargs)
        try:
            if _called_by_user():
                bound = signature.bind(*args, **kwargs)
                padding = bound.arguments.get("padding", signature.parameters["padding"].default)
                call = PadCall(
                    function="pad_sequences",
                    location=sites.user_frame_location(skip=1, call_names=("pad_sequences",)),
                    padding=str(padding),
                    explicit="padding" in bound.arguments,
                    result=weakref.ref(result),
                )
                if call.location is not None:
                    site = (call.location.file, call.location.line)
                    call.hash_rows(result, hooks.state.calls.get(site))
                _remember(hooks.state, call)
        except Exception:  # recording must never break the user's script
            pass
        return result

    for name, module in list(sys.modules.items()):
        if name.split(".")[0] == package and getattr(module, "pad_sequences", None) is original:
            module.pad_sequences = pad_sequences


def _hook_datasets(hooks: _Hooks) -> None:
    import tensorflow as tf

    dataset = tf.data.Dataset
    for method, padding in (("padded_batch", "post"), ("bucket_by_sequence_length", "post")):
        original = getattr(dataset, method, None)
        if original is None:
            continue

        def make(original=original, method=method, padding=padding):
            @functools.wraps(original)
            def wrapper(self, *args, **kwargs):
                try:
                    if _called_by_user():
                        location = sites.user_frame_location(skip=1, call_names=(method,))
                        call = PadCall(method, location, padding, explicit=False)
                        _remember(hooks.state, call)
                except Exception:
                    pass
                return original(self, *args, **kwargs)

            return wrapper

        setattr(dataset, method, make())


def _hook_rnn_call(hooks: _Hooks) -> None:
    import keras
    import tensorflow as tf

    rnn = keras.layers.RNN
    original = rnn.call

    @functools.wraps(original)
    def call(self, sequences, *args, **kwargs):
        try:
            state = hooks.state
            if isinstance(sequences, tf.RaggedTensor) and self.name not in state.ragged:
                state.ragged[self.name] = sites.site_of(self)
                if state.session is not None:
                    _record_ragged(state.session)
        except Exception:
            pass
        return original(self, sequences, *args, **kwargs)

    rnn.call = call


def _ragged_inputs(state: SequenceState) -> list[SequenceInput]:
    if not state.ragged:
        return []
    return [
        SequenceInput(
            input="(a tf.RaggedTensor, seen while fit traced the model)",
            rnn_layers=sorted(state.ragged),
            length_source="ragged",
            ragged=True,
        )
    ]


def _record_ragged(session: CaptureSession) -> None:
    facts = session.facts
    if facts.sequences is None:
        facts.sequences = SequenceFacts(
            method="seen while fit traced the model",
            not_measured="the RNN received a ragged tensor; lengths were not sampled",
        )
    facts.sequences.inputs = [i for i in facts.sequences.inputs if not i.ragged]
    facts.sequences.inputs.extend(_ragged_inputs(session.sequence_state))
    session.save()


# The sequences the padding estimates want where the sampled batches show padding and more
# batches cost little to draw (arrays: MoreBatches): RD502's estimate on the bundled demo (per-
# batch padding at batch 64, 19,000 sequences) is the expected longest of 64 lengths, which rests
# on the distribution's tail. Redrawn 200 times from the demo's own lengths, it spread by a
# standard deviation of 0.012 over 1024 sequences (16 batches: 1.08x, 90% of draws 1.07-1.11x,
# against its 1.05x cut-off; the check read 1.06x to 1.09x in six runs, and the lower bound
# of its interval fell under the cut-off in one) and of 0.0056 over 4096. Source: rnndoctor's
# choice, from those draws (README, "The padding estimates' sample").
SEQUENCE_ROWS = 4096
MORE_BATCHES_MAX = 64  # the larger sample's batches at most (4 x K_BATCHES), whatever their rows
_MORE_MEASURE_S = 2.0  # the most seconds the larger sample's forward passes may take

# Draws up to N batches of the user's data afresh, within a budget: (budget, N) -> numpy batches
MoreBatches = Callable[[Any, int], list[Any]]


def sample_sequences(
    session: CaptureSession, model: Any, batches: Any, more: MoreBatches | None = None
) -> None:
    """Fills ``session.facts.sequences`` from the sampled batches, within the phase's budget;
    where they show padding and ``more`` can draw further batches, from a larger sample
    (:func:`_larger_sample`).

    Never raises: a failure is recorded as ``not_measured`` (and as a cut-short phase when the
    budget ran out).

    Args:
        session: the check's session.
        model: the user's model.
        batches: a ``probes.Batches`` (numpy batches as Keras' data adapters yield them).
        more: draws up to N batches afresh (arrays: ``probes.more_batches``); None where more
            batches would cost a real pipeline's time, or could not be drawn again.
    """
    state = session.sequence_state
    session.set_phase(Phase.SEQUENCES)
    budget = session.budget("sequence sampling")
    items = list(getattr(batches, "items", None) or [])
    if not items:
        session.facts.sequences = SequenceFacts(
            method=getattr(batches, "method", None),
            inputs=_ragged_inputs(state),
            not_measured=getattr(batches, "not_measured", None) or "no batch was sampled",
        )
        return
    try:
        facts = measure_batches(
            model,
            items,
            model_facts=session.facts.model,
            deadline=budget.deadline,
            calls=list(state.calls.values()),
        )
    except Exception as exc:
        session.facts.sequences = SequenceFacts(
            inputs=_ragged_inputs(state),
            not_measured=f"sequence sampling failed: {type(exc).__name__}: {exc}"[:300],
        )
        return
    if more is not None and _padded(facts):
        facts = _larger_sample(session, model, facts, budget, more)
    facts.method = facts.method or getattr(batches, "method", None)
    # ragged inputs seen during fit (by layer name) and not among the sampled ones (by path)
    sampled = {path.rsplit("/", 1)[-1] for i in facts.inputs if i.ragged for path in i.rnn_layers}
    facts.inputs.extend(i for i in _ragged_inputs(state) if not set(i.rnn_layers) <= sampled)
    session.facts.sequences = facts
    if facts.batches_sampled < len(items) and budget.expired():
        session.cut_short(
            budget,
            f"sampled {facts.batches_sampled} of {len(items)} batches before the budget ran out",
        )


def _padded(facts: SequenceFacts) -> bool:
    """Whether a sampled input shows padding (a padded fraction above zero): the padding rules'
    estimates (RD501, RD502) then rest on the sample's lengths."""
    return any((i.padded_fraction or 0.0) > 0.0 and not i.ragged for i in facts.inputs)


def _larger_sample(
    session: CaptureSession, model: Any, facts: SequenceFacts, budget: Any, more: MoreBatches
) -> SequenceFacts:
    """``facts`` measured again on a larger fresh sample (:data:`SEQUENCE_ROWS` sequences, at
    most :data:`MORE_BATCHES_MAX` batches), drawn by ``more`` within ``budget`` and measured
    within :data:`_MORE_MEASURE_S`; ``facts`` as they were where the larger sample is not larger
    (the draw failed, the budget or the time ran out first)."""
    rows = max((max(i.batch_sizes, default=0) for i in facts.inputs), default=0)
    want = min(MORE_BATCHES_MAX, -(-SEQUENCE_ROWS // rows)) if rows else 0
    if want <= facts.batches_sampled or budget.expired():
        return facts
    try:
        items = more(budget, want)
        if len(items) <= facts.batches_sampled:
            return facts
        larger = measure_batches(
            model,
            items,
            model_facts=session.facts.model,
            deadline=min(budget.deadline, time.monotonic() + _MORE_MEASURE_S),
            calls=list(session.sequence_state.calls.values()),
        )
    except Exception:  # the first sample stands
        return facts
    if larger.batches_sampled <= facts.batches_sampled or len(larger.inputs) != len(facts.inputs):
        return facts
    larger.method = (
        f"a fresh draw of {larger.batches_sampled} batches through Keras' array data adapter, "
        "shuffled as fit shuffles (the padding estimates' larger sample)"
    )
    return larger


# -- measuring ---------------------------------------------------------------------------------


@dataclass
class _Seen:
    """What one RNN layer received in one batch: its input's (rows, time) and the mask."""

    rows: int
    time: int
    mask: Any = None  # numpy bool (rows, time) or None
    ragged_lengths: Any = None  # numpy int (rows,) for a ragged input


def _rnn_layers_by_path(model: Any) -> dict[str, Any]:
    """Every RNN layer of ``model`` by the path ``collect_model`` gives it (through wrappers
    and nested models)."""

    from rnndoctor.capture import flavour
    from rnndoctor.capture.model import sublayers

    found: dict[str, Any] = {}
    seen: set[int] = set()

    def visit(layer: Any, parent: str) -> None:
        if id(layer) in seen:
            return
        seen.add(id(layer))
        path = f"{parent}/{layer.name}"
        if isinstance(layer, flavour.module_of(layer).layers.RNN):
            found[path] = layer
            return
        for child in sublayers(layer):
            visit(child, path)

    for child in sublayers(model):
        visit(child, model.name)
    return found


def _to_numpy_mask(mask: Any, rows: int, time_steps: int) -> Any:
    import keras
    import numpy as np

    flat = [m for m in keras.tree.flatten(mask) if m is not None] if mask is not None else []
    if not flat:
        return None
    array = np.asarray(keras.ops.convert_to_numpy(flat[0])).astype(bool)
    if array.ndim == 3 and array.shape[-1] == 1:
        array = array[..., 0]
    if array.shape != (rows, time_steps):
        return None  # not a (batch, time) mask of these sequences (TimeDistributed's slices)
    return array


class _AllSeen(BaseException):
    """Raised by the last RNN layer's recorder (:func:`_recording`) once every RNN layer has
    recorded what it received: the layers after them compute nothing the sampling reads (the
    bundled demo's ``Dense`` over 80 timesteps of zeros was most of each forward pass). A
    ``BaseException``, so that no ``except Exception`` of Keras' call stack turns it into
    another error on its way out."""


@contextmanager
def _recording(layers: dict[str, Any]) -> Iterator[dict[str, _Seen]]:
    """Replaces each layer's ``call`` (on the instance) by a recorder that returns zeros, and
    that ends the forward pass (:class:`_AllSeen`) once every layer of ``layers`` recorded."""
    import keras
    import numpy as np
    import tensorflow as tf

    seen: dict[str, _Seen] = {}

    def recorder(path: str, layer: Any):
        original = layer.call
        signature = inspect.signature(original)

        def call(*args, **kwargs):
            bound = signature.bind(*args, **kwargs)
            arguments = bound.arguments
            sequences = next(iter(arguments.values()))
            ragged = isinstance(sequences, tf.RaggedTensor)
            if ragged:
                lengths = np.asarray(sequences.row_lengths())
                rows, steps = len(lengths), int(lengths.max()) if len(lengths) else 0
                seen[path] = _Seen(rows, steps, ragged_lengths=lengths)
                dense_shape = (rows, steps, *sequences.shape[2:])
            else:
                rows, steps = int(sequences.shape[0]), int(sequences.shape[1])
                seen[path] = _Seen(rows, steps, _to_numpy_mask(arguments.get("mask"), rows, steps))
                dense_shape = tuple(sequences.shape)
            if len(seen) == len(layers):
                raise _AllSeen
            try:
                shapes = layer.compute_output_shape(dense_shape)
                if isinstance(shapes, tf.TensorShape):  # tf_keras
                    shapes = tuple(shapes.as_list())
                return keras.tree.map_shape_structure(
                    lambda s: keras.ops.zeros(s, dtype=layer.compute_dtype), shapes
                )
            except Exception:  # a custom layer without a usable compute_output_shape
                return original(*args, **kwargs)

        return call

    for path, layer in layers.items():
        layer.__dict__["call"] = recorder(path, layer)
    try:
        yield seen
    finally:
        for layer in layers.values():
            layer.__dict__.pop("call", None)


def _as_ragged(leaf: Any) -> Any:
    """A numpy object array of sequences (what ``RaggedTensor.numpy()`` gives) as the
    ``tf.RaggedTensor`` it was; anything else unchanged."""
    import numpy as np

    if not (isinstance(leaf, np.ndarray) and leaf.dtype == object and leaf.ndim == 1):
        return leaf
    import tensorflow as tf

    rows = [np.asarray(row) for row in leaf]
    if not rows:
        return leaf
    return tf.RaggedTensor.from_row_lengths(np.concatenate(rows), [len(row) for row in rows])


def _input_names(model: Any) -> list[str]:
    names = []
    for i, tensor in enumerate(getattr(model, "inputs", None) or []):
        history = getattr(tensor, "_keras_history", None)
        operation = getattr(history, "operation", None)
        names.append(getattr(operation, "name", None) or f"input_{i}")
    return names


def _input_arrays(model: Any, x: Any) -> list[tuple[str, Any]]:
    """The model inputs of one batch, as (name, numpy array or RaggedTensor)."""
    import numpy as np

    names = _input_names(model)
    if isinstance(x, dict):
        pairs = list(x.items())
    elif isinstance(x, (list, tuple)):
        pairs = [(names[i] if i < len(names) else f"input_{i}", v) for i, v in enumerate(x)]
    else:
        pairs = [(names[0] if names else "input", x)]
    out = []
    for name, value in pairs:
        if hasattr(value, "row_lengths"):  # a RaggedTensor stays ragged
            out.append((str(name), value))
        else:
            out.append((str(name), np.asarray(value)))
    return out


def _graph(model_facts: ModelFacts | None):
    import networkx as nx

    graph = nx.DiGraph()
    if model_facts is None:
        return graph
    for layer in model_facts.layers:
        graph.add_node(layer.path, class_name=layer.class_name)
    for edge in model_facts.graph_edges:
        graph.add_edge(edge.src, edge.dst, kind=edge.kind)
    return graph


def _top(graph: Any, path: str) -> str:
    """The top-level layer holding ``path`` (climbing ``contains`` edges through wrappers)."""
    while path in graph:
        parents = [p for p, _, k in graph.in_edges(path, data="kind") if k == "contains"]
        if not parents:
            break
        path = parents[0]
    return path


def _upstream(graph: Any, path: str) -> set[str] | None:
    """Nodes upstream of the RNN at ``path`` along data-flow and mask edges, or None when the
    model graph is not known (a subclassed model)."""
    import networkx as nx

    top = _top(graph, path)
    flow = nx.DiGraph((s, d) for s, d, k in graph.edges(data="kind") if k in ("feeds", "mask"))
    if top not in flow:
        return None
    return set(nx.ancestors(flow, top))


def _mask_layers(model: Any) -> dict[str, Any]:
    """Embedding(mask_zero=True) and Masking layers of the model, by path."""

    from rnndoctor.capture import flavour
    from rnndoctor.capture.model import sublayers

    found: dict[str, Any] = {}

    def visit(layer: Any, parent: str) -> None:
        path = f"{parent}/{layer.name}"
        kl = flavour.module_of(layer).layers
        if isinstance(layer, kl.Masking) or (
            isinstance(layer, kl.Embedding) and getattr(layer, "mask_zero", False)
        ):
            found[path] = layer
        for child in sublayers(layer):
            visit(child, path)

    for child in sublayers(model):
        visit(child, model.name)
    return found


def _length_source(model: Any, graph: Any, rnn_paths: list[str], known: bool) -> tuple[str, Any]:
    """(``length_source``, ``mask_value``) for masked RNNs: the masking layers upstream."""

    from rnndoctor.capture import flavour

    candidates = _mask_layers(model)
    if known:
        upstream: set[str] = set()
        for path in rnn_paths:
            upstream |= _upstream(graph, path) or set()
        candidates = {p: layer for p, layer in candidates.items() if p in upstream}
    kinds = {
        ("masking", float(layer.mask_value))
        if isinstance(layer, flavour.module_of(layer).layers.Masking)
        else ("mask_zero", None)
        for layer in candidates.values()
    }
    return next(iter(kinds)) if len(kinds) == 1 else ("mask", None)


def _feeding_input(
    graph: Any, known: bool, path: str, seen: _Seen, inputs: list[tuple[str, Any]]
) -> tuple[str, Any] | None:
    """The model input (name, array) that feeds the RNN at ``path``: the one whose (rows, time)
    match what the RNN received, narrowed by the model graph when several do."""
    matching = [
        (name, a)
        for name, a in inputs
        if len(a.shape) >= 2 and a.shape[0] == seen.rows and a.shape[1] == seen.time
    ]
    if len(matching) > 1 and known:
        upstream = _upstream(graph, path) or set()
        narrowed = [(n, a) for n, a in matching if any(u.endswith(f"/{n}") for u in upstream)]
        matching = narrowed or matching
    return matching[0] if matching else None


@dataclass
class _PadRuns:
    """Runs of one candidate pad step (``key``: its bytes) at one end of each sampled row."""

    side: str  # "right" (trailing runs) or "left" (leading runs)
    key: bytes
    step: Any  # the pad step as an array: a scalar (rank 2) or a feature vector (rank 3+)
    runs: list[Any]  # per batch: the run length of each row at ``side``
    rows: int = 0
    padded: int = 0  # rows with a run at ``side`` and none at the other end
    full: int = 0  # rows that are nothing but the pad step
    lengths: int = 0  # distinct run lengths among the padded rows
    steps: int = 0  # padded steps in the padded rows that are not wholly padding
    inside: int = 0  # rows holding the step outside their run at ``side`` (real data uses it)


def _steps(array: Any) -> Any:
    """(rows, time, features) view of a batch (rank 2 ids get one feature)."""
    return array.reshape(array.shape[0], array.shape[1], -1)


def _runs_of(steps: Any, step: Any) -> tuple[Any, Any]:
    """Trailing and leading run lengths of ``step`` in each row of ``steps``."""
    import numpy as np

    pad = (steps == step[None, None, :]).all(axis=-1)
    total = pad.shape[1]
    trailing = np.where(pad.all(axis=1), total, np.argmin(pad[:, ::-1], axis=1))
    leading = np.where(pad.all(axis=1), total, np.argmin(pad, axis=1))
    return trailing, leading


def _candidates(batches: list[Any]) -> list[tuple[str, bytes, Any]]:
    """(side, key, step): the step that ends most rows and the one that starts most rows, and
    the zero step, over every sampled batch."""
    import numpy as np

    found: dict[tuple[str, bytes], Any] = {}
    for side, index in (("right", -1), ("left", 0)):
        counts: Counter[bytes] = Counter()
        steps_by_key: dict[bytes, Any] = {}
        for steps in batches:
            for row in steps[:, index]:
                key = row.tobytes()
                counts[key] += 1
                steps_by_key.setdefault(key, row.copy())
        if counts:
            key = counts.most_common(1)[0][0]
            found[(side, key)] = steps_by_key[key]
        zero = np.zeros_like(batches[0][0, 0])
        found.setdefault((side, zero.tobytes()), zero)
    return [(side, key, step) for (side, key), step in found.items()]


def _score(side: str, key: bytes, step: Any, batches: list[Any]) -> _PadRuns:
    runs = _PadRuns(side, key, step, [])
    seen_lengths: set[int] = set()
    for steps in batches:
        trailing, leading = _runs_of(steps, step)
        here, there = (trailing, leading) if side == "right" else (leading, trailing)
        runs.runs.append(here)
        runs.rows += len(here)
        padded = (here > 0) & (there == 0) | (here == steps.shape[1])
        runs.padded += int(padded.sum())
        runs.full += int((here == steps.shape[1]).sum())
        partial = here[padded & (here < steps.shape[1])]
        seen_lengths |= {int(n) for n in partial}
        runs.steps += int(partial.sum())
        occurrences = (steps == step[None, None, :]).all(axis=-1).sum(axis=1)
        runs.inside += int((occurrences > here).sum())
    runs.lengths = len(seen_lengths)
    return runs


def _consistent(runs: _PadRuns, other_side: int) -> bool:
    """The criterion of :func:`detect_padding` for one candidate."""
    if runs.rows == 0 or runs.padded < _PAD_ROWS_MIN_SHARE * runs.rows:
        return False
    if runs.padded < _PAD_SIDE_MIN_SHARE * (runs.padded + other_side):
        return False
    if not runs.step.any():
        return True
    partial = runs.padded - runs.full
    long_runs = partial > 0 and runs.steps >= _PAD_RUN_MEAN_MIN * partial
    only_at_the_end = partial > 0 and runs.inside == 0
    return runs.lengths >= _PAD_RUN_LENGTHS_MIN and (long_runs or only_at_the_end)


def detect_padding(arrays: list[Any]) -> tuple[list[Any], str, Any] | None:
    """No mask: the pad step of one input, decided from its sampled batches.

    Criterion. Candidates are the step (an id, or a whole feature vector) that ends the most
    sampled rows, the one that starts the most rows, and the zero step. For each candidate and
    its end, the run of it at that end of each row is measured. A candidate is padding when

    - at least ``_PAD_ROWS_MIN_SHARE`` (10%) of the sampled rows carry such a run,
    - at least ``_PAD_SIDE_MIN_SHARE`` (90%) of the rows with a run of it at exactly one end have
      it at this end, and
    - the runs have at least ``_PAD_RUN_LENGTHS_MIN`` (2) distinct lengths (sequences of varying
      lengths padded to one length; a token that merely ends every row, such as an end-of-text
      id, gives runs of one length), either of at least ``_PAD_RUN_MEAN_MIN`` (2) steps on
      average (a real token that happens to repeat at the end gives runs of about one step) or
      of a step that occurs in no sampled row outside its run at that end (short pads, such as
      the one to four spaces of fixed-width arithmetic queries: a real token also occurs
      inside rows). The zero step is exempt from both: 0 is the padding of ``pad_sequences``,
      ``padded_batch`` and ``Embedding(mask_zero=True)``.

    Among qualifying candidates the zero step wins, then the one with the fewest rows made only
    of it (real data fills most rows), then the one padding the most rows.

    Args:
        arrays: the input's sampled batches, numpy arrays of rank >= 2 (rows, time, ...).

    Returns:
        (validity masks per batch, side ``right``/``left``, the pad step as an array), or None.
    """
    import numpy as np

    if not arrays or any(a.ndim < 2 or a.dtype == object or a.shape[1] == 0 for a in arrays):
        return None
    batches = [_steps(a) for a in arrays]
    if len({b.shape[2] for b in batches}) != 1 or len({b.dtype for b in batches}) != 1:
        return None
    scored = {(s, k): _score(s, k, step, batches) for s, k, step in _candidates(batches)}
    qualified = []
    for (side, key), runs in scored.items():
        other = "left" if side == "right" else "right"
        opposite = _score(other, key, runs.step, batches) if (other, key) not in scored else None
        other_padded = (opposite or scored[(other, key)]).padded
        if _consistent(runs, other_padded):
            qualified.append(runs)
    if not qualified:
        return None
    best = min(qualified, key=lambda r: (bool(r.step.any()), r.full, -r.padded))
    masks = []
    for steps, run in zip(batches, best.runs, strict=True):
        position = np.arange(steps.shape[1])[None, :]
        if best.side == "right":
            masks.append(position < (steps.shape[1] - run)[:, None])
        else:
            masks.append(position >= run[:, None])
    return masks, best.side, best.step


def pad_value_text(step: Any, rank: int) -> str:
    """How a pad step reads in a report: ``-1``, ``0``, ``one-hot vector of index 3``,
    ``vector of 0.0``, or ``vector [0.5, 1.0, ...]``."""
    import numpy as np

    flat = np.asarray(step).ravel()
    if rank <= 2 and flat.size == 1:
        value = flat[0].item()
        integral = isinstance(value, float) and value.is_integer()
        return f"{value:g}" if integral else repr(value)
    if flat.size and (flat == flat[0]).all():
        return f"vector of {flat[0].item()!r}"
    hot = np.flatnonzero(flat)
    if len(hot) == 1 and flat[hot[0]] == 1:
        return f"one-hot vector of index {int(hot[0])}"
    shown = ", ".join(repr(v) for v in flat[:4].tolist())
    return f"vector [{shown}{', ...' if flat.size > 4 else ''}]"


@dataclass
class _Group:
    """RNN layers that received the same masks (or none) in every sampled batch."""

    rnn_paths: list[str]
    seen: list[_Seen]


def measure_batches(
    model: Any,
    items: list[Any],
    *,
    model_facts: ModelFacts | None = None,
    deadline: float | None = None,
    calls: list[PadCall] | None = None,
) -> SequenceFacts:
    """Measures lengths, padding and masks of every sequence input that reaches an RNN.

    Args:
        model: a built ``keras.Model``.
        items: sampled batches as Keras' data adapters yield them (``x``, ``(x, y)`` or
            ``(x, y, sample_weight)``), numpy arrays (a ``tf.RaggedTensor`` is kept as is).
        model_facts: the model's facts (graph and RNN paths); None: collected here (no probe).
        deadline: ``time.monotonic()`` value after which no further batch is measured.
        calls: the padding calls seen (:func:`pad_calls`) to locate the padding line.

    Returns:
        :class:`SequenceFacts`; ``batches_sampled`` may be less than ``len(items)`` when the
        deadline passed.
    """
    import keras

    if model_facts is None:
        from rnndoctor.capture.model import collect_model

        model_facts = collect_model(model, probe=False)
    layers = _rnn_layers_by_path(model)
    if not layers:
        return SequenceFacts(not_measured="the model has no RNN layer")
    graph = _graph(model_facts)
    known = bool(model_facts.graph_known)
    per_layer: dict[str, list[_Seen]] = {path: [] for path in layers}
    batch_inputs: list[list[tuple[str, Any]]] = []
    batch_targets: list[Any] = []
    notes = []
    for item in items:
        if deadline is not None and time.monotonic() >= deadline:
            break
        x, y, _ = keras.utils.unpack_x_y_sample_weight(item)
        x = keras.tree.map_structure(_as_ragged, x)
        with _recording(layers) as seen:
            try:
                model(x, training=False)
            except _AllSeen:
                pass
            except Exception as exc:
                if not seen:
                    raise
                notes.append(f"the model's forward pass stopped: {type(exc).__name__}")
        if not seen:
            break
        for path in layers:
            per_layer[path].append(seen.get(path))
        batch_inputs.append(_input_arrays(model, x))
        batch_targets.append(y)
    batches = len(batch_inputs)
    if not batches:
        return SequenceFacts(not_measured="no batch could be measured before the deadline")
    groups = _group(per_layer)
    inputs = []
    for group in groups:
        measured = _measure_group(
            model, graph, known, group, batch_inputs, batch_targets, calls or []
        )
        if measured is not None:
            inputs.append(measured)
    return SequenceFacts(batches_sampled=batches, inputs=inputs)


def _group(per_layer: dict[str, list[_Seen | None]]) -> list[_Group]:
    groups: dict[tuple, _Group] = {}
    for path, seen in per_layer.items():
        if any(s is None for s in seen):
            continue  # the layer did not run on every batch (a branch not taken)

        def key(s: _Seen) -> tuple:
            if s.ragged_lengths is not None:
                return ("ragged", s.rows, s.time, s.ragged_lengths.tobytes())
            mask = s.mask.tobytes() if s.mask is not None else None
            return ("dense", s.rows, s.time, mask)

        k = tuple(key(s) for s in seen)
        groups.setdefault(k, _Group([], list(seen))).rnn_paths.append(path)
    return list(groups.values())


def _measure_group(
    model: Any,
    graph: Any,
    known: bool,
    group: _Group,
    batch_inputs: list[list[tuple[str, Any]]],
    batch_targets: list[Any],
    calls: list[PadCall],
) -> SequenceInput | None:
    import numpy as np

    first = group.seen[0]
    feeding = [
        _feeding_input(graph, known, group.rnn_paths[0], s, inputs)
        for s, inputs in zip(group.seen, batch_inputs, strict=True)
    ]
    name = feeding[0][0] if feeding[0] is not None else "(an input the model computes)"
    record = SequenceInput(input=name, rnn_layers=sorted(group.rnn_paths))
    arrays = [f[1] if f is not None else None for f in feeding]
    if first.ragged_lengths is not None:
        record.length_source, record.ragged = "ragged", True
        lengths_per_batch = [s.ragged_lengths for s in group.seen]
        masks = None
    elif first.mask is not None:
        record.length_source, record.mask_value = _length_source(
            model, graph, group.rnn_paths, known
        )
        masks = [s.mask for s in group.seen]
        lengths_per_batch = None
    else:
        record.mask_used = False
        dense = all(isinstance(a, np.ndarray) for a in arrays)
        detected = detect_padding(arrays) if dense else None
        if detected is not None:
            masks, _, step = detected
            _set_pad_value(record, step, arrays[0].ndim)
        else:
            record.length_source = "none"
            masks = [np.ones((s.rows, s.time), dtype=bool) for s in group.seen]
        lengths_per_batch = None
    record.batches = len(group.seen)
    record.padded_lengths = [s.time for s in group.seen]
    record.batch_sizes = [s.rows for s in group.seen]
    if masks is not None:
        _mask_stats(record, masks)
        lengths_per_batch = [m.sum(axis=1) for m in masks]
    lengths = np.concatenate(lengths_per_batch).astype(int)
    _length_stats(record, lengths, lengths_per_batch)
    array = arrays[0]
    if isinstance(array, np.ndarray):
        record.input_rank = array.ndim
        targets = [t if isinstance(t, np.ndarray) else None for t in batch_targets]
        record.targets_per_step = all(
            t is not None and a is not None and t.shape[:2] == a.shape[:2]
            for t, a in zip(targets, arrays, strict=True)
        )
        _locate_padding(record, array, targets[0] if record.targets_per_step else None, calls)
    return record


def _set_pad_value(record: SequenceInput, step: Any, rank: int) -> None:
    """``length_source="pad_value"`` with the pad step found: ``mask_value`` (a scalar, when
    the step is one id or a vector of one value), ``pad_index`` / ``pad_depth`` (a one-hot
    vector) and ``pad_value`` (as text)."""
    import numpy as np

    flat = np.asarray(step).ravel()
    record.length_source = "pad_value"
    record.pad_value = pad_value_text(step, rank)
    if flat.size and (flat == flat[0]).all():
        record.mask_value = flat[0].item()
    hot = np.flatnonzero(flat)
    if rank >= 3 and len(hot) == 1 and flat[hot[0]] == 1:
        record.pad_index, record.pad_depth = int(hot[0]), int(flat.size)


def _mask_stats(record: SequenceInput, masks: list[Any]) -> None:
    """Pad side, left-padded / holed / fully-masked rows, from (rows, time) validity masks.

    A row is right-padded when its mask equals ``sequence_mask(count)`` (the test of
    ``_is_sequence_right_padded`` in ``keras/src/backend/tensorflow/rnn.py``), left-padded when
    its valid steps are the last ``count`` ones, and holed otherwise; a row with no valid step is
    fully masked (``_has_fully_masked_sequence``).
    """
    import numpy as np

    right = left = holes = empty = 0
    for mask in masks:
        steps = mask.shape[1]
        count = mask.sum(axis=1)
        position = np.arange(steps)[None, :]
        is_right = (mask == (position < count[:, None])).all(axis=1)
        is_left = (mask == (position >= (steps - count)[:, None])).all(axis=1)
        padded = (count > 0) & (count < steps)
        empty += int((count == 0).sum())
        right += int((padded & is_right).sum())
        left += int((padded & is_left & ~is_right).sum())
        holes += int((padded & ~is_left & ~is_right).sum())
    record.left_padded_rows, record.holed_rows, record.fully_masked_rows = left, holes, empty
    kinds = [k for k, n in (("right", right), ("left", left), ("holes", holes)) if n]
    record.pad_side = "none" if not kinds else kinds[0] if len(kinds) == 1 else "mixed"


def _length_stats(record: SequenceInput, lengths: Any, lengths_per_batch: list[Any]) -> None:
    import numpy as np

    record.sequences = int(len(lengths))
    record.lengths = [int(n) for n in lengths[:_MAX_LENGTHS]]
    record.lengths_truncated = len(lengths) > _MAX_LENGTHS
    values, counts = np.unique(lengths, return_counts=True)
    record.length_values = [int(v) for v in values]
    record.length_counts = [int(c) for c in counts]
    computed = stats.padded_steps(record.padded_lengths, record.batch_sizes)
    valid = int(lengths.sum())
    record.padded_fraction = round(stats.padded_fraction(valid, computed), 6)
    batch_max = [int(b.max()) if len(b) else 0 for b in lengths_per_batch]
    padded = record.padded_lengths
    record.global_max_padding = (
        len(padded) > 1 and len(set(padded)) == 1 and any(m < padded[0] for m in batch_max)
    )
    if len(lengths):
        dist = stats.LengthDistribution(tuple(record.length_values), tuple(counts.tolist()))
        batch_size = stats.most_common_batch_size(record.batch_sizes)
        expected = stats.expected_padded_steps(dist, (), batch_size)
        if expected > 0:
            record.per_batch_padded_fraction = round(stats.padded_fraction(valid, expected), 6)
        record.quantiles = {
            "min": float(lengths.min()),
            **{k: float(np.percentile(lengths, q)) for k, q in _QUANTILES},
            "max": float(lengths.max()),
            "mean": round(float(lengths.mean()), 3),
        }
        record.histogram = _histogram(lengths)


def _histogram(lengths: Any) -> LengthHistogram:
    """Equal-width bins with integer edges: bin i holds lengths in [edges[i], edges[i+1])."""
    low, high = int(lengths.min()), int(lengths.max())
    bins = min(_HISTOGRAM_BINS, high - low + 1)
    width = -(-(high - low + 1) // bins)
    edges = [low + i * width for i in range(bins + 1)]
    counts = [0] * bins
    for n in lengths.tolist():
        counts[min(bins - 1, (int(n) - low) // width)] += 1
    return LengthHistogram(edges=[float(e) for e in edges], counts=counts)


def _locate_padding(record: SequenceInput, array: Any, targets: Any, calls: list[PadCall]) -> None:
    """Sets ``padding_location`` (and the target's) from the padding calls seen."""
    padders = [c for c in calls if c.function == "pad_sequences"]

    def best(rows: Any) -> PadCall | None:
        if rows is None or rows.ndim != 2:
            return None
        scored = [(c.holds_rows(rows), i, c) for i, c in enumerate(padders)]
        scored = [s for s in scored if s[0] * 2 >= min(len(rows), _MATCH_ROWS) and s[0] > 0]
        return max(scored, key=lambda s: (s[0], s[1]))[2] if scored else None

    call = best(array)
    if call is None and record.pad_side in ("right", "none"):
        batchers = [c for c in calls if c.function != "pad_sequences"]
        call = batchers[-1] if batchers else None
    if call is not None:
        record.padding_location = call.location
        record.padding_function = call.function
        record.padding_argument = call.padding
    target_call = best(targets)
    if target_call is not None:
        record.target_padding_location = target_call.location
