"""The machine's state during a measured phase: foreign CPU load and drift (issue 11, item 5).

A step time measured while another process holds a core is not the step time of the script; a
dip in the middle of the window moves a median. This module records, for one phase, how much CPU
time **other processes** took (:class:`LoadSampler`, :class:`MachineLoad`) and whether a series
of step times drifted inside the phase (:func:`drift`). Under either, the report says "noisy
machine: ..." with the figures, and the intervals the phase's findings rest on are widened
(``MachineLoad.widen_factor`` and ``rnndoctor.decide.widen``).

Foreign CPU time = the system-wide busy CPU time (``psutil.cpu_times()``, i.e. ``/proc/stat`` on
Linux, summed over all CPUs) minus the CPU time of this process and its children
(``psutil.Process().cpu_times()`` plus each live descendant's), both as differences between the
start and the end of the phase. The readers are injectable, so the arithmetic is unit-tested
with fake counters. Caveat: in a container whose ``/proc/stat`` shows the host's CPUs while a CPU
quota limits the container, the share is relative to the host's CPUs (what ``/proc/stat`` sums).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import psutil

from rnndoctor.stats import (
    bootstrap_ratio_of_medians_interval,
    mad,
    median,
    pettitt_change_point,
)

# A phase is "noisy" when other processes took at least a quarter of one core's worth of CPU
# time over it (foreign CPU seconds / wall seconds >= 0.25). Why a quarter core: TensorFlow's
# inter- and intra-op pools use every core of the 2-core machines this tool runs on, so a quarter
# core taken by others is ~12% of the capacity the step competes for, the size of the
# run-to-run differences that flipped findings in issue 11 (one core of background load flipped
# them outright); an idle machine's daemons stay well below it. The under-load benchmark
# (benchmarks/, one busy core) is what calibrates it.
NOISY_FOREIGN_CORES = 0.25
# Widening under load: a noisy phase's intervals widen by 1 + foreign cores (one busy core on the
# side: twice as wide), at most this much. A heuristic, simple and explicit, not a published
# model: contention noise grows with the run-queue competition, and past 3x every finding that
# rests on the phase is inconclusive anyway.
MAX_WIDEN_FACTOR = 3.0
# The counters' resolution: /proc/stat and /proc/PID/stat count CPU time in clock ticks
# (``os.sysconf("SC_CLK_TCK")``, USER_HZ: 100 per second on Linux, so 10 ms), each field rounded
# once (fs/proc/stat.c sums the CPUs' nanoseconds before converting), so the difference of two
# readings of a field is off by less than a tick. Foreign CPU time is made of 10 such fields:
# the 6 busy fields of the system-wide line (user, nice, system, irq, softirq, steal) and the
# process's own 4 (utime, stime, cutime, cstime); each live child adds 2 more, not counted here.
# A phase is judged only where that rounding is at most half of the noisy cut-off
# (``RESOLUTION_SHARE``): from 0.8 s, whatever the number of CPUs. Below it, 2 ticks in a 6 ms
# phase read as 1.5 busy cores (the demo's "data pipeline inspection", issue 11): no load at all.
RESOLUTION_FIELDS = 10
RESOLUTION_SHARE = 0.5

# Drift: the halves of a series differ when the interval of median(second) / median(first)
# excludes 1 by more than this margin. 5%: half the smallest cut-off of the timed rules (RD404,
# per-batch callbacks >= 10% of the step: rules/rd404_slow_callbacks.py), so a drift below it
# cannot by itself carry a figure across a cut-off.
DRIFT_MARGIN = 0.05
# A run of slow steps: at least this many consecutive steps above median + 3 scaled MAD (the
# robust outlier cut of Leys et al., J. Exp. Soc. Psychol. 49(4), 2013). Even with heavy tails
# (5% of steps above the cut) 5 in a row has odds of 0.05^5 = 3e-7 per position by chance; 3
# would give 1e-4 per position, a false alarm every few windows of 1000 steps.
SLOW_RUN_STEPS = 5
SLOW_MAD_K = 3.0
# Each half needs this many values before the halves are compared (a median of 4 at least);
# each side of a level shift as well.
MIN_HALF = 4
# A level shift: Pettitt's change-point test (``rnndoctor.stats.pettitt_change_point``) at this
# significance, which corrects for the choice of the place among the window's steps, and the
# two sides' ratio of medians beyond DRIFT_MARGIN on its interval, as the halves'. It finds a
# change away from the middle, which the halves dilute: a new user's tagger ran its window's
# first 16 steps at 11.5 ms and the other 45 at 17.2 ms, halves 15.8 against 17.0 ms ("no
# drift"), no step above median + 3 MAD (tests/unit/test_machine.py: TAGGER_STEPS_MS).
# Pettitt's p-value takes the steps as independent; steps whose pace wanders, each step's time
# correlated with the last one's, trip it more often, and the report then calls the window
# drifting. Simulated (benchmarks/change_point.py: 60 steps, log step time a Gaussian AR(1)
# series with standard deviation 0.1, p90 / median about 1.14; 4000 windows, 400 for the whole
# check), Pettitt alone at p < 0.01 marks 0.4%, 1.5%, 5.2% and 27% of steady windows at lag-1
# autocorrelation 0, 0.13 (the median of this project's steady windows), 0.3 and 0.6; with the
# margin, a level shift is reported in 0%, 0.8%, 3.8% and 16.5%. That is the window's own
# figures' case too: their intervals also take its steps as independent.
SHIFT_P = 0.01


@dataclass(frozen=True)
class CpuCounters:
    """Cumulative counters at one moment.

    Attributes:
        busy_s: system-wide busy CPU seconds, all CPUs together, since boot.
        own_s: CPU seconds of this process and its descendants.
        wall_s: a monotonic clock, seconds.
    """

    busy_s: float
    own_s: float
    wall_s: float


def system_busy_s() -> float:
    """System-wide busy CPU seconds since boot, summed over CPUs.

    Busy = all fields of ``psutil.cpu_times()`` but idle and iowait, less guest and guest_nice
    (already counted in user and nice on Linux): psutil's own ``_cpu_busy_time`` /
    ``_cpu_tot_time`` arithmetic behind ``cpu_percent``. Steal (a hypervisor running other
    guests on our cores) counts as busy: it is foreign load too.
    """
    times = psutil.cpu_times()
    total = sum(times)
    total -= getattr(times, "guest", 0.0) + getattr(times, "guest_nice", 0.0)
    return total - times.idle - getattr(times, "iowait", 0.0)


def own_cpu_s() -> float:
    """CPU seconds (user + system) of this process, its waited-for children and its live
    descendants. A descendant that ends between two readings is missed unless it was waited
    for (then it is in ``children_user``/``children_system``)."""
    me = psutil.Process()
    t = me.cpu_times()
    total = t.user + t.system + t.children_user + t.children_system
    for child in me.children(recursive=True):
        try:
            c = child.cpu_times()
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        total += c.user + c.system
    return total


def marked_processes(
    marker_var: str, marker: str, attrs: Sequence[str] = ()
) -> Iterator[psutil.Process]:
    """The live processes other than this one whose environment carries ``marker_var=marker``,
    each with ``attrs`` read into ``proc.info`` (``psutil.process_iter``). Zombies and processes
    whose environment may not be read are left out."""
    me = os.getpid()
    for proc in psutil.process_iter(["environ", *attrs], ad_value=None):
        environ = proc.info["environ"]
        if proc.pid != me and environ and environ.get(marker_var) == marker:
            yield proc


def job_cpu_s(marker_var: str, marker: str) -> float:
    """CPU seconds of this process tree (:func:`own_cpu_s`) plus those of every other live
    process whose environment carries ``marker_var=marker`` (:func:`marked_processes`), with
    their waited-for children: under ``rnndoctor check --workers`` the other workers of the job
    and what they started (the launcher gives them all one marker), which compete for the
    machine as part of the job being checked, not as other load. Without this each worker of a
    2-worker job on 2 cores read its sibling as "noisy machine: other processes used 1.4 of 2
    CPUs" and widened every interval (a fresh user's ``--workers 2`` check). A marked process
    that ends between two readings drops out of the second, and its CPU time of the phase reads
    as foreign."""
    total = own_cpu_s()
    mine = {c.pid for c in psutil.Process().children(recursive=True)}
    for proc in marked_processes(marker_var, marker, ["cpu_times"]):
        times = proc.info["cpu_times"]
        if proc.pid not in mine and times is not None:
            total += times.user + times.system + times.children_user + times.children_system
    return total


def read_counters(
    busy: Callable[[], float] = system_busy_s,
    own: Callable[[], float] = own_cpu_s,
    clock: Callable[[], float] = time.monotonic,
) -> CpuCounters:
    """The counters now, from the given readers."""
    return CpuCounters(busy_s=busy(), own_s=own(), wall_s=clock())


@dataclass(frozen=True)
class MachineLoad:
    """What other processes did to the machine over one phase.

    Attributes:
        foreign_cpu_share: CPU time of other processes / (wall time x CPUs), in [0, 1].
        foreign_cpu_s: CPU seconds other processes took over the phase.
        own_cpu_s: CPU seconds this process tree took over the phase.
        load_avg_1m: the 1-minute load average at the end of the phase (it counts this process's
            runnable threads too: shown, not used to decide).
        cpus: logical CPUs that ``/proc/stat`` sums over.
        wall_s: the phase's wall time.
        tick_s: the CPU counters' tick (``1 / SC_CLK_TCK``, 0.01 s on Linux).
    """

    foreign_cpu_share: float
    foreign_cpu_s: float
    own_cpu_s: float
    load_avg_1m: float
    cpus: int
    wall_s: float
    tick_s: float = 0.01

    @property
    def resolution_s(self) -> float:
        """How far the foreign CPU seconds can be off from the counters' rounding: under a tick
        for each of :data:`RESOLUTION_FIELDS` fields."""
        return self.tick_s * RESOLUTION_FIELDS

    @property
    def judged(self) -> bool:
        """The phase is long enough for the counters: their rounding is at most
        :data:`RESOLUTION_SHARE` of the noisy cut-off's CPU seconds over the phase."""
        return self.resolution_s <= RESOLUTION_SHARE * NOISY_FOREIGN_CORES * self.wall_s

    @property
    def foreign_cores(self) -> float:
        """Other processes' CPU time as cores busy on average (share x CPUs)."""
        return self.foreign_cpu_share * self.cpus

    @property
    def noisy(self) -> bool:
        """Other processes took >= :data:`NOISY_FOREIGN_CORES` of a core on average, over a
        phase long enough to tell (:attr:`judged`)."""
        return self.judged and self.foreign_cores >= NOISY_FOREIGN_CORES

    @property
    def widen_factor(self) -> float:
        """1 on a quiet machine; ``1 + foreign cores`` (at most :data:`MAX_WIDEN_FACTOR`) on a
        noisy one: the factor for ``rnndoctor.decide.widen``."""
        if not self.noisy:
            return 1.0
        return min(MAX_WIDEN_FACTOR, 1.0 + self.foreign_cores)

    def describe(self) -> str:
        """One line: ``noisy machine: other processes used 0.9 of 2 CPUs (45%) over 12.0 s;
        load average 2.4`` (``quiet machine: ...`` below the cut-off)."""
        if not self.judged:
            return (
                f"not judged: {self.wall_s:.3f} s is too short for the CPU counters "
                f"({self.tick_s * 1000.0:.0f} ms ticks); load average {self.load_avg_1m:.1f}"
            )
        state = "noisy machine" if self.noisy else "quiet machine"
        return (
            f"{state}: other processes used {self.foreign_cores:.1f} of {self.cpus} CPUs "
            f"({self.foreign_cpu_share * 100.0:.0f}%) over {self.wall_s:.1f} s; "
            f"load average {self.load_avg_1m:.1f}"
        )


