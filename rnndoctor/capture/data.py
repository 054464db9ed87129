"""The data that reaches ``fit``: its kind and, for tf.data, the pipeline graph as a networkx DAG.

``install()`` hooks the ``tf.data.Dataset`` transformations and sources (``from_generator``,
``from_tensor_slices``, ``map``, ``batch``, ``padded_batch``, ``prefetch``, ``cache``, ...), the
file readers' constructors, ``keras.utils.PyDataset.__init__`` and the Keras utilities that
return a dataset (``keras.utils.timeseries_dataset_from_array``,
``text_dataset_from_directory``...), so that every dataset the user's code builds remembers the
user's file:line. ``describe(x)`` then reads the dataset fit
received:

- tf.data: the pipeline's own serialised graph (``Dataset._as_serialized_graph()``, parsed with
  TensorFlow's ``GraphDef`` protobuf class) becomes a networkx ``DiGraph`` of dataset ops. Each
  op gets a normalised kind, its ``num_parallel_calls`` (a ``Const`` input, read with
  ``tf.make_ndarray``), whether its functions run Python (``PyFunc`` / ``EagerPyFunc`` ops in
  the function library: ``from_generator``, ``py_function``, ``numpy_function``), and the
  user's line that built it.
- numpy arrays, Python generators and ``keras.utils.PyDataset`` (``workers``,
  ``use_multiprocessing``, ``max_queue_size``) are their own kinds, and so is Keras 2's
  ``tf_keras.utils.Sequence``, whose ``workers``, ``use_multiprocessing`` and
  ``max_queue_size`` are ``fit``'s arguments (``Model.fit`` in tf_keras/src/engine/training.py).
- for tf.data and arrays, the model inputs' dtypes and shapes as the data delivers them
  (``input_dtypes``, ``input_shapes``: a float64 input into a float32 model, RD207).

Two tf.data graph rewrites that run when an iterator is made matter for the rules, and are
recorded from the dataset's options rather than guessed:

- ``map_parallelization`` (default on, with autotune) turns a ``MapDataset`` whose function is
  stateless into ``ParallelMapDatasetV2(num_parallel_calls=AUTOTUNE)``
  (tensorflow/core/grappler/optimizers/data/map_parallelization.cc). A map that calls Python or
  any other stateful op stays sequential.
- ``inject_prefetch`` (default on, with autotune) appends ``prefetch(AUTOTUNE)`` when the last
  transformation is not a prefetch
  (tensorflow/core/grappler/optimizers/data/inject_prefetch.cc).
"""

from __future__ import annotations

import ast
import functools
import importlib
import inspect
import linecache
import re
import sys
import threading
from typing import Any

import networkx as nx

from rnndoctor.capture import flavour, sites
from rnndoctor.facts import DataFacts, DataKind, DataNode, GraphEdge, SourceLocation

# tf.data.Dataset methods that build a dataset, hooked to record the user's line.
_DATASET_METHODS = (
    "apply", "batch", "bucket_by_sequence_length", "cache", "choose_from_datasets",
    "concatenate", "counter", "enumerate", "filter", "flat_map", "from_generator",
    "from_tensor_slices", "from_tensors", "group_by_window", "ignore_errors", "interleave",
    "list_files", "load", "map", "padded_batch", "prefetch", "ragged_batch", "random", "range",
    "rebatch", "rejection_resample", "repeat", "sample_from_datasets", "scan", "shard",
    "shuffle", "skip", "snapshot", "sparse_batch", "take", "take_while", "unbatch", "unique",
    "window", "with_options", "zip",
)  # fmt: skip
_READER_CLASSES = ("TFRecordDataset", "TextLineDataset", "FixedLengthRecordDataset")
# Keras utilities that return a tf.data pipeline, hooked so that the pipeline they build points
# at the user's call (keras/src/utils/timeseries_dataset_utils.py, text_dataset_utils.py,
# image_dataset_utils.py, audio_dataset_utils.py), in each namespace that exports them.
_KERAS_DATASET_UTILS = (
    "timeseries_dataset_from_array", "text_dataset_from_directory",
    "image_dataset_from_directory", "audio_dataset_from_directory",
)  # fmt: skip
_KERAS_UTIL_MODULES = (
    "keras.utils", "keras.preprocessing", "keras._tf_keras.keras.utils",
    "keras._tf_keras.keras.preprocessing",
)  # fmt: skip

