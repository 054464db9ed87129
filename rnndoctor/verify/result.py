"""Each verified fix's status, from its A/B runs: the measured speedup with its 90% interval
beside the estimate the finding gave.

Direction: the speedup is B's throughput over A's (the patched copy's samples/s over the
original's), the median of the paired ratios; the paired timer's convention (``ratio > 1``: B is
faster) holds because the values handed to it are times per sample.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from rnndoctor.decide import format_ratio
from rnndoctor.paired import paired_from_samples
from rnndoctor.stats import PairedResult, median
from rnndoctor.verify.run import LOSS_NOT_MEASURED, MIN_PAIRS, Candidate, Run

CPU_LABEL = "measured on CPU: the cuDNN gain needs a GPU"
GPU_ONLY = "a GPU-only effect on a CPU run"
DECISIVE_PAIRS = 5  # the fewest pairs whose sign-test interval of the median covers >= 90%
TOO_FEW_PAIRS = "too few pairs to decide"  # a reason more pairs (a larger budget) can lift
OVER_BUDGET = "over budget"  # a reason a larger budget can lift: the pairs did not fit in it
DIVERGE_FACTOR = 10.0  # a patched run's final loss this many times the original's: diverged
_CUDNN_RULES = tuple(f"RD1{n:02d}" for n in range(1, 15))  # RD101-RD114: the cuDNN fast path
_GPU_ONLY_RULES = ("RD302", "RD601", "RD602", "RD603", "RD604")  # no effect on a CPU at all
# Rules whose gain lies outside the fit window that --verify times (its A/B pairs compare the
# window's samples/s): RD406's predict calls run after fit (capture/after_window.py), and the
# finding's own paired timing of predict against its replacements is their measurement.
OUTSIDE_WINDOW = (
    "its gain is in what runs after fit (the run-on's predict calls), which the A/B pairs of the "
    "fit window's samples/s do not time; the finding's own paired timing measured it"
)
_OUTSIDE_WINDOW_RULES = ("RD406",)


class Status(enum.StrEnum):
    """A verified fix's status (the values are what ``verify.json`` holds)."""

    FAILED = "failed"  # the patched script raised
    SLOWER = "slower"  # the whole interval is below 1
    UNSAFE = "unsafe: loss diverged"  # NaN, or far above the original's loss
    CONFIRMED = "confirmed"  # both intervals are above 1 (5 pairs at least)
    WITHIN_NOISE = "within noise"  # an interval holds 1
    NOT_VERIFIABLE = "not verifiable"  # with a reason

    @property
    def bad(self) -> bool:
        """Shown first, in red, and never part of the patch."""
        return self in (Status.FAILED, Status.SLOWER, Status.UNSAFE)


_ORDER = list(Status)


