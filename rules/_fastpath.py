"""Shared logic of the RD1xx (cuDNN fast path) rules. Pure: no TensorFlow, no I/O.

The verdict that an argument blocks the fast path comes from ``RNNLayer.fast_path``, the probe
that ran the installed Keras code in the capture (``rnndoctor/capture/model.py``). When the probe
could not run, each rule falls back to its static criterion, copied from Keras 3's
``keras/src/backend/tensorflow/rnn.py:_do_lstm_arguments_support_cudnn`` /
``_do_gru_arguments_support_cudnn`` and ``LSTM.inner_loop`` / ``GRU.inner_loop``, and says so in
the evidence. For a tf_keras (Keras 2) model the probe's verdict is tf_keras' own
``_could_use_gpu_kernel``, which ``LSTM.__init__`` / ``GRU.__init__`` set
(``tf_keras/src/layers/rnn/lstm.py``, ``gru.py``: tanh, sigmoid, ``recurrent_dropout == 0``, not
``unroll``, ``use_bias``, GRU ``reset_after``); the probe's ``source`` names it in the evidence.
The messages cite the criterion of the Keras that ran, too (``environment.keras_flavour``): a
rule's ``why`` names Keras 3's code, its ``why_keras2`` tf_keras' (:func:`tf_keras_criterion`),
and the mask proviso cites ``gru_lstm_utils.is_cudnn_supported_inputs`` under tf_keras.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

from rnndoctor import rewrite as rw
from rnndoctor.facts import FAST_PATH_DEFAULTS, Facts, RNNLayer, SequenceInput, SourceLocation
from rnndoctor.findings import Evidence, Finding, Fix, FixSafety, Location, Severity
from rnndoctor.rules import finding

FUSED_KINDS = ("lstm", "gru")

# The RD rule that covers each fast-path argument (see FAST_PATH_DEFAULTS in rnndoctor.facts).
RULE_OF_ARG = {
    "recurrent_dropout": "RD101",
    "dropout": "RD101",
    "activation": "RD102",
    "recurrent_activation": "RD103",
    "unroll": "RD104",
    "use_bias": "RD105",
    "reset_after": "RD106",
    "use_cudnn": "RD109",
}


def rnn_layers(facts: Facts, kinds: tuple[str, ...] = FUSED_KINDS) -> Iterator[RNNLayer]:
    """RNN layers of the given kinds. The backward half of a ``Bidirectional`` is skipped when it
    is the forward half's clone (same construction site and arguments): one finding covers both.
    """
    if facts.model is None:
        return
    forwards = {
        (r.location.file, r.location.line, r.class_name)
        for r in facts.model.rnn_layers
        if r.direction == "forward" and r.location is not None
    }
    for layer in facts.model.rnn_layers:
        if layer.kind not in kinds:
            continue
        if (
            layer.direction == "backward"
            and layer.location is not None
            and (layer.location.file, layer.location.line, layer.class_name) in forwards
        ):
            continue
        yield layer


def layer_label(layer: RNNLayer) -> str:
    both = " (both directions of its Bidirectional)" if layer.direction == "forward" else ""
    return f"{layer.class_name} layer '{layer.path}'{both}"


def location(layer: RNNLayer) -> Location | None:
    """The layer's construction site as a finding's location (None: not recorded)."""
    return to_location(layer.location)


def to_location(loc: SourceLocation | None) -> Location | None:
    """A recorded :class:`SourceLocation` as a finding's :class:`Location`."""
    if loc is None:
        return None
    return Location(
        file=loc.file,
        line=loc.line,
        code=loc.code,
        context_start=loc.context_start,
        context=tuple(loc.context),
    )


def severity(facts: Facts) -> Severity:
    """``error`` where a GPU is visible (the layer runs the slow kernel in this very job),
    ``warning`` on a CPU-only run (cuDNN cannot run here; the slowdown hits the GPU job)."""
    gpus = facts.environment.gpu_count if facts.environment else 0
    return Severity.ERROR if gpus else Severity.WARNING