def clock_tick_s() -> float:
    """The CPU counters' tick in seconds (``1 / SC_CLK_TCK``; 0.01 where it cannot be read)."""
    try:
        return 1.0 / float(os.sysconf("SC_CLK_TCK"))
    except (ValueError, OSError, AttributeError, ZeroDivisionError):
        return 0.01


def machine_load(
    before: CpuCounters,
    after: CpuCounters,
    *,
    cpus: int,
    load_avg_1m: float,
    tick_s: float = 0.01,
) -> MachineLoad:
    """The load between two readings of the counters.

    Foreign CPU seconds = Δbusy - Δown, at least 0 (the two counters are read a moment apart
    and tick at different granularities: a small negative difference is rounding, not load);
    the share is that over ``Δwall x cpus``, at most 1.

    Raises:
        ValueError: ``cpus`` < 1 or the wall clock did not advance.
    """
    if cpus < 1:
        raise ValueError(f"cpus must be >= 1, not {cpus}")
    wall_s = after.wall_s - before.wall_s
    if wall_s <= 0.0:
        raise ValueError(f"the phase lasted {wall_s} s: nothing to sample")
    own_s = max(0.0, after.own_s - before.own_s)
    foreign_s = max(0.0, (after.busy_s - before.busy_s) - own_s)
    share = min(1.0, foreign_s / (wall_s * cpus))
    return MachineLoad(share, foreign_s, own_s, load_avg_1m, cpus, wall_s, tick_s)


