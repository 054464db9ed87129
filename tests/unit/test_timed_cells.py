"""A notebook cell under IPython's ``%%time`` (or a ``%time`` line) runs from IPython's own
compiled copy (``<timed exec>``, ``<timed eval>``), and its cell's file holds the transformed
call (``get_ipython().run_cell_magic('time', '', '...')``): a location found on that stack
pointed at line 1 of the cell and showed the transformed call. It now points at the user's line
as typed (``rnndoctor/capture/sites.py: user_frame_location``). A real IPython shell with
ipykernel's compiler (the cell files a notebook kernel names), in a child process so that no
shell is left in the test process. No TensorFlow."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("IPython")
pytest.importorskip("ipykernel")

SHELL = textwrap.dedent(
    """
    import json, sys
    from IPython.core.interactiveshell import InteractiveShell
    from ipykernel.compiler import XCachingCompiler
    from rnndoctor.capture import sites

    shell = InteractiveShell.instance(compiler_class=XCachingCompiler)
    hits = []  # %timeit's statement runs in a function: its `where` is not the cell's

    def fit(*args, **kwargs):
        hits.append(sites.user_frame_location(skip=1, call_names=("fit",)))
        return hits[-1]

    shell.user_ns["fit"] = fit
    found = []
    for cell in json.loads(sys.stdin.read()):
        hits.clear()
        shell.run_cell(cell, store_history=True, silent=True)
        where = hits[0] if hits else None
        found.append(None if where is None else
                     [where.line, where.code, where.call_source, where.context])
    print("RESULT", json.dumps(found))
    """
)

CELLS = [
    # a plain cell: as before
    "x = 1\nwhere = fit(x,\n    epochs=2)\n",
    # %%time: the body's line, the typed cell as context
    "%%time\nx = 1\nwhere = fit(x, epochs=2)\n",
    # %%time with an argument and an expression as its last statement
    "%%time --no-raise-error\nx = 1\nwhere = fit(x, epochs=2)\nx\n",
    # a %time line among other lines
    "x = 1\n%time where = fit(x, epochs=2)\ny = 2\n",
    # a %time line inside a block
    "for i in range(1):\n    %time where = fit(i, epochs=2)\n",
    # %%timeit, with its options (the statement runs in IPython's "<magic-timeit>" function)
    "%%timeit -n1 -r1\nx = 1\nwhere = fit(x, epochs=2)\n",
    # a %timeit line with options, one taking its value as the next word
    "x = 1\n%timeit -n 1 -r1 fit(x, epochs=2)\ny = 2\n",
    # a %%timeit line's own setup statement, which shares line 1 with the body's first line
    "%%timeit -q -n1 -r1 where = fit(0, epochs=1)\nx = 1\n",
]


def _locations() -> list:
    child = subprocess.run(
        [sys.executable, "-c", SHELL],
        input=json.dumps(CELLS), capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    line = next((x for x in child.stdout.splitlines() if x.startswith("RESULT ")), None)
    assert line is not None, child.stdout + child.stderr
    return json.loads(line[len("RESULT ") :])


def test_a_timed_cell_points_at_the_users_line_as_typed():
    plain, timed_cell, timed_argument, timed_line, in_block, *_ = _locations()
    assert plain[:3] == [2, "where = fit(x,", "fit(x,\n    epochs=2)"]
    assert timed_cell[:3] == [3, "where = fit(x, epochs=2)", "fit(x, epochs=2)"]
    assert timed_cell[3] == ["%%time", "x = 1", "where = fit(x, epochs=2)"]
    assert timed_argument[:3] == [3, "where = fit(x, epochs=2)", "fit(x, epochs=2)"]
    assert timed_argument[3][0] == "%%time --no-raise-error"
    assert timed_line[:3] == [2, "%time where = fit(x, epochs=2)", "fit(x, epochs=2)"]
    assert timed_line[3] == ["x = 1", "%time where = fit(x, epochs=2)", "y = 2"]
    assert in_block[:3] == [2, "%time where = fit(i, epochs=2)", "fit(i, epochs=2)"]
    assert in_block[3] == ["for i in range(1):", "    %time where = fit(i, epochs=2)"]


def test_a_timeit_cell_or_line_points_at_the_users_line_as_typed():
    """The review (stop 38): under %%timeit the location was IPython's "<magic-timeit>" copy,
    not the cell's line."""
    timeit_cell, timeit_line, timeit_setup = _locations()[5:]
    assert timeit_cell[:3] == [3, "where = fit(x, epochs=2)", "fit(x, epochs=2)"]
    assert timeit_cell[3] == ["%%timeit -n1 -r1", "x = 1", "where = fit(x, epochs=2)"]
    assert timeit_line[:3] == [2, "%timeit -n 1 -r1 fit(x, epochs=2)", "fit(x, epochs=2)"]
    assert timeit_line[3] == ["x = 1", "%timeit -n 1 -r1 fit(x, epochs=2)", "y = 2"]
    assert timeit_setup[:3] == [
        1,
        "%%timeit -q -n1 -r1 where = fit(0, epochs=1)",
        "fit(0, epochs=1)",
    ]


@pytest.mark.parametrize(
    ("argument", "statement"),
    [
        ("-n1 -r 3 fit(x)\n", "fit(x)\n"),  # a value attached, a value as the next word
        ("-q -n  5 fit(x)", "fit(x)"),  # a run of spaces before the value
        ("-qn 5 fit(x)", "fit(x)"),  # getopt's combined flags, the last one taking a value
        ("-v out -o fit(x)", "fit(x)"),  # -v takes a value (IPython 9: "n:r:tcp:qov:")
        ("-n1 -- -x + 1", "-x + 1"),  # "--" ends the options
        ('fit(x, "a  b")', 'fit(x, "a  b")'),  # no options: the statement as typed
        ("-n", ""),
    ],
)
def test_a_timeit_lines_options_are_read_as_getopt_reads_them(argument, statement):
    from rnndoctor.capture.sites import _without_options

    assert _without_options(argument) == statement
