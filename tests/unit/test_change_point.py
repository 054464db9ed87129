"""Pettitt's change-point test (rnndoctor.stats.pettitt_change_point) against its definition."""

from __future__ import annotations

import math
import random

import pytest

from rnndoctor.stats import pettitt_change_point


def _brute_force(values: list[float]) -> tuple[int, float]:
    """Pettitt's U_t = sum_{i<=t} sum_{j>t} sign(x_i - x_j), straight from the paper's sum."""
    n, best, split = len(values), -1.0, 1
    for t in range(1, n):
        u = sum(
            (values[i] > values[j]) - (values[i] < values[j]) for i in range(t) for j in range(t, n)
        )
        if abs(u) > best:
            best, split = abs(u), t
    return split, float(best)


def test_the_rank_form_equals_the_double_sum_ties_included():
    rng = random.Random(3)
    for n in (2, 3, 7, 25):
        for _ in range(5):
            values = [float(rng.randint(0, 5)) for _ in range(n)]  # many ties
            point = pettitt_change_point(values)
            split, statistic = _brute_force(values)
            assert point.statistic == statistic
            assert point.split == split


def test_a_clean_step_is_found_where_it_is_with_a_small_p():
    # each level falls a little, so no place inside a level outscores the change itself
    values = [10.19 - 0.01 * i for i in range(20)] + [12.09 - 0.01 * i for i in range(10)]
    point = pettitt_change_point(values)
    assert point.split == 20
    assert point.statistic == 20 * 10  # every pair across the change: +1
    assert point.p_value == pytest.approx(2 * math.exp(-6 * 200**2 / (30**3 + 30**2)))
    assert point.p_value < 1e-3


def test_noise_without_a_change_is_not_significant():
    rng = random.Random(1)
    significant = sum(
        pettitt_change_point([rng.gauss(10, 1) for _ in range(60)]).p_value < 0.01
        for _ in range(200)
    )
    assert significant <= 4  # about 1% expected, the approximation being conservative


def test_a_constant_series_has_no_change_and_p_one():
    point = pettitt_change_point([5.0] * 12)
    assert point.statistic == 0.0 and point.p_value == 1.0


def test_too_few_values():
    with pytest.raises(ValueError):
        pettitt_change_point([1.0])
