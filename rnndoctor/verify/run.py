"""The A/B runs of a verification: the original (A) and a patched copy (B) alternate across
processes, A B A B. With the CLI's warm runner (``rnndoctor.cli.arms``) each script has one
window-only capture child, started before the first run, and a run is one window of it; a runner
without ``prepare`` may start a child per run. The budget counts a script's first run apart from
its later ones (the start of a child that was not prepared).

Who starts a child is not this module's business: the CLI passes a :data:`Runner` (the
supervisor, in ``rnndoctor.cli.verify``), so that this package imports nothing of the CLI's.
A run's throughput is the ``samples_per_s`` its window measured (``facts.steps``).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from rnndoctor.facts import Facts, Outcome
from rnndoctor.paired import VERIFY_PAIRS
from rnndoctor.stats import median

MIN_PAIRS = 2  # A B A B at least, per candidate
MAX_PAIRS = VERIFY_PAIRS  # then up to this many while the budget allows (a 90% sign-test interval)
BUDGET_FACTOR = 3.0  # the default budget: this many times the plain check's wall time
LOSS_NOT_MEASURED = "not measured: no paired run recorded a loss"


@dataclass(frozen=True)
class RunEnd:
    """How one child ended, as the runner saw it.

    Attributes:
        status: its exit status (None: killed before it exited).
        timed_out: the run's time limit ran out and its processes were killed.
        interrupted: Ctrl-C reached the parent.
        wall_s: the run's wall time (seconds).
    """

    status: int | None
    timed_out: bool = False
    interrupted: bool = False
    wall_s: float = 0.0


Runner = Callable[[Path, Path, float], RunEnd]
"""``runner(script, out, timeout_s)``: runs ``script`` as the capture child with its report
folder ``out`` (it saves ``out/facts.json``), for at most ``timeout_s`` seconds."""


@dataclass
class Run:
    """One process of a verification.

    Attributes:
        arm: ``"A"`` (the original) or ``"B"`` (the patched copy).
        pair: the pair it belongs to (0-based).
        out: its report folder (``facts.json``, ``script.log``).
        wall_s: its wall time (seconds).
        samples_per_s: the throughput its window measured (None: not measured).
        final_loss: the training loss at the end of its window (None: not recorded).
        loss_step: the step of its epoch (1-based) that logged ``final_loss`` (None: not
            recorded); a copy at ``steps_per_execution`` N has trained N batches per measured
            step by then.
        error: why it has no throughput (the script raised: its message and line), else None.
        ran_out: the run completed without a window (its ``fit`` ended first: too few steps
            for a window), which is no failure of the script.
    """

    arm: str
    pair: int
    out: str
    wall_s: float
    samples_per_s: float | None = None
    final_loss: float | None = None
    loss_step: int | None = None
    error: str | None = None
    ran_out: bool = False


@dataclass
class Candidate:
    """One patched copy under test, and its runs so far.

    Attributes:
        name: ``all`` or a fix's name (``RD101``).
        script: the copy of the user's script to run as arm B.
        runs: its runs, in the order run.
        over_budget: what was left of the budget could not hold its ``MIN_PAIRS`` pairs (it is
            not started then, or not continued).
        interrupted: Ctrl-C stopped it.
        budget_note: when more pairs did not fit: (seconds they needed, seconds left).
    """

    name: str
    script: Path
    runs: list[Run] = field(default_factory=list)
    over_budget: bool = False
    interrupted: bool = False
    budget_note: tuple[float, float] | None = None

    def arm(self, name: str) -> list[Run]:
        """The runs of arm ``name``, in order."""
        return [r for r in self.runs if r.arm == name]

    @property
    def failed(self) -> Run | None:
        """The first patched run that measured nothing (the patched script raised or timed
        out), if any; None after a Ctrl-C (the run it cut is no failure of the fix)."""
        if self.interrupted:
            return None
        return next((r for r in self.arm("B") if r.samples_per_s is None and not r.ran_out), None)

    def pairs(self) -> list[tuple[Run, Run]]:
        """The complete pairs (both arms measured), in order."""
        a, b = self.arm("A"), self.arm("B")
        return [
            (x, y)
            for x, y in zip(a, b, strict=False)
            if x.samples_per_s is not None and y.samples_per_s is not None
        ]


@dataclass
class Schedule:
    """The shared budget of one verification and the runner that spends it.

    Attributes:
        original: the user's script (arm A).
        runner: starts one child (:data:`Runner`).
        runs_dir: where each run's report folder goes.
        budget_s: seconds the verification may take, all candidates together.
        run_timeout_s: the time limit of one run (seconds).
        clock: ``time.monotonic`` (a fake one in tests).
        started_s: the clock when the schedule was made.
        interrupted: Ctrl-C stopped a run.
        walls: every run's wall time so far (seconds).
        first_walls: the wall times of each script's first run (a warm runner starts its
            process then: :mod:`rnndoctor.cli.arms`), seconds.
        later_walls: those of the runs after a script's first (its windows alone).
    """

    original: Path
    runner: Runner
    runs_dir: Path
    budget_s: float
    run_timeout_s: float
    clock: Callable[[], float] = time.monotonic
    started_s: float = field(init=False, default=0.0)
    interrupted: bool = field(init=False, default=False)
    walls: list[float] = field(init=False, default_factory=list)
    first_walls: list[float] = field(init=False, default_factory=list)
    later_walls: list[float] = field(init=False, default_factory=list)
    _seen: set[Path] = field(init=False, default_factory=set)

    def __post_init__(self) -> None:
        self.started_s = self.clock()

    def left_s(self) -> float:
        """Seconds of the budget left."""
        return self.budget_s - (self.clock() - self.started_s)

    def one(self, candidate: Candidate, arm: str, pair: int) -> Run:
        """Runs one arm of one pair and records it in ``candidate``."""
        script = self.original if arm == "A" else candidate.script
        out = self.runs_dir / f"{candidate.name}-{pair + 1}{arm}"
        out.mkdir(parents=True, exist_ok=True)
        (out / "facts.json").unlink(missing_ok=True)
        end = self.runner(script, out, self.run_timeout_s)
        run = read_run(arm, pair, out, end)
        candidate.runs.append(run)
        self.walls.append(run.wall_s)
        (self.later_walls if script in self._seen else self.first_walls).append(run.wall_s)
        self._seen.add(script)
        if end.interrupted:
            self.interrupted = candidate.interrupted = True
        return run


def read_run(arm: str, pair: int, out: Path, end: RunEnd) -> Run:
    """One run's result from its ``facts.json`` and how its process ended."""
    run = Run(arm=arm, pair=pair, out=str(out), wall_s=round(end.wall_s, 3))
    if end.timed_out or end.interrupted:
        run.error = "timed out" if end.timed_out else "interrupted (Ctrl-C or a stop signal)"
        return run
    try:
        facts = Facts.load(out / "facts.json")
    except (OSError, ValueError) as exc:
        run.error = f"the run saved no facts (status {end.status}): {exc}"
        return run
    steps = facts.steps
    done = facts.run.outcome == Outcome.COMPLETED
    if done and steps is not None and steps.samples_per_s:
        run.samples_per_s = float(steps.samples_per_s)
        loss = steps.final_loss
        run.final_loss = None if loss is None else float(loss)
        run.loss_step = steps.final_loss_step
        return run
    message = facts.run.message or f"the window measured no throughput ({facts.run.outcome})"
    where = facts.run.error_location
    run.error = f"{message} at {where.file}:{where.line}" if where else message
    run.ran_out = done and where is None
    return run


