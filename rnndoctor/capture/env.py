"""Environment probe: Python, TensorFlow, Keras, CUDA/cuDNN build info, devices, precision.

Also the GPU facts the RD6xx rules need: each visible GPU's compute capability, the cuDNN
version loaded at run time, and whether the machine has an NVIDIA GPU at all, whatever
TensorFlow sees (``nvidia-smi``, the driver's ``/proc/driver/nvidia/gpus``, or the PCI bus).
Each comes with a "not measured" reason where it cannot be read.
"""

from __future__ import annotations

import ctypes
import glob
import os
import platform
import re
import shutil
import subprocess
import sys

from rnndoctor.capture import flavour
from rnndoctor.facts import Device, Environment

_NVIDIA_PCI_VENDOR = "0x10de"  # NVIDIA's PCI vendor ID (PCI-SIG vendor list)
# PCI class codes of a GPU: 0x0300 VGA-compatible controller, 0x0302 3D controller (data-centre
# GPUs without a display output), from the PCI Code and ID Assignment Specification.
_GPU_PCI_CLASSES = ("0x0300", "0x0302")
_PCI_DEVICES = "/sys/bus/pci/devices"
_NVIDIA_PROC_GPUS = "/proc/driver/nvidia/gpus"


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


def _run_nvidia_smi(*args: str) -> str | None:
    tool = shutil.which("nvidia-smi")
    if tool is None:
        return None
    try:
        return subprocess.run(
            [tool, *args], capture_output=True, text=True, timeout=10, check=True
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None


def nvidia_gpus(
    pci_root: str = _PCI_DEVICES, proc_root: str = _NVIDIA_PROC_GPUS
) -> tuple[bool | None, list[str], str | None, str | None]:
    """Whether the machine has an NVIDIA GPU, whatever TensorFlow sees.

    Tries, in order: ``nvidia-smi -L`` (needs the driver), the driver's ``/proc`` entries, and
    the PCI bus in ``/sys`` (sees the card even without a driver).

    Args:
        pci_root: the sysfs PCI devices folder (tests point it at a fixture tree).
        proc_root: the NVIDIA driver's per-GPU ``/proc`` folder.

    Returns:
        ``(present, names, source, not_measured)``: ``present`` is None when no source could be
        read (``not_measured`` says why); ``names`` describe each GPU found.
    """
    out = _run_nvidia_smi("-L")
    if out is not None:
        names = [line.split(" (UUID")[0].strip() for line in out.splitlines() if line.strip()]
        if names:
            return True, names, "nvidia-smi", None
    proc = sorted(glob.glob(os.path.join(proc_root, "*", "information")))
    if proc:
        names = []
        for path in proc:
            model = None
            try:
                with open(path, encoding="utf-8", errors="replace") as f:
                    for line in f:
                        if line.startswith("Model:"):
                            model = line.split(":", 1)[1].strip()
            except OSError:
                pass
            names.append(model or os.path.basename(os.path.dirname(path)))
        return True, names, proc_root, None
    if not os.path.isdir(pci_root):
        return None, [], None, f"no nvidia-smi, no {proc_root} and no {pci_root} to read"
    found = []
    for device in sorted(os.listdir(pci_root)):
        try:
            with open(os.path.join(pci_root, device, "vendor"), encoding="ascii") as f:
                vendor = f.read().strip()
            with open(os.path.join(pci_root, device, "class"), encoding="ascii") as f:
                pci_class = f.read().strip()
        except OSError:
            continue
        if vendor == _NVIDIA_PCI_VENDOR and pci_class[:6] in _GPU_PCI_CLASSES:
            try:
                with open(os.path.join(pci_root, device, "device"), encoding="ascii") as f:
                    product = f.read().strip()
            except OSError:
                product = "?"
            found.append(f"NVIDIA PCI device {product} at {device}")
    return bool(found), found, pci_root, None


def _compute_capability(details: dict) -> str | None:
    """``"8.0"`` from the device details' ``compute_capability`` (a ``(8, 0)`` tuple, kept in
    ``Device.details`` as its string)."""
    numbers = re.findall(r"\d+", str(details.get("compute_capability") or ""))
    return f"{numbers[0]}.{numbers[1]}" if len(numbers) == 2 else None


def decode_cudnn_version(value: int) -> str:
    """``cudnnGetVersion()``'s integer as ``MAJOR.MINOR.PATCH``.

    cuDNN 9 encodes ``MAJOR*10000 + MINOR*100 + PATCH`` (90300 is 9.3.0); cuDNN 8 and earlier
    ``MAJOR*1000 + MINOR*100 + PATCH`` (8901 is 8.9.1), as ``cudnn_version.h`` defines
    ``CUDNN_VERSION`` in each.
    """
    if value >= 10000:
        return f"{value // 10000}.{value % 10000 // 100}.{value % 100}"
    return f"{value // 1000}.{value % 1000 // 100}.{value % 100}"


def _cudnn_runtime(gpu_count: int) -> tuple[str | None, str | None]:
    """The cuDNN version TensorFlow loaded, from the library mapped into this process."""
    if not gpu_count:
        return None, "no GPU visible to TensorFlow: cuDNN is not loaded"
    paths = set()
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as f:
            for line in f:
                path = line.split()[-1] if line.strip() else ""
                if os.path.basename(path).startswith("libcudnn.so"):
                    paths.add(path)
    except OSError as exc:
        return None, f"cannot read /proc/self/maps: {exc}"[:200]
    if not paths:
        return None, "no libcudnn library is loaded in this process"
    try:
        lib = ctypes.CDLL(sorted(paths)[0])
        lib.cudnnGetVersion.restype = ctypes.c_size_t
        return decode_cudnn_version(int(lib.cudnnGetVersion())), None
    except (OSError, AttributeError) as exc:
        return None, f"cudnnGetVersion failed: {exc}"[:200]


def refresh_execution_mode(environment: Environment) -> None:
    """Reads ``tf.config.functions_run_eagerly()`` and the global Keras dtype policy again: the
    script may have changed them after the environment was first collected."""
    import keras
    import tensorflow as tf

    try:
        environment.run_functions_eagerly = bool(tf.config.functions_run_eagerly())
    except Exception:
        pass
    try:
        environment.precision_policy = keras.config.dtype_policy().name
    except Exception:
        pass


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
    gpus = [d for d in devices if d.device_type == "GPU"]
    names = [str(d.details.get("device_name") or d.name) for d in gpus]
    capabilities = [_compute_capability(d.details) for d in gpus]
    if not gpus:
        cc_why = "no GPU visible to TensorFlow"
    elif None in capabilities:
        cc_why = "tf.config.experimental.get_device_details gave no compute_capability"
    else:
        cc_why = None
    cudnn, cudnn_why = _cudnn_runtime(gpu_count)
    present, nvidia, nvidia_source, nvidia_why = nvidia_gpus()
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
        gpu_names=names,
        gpu_compute_capability=[c for c in capabilities if c is not None],
        gpu_compute_capability_not_measured=cc_why,
        cudnn_runtime=cudnn,
        cudnn_runtime_not_measured=cudnn_why,
        nvidia_gpu_present=present,
        nvidia_gpus=nvidia,
        nvidia_gpu_source=nvidia_source,
        nvidia_gpu_not_measured=nvidia_why,
        keras_flavour=flavour.default_flavour(),
    )
