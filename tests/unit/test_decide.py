"""Decisions on intervals, their text, and widening under load (constructed intervals)."""

from __future__ import annotations

import pytest

from rnndoctor.decide import (
    Decision,
    as_interval,
    decide,
    describe,
    format_ratio,
    format_share,
    widen,
)
from rnndoctor.paired import paired_from_samples
from rnndoctor.stats import Interval


@pytest.mark.parametrize(
    ("interval", "expected"),
    [
        (Interval(1.8, 1.6, 2.0), Decision.CLEARS),
        (Interval(1.7, 1.5, 1.9), Decision.CLEARS),  # a bound on the cut-off clears it (>=)
        (Interval(1.6, 1.2, 1.9), Decision.INCONCLUSIVE),
        (Interval(1.5, 1.2, 1.9), Decision.INCONCLUSIVE),
        (Interval(1.4, 1.1, 1.7), Decision.BELOW),
        (Interval(1.0, 0.9, 1.1), Decision.BELOW),
    ],
)
def test_decide_when_higher_is_worse(interval, expected):
    assert decide(interval, 1.5, higher_is_worse=True) is expected


@pytest.mark.parametrize(
    ("interval", "expected"),
    [
        (Interval(0.6, 0.5, 0.7), Decision.CLEARS),
        (Interval(0.7, 0.6, 0.9), Decision.INCONCLUSIVE),
        (Interval(0.9, 0.7, 1.1), Decision.BELOW),
    ],
)
def test_decide_when_lower_is_worse(interval, expected):
    assert decide(interval, 0.8, higher_is_worse=False) is expected


def test_decide_on_a_paired_result_uses_its_ratio():
    result = paired_from_samples([20.0] * 5, [10.0] * 5)
    assert decide(result, 1.5, higher_is_worse=True) is Decision.CLEARS
    assert decide(result, 2.5, higher_is_worse=True) is Decision.BELOW


def test_decide_rejects_other_evidence():
    with pytest.raises(TypeError):
        decide((1.6, 1.2, 1.9), 1.5, higher_is_worse=True)  # type: ignore[arg-type]


def test_formats():
    assert format_ratio(Interval(1.6, 1.2, 1.9)) == "1.6x (90% interval 1.2–1.9x)"
    assert format_share(Interval(0.44, 0.31, 0.52)) == "44% (90% interval 31–52%)"
    assert format_ratio(Interval(1.234, 1.1, 1.3, level=0.95), digits=2) == (
        "1.23x (95% interval 1.10–1.30x)"
    )


def test_describe():
    interval = Interval(1.6, 1.2, 1.9)
    assert describe(Decision.INCONCLUSIVE, interval, kind="ratio") == (
        "inconclusive: 1.6x (90% interval 1.2–1.9x)"
    )
    assert describe(Decision.CLEARS, interval, kind="ratio") == "1.6x (90% interval 1.2–1.9x)"
    assert describe(Decision.BELOW, Interval(0.44, 0.31, 0.52), kind="share").startswith(
        "below the cut-off: 44%"
    )


def test_interval_checks():
    with pytest.raises(ValueError):
        Interval(1.0, 1.2, 1.1)
    with pytest.raises(ValueError):
        Interval(1.0, 0.9, 1.1, level=1.0)


def test_widen_a_ratio_on_the_log_scale():
    wide = widen(Interval(1.6, 1.2, 1.9), 2.0)
    assert wide.value == 1.6
    assert wide.low == pytest.approx(1.6 * 0.75**2)  # 0.9
    assert wide.high == pytest.approx(1.6 * (1.9 / 1.6) ** 2)
    assert wide.widen_factor == 2.0
    assert widen(wide, 1.5).widen_factor == 3.0
    assert widen(Interval(1.6, 1.2, 1.9), 1.0) == Interval(1.6, 1.2, 1.9)


def test_widening_turns_a_clear_finding_inconclusive():
    clear = Interval(1.8, 1.6, 2.0)
    assert decide(clear, 1.5, higher_is_worse=True) is Decision.CLEARS
    assert decide(widen(clear, 2.0), 1.5, higher_is_worse=True) is Decision.INCONCLUSIVE


def test_under_load_a_measured_pair_past_the_cut_off_is_inconclusive_with_the_median_short():
    # the demo's RD301 in a loaded run: 1.49x, its 2 pairs 1.12x and 1.86x, widened 1.98x
    pairs = Interval(1.49, 1.12, 1.86)
    loaded = widen(pairs, 1.98)
    assert decide(loaded, 1.5, higher_is_worse=True) is Decision.BELOW  # the median alone
    assert decide(loaded, 1.5, higher_is_worse=True, measured=pairs) is Decision.INCONCLUSIVE
    # quiet (not widened): the pairs change nothing, the median decides as before
    assert decide(pairs, 1.5, higher_is_worse=True, measured=pairs) is Decision.BELOW
    # under load, pairs that never reached the cut-off: no finding, however wide the widening
    short = Interval(0.8, 0.75, 0.85)
    assert decide(widen(short, 3.0), 1.5, higher_is_worse=True, measured=short) is (Decision.BELOW)
    # lower is worse: the pairs' low bound
    low = Interval(0.7, 0.45, 0.9)
    assert decide(widen(low, 1.5), 0.5, higher_is_worse=False, measured=low) is (
        Decision.INCONCLUSIVE
    )


