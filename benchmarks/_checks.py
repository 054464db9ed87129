"""What the benchmarks run: every script under ``tests/scripts/`` and the bundled demo, each
through a real ``rnndoctor`` executable, with the wall time and the peak memory of its process
tree. Run by hand, never in CI."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil

ROOT = Path(__file__).resolve().parent.parent
AT_LEAST_WARNING = ("warning", "error")
_POLL_S = 0.1
# sleeps_before_fit.py never reaches fit: it tests --timeout, so give it a short one.
_EXTRA = {"sleeps_before_fit.py": ["--timeout", "20"]}


def default_rnndoctor() -> str:
    """The ``rnndoctor`` executable: on ``PATH``, else the one beside this Python (a virtual
    environment's ``bin/``, run without activating it), else the bare name."""
    beside = Path(sys.executable).parent / "rnndoctor"
    return shutil.which("rnndoctor") or (str(beside) if beside.exists() else "rnndoctor")


def checks(root: Path = ROOT) -> list[tuple[str, list[str]]]:
    """``(name, rnndoctor arguments)`` for every script under tests/scripts and the demo."""
    # helper modules the scripts import (``_seq2seq_data.py``, ``verify_data.py``) are no jobs
    scripts = [
        p
        for p in sorted((root / "tests" / "scripts").glob("*.py"))
        if not p.name.startswith("_") and not p.stem.endswith("_data")
    ]
    runs = [
        (f"tests/scripts/{p.name}", ["check", str(p), *_EXTRA.get(p.name, [])]) for p in scripts
    ]
    return runs + [("demo", ["demo"]), ("demo --fixed", ["demo", "--fixed"])]


def run_tree(command: list[str], cwd: Path, env: dict[str, str] | None = None) -> dict[str, Any]:
    """Runs ``command`` (in ``env``, default this process's) and polls its process tree: exit
    code, wall time (s), peak memory (MiB, the largest sum of the resident set sizes of the
    tree's processes seen at one poll)."""
    started = time.monotonic()
    proc = subprocess.Popen(
        command, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env
    )
    peak = 0
    root = psutil.Process(proc.pid)
    while proc.poll() is None:
        try:
            tree = [root, *root.children(recursive=True)]
            peak = max(peak, sum(p.memory_info().rss for p in tree if p.is_running()))
        except psutil.Error:
            pass
        time.sleep(_POLL_S)
    stderr = proc.stderr.read().decode("utf-8", "replace") if proc.stderr else ""
    return {
        "exit": proc.returncode,
        "wall_s": round(time.monotonic() - started, 2),
        "peak_mib": round(peak / 2**20, 1),
        "stderr_tail": stderr.splitlines()[-3:],
    }


def run_check(
    rnndoctor: str, args: list[str], out: Path, cwd: Path, env: dict[str, str] | None = None
) -> dict[str, Any]:
    """One ``rnndoctor`` run with ``--format json --fail-on never``: exit code, wall time, peak
    memory, and the rule IDs (and severities) of its findings."""
    result = run_tree(
        [rnndoctor, *args, "--out", str(out), "--format", "json", "--fail-on", "never"], cwd, env
    )
    try:
        report = json.loads((out / "report.json").read_text())
    except (OSError, ValueError):
        report = {}
    findings = report.get("findings", [])
    result["ids"] = sorted({f["rule_id"] for f in findings if f["severity"] in AT_LEAST_WARNING})
    result["findings"] = sorted({f"{f['rule_id']}:{f['severity']}" for f in findings})
    # findings that say "inconclusive: ..." (info: only the median cleared the cut-off)
    result["inconclusive"] = sorted(
        {f["rule_id"] for f in findings if "inconclusive" in f.get("message", "")}
    )
    return result
