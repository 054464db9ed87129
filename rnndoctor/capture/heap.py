"""The capture process's own memory: its resident size now, and handing freed heap back.

No other capture module is imported here, so the session, the step window and the memory
figures of the batch-size probe (:mod:`rnndoctor.capture.memory`) can all use it.
"""

from __future__ import annotations


def resident_mib() -> float | None:
    """The process's resident memory (``VmRSS`` in ``/proc/self/status``), in MiB; None where it
    cannot be read."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024.0
    except (OSError, ValueError, IndexError):
        return None
    return None


def release_freed() -> bool:
    """Hands the C heap's free memory back to the system (glibc ``malloc_trim(0)``, man 3
    malloc_trim). After the profiler stops, the buffers it freed otherwise stay in the
    process's resident memory: the bundled demo's capture process held 1359 MiB after its 3
    profiled steps without this and 618 MiB with it (two checks on a loaded machine,
    ``facts.run.phases[].rss_mib``, issue 11). Returns False where there is no glibc (nothing
    done)."""
    import ctypes

    try:
        return bool(ctypes.CDLL("libc.so.6").malloc_trim(0))
    except (OSError, AttributeError):
        return False
