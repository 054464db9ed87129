"""How the capture child ends: at once, with what TensorFlow's own exit would have cleaned up.

The child ends with ``os._exit`` (the script may leave non-daemon threads or worker pools, and no
user code may run after the window), which skips the ``atexit`` handlers. One of them is
TensorFlow's: autograph writes the source of every function it converts to a temporary file,
``<tempdir>/__autograph_generated_file<random>.py``, and registers its removal at exit
(``tensorflow/python/autograph/pyct/loader.py``: ``load_source``, with ``delete_on_exit`` True
wherever TensorFlow 2.21 calls it). Without :func:`remove_autograph_sources` each check would
leave those files behind (two for the bundled demo, one or more per traced function), which a
plain ``python SCRIPT`` does not.
"""

from __future__ import annotations

import os
import sys
import tempfile
from typing import NoReturn

AUTOGRAPH_PREFIX = "__autograph_generated_file"  # loader.load_source's ``prefix``


def remove_autograph_sources() -> int:
    """Removes the temporary files of the modules that autograph loaded in this process (the
    modules named ``__autograph_generated_file...`` in ``sys.modules``, whose file lies in the
    temporary folder under that name), as TensorFlow's ``atexit`` handler would. Files of other
    processes are not touched. Never raises.

    Returns:
        How many files it removed.
    """
    folder = os.path.abspath(tempfile.gettempdir())  # mkstemp joins onto the absolute folder
    removed = 0
    for name, module in list(sys.modules.items()):
        path = getattr(module, "__file__", None) if name.startswith(AUTOGRAPH_PREFIX) else None
        if not isinstance(path, str) or os.path.abspath(os.path.dirname(path)) != folder:
            continue
        if not os.path.basename(path).startswith(AUTOGRAPH_PREFIX):
            continue
        try:
            os.remove(path)
            removed += 1
        except OSError:  # already gone, or not ours to remove
            pass
    return removed


def end_process(status: int) -> NoReturn:
    """Ends this process now with ``status`` (``os._exit``: nothing is waited on and no user
    code runs), after removing autograph's temporary files (:func:`remove_autograph_sources`)
    and flushing stdout and stderr."""
    try:
        remove_autograph_sources()
    except Exception:  # never keep the child from ending
        pass
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # closed or replaced by the script, or a broken pipe
            pass
    os._exit(status)