# Where Keras 2 decides what a mask does to the cuDNN kernel: it checks the mask at run time and
# picks the kernel, instead of asserting as Keras 3 does (rules/_sequences.py: KERAS_MASK_CHECK).
TF_KERAS_MASK_CHECK = (
    "tf_keras/src/layers/rnn/gru_lstm_utils.py: is_cudnn_supported_inputs "
    "(is_sequence_right_padded and not has_fully_masked_sequence), read by "
    "lstm_with_backend_selection / gru_with_backend_selection (tf_keras/src/layers/rnn/lstm.py, "
    "gru.py), which run the generic standard_lstm / standard_gru when it is False"
)


def is_keras2(facts: Facts) -> bool:
    """True when the diagnosed model ran on tf_keras (Keras 2): ``Environment.keras_flavour``
    (``"tf_keras 2.21.0"``; ``"keras 3.15.1"`` for Keras 3, and absent in older facts)."""
    flavour = facts.environment.keras_flavour if facts.environment else None
    return bool(flavour) and flavour.split()[0] == "tf_keras"


def tf_keras_criterion(layer: RNNLayer) -> str:
    """Where tf_keras (Keras 2) decides whether ``layer`` may take the cuDNN kernel: the
    ``_could_use_gpu_kernel`` flag that ``LSTM.__init__`` / ``GRU.__init__`` set (tanh, sigmoid,
    ``recurrent_dropout == 0``, not ``unroll``, ``use_bias``, GRU ``reset_after``) and ``call``
    reads, e.g. ``"LSTM._could_use_gpu_kernel in tf_keras/src/layers/rnn/lstm.py"``."""
    cls = "GRU" if layer.kind == "gru" else "LSTM"
    return f"{cls}._could_use_gpu_kernel in tf_keras/src/layers/rnn/{cls.lower()}.py"


def why_text(facts: Facts, layer: RNNLayer, why: str, why_keras2: str | None) -> str:
    """The reason a message gives, citing the criterion of the Keras that ran: ``why`` (Keras 3's
    code) or, for a tf_keras model, ``why_keras2`` with ``{criterion}`` replaced by
    :func:`tf_keras_criterion` (``why`` when the rule gives no Keras 2 wording)."""
    if why_keras2 is None or not is_keras2(facts):
        return why
    return why_keras2.format(criterion=tf_keras_criterion(layer))


def mask_check_severity(facts: Facts) -> Severity:
    """The severity of a mask the cuDNN kernel rejects (RD110, RD111 on a cuDNN layer).

    Keras 3 fails the job: ``_assert_valid_mask`` (``keras/src/backend/tensorflow/rnn.py``) is a
    ``tf.Assert`` inside the compiled step, so ``error``. Keras 2 (tf_keras) silently runs the
    generic kernel instead (:data:`TF_KERAS_MASK_CHECK`): the job is slow, not broken, so
    ``warning``.
    """
    return Severity.WARNING if is_keras2(facts) else Severity.ERROR


def mask_fallback_sentence(facts: Facts) -> str:
    """What a rejected mask does under Keras 2 (empty under Keras 3)."""
    if not is_keras2(facts):
        return ""
    flavour = facts.environment.keras_flavour if facts.environment else "tf_keras"
    return (
        f" This run used {flavour} (Keras 2), which does not fail: its run-time mask check "
        "(gru_lstm_utils.is_cudnn_supported_inputs) sends every such batch to the generic "
        "kernel, silently, so the GPU job runs the slow kernel instead of cuDNN."
    )


def gain_text(facts: Facts) -> str:
    gpus = facts.environment.gpu_count if facts.environment else 0
    if gpus:
        return (
            "not measured: this run did not time the layer on both kernels. Keras runs it on "
            "the generic while-loop kernel instead of the fused cuDNN kernel"
        )
    return (
        "not measured: no GPU is visible to TensorFlow in this run, and cuDNN runs only on a "
        "GPU. On a GPU, Keras runs this layer on the generic while-loop kernel instead of the "
        "fused cuDNN kernel"
    )


def blocks(layer: RNNLayer, arg: str, static: Callable[[Any], bool]) -> tuple[bool, str]:
    """Whether ``arg`` blocks the fast path of ``layer``, and the basis of that verdict."""
    probe = layer.fast_path
    if probe is not None and probe.probed:
        return arg in probe.blocking_args, f"probed: {probe.source}"
    if arg not in layer.args:
        return False, "argument not present"
    why = probe.not_probed_reason if probe is not None else "probe disabled"
    return bool(static(layer.args[arg])), f"static criterion (probe not run: {why})"