class LoadSampler:
    """Records the machine's load between :meth:`start` and :meth:`stop` (or as a context
    manager: the result is in :attr:`result` after the block).

    Args:
        busy: reader of system-wide busy CPU seconds (default :func:`system_busy_s`).
        own: reader of this process tree's CPU seconds (default :func:`own_cpu_s`).
        clock: monotonic seconds (default ``time.monotonic``).
        loadavg: the load averages (default ``os.getloadavg``).
        cpu_count: logical CPUs (default ``psutil.cpu_count()``, the CPUs ``/proc/stat`` has).
    """

    def __init__(
        self,
        *,
        busy: Callable[[], float] = system_busy_s,
        own: Callable[[], float] = own_cpu_s,
        clock: Callable[[], float] = time.monotonic,
        loadavg: Callable[[], tuple[float, float, float]] = os.getloadavg,
        cpu_count: Callable[[], int | None] = psutil.cpu_count,
    ):
        self._readers = (busy, own, clock)
        self._loadavg = loadavg
        self._cpu_count = cpu_count
        self._before: CpuCounters | None = None
        self.result: MachineLoad | None = None

    def start(self) -> LoadSampler:
        """Read the counters at the start of the phase."""
        self._before = read_counters(*self._readers)
        self.result = None
        return self

    def stop(self) -> MachineLoad:
        """Read them at the end and return (and keep in :attr:`result`) the phase's load.

        Raises:
            RuntimeError: :meth:`start` was not called.
        """
        self.result = self.peek()
        self._before = None
        return self.result

    def peek(self) -> MachineLoad:
        """The phase's load so far (the counters now against :meth:`start`), the sample going
        on: what a check inside the phase reads (``capture/probes.py: _load_factor``).

        Raises:
            RuntimeError: :meth:`start` was not called.
        """
        if self._before is None:
            raise RuntimeError("LoadSampler read before start()")
        after = read_counters(*self._readers)
        cpus = self._cpu_count() or 1
        return machine_load(
            self._before, after, cpus=cpus, load_avg_1m=float(self._loadavg()[0]),
            tick_s=clock_tick_s(),
        )  # fmt: skip

    def __enter__(self) -> LoadSampler:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


