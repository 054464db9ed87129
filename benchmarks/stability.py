"""Stability: do the findings at warning or above hold across identical runs?

    python benchmarks/stability.py [--runs 3] [--load] [--only demo]

Runs ``rnndoctor check`` ``--runs`` times on every script under ``tests/scripts/`` and on the
bundled demo (``demo``, ``demo --fixed``), one after the other, and prints a Markdown table: per
script, the rule IDs at warning or above in each run, and the flip count (the rule IDs present in
some runs but not in all). ``--load`` runs the same while a busy process holds one core (the
"under load" benchmark: a flip is allowed only to "inconclusive", which is info, so the count of
flips at warning or above must stay 0). Run by hand, never in CI; the figures go in the README.
"""

from __future__ import annotations

import argparse
import multiprocessing
import shutil
import sys
import tempfile
from pathlib import Path

from _checks import checks, run_check


def _spin() -> None:  # the background load: one core, busy
    while True:
        pass


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--load", action="store_true", help="hold one core busy meanwhile")
    parser.add_argument("--only", action="append", help="a script name (repeatable)")
    parser.add_argument("--rnndoctor", default=shutil.which("rnndoctor") or "rnndoctor")
    args = parser.parse_args()
    spinner = None
    if args.load:
        spinner = multiprocessing.Process(target=_spin, daemon=True)
        spinner.start()
    rows, total_flips = [], 0
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for name, check_args in checks():
                if args.only and name not in args.only and Path(name).name not in args.only:
                    continue
                runs = []
                for i in range(args.runs):
                    out = Path(tmp) / f"{Path(name).stem}-{i}"
                    runs.append(run_check(args.rnndoctor, check_args, out, Path(tmp)))
                    print(f"{name} run {i + 1}: {runs[-1]['ids']}", file=sys.stderr)
                sets = [set(r["ids"]) for r in runs]
                flips = sorted(set.union(*sets) - set.intersection(*sets))
                total_flips += len(flips)
                cells = [" ".join(r["ids"]) or "—" for r in runs]
                rows.append(f"| {name} | " + " | ".join(cells) + f" | {len(flips)} "
                            + (f"({', '.join(flips)})" if flips else "") + " |")  # fmt: skip
    finally:
        if spinner is not None:
            spinner.terminate()
    header = "| script | " + " | ".join(f"run {i + 1}" for i in range(args.runs)) + " | flips |"
    print(f"\nrule IDs at warning or above, {args.runs} runs each"
          + (" (one core busy meanwhile)" if args.load else "") + "\n")  # fmt: skip
    print(header)
    print("|---" * (args.runs + 2) + "|")
    print("\n".join(rows))
    print(f"\ntotal flips: {total_flips}")
    return 1 if total_flips else 0


if __name__ == "__main__":
    sys.exit(main())