parse_call = rw.parse_call  # the shared call parser (rnndoctor.rewrite.parse_call)


def _literal(value: Any) -> ast.expr:
    return ast.parse(repr(value), mode="eval").body


def rewrite_call(
    call_source: str | None,
    drop: tuple[str, ...] = (),
    set_args: dict[str, Any] | None = None,
    func_name: str | None = None,
    positional_names: tuple[str, ...] | list[str] = (),
    beside_splat: bool = False,
) -> str | None:
    """Rewrites a constructor call's source: removes keywords, sets keywords, renames the class.

    Positional arguments after the first (``units``) become keywords when one of them is to be
    dropped or set and ``positional_names`` (the constructor's parameter order) names them.
    Returns None when the call cannot be parsed, when an argument to drop was not written in the
    call (it came from ``**kwargs`` or a config), when the call passes ``**kwargs`` and the
    rewrite would set a keyword or rename the class (the splat may hold that keyword: a
    duplicate at run time), when an argument to set or drop is passed a value that is not a
    literal (``padding=pad_mode``, ``recurrent_dropout=args.rd``: the option or name that sets
    it would silently stop reaching the layer; :func:`rnndoctor.rewrite.read_values`),
    or when positional
    arguments cannot be named: the caller then builds the call from the layer's recorded
    arguments instead. Dropping a keyword written in a call that also passes ``**kwargs`` is
    exact, and done; ``beside_splat=True`` sets keywords beside it too, for a display-only fix
    that says the splat may hold them (:func:`splat_rewrite`).
    """
    node = parse_call(call_source)
    if node is None or any(isinstance(a, ast.Starred) for a in node.args):
        return None
    set_args = set_args or {}
    if rw.read_values(call_source, (*set_args, *drop), positional_names):
        return None  # a value the call reads, replaced or removed: see rebuilt_fix
    if any(k.arg is None for k in node.keywords):  # a **kwargs splat: its keys are unknown here
        explicit = {k.arg for k in node.keywords if k.arg}
        if (set_args and not beside_splat) or func_name or not set(drop) <= explicit:
            return None  # a set keyword could clash with the splat's; a dropped one is in it

    touched = set(drop) | set(set_args)
    if len(node.args) <= 1 or not set(positional_names[1 : len(node.args)]) & touched:
        return _splice(call_source, drop, set_args, func_name, beside_splat)
    if len(node.args) > 1:
        if len(node.args) > len(positional_names):
            return None
        named = set(positional_names[1 : len(node.args)])
        if named & touched:
            keywords = [
                ast.keyword(arg=name, value=value)
                for name, value in zip(positional_names[1:], node.args[1:], strict=False)
            ]
            node.keywords = keywords + node.keywords
            node.args = node.args[:1]
    names = {k.arg for k in node.keywords}
    if any(k not in names for k in drop):
        return None
    node.keywords = [k for k in node.keywords if k.arg not in touched]
    node.keywords += [ast.keyword(arg=k, value=_literal(v)) for k, v in set_args.items()]
    if func_name:
        if isinstance(node.func, ast.Attribute):
            node.func.attr = func_name
        elif isinstance(node.func, ast.Name):
            node.func.id = func_name
    return ast.unparse(node)


def _splice(
    call_source: str,
    drop: tuple[str, ...],
    set_args: dict[str, Any],
    func_name: str | None,
    beside_splat: bool = False,
) -> str | None:
    """:func:`rewrite_call` without positional arguments to name: each change spliced into the
    user's text (:mod:`rnndoctor.rewrite`), the rest kept as written (``beside_splat``: a set
    keyword is written beside a ``**kwargs`` splat, :func:`splat_rewrite`)."""
    text: str | None = call_source.strip()
    for name in drop:
        if name not in set_args:
            text = rw.remove_keyword(text, name)
            if text is None:
                return None
    for name, value in set_args.items():
        text = rw.set_keyword(text, name, repr(value), beside_splat=beside_splat)
    if func_name and text is not None:
        text = rw.rename_func(text, func_name)
    return text


