"""Overhead: what ``rnndoctor check`` costs against a bare run of the same script.

    python benchmarks/overhead.py [--pairs 3] [--against SRC] [SCRIPT]

Paired and interleaved (bare, check, bare, check, ...): the wall time and the peak memory of the
process tree of ``rnndoctor check SCRIPT`` (default: the bundled demo) against a bare run of the
same script to the same training step (``_bare.py``: warm-up + measured + profiled steps, with
rnndoctor's defaults). Prints the medians, each pair's ratio and the median ratio; with
``--against DIR`` each round also checks with another rnndoctor version (``PYTHONPATH=DIR``), so
that two versions' ratios are measured side by side under the same load. DIR is a plain
install of that version, e.g. ``git worktree add /tmp/base main && pip install --no-deps
--target /tmp/basepkg /tmp/base``, then ``--against /tmp/basepkg``: a source tree on
``PYTHONPATH`` is not enough where this rnndoctor is an editable install, whose finder still
serves ``rnndoctor.rules`` and ``rnndoctor.reports`` from this checkout. Also prints,
from the checks' own facts, where each round's check spent its time (its phases: a probe that
was measured again, as the batch-size probe's referee does, appears twice). Run by hand, never
in CI; the figures go in the README.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

from _checks import ROOT, default_rnndoctor, run_check, run_tree

_DEFAULT_STEPS = 3 + 20 + 3  # warm-up + measured + profiled (rnndoctor.options.DEFAULTS)


def _phases(out: Path) -> list[tuple[str, float, float | None]]:
    """The check's phases, their durations in seconds and the capture process's resident memory
    (MiB) as each started, from its facts."""
    try:
        run = json.loads((out / "facts.json").read_text())["run"]
    except (OSError, ValueError, KeyError):
        return []
    phases = run.get("phases", [])
    ends = [p["started_s"] for p in phases[1:]] + [
        run.get("wall_time_s") or phases[-1]["started_s"]
    ]
    return [
        (p["name"], round(end - p["started_s"], 2), p.get("rss_mib"))
        for p, end in zip(phases, ends, strict=True)
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("script", nargs="?", default=str(ROOT / "examples" / "charlm_stdlib.py"))
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--rnndoctor", default=default_rnndoctor())
    parser.add_argument(
        "--against",
        metavar="DIR",
        help="also check with the rnndoctor installed in DIR (PYTHONPATH=DIR; pip install "
        "--no-deps --target DIR SRC), interleaved: bare, check, check of DIR in each round, so "
        "two versions compare side by side",
    )
    args = parser.parse_args()
    script = str(Path(args.script).resolve())
    arms: dict[str, list] = {"bare": [], "check": []}
    envs = {"check": None}
    phases: dict[str, list[list[tuple[str, float, float | None]]]] = {"check": []}
    if args.against:
        arms["check of --against"] = []
        phases["check of --against"] = []
        envs["check of --against"] = dict(os.environ, PYTHONPATH=str(Path(args.against)))
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.pairs):
            arms["bare"].append(run_tree(
                [sys.executable, str(ROOT / "benchmarks" / "_bare.py"), str(_DEFAULT_STEPS),
                 script], Path(tmp)))  # fmt: skip
            for name, env in envs.items():
                out = Path(tmp) / f"{name.split()[-1]}-{i}"
                arms[name].append(run_check(args.rnndoctor, ["check", script], out, Path(tmp), env))
                phases[name].append(_phases(out))
            print(f"round {i + 1} (load {os.getloadavg()[0]:.2f}): " + ", ".join(
                f"{n} {a[-1]['wall_s']} s {a[-1]['peak_mib']} MiB" for n, a in arms.items()),
                file=sys.stderr)  # fmt: skip
    bare = arms["bare"]
    for key, unit in (("wall_s", "s"), ("peak_mib", "MiB")):
        print(f"{key}: bare median {statistics.median(b[key] for b in bare)} {unit}")
        for name in envs:
            ratios = [c[key] / b[key] for b, c in zip(bare, arms[name], strict=True) if b[key]]
            print(f"  {name}: median {statistics.median(c[key] for c in arms[name])} {unit}; "
                  f"ratios {', '.join(f'{r:.2f}' for r in ratios)}; median ratio "
                  f"{statistics.median(ratios):.2f}x")  # fmt: skip
    print(f"\nload average at the end: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    for arm, rounds in phases.items():
        for i, rows in enumerate(rounds):
            print(f"\nphases of {arm}, round {i + 1} (s, and the capture's resident MiB as it "
                  f"started; a probe named twice was measured again):")  # fmt: skip
            for name, seconds, rss in rows:
                print(f"  {seconds:7.2f}  {rss if rss is not None else '-':>7}  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
