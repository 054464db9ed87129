"""Time budgets for the capture's phases, so that one slow probe cannot starve the others.

The parent kills the child's whole process group at ``--timeout``. Inside the child, each phase
after the diagnosis window gets its own budget: a share of ``--timeout`` (``SHARES``), capped by
what is left before the overall deadline minus a reserve for saving the facts. A phase that runs
out stops cleanly and records a :class:`rnndoctor.facts.CutShort`; the next phase still gets its
own share.

A probe that could block forever in C++ (``next()`` on a hanging generator) runs through
:func:`run_bounded`, in a daemon thread joined with the budget's time left: the capture moves on
and the thread is dropped when the child exits (``os._exit``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

# Share of --timeout for each bounded phase. They add up to less than 1: the script's own start-up
# and the diagnosis window (bounded by its step counts) take the rest.
SHARES: dict[str, float] = {
    "input-only probe": 0.05,
    "sequence sampling": 0.05,
    "compute-only probe": 0.06,
    "batch-size probe": 0.08,
    "steps_per_execution probe": 0.06,
    "sequence length probe": 0.04,
    "fast-path probe": 0.08,
    # xprof's conversion of the profiled steps (capture/conversion.py), and under --workers a
    # second share for the chief's merged trace (capture/distribute.py: trace_facts): 48 s at
    # the default --timeout, against 1.0 s for the bundled demo's profile on the 2-core
    # development machine (README, "Overhead at 4956f45"); xprof's time grows with the
    # profile's events, and a merged trace holds every worker's. Source: rnndoctor's choice.
    "profile conversion": 0.08,
    # the script's run-on after the window of a fit inside a loop, until its next fit call
    # (capture/after_window.py): what runs there repeats with every call of the loop
    "after the window": 0.15,
    # the run-on after a single fit (no loop around it), until the script's end: what runs there
    # runs once, and the calls it makes are extrapolated from the loop counts in the source, so
    # it needs only enough time to see a few of them (RD406 reports from 10 calls). A third of
    # the loop's share: 30 s at the default --timeout of 600 s, the MIN_PHASE_S floor in the
    # short checks of the test suite. Source: rnndoctor's choice, bounded by CI time.
    "after a single fit": 0.05,
}
# The most wall seconds a probe's paired comparison (rnndoctor.capture.pairs) runs for, inside
# its phase budget: each arm wants 10 timed steps and 1 s, but a check may not get slower in
# wall time than before issue 11 (README targets), so a comparison of long steps stops here and
# records why (``PairedRatio.cut_short``); its interval is then wider. One exception: short of
# the 3 pairs that give an interval (rnndoctor.paired.INTERVAL_PAIRS), rounds go on within the
# phase budget (capture/pairs.py: stop_reason). For the batch-size and
# steps_per_execution probe it counts after each point's first burst (its warm-up and tracing:
# its steps are short by construction, probes._SPE_PROBE_MAX_STEP_MS, or for a model compiled
# with N > 1 steps per call, one call is at most probes._SPE_MAX_CALL_S); for the batch-size probe
# from its start, first round included.
# Source: the phase times
# of the bundled demo on the 2-core development machine before issue 11 (compute-only probe
# 8.3 s, batch-size probe 9.6 s; steps_per_execution probe: two points of 0.3 s plus a retrace).
# The steps_per_execution probe's 8 s: its rounds go on past the floor until the interval is
# tight (pairs.PRECISE_WIDTH), and every burst is one fit (its points need a train function
# each: about 1 s a pair for tests/scripts/tiny_lstm.py); the compute-only probe of arrays,
# whose rounds now run in one fit (probes._rounds_in_one_fit), gave back 5.6 s of that
# script's check (8.0 -> 2.4 s), so the check is still no longer than before. The batch-size
# probe gets one more allowance where its rounds end with RD301's decision not made at the
# early look (pairs.EarlyLook.extends): a check whose decision is made by then takes no longer.
PAIRED_WALL_S: dict[str, float] = {
    "compute-only probe": 8.0,
    "batch-size probe": 9.0,
    "steps_per_execution probe": 8.0,
    # two arms of the compute-only step (full and half padded length): a ratio that moves the
    # padding rules' estimate (RD501, RD502) as a share, not a cut-off decided on its own, so
    # it gets the least allowance: on the demo (0.14 and 0.28 s steps) 2 s holds the 3 pairs
    # an interval needs after the first round; with its third arm (the half on a function
    # traced for any length, probes._any_length_arm) 1.5x that, so that each arm keeps its
    # time: a new user's tagger got 3 pairs instead of 5 in 2 s. Source: rnndoctor's choice.
    "sequence length probe": 2.0,
}
MIN_PHASE_S = 2.0  # a phase never gets less than this (while the overall deadline allows)
RESERVE_S = 3.0  # kept back before the overall deadline for saving the facts


@dataclass
class Budget:
    """A phase's budget. ``deadline`` is a ``time.monotonic()`` value; ``seconds`` the budget."""

    phase: str
    seconds: float
    deadline: float

    def left(self) -> float:
        """Seconds left (never negative)."""
        return max(0.0, self.deadline - time.monotonic())

    def expired(self) -> bool:
        return time.monotonic() >= self.deadline


