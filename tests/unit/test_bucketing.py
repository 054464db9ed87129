"""rnndoctor/stats.py against brute force on the same lengths (pure: no TensorFlow)."""

from __future__ import annotations

import itertools
import random
from fractions import Fraction

import pytest

from rnndoctor import stats as bk


def _expected_max(lengths: list[int], batch: int) -> Fraction:
    """E[max of `batch` draws with replacement], by the definition sum v * P(max = v)."""
    n = len(lengths)
    total = Fraction(0)
    for v in sorted(set(lengths)):
        at_most = Fraction(sum(1 for x in lengths if x <= v), n)
        below = Fraction(sum(1 for x in lengths if x < v), n)
        total += v * (at_most**batch - below**batch)
    return total


def _brute_cost(lengths: list[int], boundaries: tuple[int, ...], batch: int) -> Fraction:
    """Expected padded timesteps: each bucket's sequences x its expected batch maximum."""
    cost = Fraction(0)
    edges = [float("-inf"), *boundaries, float("inf")]
    for lo, hi in itertools.pairwise(edges):
        bucket = [n for n in lengths if lo <= n < hi]
        if bucket:
            cost += len(bucket) * _expected_max(bucket, batch)
    return cost


def _brute_best(lengths: list[int], batch: int, k: int) -> tuple[Fraction, set[tuple[int, ...]]]:
    """The least cost over every set of at most k boundaries drawn from the useful positions
    (one above each distinct length), and every boundary set that reaches it."""
    candidates = [v + 1 for v in sorted(set(lengths))[:-1]]
    best, argbest = None, set()
    for size in range(k + 1):
        for boundaries in itertools.combinations(candidates, size):
            cost = _brute_cost(lengths, boundaries, batch)
            if best is None or cost < best:
                best, argbest = cost, {boundaries}
            elif cost == best:
                argbest.add(boundaries)
    return best, argbest


# Known lengths: two clusters and a tail. Batches of 4 rows, every batch padded to 24 steps.
KNOWN = [3, 3, 4, 4, 4, 5, 5, 6, 11, 12, 12, 12, 13, 14, 20, 24]
PADDED_LENGTHS = [24, 24, 24, 24]
BATCH_SIZES = [4, 4, 4, 4]


def test_padded_fraction_of_known_batches_is_exact():
    steps = bk.padded_steps(PADDED_LENGTHS, BATCH_SIZES)
    assert steps == 16 * 24
    fraction = bk.padded_fraction(sum(KNOWN), steps)
    assert fraction == pytest.approx(1 - Fraction(sum(KNOWN), 16 * 24))
    assert sum(KNOWN) == 152 and fraction == pytest.approx(232 / 384)


@pytest.mark.parametrize("k", [0, 1, 2, 3])
def test_suggested_boundaries_equal_the_brute_force_optimum(k):
    dist = bk.LengthDistribution.of(KNOWN)
    boundaries, cost = bk.optimal_boundaries(dist, 4, k)
    best, argbest = _brute_best(KNOWN, 4, k)
    assert cost == pytest.approx(float(best), rel=1e-12)
    assert boundaries in argbest
    assert float(_brute_cost(KNOWN, boundaries, 4)) == pytest.approx(cost, rel=1e-12)


def test_known_lengths_give_the_known_boundaries():
    # With two boundaries the clusters {3..6}, {11..14} and the tail {20, 24} separate.
    boundaries, _ = bk.optimal_boundaries(bk.LengthDistribution.of(KNOWN), 4, 2)
    assert boundaries == (7, 15)
    best, argbest = _brute_best(KNOWN, 4, 2)
    assert argbest == {(7, 15)}


@pytest.mark.parametrize("seed", range(6))
def test_random_length_sets_match_brute_force(seed):
    rng = random.Random(seed)
    lengths = [rng.randint(1, 14) for _ in range(rng.randint(5, 30))]
    batch = rng.choice([1, 2, 3, 8])
    k = rng.randint(0, 3)
    dist = bk.LengthDistribution.of(lengths)
    boundaries, cost = bk.optimal_boundaries(dist, batch, k)
    best, argbest = _brute_best(lengths, batch, k)
    assert cost == pytest.approx(float(best), rel=1e-12)
    assert boundaries in argbest or float(_brute_cost(lengths, boundaries, batch)) == (
        pytest.approx(float(best), rel=1e-12)
    )


def test_expected_padded_steps_matches_the_definition():
    dist = bk.LengthDistribution.of(KNOWN)
    for boundaries in [(), (7,), (7, 15), (5, 12, 21)]:
        got = bk.expected_padded_steps(dist, boundaries, 4)
        assert got == pytest.approx(float(_brute_cost(KNOWN, boundaries, 4)), rel=1e-12)


