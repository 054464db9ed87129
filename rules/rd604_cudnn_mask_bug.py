"""RD604 cudnn-mask-bug: a masked LSTM/GRU on a cuDNN with the masked-RNN corruption bug.

What it detects:
    A GPU run whose loaded cuDNN (``cudnnGetVersion``, else the build's version when it names a
    minor version) lies in ``_BUGGY_FIRST`` to ``_BUGGY_LAST`` (8.1.0 to 8.9.1), and an LSTM/GRU
    that receives a mask (``Embedding(mask_zero=True)``, ``Masking``) and takes the cuDNN path.

Why it slows training:
    It does not slow training: it corrupts it. With variable sequence lengths (a mask), the
    cuDNN RNN kernels of those versions gave randomly wrong results and
    ``CUDA_ERROR_ILLEGAL_ADDRESS`` crashes, in training and inference (tensorflow/tensorflow
    issue 60192); cuDNN 8.9.2 fixed it. An error, because the job's results cannot be trusted.

Evidence:
    ``environment.cudnn_runtime`` (or ``cudnn_build``), ``environment.cuda_build``,
    ``model.rnn_layers[].receives_mask``, ``.fast_path.takes_fast_path``.

Example:
    ``Embedding(20000, 128, mask_zero=True)`` then ``LSTM(128)`` on TensorFlow 2.12 with
    cuDNN 8.6.

Use instead:
    cuDNN 8.9.2 or later (``pip install "nvidia-cudnn-cu11>=8.9.2,<9"`` for a CUDA 11 build,
    ``nvidia-cudnn-cu12`` for CUDA 12), or a TensorFlow release built against it; until then
    ``use_cudnn=False`` on the masked layers (correct, but the slow kernel).

Fix safety:
    display-only: an environment change (check that the TensorFlow build loads the new cuDNN).

References:
    keras/src/backend/tensorflow/rnn.py: cudnn_ok and _compute_sequence_length_from_mask (a
    masked LSTM/GRU passes its sequence lengths to the cuDNN kernel);
    https://github.com/tensorflow/tensorflow/issues/60192 ("Masked LSTM and GRU using cuDNN
    8.1+ give randomly corrupted results and crashes"); the affected range this rule checks,
    8.1.0 to 8.9.1 (fixed in 8.9.2), is kept in this module (``_BUGGY_FIRST`` /
    ``_BUGGY_LAST``).
"""

from __future__ import annotations

from rnndoctor.facts import Facts
from rnndoctor.findings import Evidence, Finding, Fix, FixSafety, Severity
from rnndoctor.rules import NotEvaluated, finding, rule
from rnndoctor.rules import _fastpath as fp
from rnndoctor.rules import _host_hw as hh

# The cuDNN versions with the masked-RNN bug (tensorflow/tensorflow#60192; fixed in 8.9.2).
_BUGGY_FIRST = (8, 1, 0)
_BUGGY_LAST = (8, 9, 1)


def _version(facts: Facts) -> tuple[tuple[int, ...], str]:
    env = facts.environment
    runtime = hh.version_tuple(env.cudnn_runtime)
    if runtime is not None:
        return runtime, f"environment.cudnn_runtime ({env.cudnn_runtime}, cudnnGetVersion)"
    build = hh.version_tuple(env.cudnn_build)
    if build is not None and len(build) >= 2:
        return (*build, 0)[:3] if len(build) == 2 else build, (
            f"environment.cudnn_build ({env.cudnn_build}; the loaded version was not measured: "
            f"{env.cudnn_runtime_not_measured})"
        )
    raise NotEvaluated(
        "the cuDNN version was not measured: "
        + (env.cudnn_runtime_not_measured or "no runtime version")
        + (f"; the build says only {env.cudnn_build!r}" if env.cudnn_build else "")
    )


@rule(
    "RD604",
    "cudnn-mask-bug",
    "a masked LSTM/GRU on cuDNN 8.1 to 8.9.1 (known corruption bug, fixed in 8.9.2)",
    needs=("environment", "model"),
    severity=Severity.ERROR,
)
def check(facts: Facts) -> list[Finding]:
    hh.require_gpu(facts)
    version, source = _version(facts)
    if not (_BUGGY_FIRST <= version <= _BUGGY_LAST):
        return []
    env = facts.environment
    cuda = hh.version_tuple(env.cuda_build)
    package = "nvidia-cudnn-cu11" if cuda and cuda[0] == 11 else "nvidia-cudnn-cu12"
    shown = ".".join(map(str, version))
    findings = []
    for layer in fp.rnn_layers(facts):
        if not layer.receives_mask:
            continue
        if layer.fast_path is not None and layer.fast_path.takes_fast_path is False:
            continue  # the generic kernel runs: cuDNN's RNN is not used
        findings.append(
            finding(
                message=(
                    f"{fp.layer_label(layer)} receives a mask and runs on cuDNN {shown}, "
                    "whose masked RNN kernels give randomly corrupted results (fixed in 8.9.2)."
                ),
                layer=layer.path,
                location=fp.location(layer),
                evidence=(
                    Evidence("cuDNN", shown, "", source),
                    Evidence("receives a mask", True, "", "model.rnn_layers[].receives_mask"),
                    Evidence(
                        "takes the cuDNN path",
                        layer.fast_path.takes_fast_path if layer.fast_path else None,
                        "",
                        "fast_path.takes_fast_path",
                    ),
                ),  # fmt: skip
                fix=Fix(
                    title="Upgrade cuDNN to 8.9.2 or later (or use_cudnn=False on this layer "
                    "until then: correct, but the slow kernel)",
                    code=f'pip install --upgrade "{package}>=8.9.2,<9"',
                    safety=FixSafety.DISPLAY_ONLY,
                ),
                gain="not a speed issue: the results of masked steps cannot be trusted",
            )
        )
    return findings