# GraphDef op (version suffix removed) -> DataNode.kind, and source_kind for sources.
_KIND_OF_OP = {
    "MapDataset": "map",
    "ParallelMapDataset": "map",
    "MapAndBatchDataset": "batch",
    "BatchDataset": "batch",
    "ParallelBatchDataset": "batch",
    "PaddedBatchDataset": "padded_batch",
    "GroupByWindowDataset": "other",  # "bucket" when its reduce function batches
    "PrefetchDataset": "prefetch",
    "CacheDataset": "cache",
    "ShuffleDataset": "shuffle",
    "ShuffleAndRepeatDataset": "shuffle",
    "RepeatDataset": "repeat",
    "FilterDataset": "filter",
    "ParallelFilterDataset": "filter",
    "InterleaveDataset": "interleave",
    "ParallelInterleaveDataset": "interleave",
    "FlatMapDataset": "interleave",
    "TakeDataset": "take",
}
_SOURCE_KIND_OF_OP = {
    "TensorSliceDataset": "tensor_slices",
    "SparseTensorSliceDataset": "tensor_slices",
    "TensorDataset": "tensors",
    "RangeDataset": "range",
    "TFRecordDataset": "files",
    "TextLineDataset": "files",
    "FixedLengthRecordDataset": "files",
    "GeneratorDataset": "generator",
}
_FILE_OPS = ("TFRecordDataset", "TextLineDataset", "FixedLengthRecordDataset", "MatchingFiles")
# Ops that run Python code: tf.py_function (EagerPyFunc), tf.numpy_function and
# Dataset.from_generator (PyFunc / PyFuncStateless), tensorflow/python/ops/script_ops.py.
_PYTHON_OPS = ("PyFunc", "PyFuncStateless", "EagerPyFunc")
# Stateful ops that tf.data still treats as stateless (ALLOW_STATEFUL_OP_FOR_DATASET_FUNCTIONS in
# tensorflow/core/framework/dataset_stateful_op_allowlist.h users: lookup-table finds), and
# Assert, which IsNodeStateful (tensorflow/core/data/dataset_utils.cc) skips.
_STATEFUL_ALLOWED = ("Assert", "LookupTableFind", "LookupTableFindV2", "LookupFind")
# Ops tf.data may chain after the user's last transformation; inject_prefetch.cc skips them too.
_NON_USER_OPS = (
    "AssertNextDataset", "ExperimentalAssertNextDataset", "OptionsDataset", "ModelDataset",
    "OptimizeDataset", "MaxIntraOpParallelismDataset", "PrivateThreadPoolDataset",
)  # fmt: skip
_VERSION = re.compile(r"V\d+$")

_HOOKED_ATTR = "_rnndoctor_sites_hooked"  # set on tf.data.Dataset once its methods are hooked
_user_files: dict[str, bool] = {}  # a cache: filename -> sites.is_user_file(filename)
_depth = threading.local()


def _base_op(op: str) -> str:
    return _VERSION.sub("", op)


def _is_dataset_op(op: str) -> bool:
    return _base_op(op).endswith("Dataset")


def called_from_user_code(depth: int = 2) -> bool:
    """Whether the frame ``depth`` levels up (the hooked call's caller) is the user's code."""
    try:
        filename = sys._getframe(depth).f_code.co_filename
    except ValueError:
        return False
    known = _user_files.get(filename)
    if known is None:
        known = _user_files[filename] = sites.is_user_file(filename)
    return known


def _record(obj: Any, method: str, location: SourceLocation | None) -> None:
    sites.record("datasets", obj, (method, location))


def _hooked(name: str, original: Any) -> Any:
    @functools.wraps(original)
    def wrapper(*args, **kwargs):
        depth = getattr(_depth, "value", 0)
        _depth.value = depth + 1
        try:
            result = original(*args, **kwargs)
        finally:
            _depth.value = depth
        # The user's own call: not TF's use inside another method (depth), nor a library's.
        if depth == 0 and called_from_user_code():
            try:
                _record(result, name, sites.user_frame_location(skip=1, call_names=(name,)))
            except Exception:  # recording must never break the user's pipeline
                pass
        return result

    return wrapper