def test_plan_reports_fractions_and_speedup_from_the_same_steps():
    dist = bk.LengthDistribution.of(KNOWN)
    plan = bk.plan_buckets(dist, 4, bk.padded_steps(PADDED_LENGTHS, BATCH_SIZES))
    assert plan.padded_steps_now == 384 and plan.valid_steps == 152
    assert plan.padded_fraction_now == pytest.approx(232 / 384)
    assert plan.padded_fraction_after == pytest.approx(1 - 152 / plan.padded_steps_after)
    assert plan.speedup == pytest.approx(384 / plan.padded_steps_after)
    assert len(plan.batch_sizes) == len(plan.boundaries) + 1 and set(plan.batch_sizes) == {4}
    assert sum(plan.bucket_sequences) == len(KNOWN)
    # the chosen count is the fewest within BOUNDARY_GAIN_MIN_FRACTION of the best of 8
    best8 = bk.optimal_boundaries(dist, 4, bk.MAX_BOUNDARIES)[1]
    assert plan.padded_fraction_after <= bk.padded_fraction(152, best8) + 0.01
    fewer = bk.optimal_boundaries(dist, 4, len(plan.boundaries) - 1)[1]
    assert bk.padded_fraction(152, fewer) > bk.padded_fraction(152, best8) + 0.01


def test_one_length_needs_no_boundary_and_no_padding():
    dist = bk.LengthDistribution.of([7] * 10)
    boundaries, cost = bk.optimal_boundaries(dist, 4, 8)
    assert boundaries == () and cost == 70


def test_bad_inputs_raise():
    with pytest.raises(ValueError):
        bk.LengthDistribution((3, 2), (1, 1))
    with pytest.raises(ValueError):
        bk.padded_fraction(10, 5)
    with pytest.raises(ValueError):
        bk.optimal_boundaries(bk.LengthDistribution.of([1, 2]), 0, 1)


def test_padding_speedup_interval_covers_the_estimate_and_narrows_with_more_samples():
    """The bootstrap interval of RD501/RD502's estimate: around the point estimate, repeatable
    (fixed seed), a single point when nothing varies, and narrower from 16x the sample."""
    rng = random.Random(3)

    def sample(batches: int, batch: int = 32) -> tuple[bk.LengthDistribution, list, list]:
        lengths = [rng.randint(5, 80) for _ in range(batches * batch)]
        values = sorted(set(lengths))
        dist = bk.LengthDistribution(tuple(values), tuple(lengths.count(v) for v in values))
        return dist, [80] * batches, [batch] * batches  # padded to the global maximum

    dist, padded, sizes = sample(8)
    point = bk.padded_steps(padded, sizes) / bk.expected_padded_steps(dist, (), 32)
    low, high = bk.padding_speedup_interval(dist, (), 32, padded, sizes)
    assert low < point < high
    assert (low, high) == bk.padding_speedup_interval(dist, (), 32, padded, sizes)
    wide = high - low
    dist, padded, sizes = sample(128)
    low, high = bk.padding_speedup_interval(dist, (), 32, padded, sizes)
    point = bk.padded_steps(padded, sizes) / bk.expected_padded_steps(dist, (), 32)
    assert low < point < high and high - low < wide / 2
    low, high = bk.padding_speedup_interval(dist, (40,), 32, padded, sizes)
    assert low < bk.padded_steps(padded, sizes) / bk.expected_padded_steps(dist, (40,), 32) < high
    same = bk.LengthDistribution((80,), (64,))
    assert bk.padding_speedup_interval(same, (), 32, [80, 80], [32, 32]) == (1.0, 1.0)
    with pytest.raises(ValueError):
        bk.padding_speedup_interval(same, (), 32, [], [])


def test_the_training_batch_size_is_the_most_common_the_smallest_on_a_tie():
    # capture (per_batch_padded_fraction) and the rules (RD501, RD502) read this one function
    assert bk.most_common_batch_size([32, 32, 32, 7]) == 32
    assert bk.most_common_batch_size([32, 16]) == 16  # a tie: the smallest
    assert bk.most_common_batch_size([16, 8, 8, 16]) == 8  # set order would not decide this
    with pytest.raises(ValueError, match="no batch sizes"):
        bk.most_common_batch_size([])


def test_bucketed_batches_count_each_buckets_partial_batch():
    """Buckets of 3, 5 and 8 sequences in batches of 4 take 1 + 2 + 2 batches where one batch
    of 4 over the 16 would take 4; an epoch of twice the sequences doubles each bucket."""
    dist = bk.LengthDistribution((2, 5, 9), (3, 5, 8))
    assert bk.bucketed_batches(dist, (4, 8), 4, 16) == (5, 3)
    assert bk.bucketed_batches(dist, (4, 8), 4, 32) == (2 + 3 + 4, 3)
    assert bk.bucketed_batches(dist, (), 4, 16) == (4, 1)  # one bucket: the epoch's own batches
    assert bk.bucketed_batches(dist, (20, 30), 4, 16) == (4, 1)  # empty buckets add nothing
    with pytest.raises(ValueError):
        bk.bucketed_batches(dist, (8, 4), 4, 16)
