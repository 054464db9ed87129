"""Stability: do the findings at warning or above hold across identical runs?

    python benchmarks/stability.py [--runs 3] [--load] [--only demo] [--keep DIR]

Runs ``rnndoctor check`` ``--runs`` times on every script under ``tests/scripts/`` and on the
bundled demo (``demo``, ``demo --fixed``), one after the other, and prints a Markdown table: per
script, the rule IDs at warning or above in each run, and the flip count (the rule IDs present in
some runs but not in all). ``--load`` runs the same while a busy process holds one core (the
"under load" benchmark: a flip is allowed only to "inconclusive", which is info; the last
column counts the flips that are not to inconclusive, and with ``--load`` the exit status is 1
only for those). ``--rnndoctor`` defaults to the one on ``PATH`` or beside this Python. Run by
hand, never in CI; the figures go in the README.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
import tempfile
from pathlib import Path

from _checks import checks, default_rnndoctor, run_check


def _spin() -> None:  # the background load: one core, busy
    while True:
        pass


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--load", action="store_true", help="hold one core busy meanwhile")
    parser.add_argument("--only", action="append", help="a script name (repeatable)")
    parser.add_argument("--rnndoctor", default=default_rnndoctor())
    parser.add_argument("--keep", metavar="DIR", help="keep each run's --out folder under DIR")
    args = parser.parse_args()
    spinner = None
    if args.load:
        spinner = multiprocessing.Process(target=_spin, daemon=True)
        spinner.start()
    rows, total_flips, total_hard = [], 0, 0
    try:
        with tempfile.TemporaryDirectory() as tmp:
            if args.keep:  # each run's report and facts.json kept, to compare the flips' probes
                tmp = str(Path(args.keep).resolve())
                Path(tmp).mkdir(parents=True, exist_ok=True)
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
                hard = _hard_flips(runs, flips)
                total_flips += len(flips)
                total_hard += len(hard)
                cells = [" ".join(r["ids"]) or "—" for r in runs]
                rows.append(f"| {name} | " + " | ".join(cells) + f" | {len(flips)} "
                            + (f"({', '.join(flips)})" if flips else "") + f" | {len(hard)} "
                            + (f"({', '.join(hard)})" if hard else "") + " |")  # fmt: skip
    finally:
        if spinner is not None:
            spinner.terminate()
    header = "| script | " + " | ".join(f"run {i + 1}" for i in range(args.runs))
    print(f"\nrule IDs at warning or above, {args.runs} runs each"
          + (" (one core busy meanwhile)" if args.load else "")
          + f"; load average at the end {os.getloadavg()[0]:.2f}\n")  # fmt: skip
    print(header + " | flips | not to inconclusive |")
    print("|---" * (args.runs + 3) + "|")
    print("\n".join(rows))
    print(f"\ntotal flips: {total_flips}; not to inconclusive: {total_hard}")
    return 1 if (total_hard if args.load else total_flips) else 0


def _hard_flips(runs: list[dict], flips: list[str]) -> list[str]:
    """The flipping rule IDs that, in a run where they are not at warning or above, are not an
    "inconclusive" finding either (they vanished or were not evaluated): the under-load target
    allows a flip only to inconclusive."""
    return [
        rule
        for rule in flips
        if any(rule not in r["ids"] and rule not in r["inconclusive"] for r in runs)
    ]


if __name__ == "__main__":
    sys.exit(main())
