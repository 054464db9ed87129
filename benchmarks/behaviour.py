"""Same behaviour before and after a change: findings on saved facts, and on real checks.

Run by hand (not in CI). Two steps, one per code version:

    python benchmarks/behaviour.py snapshot before.json --rnndoctor OLD_VENV/bin/rnndoctor
    python benchmarks/behaviour.py snapshot after.json --rnndoctor NEW_VENV/bin/rnndoctor
    python benchmarks/behaviour.py diff before.json after.json

``snapshot`` records, with the given ``rnndoctor`` executable (each version in its own virtual
environment, since an editable install follows its working tree):

- **fixtures**: ``rnndoctor report`` on every saved facts file under ``tests/data`` (rules and
  host_hw): the whole ``findings`` list and each rule's outcome from ``report.json``, and the
  exit code. These are deterministic: ``diff`` compares them exactly.
- **checks**: ``rnndoctor check`` (``--runs`` times, default 3) on every script under
  ``tests/scripts/``, and ``rnndoctor demo`` / ``demo --fixed``: the exit code and the rule IDs
  at warning or above of each run.

``diff`` fails (exit 1) when a fixture's findings or outcomes differ, or when a check's rule IDs
at warning or above differ from the old runs' beyond what the old runs already disagreed on: a
rule ID seen in every old run must be in every new run, and a new run may hold only IDs that
some old run held (timing findings can flip from run to run on a loaded machine: those are
reported as "flipped before", not as differences). Paths are compared relative to each
snapshot's repository root.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from _checks import ROOT, checks, run_check


def _normalise(value: Any, root: str) -> Any:
    """Replaces the repository root in every string with ``<repo>``."""
    if isinstance(value, str):
        return value.replace(root, "<repo>")
    if isinstance(value, list):
        return [_normalise(v, root) for v in value]
    if isinstance(value, dict):
        return {k: _normalise(v, root) for k, v in value.items()}
    return value


def _fixtures(root: Path) -> list[Path]:
    return sorted((root / "tests" / "data").glob("*/*.json"), key=str)


def _is_facts(path: Path) -> bool:
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return False
    if not isinstance(doc, dict):
        return False
    return "run" in doc or (isinstance(doc.get("facts"), dict) and "run" in doc["facts"])


def snapshot_fixtures(rnndoctor: str, root: Path) -> dict[str, Any]:
    """``rnndoctor report`` on each saved facts file: findings, outcomes, exit code."""
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for path in _fixtures(root):
            if not _is_facts(path):
                continue
            name = f"{path.parent.name}/{path.name}"
            target = Path(tmp) / name.replace("/", "_")
            proc = subprocess.run(
                [rnndoctor, "report", str(path), "--out", str(target), "--format", "json",
                 "--fail-on", "warning"],
                capture_output=True, text=True, cwd=tmp,
            )  # fmt: skip
            try:
                report = json.loads((target / "report.json").read_text())
            except (OSError, ValueError):
                report = {}
            out[name] = {
                "exit": proc.returncode,
                "findings": _normalise(report.get("findings"), str(root)),
                "rules": report.get("rules"),
            }
    return out


def snapshot_checks(
    rnndoctor: str, root: Path, runs: int, only: list[str] | None = None
) -> dict[str, Any]:
    """Each check ``runs`` times: exit code, rule IDs at warning or above, wall time."""
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, args in checks(root):
            if only and name not in only:
                continue
            results = []
            for i in range(runs):
                target = Path(tmp) / f"{name.replace('/', '_').replace(' ', '_')}-{i}"
                result = run_check(rnndoctor, args, target, Path(tmp))
                results.append({k: result[k] for k in ("exit", "ids", "wall_s")})
                print(f"{name} run {i + 1}: exit {result['exit']} {result['ids']}", file=sys.stderr)
            out[name] = results
    return out


def diff_fixtures(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    problems = []
    for name in sorted(set(before) | set(after)):
        if name not in before or name not in after:
            problems.append(f"fixture {name}: only in {'after' if name in after else 'before'}")
            continue
        for key in ("exit", "findings", "rules"):
            if before[name][key] != after[name][key]:
                problems.append(f"fixture {name}: {key} differs")
    return problems


def diff_checks(before: dict[str, Any], after: dict[str, Any]) -> tuple[list[str], list[str]]:
    """``(problems, notes)`` for the checks, as the module docstring says."""
    problems, notes = [], []
    for name in sorted(set(before) & set(after)):
        old = [set(r["ids"]) for r in before[name]]
        new = [set(r["ids"]) for r in after[name]]
        always, ever = set.intersection(*old), set.union(*old)
        if always != ever:
            notes.append(f"{name}: flipped before: {sorted(ever - always)}")
        old_exits = {r["exit"] for r in before[name]}
        for i, ids in enumerate(new):
            if not always <= ids or not ids <= ever:
                problems.append(
                    f"{name} run {i + 1}: {sorted(ids)}; before: always {sorted(always)}, "
                    f"ever {sorted(ever)}"
                )
            exit_code = after[name][i]["exit"]
            if exit_code not in old_exits:
                problems.append(f"{name} run {i + 1}: exit {exit_code}, before {old_exits}")
    return problems, notes


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    snap = sub.add_parser("snapshot", help="record the findings of one code version")
    snap.add_argument("out", type=Path)
    snap.add_argument("--rnndoctor", default="rnndoctor", help="the executable to run")
    # (an absolute path: the runs start in a temporary folder)
    snap.add_argument("--root", type=Path, default=ROOT, help="the repository of that version")
    snap.add_argument("--runs", type=int, default=3)
    snap.add_argument("--no-checks", action="store_true", help="fixtures only (seconds)")
    snap.add_argument("--only", action="append", help="only this check (repeatable)")
    cmp_ = sub.add_parser("diff", help="compare two snapshots")
    cmp_.add_argument("before", type=Path)
    cmp_.add_argument("after", type=Path)
    args = parser.parse_args()
    if args.command == "snapshot":
        root = args.root.resolve()
        if "/" in args.rnndoctor:
            args.rnndoctor = str(Path(args.rnndoctor).resolve())
        data = {"root": str(root), "fixtures": snapshot_fixtures(args.rnndoctor, root)}
        if not args.no_checks:
            data["checks"] = snapshot_checks(args.rnndoctor, root, args.runs, args.only)
        args.out.write_text(json.dumps(data, indent=1))
        return 0
    before, after = json.loads(args.before.read_text()), json.loads(args.after.read_text())
    problems = diff_fixtures(before["fixtures"], after["fixtures"])
    print(f"fixtures: {len(after['fixtures'])} compared, {len(problems)} differ")
    if "checks" in before and "checks" in after:
        check_problems, notes = diff_checks(before["checks"], after["checks"])
        print(f"checks: {len(after['checks'])} compared, {len(check_problems)} differ")
        for note in notes:
            print("  note:", note)
        problems += check_problems
    for problem in problems:
        print("  DIFFERS:", problem)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