@dataclass(frozen=True)
class Drift:
    """Drift inside a series of step times.

    Attributes:
        drifted: the halves differ beyond their noise, a run of slow steps was found, or a
            level shift.
        halves_ratio: median(second half) / median(first half) (None: too few values).
        low: lower bound of its bootstrap interval (None: too few values).
        high: upper bound (None: too few values).
        level: coverage of that interval.
        halves_differ: the interval excludes 1 by more than the margin.
        slow_threshold: a step above this (in the series' unit) is slow: median + 3 scaled MAD
            (at least median x (1 + margin)).
        slow_run: the longest run of consecutive slow steps.
        slow_run_start: index of its first step (None: no slow step).
        description: one line, e.g. "second half 18% slower (90% interval 9–27%)".
        shift_at: the first step after the most likely level shift (Pettitt's); None where
            the series is too short to look for one or a side of that split would hold fewer
            than :data:`MIN_HALF` steps.
        shift_ratio: median(from ``shift_at`` on) / median(before it) (None: not looked for).
        shift_low: lower bound of its bootstrap interval, at ``level`` (None: not significant
            at :data:`SHIFT_P`, so not computed).
        shift_high: upper bound.
        shift_p: the shift's p-value (Pettitt's approximation, for independent steps).
        level_shift: the shift is significant at :data:`SHIFT_P` and its interval excludes 1 by
            more than the margin.
    """

    drifted: bool
    halves_ratio: float | None
    low: float | None
    high: float | None
    level: float
    halves_differ: bool
    slow_threshold: float
    slow_run: int
    slow_run_start: int | None
    description: str
    shift_at: int | None = None
    shift_ratio: float | None = None
    shift_low: float | None = None
    shift_high: float | None = None
    shift_p: float | None = None
    level_shift: bool = False


