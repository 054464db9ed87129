"""The capture process's own memory: its resident size now, handing freed heap back, and the
garbage collector held off during the diagnosis, and in the capture child after it (:func:`frozen`).

No other capture module is imported here, so the session, the step window and the memory
figures of the batch-size probe (:mod:`rnndoctor.capture.memory`) can all use it.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


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


@contextlib.contextmanager
def frozen(thaw: bool = True) -> Iterator[None]:
    """For the block: the objects alive at its start are frozen (``gc.freeze``: no collection
    scans or frees them) and automatic collection is off; after it, automatic collection is as
    it was and, with ``thaw``, the objects are unfrozen (``gc.unfreeze``). Explicit
    ``gc.collect()`` calls inside the block collect only what the block allocated.

    Args:
        thaw: unfreeze after the block. False in the capture child (``CaptureSession.child``):
            it ends with ``os._exit``, which frees nothing, so the window's garbage is never
            freed there, and the script's run-on after the window (its model calls timed for
            RD406, its Python time) cannot pay for finalising the window's epoch iterator in an
            automatic collection either; what the run-on allocates is collected as usual.
            The costs, accepted because the run-on is short and budgeted: the window's garbage
            (its epoch iterator, with its threads and prefetch buffers) stays in memory until
            the child's exit, as does any cyclic object alive at the diagnosis' start that the
            run-on drops; and the run-on's full collections skip the frozen heap, so its Python
            time (``outside_window``) leaves out the full-heap scans, and the finalisation of
            the window's iterator, that the script's own run would pay after ``fit``.

    Why (issue 11): when the window's ``fit`` returns, Keras' epoch iterator (a generator over
    the user's tf.data iterator, autotuning on) is cyclic garbage. Destroying that iterator
    waits for its autotuning thread (``RootDataset::Iterator::~Iterator`` in
    ``UnboundedThreadPool::LogicalThreadWrapper``, a native stack taken with gdb), a wait that
    grows with the iterator's age: the automatic collection that finalised it during the
    bundled demo's model inspection made that phase 6.4, 7.6, 8.6, 9.8 and 33.6 s instead of
    0.4-0.7 s in 5 of 17 checks. Frozen, the window's garbage is not collected during the diagnosis;
    the capture child ends with ``os._exit``, which frees nothing, and in the user's own
    process (``rnndoctor.diagnose``, ``DoctorCallback``) it is collected later, as the user's
    own ``fit`` would leave it. There ``gc.unfreeze`` also thaws what the user had frozen with
    ``gc.freeze`` before the call (Python keeps one permanent generation): only automatic
    collection comes back exactly as it was."""
    was_enabled = gc.isenabled()
    gc.disable()
    gc.freeze()
    try:
        yield
    finally:
        if thaw:
            gc.unfreeze()
        if was_enabled:
            gc.enable()