def func_text(call_source: str | None, class_name: str) -> str:
    """How the user's call names the class (``layers.LSTM``), for a call rebuilt from facts."""
    node = parse_call(call_source)
    if node is not None and isinstance(node.func, ast.Attribute):
        node.func.attr = class_name
        return ast.unparse(node.func)
    return class_name if node is not None else f"keras.layers.{class_name}"


_SHOWN_ARGS = (
    "activation",
    "recurrent_activation",
    "use_bias",
    "dropout",
    "recurrent_dropout",
    "return_sequences",
    "return_state",
    "go_backwards",
    "stateful",
    "unroll",
    "reset_after",
    "use_cudnn",
)
_DEFAULTS = {
    **FAST_PATH_DEFAULTS,
    "return_sequences": False,
    "return_state": False,
    "go_backwards": False,
    "stateful": False,
}


def build_call(
    class_name: str,
    args: dict[str, Any],
    overrides: dict[str, Any],
    call_source: str | None = None,
) -> str:
    """A constructor call from recorded arguments, e.g. ``keras.layers.LSTM(64, dropout=0.2)``.

    Only arguments that differ from Keras' defaults are written; ``overrides`` wins (a value of
    ``None`` removes the argument). The class is named as the user's call names it, when known.
    Values are the layer's recorded values (a ``units`` the script computed appears as a number).
    """
    merged = {**args, **overrides}
    parts = [repr(merged.get("units"))]
    for key in _SHOWN_ARGS:
        if key not in merged or merged[key] is None:
            continue
        if key == "reset_after" and class_name != "GRU":
            continue
        if merged[key] != _DEFAULTS.get(key):
            parts.append(f"{key}={merged[key]!r}")
    return f"{func_text(call_source, class_name)}({', '.join(parts)})"


def rebuilt_fix(
    fix: Fix,
    args: tuple[str, ...] = (),
    set_args: dict[str, Any] | None = None,
    positional_names: tuple[str, ...] | list[str] = (),
) -> Fix:
    """``fix`` whose code is a call rebuilt from the layer's recorded values
    (:func:`build_call`) because the user's call could not be rewritten in place (a
    ``**kwargs`` splat that holds ``args``, an argument of ``args`` or ``set_args`` that the
    call reads from a name or an option, positional arguments that could not be named): a
    display-only
    sketch, since pasted over the user's call it would replace their names and options
    (``GRU(args.units, **rnn_kwargs)`` -> ``GRU(32, activation='relu')``) with this run's
    values, and drop what the splat holds. Where no call of the user's was recorded
    (``before`` None) the sketch replaces nothing and is returned as it is."""
    if fix.before is None:
        return fix
    node = parse_call(fix.before)
    splats = rw.splats(fix.before)
    explicit = {k.arg for k in node.keywords if k.arg} if node else set()
    set_args = set_args or {}
    read = rw.read_values(fix.before, (*set_args, *args), positional_names)
    if read:
        why = "; ".join(
            f"your call passes {name}={text}: set that to {set_args[name]!r} where it is set"
            if name in set_args
            else f"your call passes {name}={text}: remove it, or set that to "
            f"{FAST_PATH_DEFAULTS.get(name)!r} (the default) where it is set"
            for name, text in read.items()
        )
    elif splats and args and not set(args) & explicit:
        why = (
            f"your call passes **{splats[0]} (which holds {', '.join(args)}): change it where "
            f"{splats[0]} is built"
        )
    elif splats and args:
        why = f"your call also passes **{splats[0]}, which may hold what this fix sets"
    elif splats:
        why = f"your call passes **{splats[0]}, which a rewrite of the call cannot carry over"
    else:
        why = "your call's arguments could not be rewritten in place"
    note = (
        f"# display-only: {why}. The call below is written from this run's values: a name of "
        f"yours\n# appears as its value, so edit your own call to match rather than paste it\n"
    )
    return replace(
        fix, code=note + fix.code, safety=FixSafety.DISPLAY_ONLY, before=None,
        title=f"{fix.title} ({why})",
    )  # fmt: skip