def install() -> None:
    """Hooks tf.data and ``keras.utils.PyDataset`` to record where the user built each dataset.

    Idempotent. Call it before the user's script runs. The sites go to the book of
    :func:`rnndoctor.capture.sites.install` (none is recorded before it).
    """
    import keras
    import tensorflow as tf

    dataset = tf.data.Dataset
    if dataset.__dict__.get(_HOOKED_ATTR):
        return
    for name in _DATASET_METHODS:
        original = inspect.getattr_static(dataset, name, None)
        if original is None:
            continue
        if isinstance(original, staticmethod):
            setattr(dataset, name, staticmethod(_hooked(name, original.__func__)))
        elif isinstance(original, classmethod):
            setattr(dataset, name, classmethod(_hooked(name, original.__func__)))
        elif callable(original):
            setattr(dataset, name, _hooked(name, original))
    for cls_name in _READER_CLASSES:
        cls = getattr(tf.data, cls_name, None)
        if cls is not None:
            _hook_init(cls, cls_name)
    _hook_init(keras.utils.PyDataset, "PyDataset")
    legacy = flavour.tf_keras()
    if legacy is not None:
        _hook_new(legacy.utils.Sequence)
    _hook_keras_utils()
    setattr(dataset, _HOOKED_ATTR, True)


def _hook_keras_utils() -> None:
    """Wraps the Keras utilities that build datasets, once per function object, in every module
    of ``_KERAS_UTIL_MODULES`` that is loaded and exports them."""
    wrapped: dict[int, Any] = {}
    for module_name in _KERAS_UTIL_MODULES:
        module = sys.modules.get(module_name)
        if module is None:
            try:
                module = importlib.import_module(module_name)
            except Exception:  # this Keras has no such namespace
                continue
        for name in _KERAS_DATASET_UTILS:
            original = getattr(module, name, None)
            if original is None or getattr(original, "_rnndoctor_hooked", False):
                continue
            if id(original) not in wrapped:
                hooked = _hooked(name, original)
                hooked._rnndoctor_hooked = True
                wrapped[id(original)] = hooked
            setattr(module, name, wrapped[id(original)])


def _hook_init(cls: type, name: str) -> None:
    original = cls.__init__

    @functools.wraps(original)
    def __init__(self, *args, **kwargs):  # noqa: N807 - it replaces __init__
        depth = getattr(_depth, "value", 0)
        _depth.value = depth + 1
        try:
            original(self, *args, **kwargs)
        finally:
            _depth.value = depth
        if depth == 0 and called_from_user_code():
            try:
                names = (name, type(self).__name__)
                _record(self, name, sites.user_frame_location(1, names, outside=self))
            except Exception:
                pass

    cls.__init__ = __init__


def _hook_new(cls: type) -> None:
    """Records the user's line that builds each instance of ``cls`` (tf_keras' ``Sequence``,
    which has no ``__init__`` a subclass must call: its ``__new__`` is wrapped instead)."""
    original = cls.__new__

    def __new__(sub, *args, **kwargs):  # noqa: N807 - it replaces __new__
        # object.__new__ takes no arguments once __new__ is overridden on the class
        obj = original(sub) if original is object.__new__ else original(sub, *args, **kwargs)
        if called_from_user_code():
            try:
                location = sites.user_frame_location(skip=1, call_names=(sub.__name__,))
                _record(obj, "Sequence", location)
            except Exception:  # recording a site must never break the user's data
                pass
        return obj

    cls.__new__ = staticmethod(__new__)


def site_of(obj: Any) -> tuple[str, SourceLocation | None] | None:
    """``(method, location)`` recorded for a dataset or PyDataset, or None."""
    return sites.lookup("datasets", obj)


# -- describing the data ---------------------------------------------------------------------


def data_kind(x: Any) -> str:
    """The kind of ``fit``'s ``x`` (the ``DataFacts.kind`` values)."""
    import keras
    import numpy as np
    import tensorflow as tf

    if isinstance(x, tf.data.Dataset):
        return DataKind.TF_DATA
    if isinstance(x, keras.utils.PyDataset):
        return DataKind.PY_DATASET
    legacy = flavour.tf_keras(import_it=False)
    if legacy is not None and isinstance(x, legacy.utils.Sequence):
        return DataKind.TF_KERAS_SEQUENCE
    if isinstance(x, np.ndarray):
        return DataKind.NUMPY
    if isinstance(x, (dict, list, tuple)):
        return DataKind.NUMPY_MULTI
    if inspect.isgenerator(x) or hasattr(x, "__next__"):
        return DataKind.PYTHON_GENERATOR
    if tf.is_tensor(x):
        return DataKind.TENSOR
    return type(x).__name__


