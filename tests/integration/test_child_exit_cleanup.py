"""The capture child ends with ``os._exit`` and still leaves none of the temporary sources that
TensorFlow's autograph writes (real TensorFlow, in a child process with its own TMPDIR)."""

from __future__ import annotations

import os
import subprocess
import sys

from rnndoctor.capture.ending import AUTOGRAPH_PREFIX

_CHILD = f"""
import os, tempfile
import tensorflow as tf

@tf.function
def clipped(x):
    if x > 0:  # Python control flow on a tensor: autograph converts the function
        return x
    return -x

clipped(tf.constant(2.0))
print(len([n for n in os.listdir(tempfile.gettempdir()) if n.startswith({AUTOGRAPH_PREFIX!r})]))
from rnndoctor.capture.ending import end_process
end_process(0)
"""


def test_autograph_sources_are_gone_after_the_childs_exit(tmp_path):
    folder = tmp_path / "tmp"
    folder.mkdir()
    script = tmp_path / "child.py"  # autograph reads the function's source from its file
    script.write_text(_CHILD)
    result = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=240,
        env=dict(os.environ, TMPDIR=str(folder)),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    written = int(result.stdout.strip().splitlines()[-1])
    assert written >= 1  # autograph did write its source there
    assert [p.name for p in folder.iterdir() if p.name.startswith(AUTOGRAPH_PREFIX)] == []