def test_widen_a_share_linearly_within_0_and_1():
    wide = widen(Interval(0.44, 0.31, 0.52), 2.0, kind="share")
    assert (wide.low, wide.high) == pytest.approx((0.18, 0.60))
    edge = widen(Interval(0.9, 0.8, 0.95), 3.0, kind="share")
    assert edge.high == 1.0 and edge.low == pytest.approx(0.6)


def test_widen_a_paired_result_keeps_its_type():
    result = paired_from_samples([20.0, 21.0, 19.0, 20.5], [10.0, 10.0, 10.5, 9.5])
    wide = widen(result, 2.0)
    assert type(wide) is type(result)
    assert wide.widen_factor == 2.0 and wide.ratio == result.ratio
    assert wide.low <= result.low and wide.high >= result.high
    assert as_interval(wide).widen_factor == 2.0


def test_widen_rejects_bad_factors_and_ratios():
    with pytest.raises(ValueError):
        widen(Interval(1.6, 1.2, 1.9), 0.5)
    with pytest.raises(ValueError):
        widen(Interval(0.5, 0.0, 1.0), 2.0)


def test_a_share_interval_beyond_its_range_is_shown_clipped_and_decides_as_before():
    # RD403 under load (issue 11): 1 - 1 / r with r widened to 0.001 gave "−97718–124%"
    raw = Interval(0.12, -977.18, 1.24)
    assert format_share(raw) == "12% (90% interval 0–100%, clipped to the share's range 0–100%)"
    assert decide(raw, 0.2, higher_is_worse=True) is Decision.BELOW
    assert describe(Decision.INCONCLUSIVE, Interval(0.3, -0.5, 0.9), kind="share") == (
        "inconclusive: 30% (90% interval 0–90%, clipped to the share's range 0–100%)"
    )
    assert format_share(Interval(0.44, 0.31, 0.52)) == "44% (90% interval 31–52%)"  # no clip


def test_a_figure_of_too_few_pairs_is_quoted_as_no_interval_not_as_its_span():
    """A new user's RD301 read "inconclusive: 3.8x (90% interval 0.4–38.1x)" beside the probe's
    own "no interval: 2 pairs": the span that keeps a decision from clearing is no 90%
    interval, and is not quoted as one. It still decides: never CLEARS."""
    from rnndoctor.facts import Facts, PairedRatio, RunInfo
    from rnndoctor.rules import _measured as m

    paired = PairedRatio(ratio=3.81, low=3.7, high=3.9, level=0.9, pairs=2, median_a_ms=4.0,
                         median_b_ms=1.05, steps_a=4, steps_b=4)  # fmt: skip
    span = m.ratio_interval(Facts(run=RunInfo(script="t", argv=[], cwd=".")), paired)
    assert span.no_interval == "no interval: 2 pairs"
    assert format_ratio(span) == "3.8x (no interval: 2 pairs)"
    assert describe(decide(span, 1.5, higher_is_worse=True), span, kind="ratio") == (
        "inconclusive: 3.8x (no interval: 2 pairs)"
    )
    assert format_share(Interval(0.4, 0.04, 1.0, no_interval="no interval: 1 pair")) == (
        "40% (no interval: 1 pair)"
    )
    wide = widen(span, 2.0)  # widened for load, still no interval
    assert format_ratio(wide) == "3.8x (no interval: 2 pairs)"


def test_a_widened_interval_says_by_how_much():
    """A new user's RD403 quoted "4% (90% interval 0–71%)" beside pairs of 0.94–1.17x (a
    share of 13% at most): the interval had been widened for the noisy machine, and the text
    did not say so."""
    from rnndoctor.decide import format_ratio, format_share, widen

    ratio = widen(Interval(1.6, 1.2, 1.9), 2.0)
    assert (
        format_ratio(ratio) == "1.6x (90% interval 0.9–2.3x, widened 2.00x for the noisy machine)"
    )
    share = widen(Interval(0.2, 0.15, 0.25), 1.5, kind="share")
    assert format_share(share).endswith(
        "(90% interval 12–28%, widened 1.50x for the noisy machine)"
    )
    assert format_ratio(Interval(1.6, 1.2, 1.9)) == "1.6x (90% interval 1.2–1.9x)"