def describe(
    x: Any,
    fit_location: SourceLocation | None = None,
    fit_arguments: dict[str, Any] | None = None,
) -> DataFacts:
    """Describes ``fit``'s ``x`` as :class:`DataFacts`.

    Never raises: what cannot be read is left empty, with ``graph_not_measured`` saying why for
    tf.data.

    Args:
        x: what ``fit`` received as ``x``.
        fit_location: the user's ``fit`` call, the location of a generator or PyDataset whose
            own construction site was not recorded. Arrays get no location: where they were
            built is not recorded.
        fit_arguments: ``fit``'s bound arguments (a tf_keras ``Sequence``'s ``workers``,
            ``use_multiprocessing`` and ``max_queue_size``; tf_keras' defaults where absent).
    """
    kind = data_kind(x)
    facts = DataFacts(kind=kind)
    recorded = site_of(x)
    if kind == DataKind.TF_DATA:
        facts.reiterable = True
        try:
            _describe_dataset(x, facts)
        except Exception as exc:
            facts.graph_not_measured = f"{type(exc).__name__}: {exc}"[:300]
        if facts.location is None and recorded is not None:
            facts.location = recorded[1]
    elif kind == DataKind.PY_DATASET:
        facts.reiterable = True
        facts.workers = _int_or_none(getattr(x, "workers", None))
        facts.use_multiprocessing = bool(getattr(x, "use_multiprocessing", False))
        facts.max_queue_size = _int_or_none(getattr(x, "max_queue_size", None))
        facts.location = recorded[1] if recorded else None
        try:
            facts.init_location, facts.built_with_keywords = _pydataset_init(x)
        except Exception:  # a site is a nicety: the rules fall back to a note
            pass
        try:
            facts.cardinality = _int_or_none(x.num_batches)
        except Exception:
            pass
    elif kind == DataKind.TF_KERAS_SEQUENCE:
        facts.reiterable = True
        _sequence_fit_arguments(facts, fit_arguments or {})
        facts.location = recorded[1] if recorded else None
        try:
            facts.cardinality = len(x)
        except Exception:
            pass
    elif kind == DataKind.PYTHON_GENERATOR:
        facts.reiterable = False
        code = getattr(x, "gi_code", None)
        if code is not None and sites.is_user_file(code.co_filename):
            facts.location = sites.source_location(code.co_filename, code.co_firstlineno)
    else:  # arrays and tensors
        facts.reiterable = True
    try:
        _read_input_dtypes(x, kind, facts)
    except Exception:  # dtypes are a nicety: leave them empty
        pass
    if facts.location is None and kind in _LOCATED_AT_FIT:
        facts.location = fit_location
    return facts