@dataclass
class Verified:
    """One fix's verification (or the all-fixes copy's, ``fix == "all"``).

    Attributes:
        fix: the fix's name (``RD101``, ``RD101-2``), a merged group's (``RD101+RD102``) or
            ``all``.
        rules: the fixes it applies (one; one call's fixes merged into one rewrite, for
            ``RD101+RD102``; or all the compatible ones).
        title: the fix's title.
        file: the file it rewrites (None for ``all`` or when not located).
        line: the line of the finding there.
        safety: the fix's safety (``safe`` / ``unsafe`` / ``display-only``).
        status: see :class:`Status`.
        reason: why not verifiable, or a note on the status (None: none).
        estimate: the speedup the finding estimated (None: it gave none).
        estimate_text: the finding's gain sentence.
        measured: the measured speedup, B's samples/s over A's (None: not measured).
        low: the 90% interval's lower bound.
        high: its upper bound.
        measured_text: ``1.6x (90% interval 1.2–1.9x)``, with the CPU label when it applies.
        sign_low: the lower bound of the distribution-free (sign test) 90% interval of the
            median ratio; the status needs it and ``low`` on the same side of 1 (None: too few
            pairs for one).
        sign_high: its upper bound.
        pairs: complete A/B pairs.
        samples_per_s_a: each A run's throughput (samples/s), in order.
        samples_per_s_b: each B run's throughput (samples/s).
        loss: the final training loss, original against patched, or why not measured.
        cpu_label: ``CPU_LABEL`` for a cuDNN rule measured on CPU, else None.
        error: the patched script's error line (``failed``).
        copy: the patched copy of the script that ran.
        runs: every run (arm, pair, report folder, wall time, throughput, error).
        in_patch: whether ``fixes.patch`` holds it (a fix in a confirmed merged group too).
    """

    fix: str
    rules: list[str]
    title: str
    file: str | None = None
    line: int | None = None
    safety: str | None = None
    status: Status = Status.NOT_VERIFIABLE
    reason: str | None = None
    estimate: float | None = None
    estimate_text: str | None = None
    measured: float | None = None
    low: float | None = None
    high: float | None = None
    measured_text: str | None = None
    sign_low: float | None = None
    sign_high: float | None = None
    pairs: int = 0
    samples_per_s_a: list[float] = field(default_factory=list)
    samples_per_s_b: list[float] = field(default_factory=list)
    loss: str = LOSS_NOT_MEASURED
    cpu_label: str | None = None
    error: str | None = None
    copy: str | None = None
    runs: list[dict[str, Any]] = field(default_factory=list)
    in_patch: bool = False

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: the status as its string value."""
        data = asdict(self)
        data["status"] = str(self.status)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Verified:
        """The entry :meth:`to_dict` wrote (``verify.json``, ``report.json``'s ``verified``);
        keys this version does not know are ignored.

        Raises:
            ValueError: an unknown status.
            KeyError: no ``fix``, ``rules`` or ``title``.
        """
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        values["status"] = Status(values.get("status", Status.NOT_VERIFIABLE))
        return cls(**values)


def sort_key(item: Verified) -> tuple[int, int, float]:
    """Failed, slower and unsafe first; then confirmed, within noise, not verifiable; the
    all-fixes copy first within its status, then by measured speedup."""
    return (_ORDER.index(item.status), item.fix != "all", -(item.measured or 0.0))


def is_cuda_effect(rule_id: str) -> bool:
    """Whether the rule's gain is the cuDNN kernel's (RD101-RD114)."""
    return rule_id.startswith(_CUDNN_RULES)


def cpu_label(rules: Sequence[str]) -> str | None:
    """What a measurement on CPU of a copy with ``rules``' fixes leaves out: :data:`CPU_LABEL`
    where they are all cuDNN fixes, the cuDNN ones named where others are in the copy too (the
    all-fixes copy's gain may be RD301's, which a CPU measures: a new user's trial read "all
    (RD301, RD102, RD104) confirmed ... measured on CPU: the cuDNN gain needs a GPU"), None
    where none is."""
    cuda = [r for r in rules if is_cuda_effect(r)]
    if not cuda:
        return None
    if len(cuda) == len(rules):
        return CPU_LABEL
    return f"measured on CPU: the cuDNN gain of {', '.join(cuda)} needs a GPU"


def is_outside_window(rule_id: str) -> bool:
    """Whether the rule's gain lies outside the fit window that ``--verify`` times."""
    return rule_id in _OUTSIDE_WINDOW_RULES


def is_gpu_only(rule_id: str) -> bool:
    """Whether the rule's effect exists on a GPU only (nothing to measure on a CPU)."""
    return rule_id.startswith(_GPU_ONLY_RULES)


def paired_speedup(a: Sequence[float], b: Sequence[float]) -> PairedResult:
    """The paired result of throughputs ``a`` (original) and ``b`` (patched), samples/s, pair by
    pair: its ``ratio`` is the median of ``b[i] / a[i]``.

    Raises:
        ValueError: no pairs, lengths differ, or a throughput that is not positive.
    """
    if min([*a, *b], default=1.0) <= 0.0:
        raise ValueError("throughputs must be positive")
    per_sample_a = [1000.0 / v for v in a]  # ms per sample: the timer's "time per step" side
    per_sample_b = [1000.0 / v for v in b]
    return paired_from_samples(per_sample_a, per_sample_b, unit="ms/sample")


def loss_verdict(
    a: Sequence[float | None],
    b: Sequence[float | None],
    a_steps: Sequence[int | None] = (),
    b_steps: Sequence[int | None] = (),
) -> tuple[str, bool]:
    """The loss line (original against patched) and whether the patched loss diverged.

    Diverged: a patched run's loss is NaN or infinite, or the patched median is more than
    ``DIVERGE_FACTOR`` times the original's. The arms log their losses at different points of
    training (the original's process serves every fix's pairs, and a copy at
    ``steps_per_execution`` 16 trains 16 batches per measured step), so the line is a
    divergence check, not a comparison of learning: with ``a_steps`` / ``b_steps`` (the step of
    its epoch at which each run's loss was logged, :attr:`Run.loss_step`) it gives each arm's
    median step beside its loss, and says so. A fresh user read "loss original 0.6622, patched
    0.4651" for an RD403 copy that had trained 16 times the batches as a fix that learns better.
    """
    a_known = [v for v in a if v is not None]
    b_known = [v for v in b if v is not None]
    if not a_known or not b_known:
        return LOSS_NOT_MEASURED, False
    if any(not math.isfinite(v) for v in b_known):
        return f"original {median(a_known):.4g}, patched not finite", True
    ma, mb = median(a_known), median(b_known)
    diverged = math.isfinite(ma) and ma > 0 and mb > DIVERGE_FACTOR * ma
    sa, sb = [s for s in a_steps if s], [s for s in b_steps if s]
    if not (sa and sb):
        return f"original {ma:.4g}, patched {mb:.4g} (median final loss)", diverged
    return (
        f"original {ma:.4g} at step {median(sa):.0f}, patched {mb:.4g} at step {median(sb):.0f} "
        "of its epoch (median final loss: a divergence check, not a comparison of learning)",
        diverged,
    )


def measure(
    item: Verified, candidate: Candidate, on_cpu: bool, budget_option: str = "--verify-budget"
) -> None:
    """Fills ``item``'s measurement and status from its candidate's runs; ``budget_option`` is
    the option that bounded the verification's budget (what a reason says to raise)."""
    item.copy = str(candidate.script)
    item.runs = [asdict(r) for r in candidate.runs]
    pairs = candidate.pairs()
    item.pairs = len(pairs)
    item.samples_per_s_a = [float(a.samples_per_s or 0.0) for a, _ in pairs]
    item.samples_per_s_b = [float(b.samples_per_s or 0.0) for _, b in pairs]
    item.cpu_label = cpu_label(item.rules) if on_cpu else None
    failed = candidate.failed
    if failed is not None:
        item.status, item.error = Status.FAILED, failed.error
        return
    if len(pairs) < MIN_PAIRS:
        item.status = Status.NOT_VERIFIABLE
        item.reason = _unmeasured(candidate, len(pairs), budget_option)
        return
    result = paired_speedup(item.samples_per_s_a, item.samples_per_s_b)
    item.measured = round(result.ratio, 4)
    item.low, item.high = round(result.low, 4), round(result.high, 4)
    item.measured_text = format_ratio(result, digits=2) + (
        f" ({item.cpu_label})" if item.cpu_label else ""
    )
    item.loss, diverged = loss_verdict(
        [a.final_loss for a, _ in pairs], [b.final_loss for _, b in pairs],
        [a.loss_step for a, _ in pairs], [b.loss_step for _, b in pairs],
    )  # fmt: skip
    ratios = [b / a for a, b in zip(item.samples_per_s_a, item.samples_per_s_b, strict=True)]
    bounds = sign_interval(ratios, result.level)
    if bounds is None:
        item.status = Status.UNSAFE if diverged else Status.NOT_VERIFIABLE
        item.reason = (
            f"{TOO_FEW_PAIRS}: {len(pairs)} (a 90% interval needs {DECISIVE_PAIRS}; "
            f"raise {budget_option})"
        )
        return
    item.sign_low, item.sign_high = round(bounds[0], 4), round(bounds[1], 4)
    # Both intervals must clear 1: the paired timer's bootstrap and the distribution-free one.
    low, high = min(result.low, bounds[0]), max(result.high, bounds[1])
    item.status = status_of(low, high, diverged)


def sign_interval(ratios: Sequence[float], level: float = 0.90) -> tuple[float, float] | None:
    """The distribution-free interval of the median of ``ratios``: ``[r(k), r(n + 1 - k)]`` of
    the sorted ratios, with the largest ``k`` whose coverage ``1 - 2 P(Binomial(n, 1/2) < k)`` is
    at least ``level`` (the sign test's interval: Conover, *Practical Nonparametric Statistics*,
    3rd ed., Wiley 1999, section 3.2). None when even ``k = 1`` covers less: at 90%, fewer than
    ``DECISIVE_PAIRS`` pairs. (A bootstrap percentile interval of 2 pairs is their range, which
    holds the median only half the time.)"""
    n = len(ratios)
    ordered = sorted(ratios)
    best = None
    for k in range(1, n // 2 + 1):
        tail = sum(math.comb(n, i) for i in range(k)) / 2**n
        if 1.0 - 2.0 * tail < level:
            break
        best = k
    return None if best is None else (ordered[best - 1], ordered[n - best])


def status_of(low: float, high: float, diverged: bool) -> Status:
    """The status of a measured fix: unsafe when its loss diverged; confirmed when the whole
    interval is above 1, slower when it is below 1, else within noise."""
    if diverged:
        return Status.UNSAFE
    if low > 1.0:
        return Status.CONFIRMED
    if high < 1.0:
        return Status.SLOWER
    return Status.WITHIN_NOISE


def _unmeasured(candidate: Candidate, pairs: int, budget_option: str) -> str:
    """Why a candidate that did not fail has fewer than ``MIN_PAIRS`` pairs (over budget: raise
    ``budget_option``)."""
    if candidate.interrupted:
        return "interrupted (Ctrl-C or a stop signal)"
    short = next((r for r in candidate.runs if r.ran_out), None)
    if short is not None:
        side = "the original" if short.arm == "A" else "the copy"
        return f"not measured: {side}'s {short.error}"
    original: Run | None = next((r for r in candidate.arm("A") if r.samples_per_s is None), None)
    if original is not None:
        return f"the original failed in its verification run: {original.error}"
    need = ""
    if candidate.budget_note is not None:
        need_s, left_s = candidate.budget_note
        need = f": the rest needs about {need_s:.0f} s, {left_s:.0f} s of the budget was left"
    return f"{OVER_BUDGET} ({pairs} of {MIN_PAIRS} A/B pairs run{need}; raise {budget_option})"
