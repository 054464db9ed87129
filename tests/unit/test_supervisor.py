"""The Supervisor on a tiny Python child (no TF): its whole tree ends, escaped processes included,
after a normal exit and after a timeout."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import psutil

from rnndoctor.cli.supervisor import Supervisor, marked_processes, read_phases

# Starts a child in its own process group and a grandchild in a new session (setsid), both
# inheriting the environment marker, writes their pids, then exits or sleeps.
_CHILD = """\
import json, subprocess, sys, time
sleep = [sys.executable, "-c", "import time; time.sleep(120)"]
in_group = subprocess.Popen(sleep)
escaped = subprocess.Popen(sleep, start_new_session=True)
with open(sys.argv[1], "w") as f:
    json.dump({"in_group": in_group.pid, "escaped": escaped.pid}, f)
print("started", flush=True)
if sys.argv[2] == "hang":
    time.sleep(120)
"""


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE  # killed, not yet reaped
    except psutil.NoSuchProcess:
        return True


def _supervise(tmp_path: Path, mode: str, timeout_s: float):
    pids = tmp_path / "pids.json"
    command = [sys.executable, "-c", _CHILD, str(pids), mode]
    supervisor = Supervisor(command, tmp_path / "script.log", tmp_path / "facts.json", timeout_s)
    result = supervisor.run()
    return supervisor, result, json.loads(pids.read_text())


def test_an_escaped_grandchild_is_killed_after_a_normal_exit(tmp_path):
    supervisor, result, pids = _supervise(tmp_path, "exit", timeout_s=60)
    assert result.status == 0 and not result.timed_out and not result.interrupted
    assert result.escaped == [pids["escaped"]]  # the one that left the process group
    assert _gone(pids["escaped"]) and _gone(pids["in_group"])
    assert marked_processes(supervisor.run_id) == []
    assert "started" in (tmp_path / "script.log").read_text()


def test_a_timeout_kills_the_whole_tree(tmp_path):
    started = time.monotonic()
    supervisor, result, pids = _supervise(tmp_path, "hang", timeout_s=3)
    assert result.timed_out and result.status is None
    assert time.monotonic() - started < 30
    assert result.escaped == [pids["escaped"]]
    assert _gone(pids["escaped"]) and _gone(pids["in_group"])
    assert marked_processes(supervisor.run_id) == []


def test_the_marker_is_in_the_childs_environment_only():
    supervisor = Supervisor(["true"], Path("log"), Path("facts.json"), 1.0)
    assert supervisor.environment()["RNNDOCTOR_RUN_ID"] == supervisor.run_id
    assert supervisor.environment()["PYTHONDONTWRITEBYTECODE"] == "1"
    assert Supervisor(["true"], Path("log"), Path("f"), 1.0).run_id != supervisor.run_id


def test_phases_are_read_from_the_facts_being_written(tmp_path):
    facts = tmp_path / "facts.json"
    assert read_phases(facts) is None
    facts.write_text(json.dumps({"run": {"phases": [{"name": "starting", "started_s": 0}]}}))
    assert read_phases(facts) == [("starting", 0.0)]
    facts.write_text("{half")
    assert read_phases(facts) is None


# What `rnndoctor check` imports and calls before and while the capture child runs: the CLI, the
# report folder's file names, the rules' probe options for the child, the phase display.
_PARENT_WHILE_THE_CHILD_RUNS = """\
import sys
from rnndoctor.cli import app, check, common, launched, supervisor, workers
from rnndoctor.engine import spe_share_cutoffs, unread_probes
from rnndoctor.reports import FILENAMES
from rnndoctor.reports.progress import PhaseDisplay
unread_probes(), spe_share_cutoffs(), PhaseDisplay()
print(sorted({m.split(".")[0] for m in sys.modules} & {"jinja2", "networkx", "tensorflow",
                                                        "keras", "xprof"}))
"""


def test_the_parent_loads_no_renderer_while_the_child_runs():
    """The renderers (jinja2, networkx: 14 MiB of the parent's 54) load only once the child has
    ended, when the check's peak, the child's batch-size probe, is past."""
    import subprocess

    done = subprocess.run(
        # -P: the installed rnndoctor, as the console script runs it, not the source tree that
        # the working directory (the repository root) would put first
        [sys.executable, "-P", "-c", _PARENT_WHILE_THE_CHILD_RUNS], capture_output=True,
        text=True, check=True,
    )  # fmt: skip
    assert done.stdout.strip() == "[]"


def test_a_phase_entered_again_is_listed_as_such():
    """A new user read "compute-only probe" and "batch-size probe" listed twice (each measured
    again, to check it against the window) as a duplicate."""
    import io

    from rich.console import Console

    from rnndoctor.reports.progress import PhaseDisplay

    display = PhaseDisplay()
    display.console = Console(file=io.StringIO(), width=120)
    phases = [("compute-only probe", 0.0), ("batch-size probe", 1.0),
              ("compute-only probe", 2.0), ("batch-size probe", 3.5), ("done", 4.0)]  # fmt: skip
    display.close(phases, 4.0, finished=True)
    lines = [x.split("  ")[0].strip() for x in display.console.file.getvalue().splitlines()]
    names = [" ".join(x.split()[1:]) for x in display.console.file.getvalue().splitlines()]
    assert [n.rsplit(" ", 2)[0] for n in names] == [
        "compute-only probe", "batch-size probe", "compute-only probe (again)",
        "batch-size probe (again)",
    ]  # fmt: skip
    assert all(x.startswith("done") for x in lines)
