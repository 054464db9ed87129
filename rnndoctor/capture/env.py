"""Environment probe: Python, TensorFlow, Keras, CUDA/cuDNN build info, devices, precision."""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys

from rnndoctor.facts import Device, Environment


def _cpu_model() -> str | None:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def _gpu_memory_mib() -> tuple[list[int], str | None]:
    """Total memory per GPU from ``nvidia-smi`` (TensorFlow reports usage, not capacity)."""
    tool = shutil.which("nvidia-smi")
    if tool is None:
        return [], "nvidia-smi not found"
    try:
        out = subprocess.run(
            [tool, "--query-gpu=memory.total", "--format=csv,noheader,nounits"],
            capture_output=True, text=True, timeout=10, check=True,
        ).stdout  # fmt: skip
        return [int(float(v)) for v in out.split()], None
    except (OSError, subprocess.SubprocessError, ValueError) as exc:
        return [], f"nvidia-smi failed: {exc}"[:200]


def collect_environment() -> Environment:
    """Reads versions and devices from the running interpreter (imports TensorFlow)."""
    import keras
    import tensorflow as tf

    build = {}
    try:
        build = dict(tf.sysconfig.get_build_info())
    except Exception:
        pass
    devices = []
    for dev in tf.config.list_physical_devices():
        details = {}
        if dev.device_type == "GPU":
            try:
                details = {
                    k: (str(v) if not isinstance(v, (int, float, str)) else v)
                    for k, v in tf.config.experimental.get_device_details(dev).items()
                }
            except Exception:
                pass
        devices.append(Device(name=dev.name, device_type=dev.device_type, details=details))
    try:
        policy = keras.config.dtype_policy().name
    except Exception:
        policy = None
    try:
        eager = bool(tf.config.functions_run_eagerly())
    except Exception:
        eager = None
    try:
        strategy = type(tf.distribute.get_strategy()).__name__
    except Exception:
        strategy = None
    gpu_count = sum(d.device_type == "GPU" for d in devices)
    memory, memory_why = _gpu_memory_mib() if gpu_count else ([], "no GPU visible to TensorFlow")
    return Environment(
        python=sys.version.split()[0],
        platform=platform.platform(),
        keras=keras.__version__,
        keras_backend=keras.backend.backend(),
        tensorflow=tf.__version__,
        cuda_build=build.get("cuda_version"),
        cudnn_build=build.get("cudnn_version"),
        is_cuda_build=build.get("is_cuda_build"),
        devices=devices,
        gpu_count=gpu_count,
        gpu_memory_mib=memory,
        gpu_memory_not_measured=memory_why,
        cpu_count=os.cpu_count(),
        cpu_model=_cpu_model(),
        precision_policy=policy,
        run_functions_eagerly=eager,
        distribution_strategy=strategy,
    )
