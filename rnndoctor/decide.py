"""Decisions on intervals: when a measured figure may fire a finding, and how it is quoted.

A measured rule fires at warning or error only when the whole
interval of its figure clears the rule's cut-off (RD301: the lower bound of the throughput ratio
>= 1.5x); when only the median clears it, the finding is ``info`` and says "inconclusive: 1.6x
(90% interval 1.2–1.9x)"; when the median does not clear it, there is no finding (under load:
unless a pair measured past the cut-off, or the pairs' bound with the load's bias taken out
reaches it, see :func:`decide`). The cut-offs
stay where the rules have them; only the evidence a decision needs is stronger. Every measured
gain is quoted with its interval, in the one format of :func:`format_ratio` and
:func:`format_share`.

On a noisy machine (``rnndoctor.machine``) the interval is widened first (:func:`widen`), so a
finding that rests on a noisy phase becomes inconclusive rather than flipping between runs.

Pure Python.
"""

from __future__ import annotations

import dataclasses
import enum
from typing import Literal, TypeVar

from rnndoctor.stats import Interval, PairedResult

Evidence = TypeVar("Evidence", Interval, PairedResult)
Kind = Literal["ratio", "share"]


class Decision(enum.Enum):
    """Where an interval stands against a rule's cut-off."""

    CLEARS = "clears"
    """The whole interval is on the finding's side of the cut-off: it may fire at its severity."""
    INCONCLUSIVE = "inconclusive"
    """Only the point estimate is (or, under load, a measured pair, or a bound with the load's
    bias taken out): the finding is ``info`` and says "inconclusive: ..."."""
    BELOW = "below"
    """The point estimate is not: no finding."""


def as_interval(evidence: Interval | PairedResult) -> Interval:
    """The interval of ``evidence`` (a paired result's ratio, or an interval as it is).

    Raises:
        TypeError: ``evidence`` is neither.
    """
    if isinstance(evidence, PairedResult):
        return evidence.interval
    if isinstance(evidence, Interval):
        return evidence
    raise TypeError(f"expected an Interval or a PairedResult, not {type(evidence).__name__}")


def decide(
    evidence: Interval | PairedResult,
    cutoff: float,
    *,
    higher_is_worse: bool,
    measured: Interval | None = None,
) -> Decision:
    """Decide a measured rule on the interval of its figure.

    Args:
        evidence: the figure and its interval (a :class:`PairedResult` is decided on its
            ``ratio``; convert a batch-size result with ``rnndoctor.paired.throughput_ratio``
            first).
        cutoff: the rule's cut-off, unchanged (e.g. 1.5 for RD301's throughput ratio). A bound
            equal to the cut-off clears it (the rules' cut-offs read ">=").
        higher_is_worse: True when the finding fires on values at or above the cut-off (a gain
            to be had, a share of time lost); False when it fires at or below it.
        measured: the same figure as its pairs measured it, before ``evidence`` was widened for
            a noisy machine (its bounds: the bootstrap interval, or the pairs' extremes when
            there are too few for one; where the rule models which way the load biases the
            figure, the bound on that side moved to the figure with the bias taken out, e.g.
            RD301's and RD403's ``rnndoctor.dispatch.unloaded_ratio``); None when the rule
            does not have it.

    Returns:
        CLEARS when the whole interval clears the cut-off, INCONCLUSIVE when only the point
        estimate does, BELOW otherwise. Under load (``evidence.widen_factor`` > 1) also
        INCONCLUSIVE when the median falls short but ``measured`` reaches the cut-off: there
        the median itself is biased by the load (``rules/_measured.py: widen_ratio``), while
        a pair measured past the cut-off is a fact (the demo's RD301 in a loaded run: 1.49x,
        its 2 pairs 1.12x and 1.86x, gave no finding where quiet runs warned at 1.8–1.9x), and
        so, by the rule's model of the bias, is a bound with that bias taken out (RD403 on
        tests/scripts/fit_loop_predict.py under load: 1.13–1.15x, its pairs' upper bound
        below the cut-off, where quiet runs warned at 1.29–1.40x). The
        widened interval cannot serve for this: its floor (value / factor to value x factor)
        reaches every cut-off within the load factor, a 0.8x ratio's included.
    """
    interval = as_interval(evidence)
    pairs = measured if interval.widen_factor > 1.0 else None  # read under load only
    if higher_is_worse:
        near, value = interval.low, interval.value
        if near >= cutoff:
            return Decision.CLEARS
        reached = value >= cutoff or (pairs is not None and pairs.high >= cutoff)
        return Decision.INCONCLUSIVE if reached else Decision.BELOW
    near, value = interval.high, interval.value
    if near <= cutoff:
        return Decision.CLEARS
    reached = value <= cutoff or (pairs is not None and pairs.low <= cutoff)
    return Decision.INCONCLUSIVE if reached else Decision.BELOW


def _level_text(level: float) -> str:
    return f"{round(level * 100.0, 1):g}%"


