"""Memory figures for the batch-size probe: the limit it may use and what each point takes.

On CPU the process's peak RSS (``VmHWM`` in ``/proc/self/status``) is reset before a point
(``/proc/self/clear_refs`` value 5, Linux Documentation/filesystems/proc.rst) and read after
it; on a GPU the allocator's own peak (``tf.config.experimental.get_memory_info``). The limit is
``MemAvailable`` (``/proc/meminfo``) or the GPU's free memory, times a headroom, or the
``RNNDOCTOR_PROBE_MEMORY_MIB`` environment variable when set.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rnndoctor.capture.session import CaptureSession

MEMORY_ENV = "RNNDOCTOR_PROBE_MEMORY_MIB"
_MEMORY_HEADROOM = 0.8  # share of MemAvailable / free GPU memory the batch-size probe may use


def reset_peak_rss() -> float | None:
    """Resets the process's peak RSS (``VmHWM``) to its current RSS and returns that, in MiB.

    Linux ``/proc/self/clear_refs`` value 5 (Documentation/filesystems/proc.rst); None where
    it cannot be done.
    """
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        return None
    return proc_status_mib("VmRSS")


def proc_status_mib(key: str) -> float | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) / 1024.0
    except (OSError, ValueError, IndexError):
        return None
    return None


def memory_limit(session: CaptureSession) -> tuple[float | None, str | None]:
    """The extra memory (MiB) the batch-size probe may use, and where the figure comes from."""
    env = os.environ.get(MEMORY_ENV)
    if env:
        try:
            return float(env), MEMORY_ENV
        except ValueError:
            pass
    gpu = gpu_memory(session)
    if gpu is not None:
        total_mib, current_mib = gpu
        return (total_mib - current_mib) * _MEMORY_HEADROOM, "free GPU memory"
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) / 1024.0 * _MEMORY_HEADROOM, "MemAvailable"
    except (OSError, ValueError, IndexError):
        pass
    return None, None


def gpu_memory(session: CaptureSession) -> tuple[float, float] | None:
    """``(total, in use)`` of the first GPU in MiB, or None without a GPU."""
    env = session.facts.environment
    if env is None or not env.gpu_count or not env.gpu_memory_mib:
        return None
    try:
        import tensorflow as tf

        info = tf.config.experimental.get_memory_info("GPU:0")
        return float(env.gpu_memory_mib[0]), info["current"] / 2**20
    except Exception:
        return None


class MemoryMeter:
    """Peak extra memory of a probe point: the GPU allocator's peak on a GPU, else the growth
    of the process's peak RSS (``VmHWM``, reset before the point)."""

    def __init__(self, session: CaptureSession):
        self.gpu = gpu_memory(session) is not None
        self.before: float | None = None

    def start(self) -> None:
        if self.gpu:
            import tensorflow as tf

            try:
                tf.config.experimental.reset_memory_stats("GPU:0")
                self.before = tf.config.experimental.get_memory_info("GPU:0")["current"] / 2**20
            except Exception:
                self.before = None
        else:
            self.before = reset_peak_rss()

    def growth_mib(self) -> float | None:
        if self.before is None:
            return None
        if self.gpu:
            import tensorflow as tf

            try:
                peak = tf.config.experimental.get_memory_info("GPU:0")["peak"] / 2**20
            except Exception:
                return None
        else:
            peak = proc_status_mib("VmHWM")
            if peak is None:
                return None
        return max(0.0, peak - self.before)