def _pydataset_init(x: Any) -> tuple[SourceLocation | None, bool | None]:
    """``DataFacts.init_location`` and ``built_with_keywords`` for the PyDataset ``x``: the one
    call to its base's ``__init__`` (``super().__init__(...)``, ``PyDataset.__init__(self,
    ...)``) in the ``__init__`` its class runs, where that ``__init__`` is in a user file and
    the next ``__init__`` up the class's MRO is ``PyDataset``'s (a user's base class in
    between takes its own parameters first: ``super().__init__(64)`` may be its batch size),
    and whether keywords given where ``x`` is built reach ``PyDataset.__init__`` (no
    ``__init__`` of the user's own, or one that passes its ``**kwargs`` on in that call). Read
    from the source: ``(None, None)`` where it cannot be."""
    import keras

    mro = type(x).__mro__
    owner = next((c for c in mro if "__init__" in c.__dict__), None)
    if owner is None or owner is keras.utils.PyDataset:
        return None, owner is not None  # PyDataset.__init__ itself takes the keywords
    after = mro[mro.index(owner) + 1 :]
    if next((c for c in after if "__init__" in c.__dict__), None) is not keras.utils.PyDataset:
        return None, None  # its base call reaches another __init__ (a user's base class) first
    code = getattr(owner.__dict__["__init__"], "__code__", None)
    if code is None or not sites.is_user_file(code.co_filename):
        return None, None
    source = "".join(linecache.getlines(code.co_filename))
    tree = sites._parse(source) if source else None
    if tree is None:
        return None, None
    functions = [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.FunctionDef)
        and n.name == "__init__"
        and code.co_firstlineno in (n.lineno, *(d.lineno for d in n.decorator_list))
    ]
    if len(functions) != 1:
        return None, None
    (function,) = functions
    calls = [n for n in ast.walk(function) if _is_base_init(n)]
    if len(calls) != 1:
        return None, None
    (call,) = calls
    location = sites.source_location(code.co_filename, call.lineno)
    location.call_source = ast.get_source_segment(source, call)
    kwarg = function.args.kwarg.arg if function.args.kwarg else None
    forwards = any(
        k.arg is None and isinstance(k.value, ast.Name) and k.value.id == kwarg
        for k in call.keywords
    )
    return location, forwards


def _is_base_init(node: ast.AST) -> bool:
    """Whether ``node`` calls a base class's ``__init__``: ``super().__init__(...)``,
    ``super(Cls, self).__init__(...)`` or ``Base.__init__(self, ...)``."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
        return False
    if node.func.attr != "__init__":
        return False
    owner = node.func.value
    is_super = isinstance(owner, ast.Call) and sites._call_name(owner) == "super"
    return is_super or isinstance(owner, (ast.Name, ast.Attribute))


_LOCATED_AT_FIT = (DataKind.PY_DATASET, DataKind.TF_KERAS_SEQUENCE, DataKind.PYTHON_GENERATOR)


def _sequence_fit_arguments(facts: DataFacts, arguments: dict[str, Any]) -> None:
    """A tf_keras ``Sequence``'s loading settings, which are ``fit``'s arguments in Keras 2:
    as the call passed them, else the defaults of tf_keras' ``Model.fit`` signature."""
    defaults: dict[str, Any] = {}
    legacy = flavour.tf_keras(import_it=False)
    if legacy is not None:
        try:
            parameters = inspect.signature(legacy.Model.fit).parameters
            defaults = {n: p.default for n, p in parameters.items() if p.default is not p.empty}
        except (TypeError, ValueError):
            pass

    def value(name: str) -> Any:
        return arguments[name] if name in arguments else defaults.get(name)

    facts.workers = _int_or_none(value("workers"))
    use_multiprocessing = value("use_multiprocessing")
    facts.use_multiprocessing = None if use_multiprocessing is None else bool(use_multiprocessing)
    facts.max_queue_size = _int_or_none(value("max_queue_size"))


def _read_input_dtypes(x: Any, kind: str, facts: DataFacts) -> None:
    """``facts.input_dtypes`` / ``input_shapes``: the model inputs as the data delivers them
    (the first component of a dataset's ``(x, y[, w])`` elements; the arrays passed as ``x``)."""
    import tensorflow as tf

    if kind == DataKind.TF_DATA:
        spec = x.element_spec
        if isinstance(spec, tuple) and len(spec) in (2, 3):
            spec = spec[0]
        leaves = tf.nest.flatten(spec)
    elif DataKind.is_array(kind) or kind == DataKind.TENSOR:
        leaves = tf.nest.flatten(x)
    else:
        return
    for leaf in leaves:
        dtype = getattr(leaf, "dtype", None)
        shape = getattr(leaf, "shape", None)
        if dtype is None or shape is None:
            continue
        dims = [None if d is None else int(d) for d in tuple(shape)]
        if kind != DataKind.TF_DATA and dims:
            dims[0] = None  # arrays: the batch is fit's batch_size, not the array's length
        facts.input_dtypes.append(getattr(dtype, "name", str(dtype)))
        facts.input_shapes.append(dims)


def _int_or_none(value: Any) -> int | None:
    try:
        return None if value is None else int(value)
    except (TypeError, ValueError):
        return None


