"""RD602 tensor-core-alignment: under mixed precision, a dimension is not a multiple of 8.

What it detects:
    On a GPU run under a mixed dtype policy (``mixed_float16`` / ``mixed_bfloat16``), an
    LSTM/GRU whose ``units`` or input feature size is not a multiple of 8 (``alignment``), and a
    batch size that is not.

Why it slows training:
    Tensor Cores multiply 16-bit matrices in tiles; cuBLAS and cuDNN use them fully only when
    the matrix dimensions (the GEMM's M, N, K: batch, ``4 * units`` or ``3 * units``, features)
    are multiples of 8 for float16. Otherwise they pad internally or fall back to slower
    kernels.

Evidence:
    ``environment.precision_policy``, ``model.rnn_layers[].dtype_policy``, ``.args.units``,
    ``.input_shape`` (last dimension: features), ``steps.batch_size`` / ``fit.batch_size``.

Example:
    ``keras.layers.LSTM(100)`` under ``mixed_float16`` with ``batch_size=50``.

Use instead:
    ``keras.layers.LSTM(104)`` and ``batch_size=56`` (or 48): the next multiple of 8.

Fix safety:
    unsafe: more units change the model's capacity; a different batch size changes the
    optimisation.

Options:
    ``alignment`` = 8 (elements): units, input features and the batch size are reported unless
    they are multiples of this. Source: https://www.tensorflow.org/guide/mixed_precision
    ("Ensuring GPU Tensor Cores are used"); NVIDIA Deep Learning Performance Guide, "Tensor
    Core Requirements".

References:
    keras/src/dtype_policies/dtype_policy.py (the ``mixed_*`` policies);
    https://www.tensorflow.org/guide/mixed_precision ("Ensuring GPU Tensor Cores are used":
    dimensions in multiples of 8); NVIDIA Deep Learning Performance Guide, "Tensor Core
    Requirements" (https://docs.nvidia.com/deeplearning/performance/).
"""

from __future__ import annotations

import ast

from rnndoctor import rewrite as rw
from rnndoctor.facts import Facts, RNNLayer
from rnndoctor.findings import Evidence, Finding, Fix, FixSafety, Severity
from rnndoctor.rules import Option, OptionValues, finding, rule
from rnndoctor.rules import _fastpath as fp
from rnndoctor.rules import _host_hw as hh

# Tensor Cores need float16 matrix dimensions in multiples of 8 (TF mixed precision guide;
# NVIDIA Deep Learning Performance Guide, "Tensor Core Requirements").
_ALIGNMENT = Option(
    name="alignment",
    default=8,
    unit="elements",
    source='TF mixed precision guide ("Ensuring GPU Tensor Cores are used"); NVIDIA Deep '
    'Learning Performance Guide, "Tensor Core Requirements"',
    help="units, features and batch sizes are reported unless they are multiples of this",
)


def _up(value: int, align: int) -> int:
    return -(-value // align) * align


def _mixed(facts: Facts) -> bool:
    policies = {facts.environment.precision_policy}
    policies |= {r.dtype_policy for r in (facts.model.rnn_layers if facts.model else [])}
    return any(str(p).startswith("mixed") for p in policies if p)


def _units_fix(layer: RNNLayer, units: int) -> str:
    """The layer call with its ``units`` (first positional argument, else the keyword) set to
    ``units``, the rest as written; else a call rebuilt from the layer's recorded values."""
    call = layer.location.call_source if layer.location else None
    code = rw.set_argument(call, 0, "units", str(units)) if fp.parse_call(call) else None
    return code or fp.build_call(layer.class_name, layer.args, {"units": units})


def _units_change(layer: RNNLayer, units: int, new: int, align: int) -> Fix:
    """The units fix: the layer call with its integer ``units`` rewritten; where the call reads
    ``units`` from a name or an option (``LSTM(args.units)``), a display-only note to set it
    where it is set (a literal would override it); where the call could not be rewritten in
    place, a display-only sketch (:func:`rnndoctor.rules._fastpath.rebuilt_fix`)."""
    title = f"Round units up to a multiple of {align}"
    call = layer.location.call_source if layer.location else None
    value = rw.argument(call, 0, "units")
    if value is not None and not rw.is_int_literal(value):
        text = ast.unparse(value)
        code = (
            f"# units is {text} ({units} in this run): set it to {new} where its value is set;\n"
            f"# a literal in the layer call would override {text}"
        )
        return Fix(title=f"{title} (display-only: units is {text}, set elsewhere)", code=code,
                   safety=FixSafety.DISPLAY_ONLY)  # fmt: skip
    fix = Fix(title=title, code=_units_fix(layer, new), safety=FixSafety.UNSAFE, before=call)
    if value is None:  # no call, or units behind a *args: _units_fix rebuilt it
        return fp.rebuilt_fix(fix)  # rebuilt from the run's values: never pasted over the call
    return fix


@rule(
    "RD602",
    "tensor-core-alignment",
    "under mixed precision, units / features / batch are not multiples of 8",
    needs=("environment", "model"),
    severity=Severity.INFO,
    options=(_ALIGNMENT,),
)
def check(facts: Facts, options: OptionValues) -> list[Finding]:
    align = options.alignment
    hh.require_gpu(facts)
    if not _mixed(facts):
        return []
    findings = []
    for layer in fp.rnn_layers(facts):
        units = layer.args.get("units")
        features = layer.input_shape[-1] if layer.input_shape else None
        off = {
            name: value
            for name, value in (("units", units), ("input features", features))
            if isinstance(value, int) and value % align
        }
        if not off:
            continue
        evidence = [
            Evidence(name, value, "", f"not a multiple of {align}") for name, value in off.items()
        ]
        evidence.append(Evidence("dtype policy", layer.dtype_policy, "",
                                 "model.rnn_layers[].dtype_policy"))  # fmt: skip
        if "units" in off:
            fix = _units_change(layer, units, _up(units, align), align)
        else:
            fix = Fix(
                title=f"Pad or project the input features to {_up(features, align)} (a multiple of "
                f"{align})",
                code=f"keras.layers.Dense({_up(features, align)})  # before {layer.class_name}",
                safety=FixSafety.DISPLAY_ONLY,
            )
        findings.append(
            finding(
                message=(
                    f"{fp.layer_label(layer)}: "
                    + " and ".join(f"{k} {v}" for k, v in off.items())
                    + f" not a multiple of {align}: Tensor Cores run its matrices at part speed."
                ),
                layer=layer.path,
                location=fp.location(layer),
                evidence=tuple(evidence),
                fix=fix,
                gain="not measured: this run did not time an aligned variant",
            )
        )
    batch = facts.steps.batch_size if facts.steps else None
    batch = batch or (facts.fit.batch_size if facts.fit else None)
    if isinstance(batch, int) and batch % align:
        findings.append(
            finding(
                message=f"Batch size {batch} is not a multiple of {align} under mixed precision.",
                location=hh.first_location(
                    facts.fit.location if facts.fit else None,
                    facts.loop.location if facts.loop else None,
                ),
                evidence=(Evidence("batch size", batch, "samples", "steps.batch_size"),),
                fix=Fix(
                    title=f"Use a batch size that is a multiple of {align}",
                    code=f"batch_size={_up(batch, align)}",
                    safety=FixSafety.UNSAFE,
                ),
                gain="not measured: this run did not time an aligned variant",
            )
        )
    return findings