MASK_CAVEAT = (
    "provided every mask the layer receives is right-padded with no empty sequence, which cuDNN "
    "also requires (keras/src/backend/tensorflow/rnn.py: _assert_valid_mask); this run did not "
    "sample the masks"
)
# The same proviso under tf_keras (Keras 2), citing its run-time mask check (TF_KERAS_MASK_CHECK).
TF_KERAS_MASK_CAVEAT = (
    "provided every mask the layer receives is right-padded with no empty sequence, which cuDNN "
    "also requires (tf_keras/src/layers/rnn/gru_lstm_utils.py: is_cudnn_supported_inputs); this "
    "run did not sample the masks"
)


def sampled_mask(facts: Facts | None, layer: RNNLayer) -> SequenceInput | None:
    """The sampled masked input that reaches ``layer`` (``Facts.sequences``), or None when the
    masks it receives were not sampled."""
    if facts is None or facts.sequences is None:
        return None
    return next(
        (
            record
            for record in facts.sequences.inputs
            if record.mask_used
            and not record.ragged
            and record.sequences
            and layer.path in record.rnn_layers
        ),
        None,
    )


def _mask_problem(record: SequenceInput) -> str | None:
    """What in the sampled masks cuDNN rejects (with the rule that reports it), or None."""
    problems = []
    if record.left_padded_rows or record.holed_rows:
        problems.append(
            f"{record.left_padded_rows + record.holed_rows} of {record.sequences} sampled "
            "sequences are not right-padded (RD110)"
        )
    if record.fully_masked_rows:
        problems.append(f"{record.fully_masked_rows} are empty (RD111)")
    return "; ".join(problems) or None


def mask_caveat(layer: RNNLayer, facts: Facts | None = None) -> str | None:
    """The mask proviso of a cuDNN verdict: None when the layer receives no mask, or when the
    sampled masks it receives were checked and are right-padded with no empty sequence; the
    sampled problem when they are not; ``MASK_CAVEAT`` when the masks were not sampled. Under
    tf_keras the proviso cites its own mask check, which sends such a batch to the generic
    kernel instead of failing the step (:data:`TF_KERAS_MASK_CHECK`)."""
    keras2 = facts is not None and is_keras2(facts)
    record = sampled_mask(facts, layer)
    if record is not None:
        problem = _mask_problem(record)
        if problem is None:
            return None
        if keras2:
            return (
                "but cuDNN requires right-padded masks with no empty sequence "
                "(tf_keras/src/layers/rnn/gru_lstm_utils.py: is_cudnn_supported_inputs), and "
                f"{problem}: those batches run the generic kernel until that is fixed too"
            )
        return (
            "but cuDNN requires right-padded masks with no empty sequence "
            f"(keras/src/backend/tensorflow/rnn.py: _assert_valid_mask), and {problem}: "
            "the step fails there until that is fixed too"
        )
    if not layer.receives_mask:
        return None
    return TF_KERAS_MASK_CAVEAT if keras2 else MASK_CAVEAT


def after_fix(
    layer: RNNLayer, fixed_args: tuple[str, ...], facts: Facts | None = None
) -> tuple[bool | None, str]:
    """Whether the layer would take cuDNN once ``fixed_args`` are reset, and why (a sentence).

    With ``facts``, the sentence says whether the sampled masks the layer receives meet cuDNN's
    mask requirement (right-padded, no empty sequence), or that they were not sampled.
    """
    probe = layer.fast_path
    if probe is None or not probe.probed:
        return None, "Whether the layer then takes the cuDNN kernel was not probed."
    others = [a for a in probe.blocking_args if a not in fixed_args]
    if others:
        listed = ", ".join(f"{a}={layer.args.get(a)!r} ({RULE_OF_ARG.get(a, '?')})" for a in others)
        return False, f"Once fixed, the layer still misses the cuDNN kernel: blocked by {listed}."
    if probe.fixed_takes_fast_path:
        record = sampled_mask(facts, layer)
        problem = _mask_problem(record) if record is not None else None
        if record is not None and problem is None:
            proviso = (
                f", and its sampled masks are right-padded with no empty sequence (checked on "
                f"{record.sequences} sequences)"
            )
        elif problem is not None:
            proviso = f", but its masks must be right-padded first: {problem}"
        elif layer.receives_mask:
            proviso = ", provided its masks are right-padded (not sampled in this run)"
        else:
            proviso = ""
        return True, f"Once fixed, the installed Keras takes the cuDNN kernel on a GPU{proviso}."
    return False, "Even once fixed, the probe did not see Keras take the cuDNN kernel."