def _describe_dataset(ds: Any, facts: DataFacts) -> None:
    from tensorflow.core.framework import graph_pb2

    try:
        facts.cardinality = int(ds.cardinality())
    except Exception:
        facts.cardinality = None
    _read_options(ds, facts)
    graph_def = graph_pb2.GraphDef.FromString(ds._as_serialized_graph().numpy())
    graph = pipeline_graph(graph_def)
    output = _output_node(graph_def)
    _attach_locations(ds, graph, output)
    order = list(nx.topological_sort(graph))
    facts.nodes = [graph.nodes[name]["node"] for name in order]
    facts.edges = [GraphEdge(src=a, dst=b, kind="feeds") for a, b in graph.edges]
    summarise(facts, graph, output=output)
    recorded = site_of(ds)
    facts.location = recorded[1] if recorded else _last_location(facts)
    facts.array_location = array_site(facts.nodes)


def _read_options(ds: Any, facts: DataFacts) -> None:
    """Whether tf.data's map_parallelization and inject_prefetch rewrites will run (their
    defaults as ``tf.data.Options`` documents them: on unless turned off, and only with
    autotune on; DefaultOptimizationGraphRewrites in tensorflow/core/data/dataset_utils.cc)."""
    options = ds.options()
    autotune = options.autotune.enabled is not False
    opt = options.experimental_optimization
    defaults = opt.apply_default_optimizations is not False

    def enabled(value: bool | None) -> bool:
        return autotune and (value if value is not None else defaults)

    facts.inject_prefetch = enabled(opt.inject_prefetch)
    facts.map_parallelization = enabled(opt.map_parallelization)


def _output_node(graph_def: Any) -> str | None:
    for node in graph_def.node:
        if node.op == "_Retval" and node.input:
            return _input_name(node.input[0])
    return None


def _input_name(text: str) -> str:
    return text.lstrip("^").split(":")[0]


def pipeline_graph(graph_def: Any) -> nx.DiGraph:
    """The dataset ops of a tf.data ``GraphDef`` as a DiGraph (edge: the source feeds the
    destination), each node holding a :class:`DataNode` under ``"node"``.

    Args:
        graph_def: a ``tensorflow.core.framework.graph_pb2.GraphDef``, as
            ``Dataset._as_serialized_graph()`` serialises it.
    """
    import tensorflow as tf

    nodes = {n.name: n for n in graph_def.node}
    functions = {f.signature.name: f for f in graph_def.library.function}
    graph = nx.DiGraph()
    for node in graph_def.node:
        if not _is_dataset_op(node.op):
            continue
        named = _named_inputs(node)
        consts = {}
        for arg, names in named.items():
            values = [_const(nodes.get(n), tf) for n in names]
            if len(values) == 1 and values[0] is not None:
                consts[arg] = values[0]
        base = _base_op(node.op)
        ops = _function_ops(node, functions)
        data_node = DataNode(name=node.name, op=node.op, kind=_KIND_OF_OP.get(base, "other"))
        leaf = not any(
            _is_dataset_op(nodes[n].op) for names in named.values() for n in names if n in nodes
        )
        if leaf:
            data_node.kind = "source"
            data_node.source_kind = _SOURCE_KIND_OF_OP.get(base, "other")
            if any(nodes[n].op == "MatchingFiles" for ns in named.values() for n in ns
                   if n in nodes):  # fmt: skip
                data_node.source_kind = "files"  # Dataset.list_files
        if "GeneratorDataset" in ops:
            data_node.source_kind = "generator"
            if base == "FlatMapDataset":  # Dataset.from_generator: the generator is the source
                data_node.kind = "source"
        elif any(op in ops for op in _FILE_OPS):
            data_node.source_kind = "files"
        if base == "GroupByWindowDataset" and {"PaddedBatchDataset", "BatchDataset"} & {
            _base_op(op) for op in ops
        }:
            data_node.kind = "bucket"
        data_node.python = any(op in ops for op in _PYTHON_OPS)
        if "num_parallel_calls" in consts:
            data_node.num_parallel_calls = int(consts["num_parallel_calls"])
        attrs: dict[str, Any] = {}
        for arg in ("batch_size", "drop_remainder", "buffer_size", "count", "filename"):
            if arg in consts:
                attrs[arg] = consts[arg]
        for attr in ("deterministic", "force_synchronous", "use_inter_op_parallelism"):
            if attr in node.attr:
                value = node.attr[attr]
                attrs[attr] = value.s.decode() if value.WhichOneof("value") == "s" else value.b
        if data_node.kind == "map":
            attrs["stateful_ops"] = _stateful_ops(ops)
        data_node.attrs = attrs
        graph.add_node(node.name, node=data_node)
    for node in graph_def.node:
        if node.name not in graph:
            continue
        for src in (_input_name(i) for i in node.input if not i.startswith("^")):
            if src in graph:
                graph.add_edge(src, node.name)
    return graph


