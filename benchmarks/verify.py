"""``--verify``: what it costs, whether its all-fixes figure agrees with an independent A/B, and
how far each estimate is from its measurement.

    python benchmarks/verify.py [--pairs 2] [--ab-pairs 3] [--scripts NAME ...] [--out DIR]

1. Cost: the demo (a fresh copy of ``examples/`` in a git work tree), ``rnndoctor check`` against
   ``rnndoctor check --verify``, interleaved (check, verify, check, verify, ...): wall times, the
   per-pair ratio verify / check and the median ratio (the target: at most 3x).
2. Agreement: ``examples/charlm_stdlib.py`` against ``examples/charlm_stdlib_fixed.py`` at the
   same batch size, whole process, ``--epochs 2 --lines 6000``, interleaved (original, fixed,
   ...): wall and CPU time (user + system of the process tree), the median of the per-pair
   ratios, beside the all-fixes speedup and interval that each ``--verify`` run of step 1
   reported. The whole process also holds TensorFlow's import, the data preparation and the
   validation passes, which no fix speeds up: its ratio is the lower bound of the step's.
3. Accuracy: ``check --verify`` on each e2e script (``--scripts``, default: those whose findings
   carry source rewrites) and the demo runs of step 1; every fix measured (5 pairs or more), its
   ratio measured / estimated, the median and range per rule family (RD1xx ...).

Every figure is printed with the machine's 1-minute load average at its start (``os.getloadavg``).
Run by hand, never in CI; the figures go in the README.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil
from _checks import ROOT

DEMO_ARGS = ["--", "--lines", "6000"]
AB_ARGS = ["--epochs", "2", "--lines", "6000"]
DEFAULT_SCRIPTS = ["tiny_lstm.py", "padded_lstm.py", "small_batch_slow_callback.py",
                   "run_eagerly_fit.py"]  # fmt: skip
_POLL_S = 0.1


def _load() -> float:
    return round(os.getloadavg()[0], 2)


def _timed(command: list[str], cwd: Path) -> dict[str, Any]:
    """Runs ``command``: wall time (s), CPU time of its process tree (s), exit code, load."""
    load = _load()
    started = time.monotonic()
    proc = subprocess.Popen(command, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    root = psutil.Process(proc.pid)
    cpu: dict[int, float] = {}
    while proc.poll() is None:
        try:
            for p in [root, *root.children(recursive=True)]:
                times = p.cpu_times()
                cpu[p.pid] = times.user + times.system + times.children_user + times.children_system
        except psutil.Error:
            pass
        time.sleep(_POLL_S)
    wall = time.monotonic() - started
    stderr = proc.stderr.read().decode("utf-8", "replace") if proc.stderr else ""
    return {"exit": proc.returncode, "wall_s": round(wall, 2), "cpu_s": round(sum(cpu.values()), 2),
            "load": load, "tail": stderr.splitlines()[-3:]}  # fmt: skip


def _work_tree(tmp: Path, name: str) -> Path:
    work = tmp / name
    shutil.copytree(ROOT / "examples", work, ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run(["git", "init", "-q"], cwd=work, check=True)
    return work


def _check(rnndoctor: str, work: Path, script: str, out: Path, *extra: str) -> dict[str, Any]:
    run = _timed([rnndoctor, "check", script, "--out", str(out), "--format", "json",
                  "--fail-on", "never", *extra], work)  # fmt: skip
    try:
        run["report"] = json.loads((out / "report.json").read_text())
    except (OSError, ValueError):
        run["report"] = {}
    return run


def _spread(values: list[float]) -> str:
    return f"median {statistics.median(values):.2f} (range {min(values):.2f}-{max(values):.2f})"


def cost(rnndoctor: str, tmp: Path, pairs: int) -> list[dict[str, Any]]:
    """Step 1; returns the verify runs (their reports feed steps 2 and 3)."""
    verified = []
    ratios = []
    for i in range(pairs):
        plain = _check(rnndoctor, _work_tree(tmp, f"plain-{i}"), "charlm_stdlib.py",
                       tmp / f"plain-{i}-out", *DEMO_ARGS)  # fmt: skip
        run = _check(rnndoctor, _work_tree(tmp, f"verify-{i}"), "charlm_stdlib.py",
                     tmp / f"verify-{i}-out", "--verify", *DEMO_ARGS)  # fmt: skip
        ratios.append(run["wall_s"] / plain["wall_s"])
        verified.append(run)
        print(
            f"cost pair {i + 1}: check {plain['wall_s']} s (load {plain['load']}), check "
            f"--verify {run['wall_s']} s (load {run['load']}): {ratios[-1]:.2f}x",
            flush=True,
        )
        for item in run["report"].get("verified", []):
            print(
                f"  {item['fix']:8} {item['status']:15} pairs {item['pairs']} estimate "
                f"{item['estimate']} measured {item['measured_text']}",
                flush=True,
            )
    print(f"cost: check --verify / check {_spread(ratios)} over {pairs} pairs", flush=True)
    return verified


def agreement(tmp: Path, pairs: int, verified: list[dict[str, Any]]) -> None:
    """Step 2."""
    work = _work_tree(tmp, "ab")
    walls, cpus = [], []
    for i in range(pairs):
        a = _timed([sys.executable, "charlm_stdlib.py", *AB_ARGS], work)
        b = _timed([sys.executable, "charlm_stdlib_fixed.py", *AB_ARGS], work)
        walls.append(a["wall_s"] / b["wall_s"])
        cpus.append(a["cpu_s"] / b["cpu_s"])
        print(
            f"A/B pair {i + 1}: original {a['wall_s']} s wall {a['cpu_s']} s CPU (load "
            f"{a['load']}), fixed {b['wall_s']} s wall {b['cpu_s']} s CPU (load {b['load']}) "
            f"exit {a['exit']}/{b['exit']}",
            flush=True,
        )
    print(
        f"A/B whole process, fixed twin over original: wall {_spread(walls)}x, CPU "
        f"{_spread(cpus)}x",
        flush=True,
    )
    for run in verified:
        for item in run["report"].get("verified", []):
            if item["fix"] == "all":
                print(
                    f"  --verify all-fixes ({', '.join(item['rules'])}): {item['status']}, "
                    f"{item['measured_text']}, {item['pairs']} pairs",
                    flush=True,
                )


def accuracy(rnndoctor: str, tmp: Path, scripts: list[str], verified: list[dict]) -> None:
    """Step 3."""
    runs = list(verified)
    for name in scripts:
        work = tmp / f"script-{Path(name).stem}"
        work.mkdir()
        for path in (ROOT / "tests" / "scripts").glob("*.py"):
            shutil.copy(path, work)
        subprocess.run(["git", "init", "-q"], cwd=work, check=True)
        run = _check(rnndoctor, work, name, tmp / f"{Path(name).stem}-out", "--verify")
        print(f"{name}: {run['wall_s']} s (load {run['load']})", flush=True)
        runs.append(run)
    families: dict[str, list[float]] = {}
    for run in runs:
        for item in run["report"].get("verified", []):
            if item["fix"] == "all" or item.get("measured") is None or not item.get("estimate"):
                continue
            if item["pairs"] < 5:
                continue
            family = item["fix"][:3] + "xx"
            families.setdefault(family, []).append(item["measured"] / item["estimate"])
            print(
                f"  {item['fix']:8} estimate {item['estimate']:.2f}x measured "
                f"{item['measured_text']} -> {item['measured'] / item['estimate']:.2f}",
                flush=True,
            )
    print("| family | fixes measured | measured / estimated |")
    print("|---|---|---|")
    for family, ratios in sorted(families.items()):
        print(f"| {family} | {len(ratios)} | {_spread(ratios)} |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=2)
    parser.add_argument("--ab-pairs", type=int, default=3)
    parser.add_argument("--scripts", nargs="*", default=DEFAULT_SCRIPTS)
    parser.add_argument("--rnndoctor", default=shutil.which("rnndoctor") or "rnndoctor")
    parser.add_argument("--out", default=None, help="keep the runs here (default: a temp dir)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        tmp = Path(args.out or scratch)
        tmp.mkdir(parents=True, exist_ok=True)
        print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()}", flush=True)
        verified = cost(args.rnndoctor, tmp, args.pairs)
        agreement(tmp, args.ab_pairs, verified)
        accuracy(args.rnndoctor, tmp, args.scripts, verified)
    return 0


if __name__ == "__main__":
    sys.exit(main())