def paired_left(budget: Budget, scale: float = 1.0) -> Callable[[], float]:
    """``left()`` for a paired comparison starting now in ``budget``'s phase: the seconds until
    the phase's budget or the comparison's own wall allowance (:data:`PAIRED_WALL_S`, times
    ``scale``: the sequence length probe's third arm, 1.5) runs out."""
    allowance = PAIRED_WALL_S.get(budget.phase, 5.0) * scale
    deadline = min(budget.deadline, time.monotonic() + allowance)
    return lambda: deadline - time.monotonic()


class Budgets:
    """Hands out phase budgets from the overall timeout.

    Args:
        timeout_s: the ``--timeout`` the parent enforces (None: no overall limit; each phase then
            gets its share of ``default_s``).
        started: ``time.monotonic()`` when the child started (the parent's clock starts a little
            earlier; ``RESERVE_S`` covers the difference).
        default_s: the notional timeout used for shares when ``timeout_s`` is None.
    """

    def __init__(self, timeout_s: float | None, started: float, default_s: float = 600.0):
        self.timeout_s = timeout_s
        self.started = started
        self.default_s = default_s

    def overall_left(self) -> float:
        if self.timeout_s is None:
            return float("inf")
        return self.started + self.timeout_s - RESERVE_S - time.monotonic()

    def budget(self, phase: str, share: float | None = None) -> Budget:
        """The budget of ``phase`` (a key of ``SHARES``, or any name with ``share`` given)."""
        share = SHARES.get(phase, 0.05) if share is None else share
        total = self.timeout_s if self.timeout_s is not None else self.default_s
        seconds = max(MIN_PHASE_S, share * total)
        seconds = max(0.0, min(seconds, self.overall_left()))
        return Budget(phase, round(seconds, 3), time.monotonic() + seconds)


class Overrun(Exception):
    """``run_bounded``'s function did not finish within the budget (it may still be running)."""

    @classmethod
    def of(cls, budget: Budget) -> Overrun:
        """The overrun of ``budget``'s phase, with the words every phase's note uses."""
        return cls(f"{budget.phase} did not finish within its {budget.seconds:g} s budget")


def run_bounded(fn: Callable[[], Any], budget: Budget) -> Any:
    """Runs ``fn()`` in a daemon thread and waits at most ``budget.left()`` seconds.

    Returns:
        ``fn()``'s result.

    Raises:
        Overrun: the budget ran out first (the thread is left behind, blocked or not).
        BaseException: whatever ``fn`` raised.
    """
    result: dict[str, Any] = {}

    def target() -> None:
        try:
            result["value"] = fn()
        except BaseException as exc:  # handed to the caller
            result["error"] = exc

    thread = threading.Thread(target=target, name=f"rnndoctor {budget.phase}", daemon=True)
    thread.start()
    thread.join(budget.left())
    if thread.is_alive():
        raise Overrun.of(budget)
    if "error" in result:
        raise result["error"]
    return result.get("value")
