"""Model probe: the layer tree, every RNN layer's fast-path arguments, and the fast-path probe.

The fast-path verdict comes from running the installed Keras code (see
:class:`rnndoctor.facts.FastPathProbe`), so it follows whatever version is installed:
``LSTM.inner_loop`` / ``GRU.inner_loop`` (``keras/src/layers/rnn/lstm.py``, ``gru.py``) decide
whether the backend kernel is tried at all, and ``cudnn_ok`` in
``keras/src/backend/tensorflow/rnn.py`` decides whether its arguments suit cuDNN.

A tf_keras (Keras 2) layer decides at construction instead: ``LSTM.__init__`` / ``GRU.__init__``
(``tf_keras/src/layers/rnn/lstm.py``, ``gru.py``) set ``self._could_use_gpu_kernel``, which
``call`` reads to choose between the generic loop and ``lstm_with_backend_selection`` /
``gru_with_backend_selection``; the probe reads that attribute on a clone
(:func:`_tf_keras_attempts_cudnn`). The masks are checked at run time by
``gru_lstm_utils.is_cudnn_supported_inputs`` (the sequence facts measure them; RD110/RD111).
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
from typing import Any

import keras
import networkx as nx

from rnndoctor.capture import flavour, sites
from rnndoctor.facts import (
    FAST_PATH_DEFAULTS,
    FastPathProbe,
    GraphEdge,
    LayerInfo,
    ModelFacts,
    RNNLayer,
)

_RECORDED_ARGS = (
    "units",
    "activation",
    "recurrent_activation",
    "recurrent_dropout",
    "dropout",
    "unroll",
    "use_bias",
    "reset_after",
    "use_cudnn",
    "go_backwards",
    "stateful",
    "return_sequences",
    "return_state",
    "time_major",
)

_TF_KERAS_PROBE_SOURCE = (
    "installed tf_keras {version}: {cls}._could_use_gpu_kernel, set by {cls}.__init__ "
    "(tf_keras/src/layers/rnn/{file}.py; GPU availability assumed, masks checked at run time by "
    "gru_lstm_utils.is_cudnn_supported_inputs)"
)

_PROBE_SOURCE = (
    "installed keras {version}: {cls}.inner_loop + "
    "keras/src/backend/tensorflow/rnn.py:cudnn_ok (GPU availability assumed)"
)


def _activation_name(fn: Any, module: Any = keras) -> str:
    try:
        name = module.activations.serialize(fn)
    except Exception:
        name = None
    if isinstance(name, dict):
        name = name.get("config", {}).get("name") or name.get("class_name")
    return str(name or getattr(fn, "__name__", None) or repr(fn))


def sublayers(layer: Any) -> list[Any]:
    """Direct sub-layers, as Keras tracks them (wrappers, nested and subclassed models)."""
    flatten = getattr(layer, "_flatten_layers", None)
    if flatten is not None:
        try:
            return list(flatten(include_self=False, recursive=False))
        except Exception:
            pass
    return list(getattr(layer, "layers", []) or [])


def _is_keras_class(cls: type) -> bool:
    return cls.__module__.startswith(("keras.", "tf_keras."))


def _rnn_kind(layer: Any) -> str:
    layers = flavour.module_of(layer).layers
    lstm, gru, simple = layers.LSTM, layers.GRU, layers.SimpleRNN
    if isinstance(layer, lstm):
        return "lstm"
    if isinstance(layer, gru):
        return "gru"
    if isinstance(layer, simple):
        return "simple_rnn"
    cell = getattr(layer, "cell", None)
    cells = getattr(cell, "cells", None) or ([cell] if cell is not None else [])
    if type(layer) is layers.RNN or not _is_keras_class(type(layer)):
        if cells and all(_is_keras_class(type(c)) for c in cells):
            return "generic_rnn"
        return "custom_cell"
    return "other_rnn"


def _input_shape(layer: Any) -> list[int | None] | None:
    try:
        shape = layer.input.shape  # functional / sequential graphs
    except Exception:
        shape = getattr(layer, "_build_shapes_dict", None)
        shape = next(iter(shape.values()), None) if isinstance(shape, dict) and shape else None
    if shape is None:
        return None
    try:
        return [None if d is None else int(d) for d in shape]
    except TypeError:
        return None


def _rnn_args(layer: Any) -> dict[str, Any]:
    cell = getattr(layer, "cell", None)
    args: dict[str, Any] = {}
    for name in _RECORDED_ARGS:
        holder = layer if hasattr(layer, name) else cell
        if holder is None or not hasattr(holder, name):
            continue
        value = getattr(holder, name)
        if name in ("activation", "recurrent_activation"):
            value = _activation_name(value, flavour.module_of(layer))
        elif hasattr(value, "item"):
            value = value.item()
        args[name] = value
    return args


@contextlib.contextmanager
def _spy_backend_kernels(calls: list[bool]):
    """Replaces ``keras.src.backend.lstm`` / ``gru`` with a spy that records, per call, whether
    ``cudnn_ok`` accepts the arguments, then raises ``NotImplementedError`` so that Keras falls
    back to its generic loop (exactly what it does when cuDNN is unavailable)."""
    from keras.src import backend as kbackend

    # The package re-exports a function named `rnn`, which shadows the module of that name.
    tfrnn = importlib.import_module("keras.src.backend.tensorflow.rnn")

    def spy(*args, reset_after=None, **kwargs):
        saved = tfrnn._is_gpu_available
        tfrnn._is_gpu_available = lambda: True
        try:
            ok = tfrnn.cudnn_ok(
                kwargs["activation"],
                kwargs["recurrent_activation"],
                kwargs.get("unroll", False),
                use_bias=kwargs.get("bias") is not None,
                reset_after=reset_after,
            )
        finally:
            tfrnn._is_gpu_available = saved
        calls.append(bool(ok))
        raise NotImplementedError

    saved = kbackend.lstm, kbackend.gru
    kbackend.lstm = kbackend.gru = spy
    try:
        yield
    finally:
        kbackend.lstm, kbackend.gru = saved


def _keras3_attempts(layer_cls: type, config: dict[str, Any], features: int, steps: int) -> bool:
    """Builds ``layer_cls.from_config(config)`` and calls it once in training mode."""
    import numpy as np

    config = dict(config, name=f"rnndoctor_probe_{config.get('name', 'rnn')}", stateful=False)
    calls: list[bool] = []
    with _spy_backend_kernels(calls):
        clone = layer_cls.from_config(config)
        clone(np.zeros((2, steps, features), dtype="float32"), training=True)
    return bool(calls) and all(calls)


def _tf_keras_attempts_cudnn(
    layer_cls: type, config: dict[str, Any], features: int, steps: int
) -> bool:
    """Builds ``layer_cls.from_config(config)`` (a tf_keras LSTM/GRU) and reads the verdict its
    own ``__init__`` set: ``_could_use_gpu_kernel`` (``tf_keras/src/layers/rnn/lstm.py``,
    ``gru.py``), evaluated outside any ``tf.function`` (it includes
    ``tf.compat.v1.executing_eagerly_outside_functions()``). ``features``/``steps`` are unused:
    the verdict does not depend on the input."""
    del features, steps
    config = dict(config, name=f"rnndoctor_probe_{config.get('name', 'rnn')}", stateful=False)
    return bool(getattr(layer_cls.from_config(config), "_could_use_gpu_kernel", False))


def _replacement(layer: Any, kind: str) -> tuple[type, dict[str, Any]] | None:
    """The fused layer (class, config) that computes what a SimpleRNN / RNN(cell) computes.

    ``RNN(LSTMCell(...))`` -> ``LSTM(...)`` and ``RNN(GRUCell(...))`` -> ``GRU(...)`` are the
    same computation; ``SimpleRNN`` -> ``GRU`` is a different model, suggested for speed only.
    """
    cell = getattr(layer, "cell", None)
    layers = flavour.module_of(layer).layers
    if kind == "generic_rnn" and isinstance(cell, layers.LSTMCell):
        cls = layers.LSTM
    elif kind == "generic_rnn" and isinstance(cell, layers.GRUCell):
        cls = layers.GRU
    elif kind == "simple_rnn":
        cls = layers.GRU
    else:
        return None
    accepted = set(inspect.signature(cls.__init__).parameters)
    config = {k: v for k, v in cell.get_config().items() if k in accepted}
    outer = layer.get_config()
    for key in ("return_sequences", "return_state", "go_backwards", "unroll", "name"):
        if key in outer:
            config[key] = outer[key]
    return cls, config


def _probe_config(cls: type, config: dict[str, Any], features: int) -> dict[str, Any]:
    """Probes ``config`` and, one at a time, each argument that differs from the fast path,
    with the installed Keras' own decision (Keras 3's ``cudnn_ok`` or tf_keras'
    ``_could_use_gpu_kernel``)."""
    steps = 3
    _attempts_cudnn = _tf_keras_attempts_cudnn if flavour.is_tf_keras(cls) else _keras3_attempts
    relevant = [k for k in FAST_PATH_DEFAULTS if k in config]
    compliant = dict(config, **{k: FAST_PATH_DEFAULTS[k] for k in relevant})
    takes = _attempts_cudnn(cls, config, features, steps)
    blocking = [
        k
        for k in relevant
        if config[k] != FAST_PATH_DEFAULTS[k]
        and not _attempts_cudnn(cls, dict(compliant, **{k: config[k]}), features, steps)
    ]
    fixed = dict(config, **{k: FAST_PATH_DEFAULTS[k] for k in blocking})
    return {
        "takes": takes,
        "blocking": blocking,
        "fixed_takes": takes or _attempts_cudnn(cls, fixed, features, steps),
        "dropout_ok": _attempts_cudnn(cls, dict(compliant, dropout=0.5), features, steps),
    }


def _probe_source(cls: type) -> str:
    """Which installed code decides the verdict of ``cls`` (``FastPathProbe.source``)."""
    if flavour.is_tf_keras(cls):
        version = flavour.module_of(cls).__version__
        file = "gru" if "GRU" in cls.__name__ else "lstm"
        return _TF_KERAS_PROBE_SOURCE.format(version=version, cls=cls.__name__, file=file)
    return _PROBE_SOURCE.format(version=keras.__version__, cls=cls.__name__)


def probe_fast_path(layer: Any, kind: str) -> FastPathProbe:
    """Runs the installed Keras code to decide the cuDNN verdict of ``layer`` (see module doc).

    Never raises: when the probe cannot run, ``probed`` is False and the reason is kept.
    """
    source = _probe_source(type(layer))
    if kind not in ("lstm", "gru", "simple_rnn", "generic_rnn"):
        return FastPathProbe(
            probed=True,
            takes_fast_path=False,
            source="a user-defined cell always runs the generic backend.rnn loop "
            "(keras/src/layers/rnn/rnn.py:RNN.inner_loop)",
        )
    if keras.backend.backend() != "tensorflow":
        return FastPathProbe(probed=False, not_probed_reason="the Keras backend is not TensorFlow")
    try:
        kernel = getattr(layer.cell, "kernel", None)
        if kernel is None:
            return FastPathProbe(probed=False, not_probed_reason="the layer was never built")
        features = int(kernel.shape[0])
        if kind in ("lstm", "gru"):
            config = layer.get_config()
            if kind == "lstm":
                config.pop("reset_after", None)
            # get_config() leaves some constructor arguments out (use_cudnn in Keras 3.15):
            # carry them over, or the clone would silently probe the default.
            accepted = inspect.signature(type(layer).__init__).parameters
            for key in FAST_PATH_DEFAULTS:
                if key not in config and key in accepted and hasattr(layer, key):
                    config[key] = getattr(layer, key)
            result = _probe_config(type(layer), config, features)
            return FastPathProbe(
                probed=True,
                takes_fast_path=result["takes"],
                blocking_args=result["blocking"],
                fixed_takes_fast_path=result["fixed_takes"],
                dropout_keeps_fast_path=result["dropout_ok"],
                source=source,
            )
        replacement = _replacement(layer, kind)
        generic = (
            "SimpleRNN has no fused kernel"
            if kind == "simple_rnn"
            else "keras/src/layers/rnn/rnn.py:RNN.inner_loop always runs the generic backend.rnn"
        )
        if replacement is None:
            return FastPathProbe(probed=True, takes_fast_path=False, source=generic)
        cls, config = replacement
        result = _probe_config(cls, config, features)
        return FastPathProbe(
            probed=True,
            takes_fast_path=False,
            blocking_args=result["blocking"],
            fixed_takes_fast_path=result["fixed_takes"],
            dropout_keeps_fast_path=result["dropout_ok"],
            replacement_class=cls.__name__,
            source=f"{generic}; replacement probed with " + _probe_source(cls),
        )
    except Exception as exc:  # a custom subclass that cannot be cloned, say
        return FastPathProbe(
            probed=False, not_probed_reason=f"{type(exc).__name__}: {exc}"[:300], source=source
        )


def _model_type(model: Any) -> str:
    if isinstance(model, flavour.module_of(model).Sequential):
        return "sequential"
    if flavour.is_tf_keras(model):
        from tf_keras.src.engine.functional import Functional
    else:
        from keras.src.models.functional import Functional

    return "functional" if isinstance(model, Functional) else "subclassed"


def _dataflow(model: Any) -> list[tuple[Any, Any, str]] | None:
    """(producer, consumer, kind) between the operations of a functional/sequential model's graph.

    ``kind`` is ``mask`` when the producer's output is the consumer's ``mask=`` argument, else
    ``feeds``. Returns None when the model has no functional graph (subclassed models).
    """
    if flavour.is_tf_keras(model):
        return _tf_keras_dataflow(model)
    graph = getattr(model, "_functional", None) or model
    operations = getattr(graph, "_operations", None)
    if not operations:
        return None
    members = set(map(id, operations))
    edges = []
    for op in operations:
        for node in getattr(op, "_inbound_nodes", []):
            arguments = getattr(node, "arguments", None)
            mask = arguments.kwargs.get("mask") if arguments is not None else None
            masks = {id(t) for t in keras.tree.flatten(mask)} if mask is not None else set()
            for tensor in node.input_tensors:
                history = getattr(tensor, "_keras_history", None)
                if history is None or id(history.operation) not in members:
                    continue
                kind = "mask" if id(tensor) in masks else "feeds"
                edges.append((history.operation, op, kind))
    return edges


def _tf_keras_dataflow(model: Any) -> list[tuple[Any, Any, str]] | None:
    """:func:`_dataflow` for a tf_keras graph network (``tf_keras/src/engine/functional.py``:
    ``Functional._network_nodes``; each ``node.Node`` keeps ``keras_inputs`` and
    ``call_kwargs``, whose ``mask`` is the explicit ``mask=`` argument)."""
    import tensorflow as tf

    if not getattr(model, "_is_graph_network", False):
        return None
    operations = list(model.layers)
    members = set(map(id, operations))
    network_nodes = getattr(model, "_network_nodes", set())
    edges = []
    for op in operations:
        for index, node in enumerate(getattr(op, "_inbound_nodes", [])):
            if network_nodes and f"{op.name}_ib-{index}" not in network_nodes:
                continue  # a node of the layer's use in another model
            mask = (getattr(node, "call_kwargs", None) or {}).get("mask")
            masks = {id(t) for t in tf.nest.flatten(mask)} if mask is not None else set()
            for tensor in getattr(node, "keras_inputs", []):
                history = getattr(tensor, "_keras_history", None)
                if history is None or id(history.layer) not in members:
                    continue
                kind = "mask" if id(tensor) in masks else "feeds"
                edges.append((history.layer, op, kind))
    return edges


def model_graph(model: Any, facts: ModelFacts) -> nx.DiGraph:
    """The model as a networkx DiGraph over layer paths: containment and data-flow edges.

    Fills ``facts.graph_edges``, ``facts.graph_known`` and each RNN layer's ``receives_mask`` and
    ``fed_by`` (through the wrapper that holds it, for ``Bidirectional`` / ``TimeDistributed``).
    """
    graph = nx.DiGraph()
    for info in facts.layers:
        graph.add_node(info.path, class_name=info.class_name)
        if info.parent is not None and info.parent != model.name:
            graph.add_edge(info.parent, info.path, kind="contains")
    flow = _dataflow(model)
    facts.graph_known = flow is not None
    for src, dst, kind in flow or []:
        for op in (src, dst):
            graph.add_node(f"{model.name}/{op.name}", class_name=type(op).__name__)
        graph.add_edge(f"{model.name}/{src.name}", f"{model.name}/{dst.name}", kind=kind)
    facts.graph_edges = [GraphEdge(s, d, data["kind"]) for s, d, data in graph.edges(data=True)]
    for rnn in facts.rnn_layers:
        top = rnn.path
        while True:  # climb to the top-level layer through its wrappers
            parents = [p for p, _, k in graph.in_edges(top, data="kind") if k == "contains"]
            if not parents:
                break
            top = parents[0]
        incoming = list(graph.in_edges(top, data="kind"))
        rnn.fed_by = sorted(s for s, _, k in incoming if k == "feeds")
        rnn.receives_mask = any(k == "mask" for _, _, k in incoming) if flow is not None else None
    return graph


def collect_model(model: Any, probe: bool = True) -> ModelFacts:
    """Walks ``model``'s layer tree (wrappers, nested and subclassed models) into ModelFacts.

    Args:
        model: a built ``keras.Model``.
        probe: run the fast-path probe on each LSTM/GRU (a few tiny eager calls per layer).
    """
    try:
        params = int(model.count_params())
    except Exception:
        params = None
    facts = ModelFacts(
        name=model.name,
        class_name=type(model).__name__,
        model_type=_model_type(model),
        param_count=params,
    )
    seen: set[int] = set()

    def visit(layer: Any, parent_path: str | None, depth: int, wrappers: list[str]) -> None:
        if id(layer) in seen:
            return
        seen.add(id(layer))
        path = f"{parent_path}/{layer.name}" if parent_path else layer.name
        is_rnn = isinstance(layer, flavour.module_of(layer).layers.RNN)
        location = sites.site_of(layer)
        facts.layers.append(
            LayerInfo(
                path=path,
                name=layer.name,
                class_name=type(layer).__name__,
                depth=depth,
                parent=parent_path,
                is_rnn=is_rnn,
                location=location,
            )
        )
        if is_rnn:
            kind = _rnn_kind(layer)
            cell = getattr(layer, "cell", None)
            cells = getattr(cell, "cells", None) or ([cell] if cell is not None else [])
            direction = None
            if wrappers and wrappers[-1] == "Bidirectional":
                direction = "backward" if getattr(layer, "go_backwards", False) else "forward"
            facts.rnn_layers.append(
                RNNLayer(
                    path=path,
                    name=layer.name,
                    class_name=type(layer).__name__,
                    kind=kind,
                    cell_class=type(cell).__name__ if cell is not None else "",
                    cell_classes=[f"{type(c).__module__}.{type(c).__name__}" for c in cells],
                    args=_rnn_args(layer),
                    wrappers=list(wrappers),
                    direction=direction,
                    input_shape=_input_shape(layer),
                    dtype_policy=str(getattr(getattr(layer, "dtype_policy", None), "name", "")),
                    location=location,
                    fast_path=probe_fast_path(layer, kind) if probe else None,
                    init_params=_positional_params(type(layer)),
                )
            )
            return  # an RNN's cells are described by the RNN entry
        child_wrappers = [*wrappers, type(layer).__name__] if _is_wrapper(layer) else wrappers
        for child in sublayers(layer):
            visit(child, path, depth + 1, child_wrappers)

    for child in sublayers(model):
        visit(child, model.name, 1, [])
    model_graph(model, facts)
    return facts


def _positional_params(cls: type) -> list[str]:
    try:
        params = inspect.signature(cls.__init__).parameters.values()
    except (TypeError, ValueError):
        return []
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return [p.name for p in params if p.kind in kinds][1:]  # without self


def _is_wrapper(layer: Any) -> bool:
    layers = flavour.module_of(layer).layers
    return isinstance(layer, (layers.Bidirectional, layers.Wrapper))