def _named_inputs(node: Any) -> dict[str, list[str]]:
    """The node's data inputs by the op's argument names (from the registered OpDef)."""
    from tensorflow.python.framework import op_def_registry

    inputs = [i for i in node.input if not i.startswith("^")]
    op_def = op_def_registry.get(node.op)
    if op_def is None:
        return {"input_dataset": [_input_name(inputs[0])]} if inputs else {}
    named: dict[str, list[str]] = {}
    pos = 0
    for arg in op_def.input_arg:
        if arg.number_attr:
            count = node.attr[arg.number_attr].i
        elif arg.type_list_attr:
            count = len(node.attr[arg.type_list_attr].list.type)
        else:
            count = 1
        named[arg.name] = [_input_name(i) for i in inputs[pos : pos + count]]
        pos += count
    return named


def _const(node: Any, tf: Any) -> Any:
    if node is None or node.op != "Const":
        return None
    try:
        value = tf.make_ndarray(node.attr["value"].tensor)
    except Exception:
        return None
    if value.shape != ():
        return None
    value = value.item()
    return value.decode(errors="replace") if isinstance(value, bytes) else value


def _function_ops(node: Any, functions: dict[str, Any]) -> set[str]:
    """Every op reachable from the node's function attributes (recursively)."""
    seen: set[str] = set()
    ops: set[str] = set()
    pending = _func_names(node)
    while pending:
        name = pending.pop()
        if name in seen or name not in functions:
            continue
        seen.add(name)
        for inner in functions[name].node_def:
            ops.add(inner.op)
            pending.extend(_func_names(inner))
            if inner.op in functions:
                pending.append(inner.op)
    return ops


def _func_names(node: Any) -> list[str]:
    names = []
    for value in node.attr.values():
        kind = value.WhichOneof("value")
        if kind == "func":
            names.append(value.func.name)
        elif kind == "list":
            names.extend(f.name for f in value.list.func)
    return names


def _stateful_ops(ops: set[str]) -> list[str]:
    from tensorflow.python.framework import op_def_registry

    stateful = []
    for op in sorted(ops):
        op_def = op_def_registry.get(op)
        if op_def is None or not op_def.is_stateful or _is_dataset_op(op):
            continue
        if op in _STATEFUL_ALLOWED:
            continue
        stateful.append(op)
    return stateful


def summarise(facts: DataFacts, graph: nx.DiGraph, output: str | None) -> None:
    """Fills the summary fields of ``facts`` from the pipeline ``graph``."""
    nodes = [graph.nodes[n]["node"] for n in graph.nodes]
    # A from_generator / file source is an interleave over a small id / filename dataset: that
    # helper source is not a data source of its own.
    helpers = {
        pred
        for n in nodes
        if n.source_kind in ("generator", "files") and _base_op(n.op) not in _SOURCE_KIND_OF_OP
        for pred in graph.predecessors(n.name)
    }
    kinds = [n.source_kind for n in nodes if n.source_kind and n.name not in helpers]
    facts.source_kinds = sorted(set(kinds), key=kinds.index)
    for node in nodes:
        if node.kind != "map":
            continue
        if node.num_parallel_calls is not None:
            facts.parallel_maps += 1
        elif (
            facts.map_parallelization
            and not node.attrs.get("stateful_ops")
            and not node.attrs.get("force_synchronous")
        ):
            facts.auto_parallel_maps += 1
            node.attrs["auto_parallel"] = True
        else:
            facts.sequential_maps += 1
    batch_kinds = [n.kind for n in nodes if n.kind in ("batch", "padded_batch", "bucket")]
    facts.batch_kind = batch_kinds[-1] if batch_kinds else None
    facts.has_cache = any(n.kind == "cache" for n in nodes)
    facts.has_shuffle = any(n.kind == "shuffle" for n in nodes)
    facts.python_ops = [n.name for n in nodes if n.python]
    last = output
    while last is not None and _base_op(graph.nodes[last]["node"].op) in _NON_USER_OPS:
        preds = list(graph.predecessors(last))
        last = preds[0] if preds else None
    facts.prefetch_last = graph.nodes[last]["node"].kind == "prefetch" if last is not None else None


