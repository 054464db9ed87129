"""Overhead: what ``rnndoctor check`` costs against a bare run of the same script.

    python benchmarks/overhead.py [--pairs 3] [SCRIPT]

Paired and interleaved (bare, check, bare, check, ...): the wall time and the peak memory of the
process tree of ``rnndoctor check SCRIPT`` (default: the bundled demo) against a bare run of the
same script to the same training step (``_bare.py``: warm-up + measured + profiled steps, with
rnndoctor's defaults). Prints the medians, each pair's ratio and the median ratio. Also prints,
from the checks' own facts, where the check's time went (its phases). Run by hand, never in CI;
the figures go in the README.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

from _checks import ROOT, run_check, run_tree

_DEFAULT_STEPS = 3 + 20 + 3  # warm-up + measured + profiled (rnndoctor.options.DEFAULTS)


def _phases(out: Path) -> list[tuple[str, float]]:
    """The check's phases and their durations in seconds, from its facts."""
    try:
        run = json.loads((out / "facts.json").read_text())["run"]
    except (OSError, ValueError, KeyError):
        return []
    phases = run.get("phases", [])
    ends = [p["started_s"] for p in phases[1:]] + [
        run.get("wall_time_s") or phases[-1]["started_s"]
    ]
    return [
        (p["name"], round(end - p["started_s"], 2)) for p, end in zip(phases, ends, strict=True)
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("script", nargs="?", default=str(ROOT / "examples" / "charlm_stdlib.py"))
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--rnndoctor", default=shutil.which("rnndoctor") or "rnndoctor")
    args = parser.parse_args()
    script = str(Path(args.script).resolve())
    bare, check = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.pairs):
            bare.append(run_tree(
                [sys.executable, str(ROOT / "benchmarks" / "_bare.py"), str(_DEFAULT_STEPS),
                 script], Path(tmp)))  # fmt: skip
            out = Path(tmp) / f"check-{i}"
            check.append(run_check(args.rnndoctor, ["check", script], out, Path(tmp)))
            b, c = bare[-1], check[-1]
            print(f"pair {i + 1}: bare {b['wall_s']} s {b['peak_mib']} MiB, check "
                  f"{c['wall_s']} s {c['peak_mib']} MiB", file=sys.stderr)  # fmt: skip
        phases = _phases(Path(tmp) / f"check-{args.pairs - 1}")
    for key, unit in (("wall_s", "s"), ("peak_mib", "MiB")):
        ratios = [c[key] / b[key] for b, c in zip(bare, check, strict=True) if b[key]]
        print(f"{key}: bare median {statistics.median(b[key] for b in bare)} {unit}, check median "
              f"{statistics.median(c[key] for c in check)} {unit}; ratios "
              f"{', '.join(f'{r:.2f}' for r in ratios)}; median ratio "
              f"{statistics.median(ratios):.2f}x")  # fmt: skip
    print("\nphases of the last check (s):")
    for name, seconds in phases:
        print(f"  {seconds:7.2f}  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
