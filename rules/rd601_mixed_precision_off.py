"""RD601 mixed-precision-off: a Tensor Core GPU trains in float32.

What it detects:
    A GPU of compute capability ``_TENSOR_CORE_CC`` (7.0) or higher (Volta and later, which have
    Tensor Cores) and a ``float32`` Keras dtype policy: the global policy when the diagnosis
    ended, and the RNN layers' own policies.

Why it slows training:
    Tensor Cores run float16 (and, from compute capability 8.0, bfloat16) matrix math several
    times faster than float32, and 16-bit activations halve the memory traffic. The TensorFlow
    mixed precision guide reports "more than 3 times" on modern GPUs. The LSTM/GRU cuDNN kernels
    use Tensor Cores under a mixed policy.

Evidence:
    ``environment.gpu_compute_capability``, ``environment.gpu_names``,
    ``environment.precision_policy``, ``model.rnn_layers[].dtype_policy``.

Example:
    ``model = keras.Sequential([...LSTM(256)...])`` with the default ``float32`` policy on an
    A100.

Use instead:
    ``keras.mixed_precision.set_global_policy("mixed_float16")`` before building the model
    (``"mixed_bfloat16"`` on compute capability 8.0+ needs no loss scaling); keep the last
    layer's output in float32 (``Dense(..., dtype="float32")``). ``compile`` wraps the optimizer
    in a ``LossScaleOptimizer``; a custom loop wraps it itself.

Fix safety:
    unsafe: 16-bit math changes numerics; check the loss curve.

References:
    https://www.tensorflow.org/guide/mixed_precision ("Supported hardware": compute capability
    7.0 or higher); keras/src/dtype_policies/dtype_policy.py.
"""

from __future__ import annotations

from rnndoctor.facts import Facts
from rnndoctor.findings import Evidence, Finding, Fix, FixSafety, Severity
from rnndoctor.rules import NotEvaluated, finding, rule
from rnndoctor.rules import _host_hw as hh

# TensorFlow's mixed precision guide: mixed precision speeds up NVIDIA GPUs of compute
# capability 7.0 or higher (Tensor Cores); older GPUs gain little.
_TENSOR_CORE_CC = (7, 0)
_BFLOAT16_CC = (8, 0)  # Ampere and later run bfloat16 on Tensor Cores (mixed precision guide)


@rule(
    "RD601",
    "mixed-precision-off",
    "a GPU of compute capability >= 7.0 and a float32 policy",
    needs=("environment",),
    severity=Severity.WARNING,
)
def check(facts: Facts) -> list[Finding]:
    hh.require_gpu(facts)
    env = facts.environment
    if not env.gpu_compute_capability:
        raise NotEvaluated(
            "the GPU's compute capability was not measured: "
            + (env.gpu_compute_capability_not_measured or "no device details")
        )
    capabilities = [hh.version_tuple(c) or (0,) for c in env.gpu_compute_capability]
    best = max(capabilities)
    if best < _TENSOR_CORE_CC:
        return []
    rnn_policies = sorted({r.dtype_policy for r in (facts.model.rnn_layers if facts.model else [])
                           if r.dtype_policy})  # fmt: skip
    policies = {env.precision_policy, *rnn_policies} - {None}
    if not policies or any(str(p).startswith("mixed") for p in policies):
        return []
    if not all(p == "float32" for p in policies):
        return []  # float16/bfloat16 throughout, or float64: not this rule's case
    policy = "mixed_bfloat16" if best >= _BFLOAT16_CC else "mixed_float16"
    evidence = [
        Evidence("GPU", ", ".join(env.gpu_names) or f"{env.gpu_count} GPU(s)", "",
                 "environment.gpu_names"),
        Evidence("compute capability", ", ".join(env.gpu_compute_capability), "",
                 "environment.gpu_compute_capability (tf.config.experimental"
                 ".get_device_details)"),
        Evidence("global dtype policy", env.precision_policy, "", "environment.precision_policy"),
    ]  # fmt: skip
    if rnn_policies:
        evidence.append(Evidence("RNN layers' dtype policies", ", ".join(rnn_policies), "",
                                 "model.rnn_layers[].dtype_policy"))  # fmt: skip
    location = hh.first_location(
        *(r.location for r in (facts.model.rnn_layers if facts.model else [])),
        facts.fit.location if facts.fit else None,
    )
    return [
        finding(
            message=(
                f"The GPU has Tensor Cores (compute capability "
                f"{'.'.join(map(str, best))}) but the model trains in float32."
            ),
            location=location,
            evidence=tuple(evidence),
            fix=Fix(
                title=f"Train under mixed precision ({policy}); keep the output layer float32",
                code=(
                    "import keras\n"
                    f'keras.mixed_precision.set_global_policy("{policy}")  # before building '
                    "the model\n"
                    '# last layer: keras.layers.Dense(n, dtype="float32")'
                ),
                safety=FixSafety.UNSAFE,
            ),
            gain=(
                "not measured: this run trained in float32 only (a mixed-precision run of this "
                "model would measure it); TensorFlow's mixed precision guide reports more than "
                "3x on modern GPUs"
            ),
        )
    ]