def _longest_run(flags: Sequence[bool]) -> tuple[int, int | None]:
    """The longest run of True in ``flags``: (length, start index or None)."""
    best, best_start, length = 0, None, 0
    for index, flag in enumerate(flags):
        length = length + 1 if flag else 0
        if length > best:
            best, best_start = length, index - length + 1
    return best, best_start


def _change_text(ratio: float, low: float, high: float, level: float) -> str:
    """A ratio of medians as text: "18% slower (90% interval 9–27%)", or "faster"."""
    pct = round(level * 100.0, 1)
    if ratio >= 1.0:
        change, lo, hi, word = ratio - 1.0, low - 1.0, high - 1.0, "slower"
    else:
        change, lo, hi, word = 1.0 - ratio, 1.0 - high, 1.0 - low, "faster"
    return (  # round() to an int: a bound of -0.4% reads 0, not "-0"
        f"{round(change * 100)}% {word} ({pct:g}% interval {round(lo * 100)}–{round(hi * 100)}%)"
    )


def _beyond(low: float, high: float, margin: float) -> bool:
    """The interval (of a ratio) excludes 1 by more than ``margin``, either way."""
    return low > 1.0 + margin or high < 1.0 / (1.0 + margin)


def _level_shift(
    values: Sequence[float], level: float, margin: float, seed: int
) -> tuple[dict[str, Any], str | None]:
    """The most likely level shift of ``values`` (:func:`~rnndoctor.stats.pettitt_change_point`)
    as :class:`Drift`'s ``shift_*`` fields, and its text where it is a drift (None otherwise);
    nothing where a side would hold fewer than :data:`MIN_HALF` values."""
    point = pettitt_change_point(values)
    before, after = values[: point.split], values[point.split :]
    if min(len(before), len(after)) < MIN_HALF:
        return {}, None
    ratio = median(after) / median(before)
    fields = dict(shift_at=point.split, shift_ratio=ratio, shift_p=point.p_value)
    if point.p_value >= SHIFT_P:  # the interval, a bootstrap, only where it can decide
        return fields, None
    low, high = bootstrap_ratio_of_medians_interval(before, after, level=level, seed=seed)
    shifted = _beyond(low, high, margin)
    fields.update(shift_low=low, shift_high=high, level_shift=shifted)
    p = "Pettitt's p < 0.001" if point.p_value < 0.001 else f"Pettitt's p {point.p_value:.1g}"
    text = (
        f"a level shift at step {point.split}: median {median(before):.3g} before, "
        f"{median(after):.3g} from it on, {_change_text(ratio, low, high, level)}; {p}"
    )
    return fields, text if shifted else None