def input_dropout_kept(layer: RNNLayer, rec: bool, drop: bool) -> dict[str, Any] | None:
    """``{"dropout": rate}`` where RD101 moves ``recurrent_dropout`` to input dropout: it
    blocks the fast path (``rec``) while input dropout does not (``drop`` False), the probe saw
    input dropout keep the fast path (``dropout_keeps_fast_path``), and the layer has no input
    dropout of its own; else None."""
    probe = layer.fast_path
    if not rec or drop or probe is None or not probe.dropout_keeps_fast_path:
        return None
    if float(layer.args.get("dropout") or 0):
        return None
    return {"dropout": layer.args.get("recurrent_dropout")}


def fixed_together(layer: RNNLayer) -> tuple[tuple[str, ...], str] | None:
    """Where the probe saw arguments of two or more rules block the fast path of one call, and
    the layer take it once all are fixed (``fixed_takes_fast_path``), the rules that fix them
    (``RULE_OF_ARG``) and the user's call with all of them fixed at once, each as its rule
    fixes it: removed, and ``recurrent_dropout`` moved to input dropout where RD101
    does (:func:`input_dropout_kept`). Each finding's own fix changes only its argument, and the
    layer takes the cuDNN kernel only once none blocks it. None where the probe did not run,
    an argument has no rule, or the call cannot be rewritten in place
    (:func:`rewrite_call`: a value it reads, a splat that holds one). A multi-line call is given
    on one line (``ast.unparse``), for the finding's message."""
    probe = layer.fast_path
    if probe is None or not probe.probed or not probe.fixed_takes_fast_path:
        return None
    blocking = probe.blocking_args
    if any(a not in RULE_OF_ARG for a in blocking):
        return None
    set_args = input_dropout_kept(layer, "recurrent_dropout" in blocking, "dropout" in blocking)
    _, code = _rewrite_layer_call(layer, tuple(blocking), set_args or {})
    if code is None:
        return None
    if "\n" in code:  # a sentence shows it on one line (the fix's own code keeps the layout)
        code = ast.unparse(parse_call(code))
    rules = tuple(sorted({RULE_OF_ARG[a] for a in blocking}))
    return (rules, code) if len(rules) > 1 else None


def _rewrite_layer_call(
    layer: RNNLayer, args: tuple[str, ...], set_args: dict[str, Any]
) -> tuple[str | None, str | None]:
    """The layer's recorded call, and that call with ``args`` fixed in place: each removed, or
    set to its value in ``set_args`` (:func:`rewrite_call`; None where it cannot be)."""
    call = layer.location.call_source if layer.location else None
    code = rewrite_call(
        call,
        drop=tuple(a for a in args if a not in set_args),
        set_args=set_args,
        positional_names=layer.init_params,
    )
    return call, code


def splat_rewrite(
    fix: Fix, layer: RNNLayer, args: tuple[str, ...], set_args: dict[str, Any]
) -> Fix:
    """``fix`` (its ``before`` the layer's recorded call) written on the user's own call, where
    only a ``**kwargs`` splat kept :func:`rewrite_call` from it: the call passes each of
    ``args`` as a literal keyword and the fix sets ``set_args`` (RD101's ``dropout``), which the
    splat may already hold, two values for one keyword at run time (``TypeError``). The call
    is rewritten in place all the same, comments, names and the splat kept, display-only, with
    what to check; a sketch rebuilt from the run's values (:func:`rebuilt_fix`) would drop the
    splat. Where the call writes every keyword the fix sets, the splat cannot hold them: the
    rewrite is exact, with ``fix``'s own safety. ``fix`` as it is where it cannot be done (a
    ``*args`` splat, positional arguments past ``units``, a value the call reads)."""
    call = fix.before
    node = parse_call(call)
    splats = rw.splats(call)
    explicit = {k.arg for k in node.keywords if k.arg} if node else set()
    if not splats or not set_args or not set(args) <= explicit or node.args[1:]:
        return fix
    drop = tuple(a for a in args if a not in set_args)
    code = rewrite_call(call, drop, set_args, None, layer.init_params, beside_splat=True)
    if code is None:  # a *args splat, a value the call reads (rewrite_call's own checks)
        return fix
    if set(set_args) <= explicit:  # replaced where the call writes them: the splat holds none
        return replace(fix, code=code)
    held = ", ".join(set_args)
    why = f"your call also passes **{splats[0]}: if it holds {held}, remove it there"
    note = f"# display-only: {why} (two values for one keyword: TypeError)\n"
    return replace(fix, code=note + code, safety=FixSafety.DISPLAY_ONLY, before=None,
                   title=f"{fix.title} ({why})")  # fmt: skip


