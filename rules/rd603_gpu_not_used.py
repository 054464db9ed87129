"""RD603 gpu-not-used: the machine has an NVIDIA GPU, but TensorFlow sees none.

What it detects:
    ``nvidia-smi``, the NVIDIA driver's ``/proc`` entries or the PCI bus show an NVIDIA GPU,
    while ``tf.config.list_physical_devices("GPU")`` is empty. On a machine without one the rule
    is evaluated and passes (that is what it checks); where no source could be read it is not
    evaluated.

Why it slows training:
    Training runs on the CPU while the GPU, with its cuDNN LSTM/GRU kernels, sits idle. Usual
    causes: a CPU-only build (``tensorflow-cpu``, or
    ``tensorflow`` on a platform without GPU wheels), missing CUDA/cuDNN libraries (pip
    ``tensorflow[and-cuda]`` not installed), a driver too old for the build's CUDA, or
    ``CUDA_VISIBLE_DEVICES`` hiding the devices.

Evidence:
    ``environment.nvidia_gpu_present``, ``nvidia_gpus``, ``nvidia_gpu_source``,
    ``environment.gpu_count``, ``is_cuda_build``, ``cuda_build``, ``tensorflow``.

Example:
    ``pip install tensorflow-cpu`` on a GPU server.

Use instead:
    ``pip install "tensorflow[and-cuda]"`` (Linux), then check
    ``python -c "import tensorflow as tf; print(tf.config.list_physical_devices('GPU'))"``.

Fix safety:
    display-only: an environment change.

References:
    keras/src/backend/tensorflow/rnn.py: _is_gpu_available / cudnn_ok (Keras takes the cuDNN
    kernel only when TensorFlow lists a GPU); https://www.tensorflow.org/install/pip (GPU
    setup); tf.sysconfig.get_build_info.
"""

from __future__ import annotations

from rnndoctor.facts import Facts
from rnndoctor.findings import Evidence, Finding, Fix, FixSafety, Severity
from rnndoctor.rules import NotEvaluated, finding, rule


@rule(
    "RD603",
    "gpu-not-used",
    "an NVIDIA GPU is present on the machine, but TensorFlow sees none",
    needs=("environment",),
    severity=Severity.WARNING,
)
def check(facts: Facts) -> list[Finding]:
    env = facts.environment
    if env.nvidia_gpu_present is None:
        raise NotEvaluated(
            "whether the machine has an NVIDIA GPU was not measured: "
            + (env.nvidia_gpu_not_measured or "the facts do not say (an older rnndoctor)")
        )
    if not env.nvidia_gpu_present or env.gpu_count:
        return []
    build = (
        "a CPU-only TensorFlow build"
        if env.is_cuda_build is False
        else "TensorFlow could not load the CUDA/cuDNN libraries or the driver"
    )
    evidence = [
        Evidence("NVIDIA GPUs on the machine", "; ".join(env.nvidia_gpus) or "yes", "",
                 f"environment.nvidia_gpus (from {env.nvidia_gpu_source})"),
        Evidence("GPUs TensorFlow sees", env.gpu_count, "",
                 "tf.config.list_physical_devices"),
        Evidence("CUDA build", env.is_cuda_build, "",
                 "tf.sysconfig.get_build_info()['is_cuda_build']"),
        Evidence("TensorFlow", env.tensorflow, "", "environment.tensorflow"),
    ]  # fmt: skip
    fix_code = (
        'pip install "tensorflow[and-cuda]"  # replaces a CPU-only build, with CUDA and cuDNN\n'
        "python -c \"import tensorflow as tf; print(tf.config.list_physical_devices('GPU'))\""
    )
    return [
        finding(
            message=(
                f"The machine has {len(env.nvidia_gpus) or 'an'} NVIDIA GPU(s) but TensorFlow "
                f"sees none ({build}): training runs on the CPU."
            ),
            evidence=tuple(evidence),
            fix=Fix(
                title="Install a CUDA build of TensorFlow with its libraries",
                code=fix_code,
                safety=FixSafety.DISPLAY_ONLY,
            ),  # fmt: skip
            gain=(
                "not measured: the GPU could not run in this environment, so there is no GPU "
                "step time to compare with the CPU one"
            ),
        )
    ]