def drift(
    values: Sequence[float],
    *,
    level: float = 0.90,
    margin: float = DRIFT_MARGIN,
    run_steps: int = SLOW_RUN_STEPS,
    mad_k: float = SLOW_MAD_K,
    seed: int = 0,
) -> Drift:
    """Detect drift inside a series of step times (in order, any one unit, positive).

    Three tests: (1) the **halves** (first ``n // 2`` and last ``n // 2`` values; the middle one
    of an odd count is left out) differ when the bootstrap interval of median(second) /
    median(first) lies wholly above ``1 + margin`` or wholly below ``1 / (1 + margin)``; (2) a
    **run** of at least ``run_steps`` consecutive steps above median + ``mad_k`` scaled MAD
    (never below median x (1 + margin), so a series of nearly equal values has no "slow" steps);
    (3) a **level shift** anywhere in the series: Pettitt's change point, significant at
    :data:`SHIFT_P`, whose two sides' ratio of medians has its interval beyond the margin as in
    (1). The shift's text is given where the halves do not already differ. Pettitt's p-value
    takes the steps as independent (a wandering pace trips it more often: :data:`SHIFT_P`),
    and the two sides' interval, of a split chosen from the same steps, is narrower than a
    fresh one would be: the p-value, not the interval, guards against chance.

    Args:
        values: the step times, in the order measured.
        level: coverage of the halves' interval.
        margin: how far from 1 the interval must be (relative).
        run_steps: consecutive slow steps that make a run.
        mad_k: scaled MADs above the median that make a step slow.
        seed: seed of the bootstrap.

    Raises:
        ValueError: no values, a value that is not positive, or ``run_steps`` < 1.
    """
    if not values or min(values) <= 0.0:
        raise ValueError("drift needs step times, all positive")
    if run_steps < 1:
        raise ValueError(f"run_steps must be >= 1, not {run_steps}")
    centre = median(values)
    threshold = max(centre + mad_k * mad(values), centre * (1.0 + margin))
    run, run_start = _longest_run([v > threshold for v in values])
    slow = run >= run_steps
    half = len(values) // 2
    ratio = low = high = None
    differ = False
    parts = []
    shift: dict[str, Any] = {}
    if half >= MIN_HALF:
        first, second = values[:half], values[len(values) - half :]
        ratio = median(second) / median(first)
        low, high = bootstrap_ratio_of_medians_interval(first, second, level=level, seed=seed)
        differ = _beyond(low, high, margin)
        parts.append("second half " + _change_text(ratio, low, high, level))
        shift, shift_text = _level_shift(values, level, margin, seed)
        if shift_text is not None and not differ:
            parts.append(shift_text)
    if slow:
        parts.append(
            f"{run} consecutive slow steps from step {run_start} "
            f"(> {threshold:.3g}: median {centre:.3g} + {mad_k:g} MAD)"
        )
    drifted = differ or slow or shift.get("level_shift", False)
    description = "; ".join(parts) if parts else f"{len(values)} steps: too few to compare"
    if not drifted:
        description = "no drift: " + description
    return Drift(
        drifted, ratio, low, high, level, differ, threshold, run, run_start, description, **shift
    )