def _call_fix(
    layer: RNNLayer,
    args: tuple[str, ...],
    set_args: dict[str, Any],
    title: str,
    safety: FixSafety,
) -> Fix:
    """The fix of :func:`arg_finding`: the user's call with ``args`` fixed in place
    (:func:`rewrite_call`), else written beside the call's ``**kwargs`` splat, display-only
    (:func:`splat_rewrite`), else a display-only sketch rebuilt from the layer's recorded values
    (:func:`rebuilt_fix`; where no call was recorded, that sketch as it is)."""
    call, code = _rewrite_layer_call(layer, args, set_args)
    fix = Fix(title=title, code=code or "", safety=safety, before=call)
    if code is not None:
        return fix
    spliced = splat_rewrite(fix, layer, args, set_args)
    if spliced is not fix:
        return spliced
    overrides: dict[str, Any] = {a: None for a in args}
    overrides.update(set_args)
    rebuilt = build_call(layer.class_name, layer.args, overrides, call)
    return rebuilt_fix(
        Fix(title=title, code=rebuilt, safety=safety, before=call),
        args,
        set_args,
        layer.init_params,
    )


def arg_finding(
    facts: Facts,
    layer: RNNLayer,
    *,
    args: tuple[str, ...],
    basis: str,
    set_args: dict[str, Any] | None = None,
    fix_title: str,
    safety: FixSafety,
    why: str,
    why_keras2: str | None = None,
) -> Finding:
    """A finding for fast-path arguments ``args`` of ``layer`` (removed, or set to ``set_args``).

    ``why`` cites Keras 3's criterion; ``why_keras2`` is the same reason citing tf_keras'
    (``{criterion}``: :func:`tf_keras_criterion`), used when the model ran on tf_keras."""
    set_args = set_args or {}
    values = {a: layer.args.get(a) for a in args}
    shown = ", ".join(f"{a}={v!r}" for a, v in values.items())
    fix = _call_fix(layer, args, set_args, fix_title, safety)
    eligible, after = after_fix(layer, args, facts)
    together = fixed_together(layer)
    if together is not None:
        after += f" With {', '.join(together[0])} fixed together, the call reads: {together[1]}"
    evidence = [Evidence(a, v, source="layer config") for a, v in values.items()]
    evidence.append(Evidence("fast-path verdict", "blocks the cuDNN kernel", source=basis))
    if layer.location is None:
        evidence.append(
            Evidence("construction site", "not recorded", source="layer built before the hook")
        )
    return finding(
        severity=severity(facts),
        message=f"{layer_label(layer)} sets {shown}: {why_text(facts, layer, why, why_keras2)} "
        f"{after}",
        layer=layer.path,
        location=location(layer),
        evidence=tuple(evidence),
        fix=fix,
        gain=gain_text(facts),
        fast_path_after_fix=eligible,
        fast_path_caveat=mask_caveat(layer, facts) if eligible else None,
    )


def single_arg_check(
    facts: Facts,
    *,
    arg: str,
    static: Callable[[Any], bool],
    fix_title: str,
    safety: FixSafety,
    why: str,
    why_keras2: str | None = None,
    set_value: Any = None,
    kinds: tuple[str, ...] = FUSED_KINDS,
) -> list[Finding]:
    """The common check of RD102-RD106 and RD109: one argument, one fix (``why`` /
    ``why_keras2``: see :func:`arg_finding`)."""
    findings = []
    for layer in rnn_layers(facts, kinds):
        blocked, basis = blocks(layer, arg, static)
        if not blocked:
            continue
        findings.append(
            arg_finding(
                facts,
                layer,
                args=(arg,),
                basis=basis,
                set_args={arg: set_value} if set_value is not None else None,
                fix_title=fix_title,
                safety=safety,
                why=why,
                why_keras2=why_keras2,
            )
        )
    return findings