def _pair_s(schedule: Schedule, candidate: Candidate, estimate_s: float) -> float:
    """One more pair's expected cost (seconds): two runs of the median of the runs after each
    script's first (a warm runner's windows), else of the mean of every run so far, else of
    ``estimate_s``."""
    if schedule.later_walls:
        return 2 * median(schedule.later_walls)
    walls = [r.wall_s for r in candidate.runs] or schedule.walls
    return 2 * (sum(walls) / len(walls) if walls else estimate_s)


def _start_s(schedule: Schedule, candidate: Candidate) -> float:
    """What starting the candidate's copy costs beyond its runs (seconds): the median first run
    over the median later one, when the copy has not run yet and both are known."""
    if candidate.runs or not schedule.first_walls or not schedule.later_walls:
        return 0.0
    return max(0.0, median(schedule.first_walls) - median(schedule.later_walls))


def _fits(schedule: Schedule, candidate: Candidate, estimate_s: float, pairs: int) -> bool:
    """Whether ``pairs`` more pairs fit in what is left of the budget; when not, the candidate
    records what they need and what was left (for its "over budget" reason)."""
    need = pairs * _pair_s(schedule, candidate, estimate_s) + _start_s(schedule, candidate)
    left = schedule.left_s()
    if need <= left:
        return True
    candidate.budget_note = (need, max(0.0, left))
    return False


def run_pair(schedule: Schedule, candidate: Candidate) -> bool:
    """Runs one pair (A then B); False when it stopped the candidate (B failed, Ctrl-C)."""
    pair = len(candidate.arm("B"))
    a = schedule.one(candidate, "A", pair)
    if schedule.interrupted or a.samples_per_s is None:
        return False
    b = schedule.one(candidate, "B", pair)
    return not schedule.interrupted and b.samples_per_s is not None


def run_all(schedule: Schedule, candidates: Sequence[Candidate], estimate_s: float) -> None:
    """Runs the candidates in order, ``MIN_PAIRS`` pairs each while the budget allows (a fix
    that fails shows early), then completes them in the same order up to ``MAX_PAIRS`` pairs
    (what a decision needs), each while its next pair fits.

    Args:
        schedule: the budget and the runner.
        candidates: in the order they are verified (the all-fixes copy first, then each
            call's merged fixes, then each fix by its estimated gain).
        estimate_s: a run's expected wall time before any run was timed (seconds).
    """
    active: list[Candidate] = []
    for candidate in candidates:
        if _run_up_to(schedule, candidate, estimate_s, MIN_PAIRS):
            active.append(candidate)
    for candidate in active:
        _run_up_to(schedule, candidate, estimate_s, MAX_PAIRS, all_or_none=False)


def _run_up_to(
    schedule: Schedule,
    candidate: Candidate,
    estimate_s: float,
    pairs: int,
    all_or_none: bool = True,
) -> bool:
    """Runs the candidate's pairs up to ``pairs`` complete ones; starts only when all the missing
    pairs fit (``all_or_none``), else one pair at a time. True when it has them and did not
    fail."""
    while len(candidate.pairs()) < pairs and not candidate.failed:
        if schedule.interrupted:
            candidate.interrupted = True
            return False
        missing = pairs - len(candidate.pairs()) if all_or_none else 1
        if not _fits(schedule, candidate, estimate_s, missing):
            candidate.over_budget = all_or_none
            return False
        if not run_pair(schedule, candidate):
            return False
    return candidate.failed is None


def default_budget(plain_check_s: float) -> float:
    """The budget when ``--verify-budget`` is not given: ``BUDGET_FACTOR`` times the plain
    check's wall time (seconds)."""
    return BUDGET_FACTOR * plain_check_s if math.isfinite(plain_check_s) else math.inf