def format_ratio(evidence: Interval | PairedResult, *, digits: int = 1) -> str:
    """A ratio with its interval: ``1.6x (90% interval 1.2–1.9x)`` (an en dash between bounds),
    ``1.6x (90% interval 0.9–2.3x, widened 2.00x for the noisy machine)`` where it was widened;
    ``3.8x (no interval: 2 pairs)`` where the bounds are no measured interval
    (``Interval.no_interval``)."""
    i = as_interval(evidence)
    return f"{i.value:.{digits}f}x ({ratio_interval_words(i, digits=digits)})"


def ratio_interval_words(evidence: Interval | PairedResult, *, digits: int = 1) -> str:
    """A ratio's interval alone, as :func:`format_ratio` quotes it in brackets: ``90% interval
    1.2–1.9x`` (``, widened 2.00x for the noisy machine``), or why there is none."""
    i = as_interval(evidence)
    if i.no_interval is not None:
        return i.no_interval
    return f"{_level_text(i.level)} interval {i.low:.{digits}f}–{i.high:.{digits}f}x{_widened(i)}"


def _widened(i: Interval) -> str:
    """``, widened 2.06x for the noisy machine`` where the interval was (:func:`widen`), so
    that a reader can tell its width from the pairs' own (a new user's RD403 quoted "0–71%"
    beside pairs of 0.94–1.17x, 13% at most); else ""."""
    if i.widen_factor <= 1.0:
        return ""
    return f", widened {i.widen_factor:.2f}x for the noisy machine"


def format_share(evidence: Interval | PairedResult, *, digits: int = 0) -> str:
    """A share (a fraction in [0, 1]) with its interval: ``44% (90% interval 31–52%)``.

    A share cannot leave [0, 1], but its interval, mapped from a ratio's and widened for a
    noisy machine (e.g. RD403's ``1 - 1 / r`` with ``r`` widened to 0.001 on the log scale), can
    ("−97718–124%", issue 11): the shown bounds (and the point) are clipped to 0–100% and the
    text says so, ``12% (90% interval 0–100%, clipped to the share's range 0–100%)``. Display
    only: :func:`decide` reads the interval as it is, so a clipped interval decides as before
    (a cut-off inside (0, 1) is cleared by a clipped bound exactly when by the raw one)."""
    i = as_interval(evidence)

    def pct(x: float) -> str:
        return f"{min(1.0, max(0.0, x)) * 100.0:.{digits}f}"

    if i.no_interval is not None:
        return f"{pct(i.value)}% ({i.no_interval})"

    clipped = min(i.low, i.value) < 0.0 or max(i.high, i.value) > 1.0
    return (
        f"{pct(i.value)}% ({_level_text(i.level)} interval {pct(i.low)}–{pct(i.high)}%"
        + _widened(i)
        + (", clipped to the share's range 0–100%" if clipped else "")
        + ")"
    )


def describe(decision: Decision, evidence: Interval | PairedResult, *, kind: Kind) -> str:
    """The figure as a finding quotes it: ``1.6x (90% interval 1.2–1.9x)`` when it clears,
    ``inconclusive: 1.6x (90% interval 1.2–1.9x)`` when only its median does, and
    ``below the cut-off: ...`` (for logs; BELOW gives no finding)."""
    text = format_ratio(evidence) if kind == "ratio" else format_share(evidence)
    if decision is Decision.INCONCLUSIVE:
        return "inconclusive: " + text
    if decision is Decision.BELOW:
        return "below the cut-off: " + text
    return text


def widen(evidence: Evidence, factor: float, *, kind: Kind = "ratio") -> Evidence:
    """Widen an interval around its point estimate by ``factor`` (>= 1), for a noisy machine.

    Each bound's distance from the point estimate is multiplied by ``factor``:

    - ``kind="ratio"``: on the log scale, ``low' = value * (low / value) ** factor`` (and so for
      ``high``), so a ratio's interval stays positive and widens alike in both directions
      (1.6x with 1.2–1.9x widened by 2 gives 0.9–2.26x);
    - ``kind="share"``: linearly, ``low' = value - factor * (value - low)``, clamped to [0, 1].

    The factor comes from the measured foreign load (``rnndoctor.machine.MachineLoad
    .widen_factor``); the widened result records the product of all factors applied in
    ``widen_factor``, so the report can say by how much.

    Raises:
        ValueError: ``factor`` < 1, or a ratio interval with a bound or value that is not
            positive.
    """
    if factor < 1.0:
        raise ValueError(f"a widening factor must be >= 1, not {factor}")
    if factor == 1.0:
        return evidence
    i = as_interval(evidence)
    if kind == "ratio":
        if min(i.value, i.low) <= 0.0:
            raise ValueError("a ratio interval must be positive to widen on the log scale")
        low = i.value * (i.low / i.value) ** factor
        high = i.value * (i.high / i.value) ** factor
    else:
        low = max(0.0, i.value - factor * (i.value - i.low))
        high = min(1.0, i.value + factor * (i.high - i.value))
    return dataclasses.replace(
        evidence, low=low, high=high, widen_factor=evidence.widen_factor * factor
    )
