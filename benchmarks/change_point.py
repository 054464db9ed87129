"""Change point false alarms: how often does a steady window "drift" by a level shift?

    python benchmarks/change_point.py [--windows 4000] [--steps 60] [--sd 0.1]

Simulates steady windows (no change in level): log step time a Gaussian AR(1) series with
standard deviation ``--sd`` (0.1: p90 / median about 1.14), at lag-1 autocorrelations 0, 0.13
(the median of this project's steady windows), 0.3 and 0.6, and prints per autocorrelation the
share of windows where Pettitt's test alone is significant at ``rnndoctor.machine.SHIFT_P``
(``--windows`` windows) and where ``rnndoctor.machine.drift`` reports a level shift (the test
and the margin on the two sides' interval; a tenth as many windows: its bootstrap is slower).
Pettitt's p-value takes the steps as independent; this is how far that assumption's failure
moves it. Fixed seed; run by hand, never in CI; the figures go in ``rnndoctor/machine.py``.
"""

from __future__ import annotations

import argparse
import math
import random

from rnndoctor.machine import SHIFT_P, drift
from rnndoctor.stats import pettitt_change_point

AUTOCORRELATIONS = (0.0, 0.13, 0.3, 0.6)


def steady_window(steps: int, rho: float, sd: float, rng: random.Random) -> list[float]:
    """``steps`` step times (ms) around 10 ms, log-normal, lag-1 autocorrelated (``rho``)."""
    x, out = rng.gauss(0.0, 1.0), []
    for _ in range(steps):
        x = rho * x + math.sqrt(1.0 - rho * rho) * rng.gauss(0.0, 1.0)
        out.append(10.0 * math.exp(sd * x))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--windows", type=int, default=4000)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--sd", type=float, default=0.1)
    args = parser.parse_args()
    rng = random.Random(1)
    checked = max(args.windows // 10, 1)
    print(f"| lag-1 autocorrelation | Pettitt p < {SHIFT_P} | level shift ({checked} windows) |")
    print("|---|---|---|")
    for rho in AUTOCORRELATIONS:
        alone = shifted = 0
        for index in range(args.windows):
            window = steady_window(args.steps, rho, args.sd, rng)
            alone += pettitt_change_point(window).p_value < SHIFT_P
            if index < checked:
                shifted += bool(drift(window).level_shift)
        print(f"| {rho} | {alone / args.windows:.1%} | {shifted / checked:.1%} |")


if __name__ == "__main__":
    main()