def _python_chain(ds: Any) -> list[Any]:
    """The user's dataset and its inputs along the main (first-input) chain, output first."""
    chain = []
    seen = set()
    while ds is not None and id(ds) not in seen:
        seen.add(id(ds))
        chain.append(ds)
        try:
            inputs = ds._inputs()
        except Exception:
            inputs = []
        ds = inputs[0] if inputs else None
    return chain


def _graph_chain(graph: nx.DiGraph, output: str | None) -> list[str]:
    """Dataset nodes from the output down the main chain (the ``input_dataset`` edge)."""
    chain = []
    node = output
    while node is not None:
        chain.append(node)
        preds = list(graph.predecessors(node))
        node = preds[0] if preds else None
    return chain


def _chain_length(ds: Any) -> int:
    from tensorflow.core.framework import graph_pb2

    graph_def = graph_pb2.GraphDef.FromString(ds._as_serialized_graph().numpy())
    graph = pipeline_graph(graph_def)
    return len(_graph_chain(graph, _output_node(graph_def)))


def _attach_locations(ds: Any, graph: nx.DiGraph, output: str | None) -> None:
    """Gives each graph node on the main chain the user's line that built it.

    Each Python dataset object on the chain covers the graph nodes between its own output and
    its input's output (``from_generator`` is several ops). The span is found by serialising
    each Python dataset on the chain on its own and counting its chain length. Nodes built
    inside a hooked call (internal datasets) take that call's line.
    """
    full = _graph_chain(graph, output)
    full.reverse()  # source first
    spans = []  # (chain length of a recorded Python dataset, its record), output first
    for obj in _python_chain(ds):
        record = site_of(obj)
        if record is None:
            continue
        try:
            spans.append((_chain_length(obj), record))
        except Exception:  # this one cannot be serialised on its own: its nodes go to the next
            continue
    # From the source up, each recorded dataset owns the nodes up to its chain length.
    owner: dict[int, tuple[str, SourceLocation | None]] = {}
    for length, record in reversed(spans):
        for index in range(length):
            if index < len(full) and index not in owner:
                owner[index] = record
    for index, name in enumerate(full):
        record = owner.get(index)
        if record is not None:
            graph.nodes[name]["node"].location = record[1]
            graph.nodes[name]["node"].attrs.setdefault("built_by", record[0])


# The array argument of the user's calls that build a tf.data source from one array.
_ARRAY_ARGUMENTS = {
    "timeseries_dataset_from_array": "data",
    "from_tensor_slices": "tensors",
    "from_tensors": "tensors",
}


def array_site(nodes: list[DataNode]) -> SourceLocation | None:
    """``DataFacts.array_location``: the assignment of the one array the pipeline's sources were
    built from, or None (no such source, sources from several calls, an argument that is not a
    plain name, or no assignment of it before the call in the file)."""
    built = {
        (n.location.file, n.location.line, n.location.call_source, n.attrs.get("built_by"))
        for n in nodes
        if n.kind == "source" and n.location is not None
    }
    if len(built) != 1:
        return None
    ((file, line, call_source, method),) = built
    keyword = _ARRAY_ARGUMENTS.get(method or "")
    if keyword is None or not call_source or not file or not line:
        return None
    try:
        call = ast.parse(call_source.strip(), mode="eval").body
    except SyntaxError:
        return None
    if not isinstance(call, ast.Call):
        return None
    value = next((k.value for k in call.keywords if k.arg == keyword), None)
    if value is None and call.args:
        value = call.args[0]
    if not isinstance(value, ast.Name):
        return None
    try:
        return sites.assignment_site(file, value.id, line)
    except Exception:  # a site is a nicety: never break the check
        return None


def _last_location(facts: DataFacts) -> SourceLocation | None:
    for node in reversed(facts.nodes):
        if node.location is not None:
            return node.location
    return None
