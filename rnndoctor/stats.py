"""Shared pure math: step-time statistics, padding arithmetic and exact bucket boundaries.

Pure Python: no TensorFlow, no numpy, no I/O. The one module that both the capture layer and the
rules import for arithmetic, so that a percentile or a padded fraction is computed one way
everywhere. Used by the step window (``percentile``), RD501 (padding waste) and RD502
(global-max padding), and by the capture to fill ``SequenceInput.per_batch_padded_fraction``.

The cost model: an RNN step costs the same for a valid and for
a padded timestep (the generic while loop runs every step; cuDNN reads every step of the padded
tensor too), so the compute of one training step grows linearly with
``batch_size x padded_length``. The work of one pass over the data is then proportional to the
**padded timesteps**, the sum over batches of ``rows x padded length``, and the estimated speedup
of a change is ``padded timesteps now / padded timesteps after``.

After bucketing, ``tf.data.Dataset.bucket_by_sequence_length`` (TF 2.21,
``tensorflow/python/data/ops/dataset_ops.py``) puts a sequence of length ``n`` into bucket ``i``
when ``boundaries[i-1] <= n < boundaries[i]``, fills each batch with the next ``batch_size``
sequences of that bucket (in the shuffled order) and pads the batch to its own longest sequence
(``pad_to_bucket_boundary=False``, the default). A batch is modelled as ``batch_size``
independent draws from the bucket's sampled length distribution, so the expected padded length
of a batch is the expected maximum of those draws, computed exactly:

``E[max of B draws] = v_j - sum_{l<j} (v_{l+1} - v_l) * (F(v_l))^B``

over the bucket's sorted distinct lengths ``v_i..v_j`` with empirical CDF ``F``. The boundaries
that minimise the expected padded timesteps are found exactly by dynamic programming over the
sorted distinct lengths (buckets are intervals of lengths); each bucket's last, partial batch
is not modelled in the padded timesteps, and counted as a step of its own by
:func:`bucketed_batches`.
"""

from __future__ import annotations

import itertools
import math
import random
import statistics
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

# bucket_by_sequence_length boundaries suggested at most: the issue asks for "4 to 8 of them";
# past 8, each extra bucket holds few sequences per epoch and adds a padded shape to trace.
MAX_BOUNDARIES = 8
# Fewer boundaries are preferred while they give up less than this much padded fraction
# (an absolute difference, 0.01 = one percentage point) against the best with MAX_BOUNDARIES.
BOUNDARY_GAIN_MIN_FRACTION = 0.01


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-quantile (0 <= q <= 1) of ``values`` by linear interpolation between the
    closest ranks (numpy's default ``linear`` method; ``statistics.quantiles`` ``inclusive``).

    Raises:
        ValueError: ``values`` is empty, or ``q`` is outside [0, 1].
    """
    if not values:
        raise ValueError("percentile of no values")
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"q must be in [0, 1], not {q}")
    if len(values) == 1 or q == 0.0:
        return float(min(values))
    if q == 1.0:
        return float(max(values))
    # quantiles(n=1000) gives the cut points at 0.001 .. 0.999; q is a multiple of 0.001 in use.
    cuts = statistics.quantiles(values, n=1000, method="inclusive")
    return float(cuts[round(q * 1000) - 1])


@dataclass(frozen=True)
class LengthDistribution:
    """Valid lengths as sorted distinct ``values`` (timesteps) and their ``counts`` (sequences).

    Raises:
        ValueError: the lists differ in length, a count is not positive, or values are not
            strictly increasing.
    """

    values: tuple[int, ...]
    counts: tuple[int, ...]

    def __post_init__(self) -> None:
        if len(self.values) != len(self.counts):
            raise ValueError("values and counts differ in length")
        if any(c <= 0 for c in self.counts):
            raise ValueError("counts must be positive")
        if any(b <= a for a, b in zip(self.values, self.values[1:], strict=False)):
            raise ValueError("values must be strictly increasing")

    @classmethod
    def of(cls, lengths: Iterable[int]) -> LengthDistribution:
        """The distribution of a list of per-sequence lengths."""
        counted = sorted(Counter(int(n) for n in lengths).items())
        return cls(tuple(v for v, _ in counted), tuple(c for _, c in counted))

    @property
    def sequences(self) -> int:
        return sum(self.counts)

    @property
    def valid_steps(self) -> int:
        """Valid (unpadded) timesteps over all sequences."""
        return sum(v * c for v, c in zip(self.values, self.counts, strict=True))


def padded_fraction(valid_steps: int, padded_steps: float) -> float:
    """``1 - valid / padded``: the share of computed timesteps that are padding, in [0, 1].

    Raises:
        ValueError: ``padded_steps`` is not positive or is smaller than ``valid_steps``.
    """
    if padded_steps <= 0 or padded_steps + 1e-9 * padded_steps < valid_steps:
        raise ValueError(f"padded steps {padded_steps} < valid steps {valid_steps}")
    return max(0.0, 1.0 - valid_steps / padded_steps)


def most_common_batch_size(batch_sizes: Sequence[int]) -> int:
    """The most common rows per sampled batch (the training batch size), the smallest on a tie.

    Raises:
        ValueError: ``batch_sizes`` is empty.
    """
    if not batch_sizes:
        raise ValueError("no batch sizes")
    return max(sorted(set(batch_sizes)), key=list(batch_sizes).count)


def padded_steps(padded_lengths: Sequence[int], batch_sizes: Sequence[int]) -> int:
    """Timesteps computed for sampled batches: sum of ``rows x padded length`` over batches."""
    if len(padded_lengths) != len(batch_sizes):
        raise ValueError("padded_lengths and batch_sizes differ in length")
    return sum(int(t) * int(b) for t, b in zip(padded_lengths, batch_sizes, strict=True))


def _interval_costs(dist: LengthDistribution, batch_size: int) -> list[list[float]]:
    """``cost[i][j]``: expected padded timesteps of the bucket holding lengths ``i..j``
    (indices into ``dist.values``): its sequence count times the expected batch maximum.

    For a fixed first index ``i``, with ``a_l`` the count of sequences of lengths ``i..l`` and
    ``Q_j = sum_{l<j} (v_{l+1} - v_l) (a_l / a_j)^B``, the expected maximum is ``v_j - Q_j`` and
    ``Q_{j+1} = (a_j / a_{j+1})^B (Q_j + v_{j+1} - v_j)``: O(1) per interval, no overflow.
    """
    values, counts = dist.values, dist.counts
    m = len(values)
    costs = [[0.0] * m for _ in range(m)]
    for i in range(m):
        a = counts[i]
        q = 0.0
        costs[i][i] = a * values[i]
        for j in range(i + 1, m):
            a_next = a + counts[j]
            q = (a / a_next) ** batch_size * (q + values[j] - values[j - 1])
            a = a_next
            costs[i][j] = a * (values[j] - q)
    return costs


def expected_padded_steps(
    dist: LengthDistribution, boundaries: Sequence[int], batch_size: int
) -> float:
    """Expected padded timesteps of the sampled sequences once bucketed at ``boundaries``
    (``bucket_by_sequence_length`` semantics, batches padded to their own longest sequence).

    With no boundaries it is plain per-batch padding (``padded_batch`` on shuffled data).

    Raises:
        ValueError: ``batch_size`` < 1 or boundaries not strictly increasing.
    """
    if batch_size < 1:
        raise ValueError("batch_size must be >= 1")
    return sum(
        _bucket_cost([dist.values[k] for k in g], [dist.counts[k] for k in g], batch_size)
        for g in _bucket_groups(dist, boundaries)
        if g
    )


def _bucket_groups(dist: LengthDistribution, boundaries: Sequence[int]) -> list[list[int]]:
    """The indices of ``dist.values`` in each bucket of ``boundaries``: length ``n`` in bucket
    ``i`` where ``boundaries[i-1] <= n < boundaries[i]`` (``bucket_by_sequence_length``).

    Raises:
        ValueError: boundaries not strictly increasing.
    """
    if any(b <= a for a, b in zip(boundaries, boundaries[1:], strict=False)):
        raise ValueError("boundaries must be strictly increasing")
    groups: list[list[int]] = [[] for _ in range(len(boundaries) + 1)]
    for index, value in enumerate(dist.values):
        groups[sum(1 for b in boundaries if value >= b)].append(index)
    return groups


def bucketed_batches(
    dist: LengthDistribution, boundaries: Sequence[int], batch_size: int, sequences: int
) -> tuple[int, int]:
    """The batches of an epoch of ``sequences`` sequences, bucketed at ``boundaries``, and the
    buckets that hold any: ``bucket_by_sequence_length`` batches each bucket on its own and ends
    each in a partial batch (``tensorflow/python/data/experimental/ops/grouping.py``), so the
    epoch takes ``sum over buckets of ceil(n_i / batch_size)`` steps, ``n_i`` the bucket's share
    of ``dist`` times ``sequences``.

    Raises:
        ValueError: ``batch_size`` < 1 or boundaries not strictly increasing.
    """
    if batch_size < 1:
        raise ValueError("batch_size must be >= 1")
    total = dist.sequences
    shares = [sum(dist.counts[k] for k in g) / total for g in _bucket_groups(dist, boundaries) if g]
    return sum(math.ceil(round(sequences * q, 6) / batch_size) for q in shares), len(shares)


def _bucket_cost(values: Sequence[int], counts: Sequence[int], batch_size: int) -> float:
    """Expected padded timesteps of one bucket (the recurrence of :func:`_interval_costs`)."""
    a, q = counts[0], 0.0
    for j in range(1, len(values)):
        a_next = a + counts[j]
        q = (a / a_next) ** batch_size * (q + values[j] - values[j - 1])
        a = a_next
    return a * (values[-1] - q)


def optimal_boundaries(
    dist: LengthDistribution, batch_size: int, n_boundaries: int
) -> tuple[tuple[int, ...], float]:
    """The at most ``n_boundaries`` bucket boundaries with the least expected padded timesteps.

    Exact over all ways to split the sorted distinct lengths into contiguous buckets (dynamic
    programming, O(n_boundaries x distinct lengths^2)). A boundary is placed one above the longest
    length of the bucket below it.

    Returns:
        (boundaries, expected padded timesteps).

    Raises:
        ValueError: ``batch_size`` < 1, ``n_boundaries`` < 0 or an empty distribution.
    """
    return _optimal_per_count(dist, batch_size, n_boundaries)[-1]


def _optimal_per_count(
    dist: LengthDistribution, batch_size: int, max_boundaries: int
) -> list[tuple[tuple[int, ...], float]]:
    """Entry ``k``: the best boundaries with at most ``k`` of them, and their expected padded
    timesteps, for k = 0..max_boundaries (one dynamic programme for all k)."""
    if batch_size < 1 or max_boundaries < 0:
        raise ValueError("batch_size must be >= 1 and n_boundaries >= 0")
    m = len(dist.values)
    if m == 0:
        raise ValueError("no lengths")
    buckets = min(max_boundaries + 1, m)
    costs = _interval_costs(dist, batch_size)
    inf = float("inf")
    # best[k][j]: least cost of lengths 0..j in exactly k+1 buckets; cut[k][j]: where the last
    # bucket starts.
    best = [[inf] * m for _ in range(buckets)]
    cut = [[0] * m for _ in range(buckets)]
    best[0] = [costs[0][j] for j in range(m)]
    for k in range(1, buckets):
        previous, row, row_cut = best[k - 1], best[k], cut[k]
        for j in range(k, m):
            value, start = min((previous[i - 1] + costs[i][j], i) for i in range(k, j + 1))
            row[j], row_cut[j] = value, start
    results = []
    for limit in range(max_boundaries + 1):
        k = min(range(min(limit + 1, buckets)), key=lambda kk: (best[kk][m - 1], kk))
        cost, starts, j = best[k][m - 1], [], m - 1
        while k > 0:
            starts.append(cut[k][j])
            j, k = cut[k][j] - 1, k - 1
        results.append((tuple(dist.values[i - 1] + 1 for i in sorted(starts)), cost))
    return results


@dataclass(frozen=True)
class BucketPlan:
    """Suggested ``bucket_by_sequence_length`` settings and what they are expected to save.

    Attributes:
        boundaries: ``bucket_boundaries`` (timesteps).
        batch_sizes: ``bucket_batch_sizes`` (len(boundaries) + 1 entries, the current batch size).
        bucket_sequences: sampled sequences per bucket.
        valid_steps: valid timesteps of the sampled sequences.
        padded_steps_now: timesteps the sampled batches computed (rows x padded length).
        padded_steps_after: expected timesteps once bucketed.
        padded_fraction_now / padded_fraction_after: share of padding, in [0, 1].
        speedup: ``padded_steps_now / padded_steps_after`` (the linear cost model).
    """

    boundaries: tuple[int, ...]
    batch_sizes: tuple[int, ...]
    bucket_sequences: tuple[int, ...]
    valid_steps: int
    padded_steps_now: int
    padded_steps_after: float
    padded_fraction_now: float
    padded_fraction_after: float
    speedup: float


def plan_buckets(
    dist: LengthDistribution,
    batch_size: int,
    padded_steps_now: int,
    max_boundaries: int = MAX_BOUNDARIES,
    gain_min_fraction: float = BOUNDARY_GAIN_MIN_FRACTION,
) -> BucketPlan:
    """The fewest boundaries (up to ``max_boundaries``) whose expected padded fraction is within
    ``gain_min_fraction`` of the best that ``max_boundaries`` achieve, with the expected gain.

    Args:
        dist: the sampled valid lengths.
        batch_size: the batch size of training (rows per batch).
        padded_steps_now: timesteps the sampled batches computed (see :func:`padded_steps`).
        max_boundaries: most boundaries considered.
        gain_min_fraction: padded fraction an extra boundary must save to be worth it.

    Raises:
        ValueError: see :func:`optimal_boundaries` and :func:`padded_fraction`.
    """
    valid = dist.valid_steps
    options = _optimal_per_count(dist, batch_size, max_boundaries)
    best_fraction = padded_fraction(valid, options[-1][1])
    boundaries, after = next(
        (b, cost)
        for b, cost in options
        if padded_fraction(valid, cost) <= best_fraction + gain_min_fraction
    )
    per_bucket = [0] * (len(boundaries) + 1)
    for value, count in zip(dist.values, dist.counts, strict=True):
        per_bucket[sum(1 for b in boundaries if value >= b)] += count
    return BucketPlan(
        boundaries=boundaries,
        batch_sizes=(batch_size,) * (len(boundaries) + 1),
        bucket_sequences=tuple(per_bucket),
        valid_steps=valid,
        padded_steps_now=padded_steps_now,
        padded_steps_after=after,
        padded_fraction_now=padded_fraction(valid, padded_steps_now),
        padded_fraction_after=padded_fraction(valid, after),
        speedup=padded_steps_now / after,
    )


def padding_speedup_interval(
    dist: LengthDistribution,
    boundaries: Sequence[int],
    batch_size: int,
    padded_lengths: Sequence[int],
    batch_sizes: Sequence[int],
    level: float = 0.90,
    resamples: int = 200,
    seed: int = 0,
) -> tuple[float, float]:
    """A bootstrap percentile interval of the padding speedup ``padded steps now / expected
    padded steps at boundaries`` (RD501, RD502; ``boundaries`` empty: per-batch padding), over
    the sampling of the batches and sequences it was estimated from.

    Each resample draws the sampled batches with replacement (the padded timesteps now, per
    row) and as many sequences from the sampled length distribution (the expected padded
    timesteps after, per sequence), with ``random.Random(seed)``. The interval is of the
    estimate under its linear cost model; the model's own error (per-step costs that do not
    scale with length) is not in it.

    Raises:
        ValueError: ``batch_sizes`` and ``padded_lengths`` differ in length or are empty; see
            :func:`expected_padded_steps`.
    """
    _check_bootstrap(level, resamples)
    if not padded_lengths or len(padded_lengths) != len(batch_sizes):
        raise ValueError("need one padded length per sampled batch")
    rng = random.Random(seed)
    total = sum(dist.counts)
    cumulative = list(itertools.accumulate(dist.counts))
    batches = list(zip(padded_lengths, batch_sizes, strict=True))
    estimates = []
    for _ in range(resamples):
        drawn = rng.choices(batches, k=len(batches))
        rows = sum(b for _, b in drawn)
        now = sum(t * b for t, b in drawn) / rows
        counts = Counter(rng.choices(dist.values, cum_weights=cumulative, k=total))
        values = tuple(sorted(counts))
        resampled = LengthDistribution(values, tuple(counts[v] for v in values))
        after = expected_padded_steps(resampled, boundaries, batch_size) / total
        estimates.append(now / after)
    return _percentile_bounds(estimates, level)


# ---------------------------------------------------------------------------------------------
# Paired measurements: the median, a bootstrap interval of a
# median, and the result of a paired A/B timing that the probes and `--verify` share.
# ---------------------------------------------------------------------------------------------

# Consistency factor that makes the MAD estimate the standard deviation of normal data
# (1 / Phi^-1(3/4) = 1.4826; Rousseeuw & Croux, JASA 88(424), 1993; Leys et al., J. Exp. Soc.
# Psychol. 49(4), 2013).
MAD_NORMAL_SCALE = 1.4826


def median(values: Sequence[float]) -> float:
    """The median of ``values`` (the mean of the two middle values for an even count).

    Raises:
        ValueError: ``values`` is empty.
    """
    if not values:
        raise ValueError("median of no values")
    return float(statistics.median(values))


def mad(values: Sequence[float], *, scaled: bool = True) -> float:
    """The median absolute deviation from the median of ``values``.

    Args:
        values: the sample.
        scaled: multiply by :data:`MAD_NORMAL_SCALE`, so that for normal data the result
            estimates the standard deviation (Leys et al. 2013 use the scaled MAD in their
            "median +- 3 MAD" outlier rule).

    Raises:
        ValueError: ``values`` is empty.
    """
    centre = median(values)
    raw = median([abs(v - centre) for v in values])
    return raw * MAD_NORMAL_SCALE if scaled else raw


def _check_bootstrap(level: float, resamples: int) -> None:
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be in (0, 1), not {level}")
    if resamples < 1:
        raise ValueError(f"resamples must be >= 1, not {resamples}")


def _percentile_bounds(estimates: list[float], level: float) -> tuple[float, float]:
    """The ``(1 - level) / 2`` and ``(1 + level) / 2`` quantiles of bootstrap estimates."""
    tail = (1.0 - level) / 2.0
    return percentile(estimates, tail), percentile(estimates, 1.0 - tail)


def student_t_quantile(p: float, df: int) -> float:
    """The ``p``-quantile of Student's t with ``df`` degrees of freedom, by the Cornish-Fisher
    expansion of Abramowitz & Stegun, "Handbook of Mathematical Functions" (1964), 26.7.5, from
    the normal quantile. Within 0.01 of the exact value for ``df >= 2`` at p = 0.95 (2.912
    against 2.920 at df = 2; 2.132 at df = 4 and 1.729 at df = 19, both exact to 3 places).

    Raises:
        ValueError: ``p`` outside (0, 1) or ``df`` < 1.
    """
    if not 0.0 < p < 1.0 or df < 1:
        raise ValueError(f"need 0 < p < 1 and df >= 1, not p={p}, df={df}")
    z = statistics.NormalDist().inv_cdf(p)
    terms = (
        (z**3 + z) / 4,
        (5 * z**5 + 16 * z**3 + 3 * z) / 96,
        (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / 384,
        (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / 92160,
    )
    return z + sum(term / df**k for k, term in enumerate(terms, start=1))


def expanded_tail(level: float, n: int) -> float:
    """The tail probability of each side of the **expanded percentile interval** of ``n``
    values: Hesterberg, "What Teachers Should Know About the Bootstrap: Resampling in the
    Undergraduate Statistics Curriculum", The American Statistician 69(4), 2015, section 3.3.
    The plain percentile interval is too narrow in small samples (it ignores the
    ``sqrt(n / (n - 1))`` of the bootstrap's variance and uses z where t is due); the expanded
    one takes the bootstrap quantiles at ``Phi(-sqrt(n / (n - 1)) * t_{(1 + level) / 2, n - 1})``
    instead of ``(1 - level) / 2``. Rounded down to a multiple of 0.001 (:func:`percentile`'s
    ranks), i.e. outwards.

    Why (a simulation of the median of ``n`` log-normal pair ratios, 500 sets per ``n``, the
    2000 resamples of :func:`bootstrap_median_interval`): the plain 90% interval covered the
    true median 78% of the time at 4 pairs and 88-91% at 6, 8, 10, 14 and 20; the expanded one
    87% and 90-95%. At 3, 5 and 7 pairs the two are the same interval: the resampled medians of
    an odd number of pairs take few values, and both tails fall on the same ones (at 5 pairs,
    the range: 92% in the simulation, 93.75% exactly). No interval of a median reaches 90% with
    3 pairs: the widest, the smallest to the largest value, covers ``1 - 2 / 2**3`` = 75% (4
    pairs: 87.5%).

    Returns:
        A probability in [0, (1 - level) / 2]; ``(1 - level) / 2`` for ``n`` < 2.

    Raises:
        ValueError: ``level`` outside (0, 1).
    """
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be in (0, 1), not {level}")
    plain = (1.0 - level) / 2.0
    if n < 2:
        return plain
    stretch = math.sqrt(n / (n - 1)) * student_t_quantile(1.0 - plain, n - 1)
    tail = statistics.NormalDist().cdf(-stretch)
    return min(plain, math.floor(tail * 1000.0 + 1e-9) / 1000.0)


def bootstrap_median_interval(
    ratios: Sequence[float], level: float = 0.90, resamples: int = 2000, seed: int = 0
) -> tuple[float, float]:
    """A bootstrap interval of the median of ``ratios`` (one value per pair), expanded for the
    number of pairs so that it covers at its nominal ``level`` (:func:`expanded_tail`).

    The pairs are resampled with replacement ``resamples`` times with ``random.Random(seed)``;
    the interval is the ``t`` and ``1 - t`` quantiles of the resampled medians, with ``t`` =
    ``expanded_tail(level, len(ratios))``: the percentile interval of Efron & Tibshirani, "An
    Introduction to the Bootstrap" (Chapman & Hall, 1993), chapter 13, expanded as Hesterberg
    (2015) proposes (e.g. 0.8% and 99.2% for a 90% interval of 5 pairs, 2.6% and 97.4% of 10,
    3.8% and 96.2% of 20). Resampling whole pairs keeps whatever the two arms of a pair share
    (the machine's state at that moment) together. The same inputs and seed give the same
    interval on every run and platform (``Random.choices`` is deterministic for a seed).

    The quantiles use :func:`percentile`, whose ranks are multiples of 0.001: ``level`` should be
    a multiple of 0.002 (0.90, 0.95, 0.99 all are).

    Args:
        ratios: the per-pair values (e.g. time of A / time of B).
        level: the coverage of the interval, in (0, 1).
        resamples: bootstrap resamples.
        seed: the seed of the resampling.

    Returns:
        (low, high). A single pair gives (ratio, ratio).

    Raises:
        ValueError: no ratios, ``level`` outside (0, 1) or ``resamples`` < 1.
    """
    if not ratios:
        raise ValueError("bootstrap interval of no values")
    _check_bootstrap(level, resamples)
    values = [float(r) for r in ratios]
    rng = random.Random(seed)
    n = len(values)
    estimates = [statistics.median(rng.choices(values, k=n)) for _ in range(resamples)]
    tail = expanded_tail(level, n)
    return percentile(estimates, tail), percentile(estimates, 1.0 - tail)


def bootstrap_ratio_of_medians_interval(
    first: Sequence[float],
    second: Sequence[float],
    level: float = 0.90,
    resamples: int = 2000,
    seed: int = 0,
) -> tuple[float, float]:
    """A bootstrap percentile interval of ``median(second) / median(first)`` for two
    independent samples (e.g. the two halves of a series of step times).

    Each sample is resampled with replacement on its own (the two-sample bootstrap, Efron &
    Tibshirani 1993, chapter 8), then the percentile interval is taken as in
    :func:`bootstrap_median_interval`. Deterministic for a seed.

    Returns:
        (low, high).

    Raises:
        ValueError: an empty sample, a non-positive median of a resample of ``first``,
            ``level`` outside (0, 1) or ``resamples`` < 1.
    """
    if not first or not second:
        raise ValueError("ratio of medians of an empty sample")
    _check_bootstrap(level, resamples)
    a, b = [float(v) for v in first], [float(v) for v in second]
    if min(a) <= 0.0:
        raise ValueError("the first sample must be positive")
    rng = random.Random(seed)
    estimates = [
        statistics.median(rng.choices(b, k=len(b))) / statistics.median(rng.choices(a, k=len(a)))
        for _ in range(resamples)
    ]
    return _percentile_bounds(estimates, level)


@dataclass(frozen=True)
class Interval:
    """A measured figure with its bootstrap interval: what a decision rests on.

    Attributes:
        value: the point estimate (a median, or a median of paired ratios).
        low: the lower bound of the interval.
        high: the upper bound of the interval.
        level: the coverage of the interval, in (0, 1) (0.90 for a 90% interval).
        widen_factor: how much the interval was widened for a noisy machine (1.0: not at all;
            see ``rnndoctor.decide.widen``).
        no_interval: why the bounds are no measured interval but a span that keeps any
            decision from clearing (``"no interval: 2 pairs"``: ``rules/_measured.py:
            FEW_PAIRS_SPAN``); the figure is then quoted with this instead of its bounds.
            None: a measured interval.

    Raises:
        ValueError: ``low > high`` or ``level`` outside (0, 1).
    """

    value: float
    low: float
    high: float
    level: float = 0.90
    widen_factor: float = 1.0
    no_interval: str | None = None

    def __post_init__(self) -> None:
        if self.low > self.high:
            raise ValueError(f"interval low {self.low} > high {self.high}")
        if not 0.0 < self.level < 1.0:
            raise ValueError(f"level must be in (0, 1), not {self.level}")


@dataclass(frozen=True)
class PairedResult:
    """The outcome of a paired A/B measurement (interleaved bursts A B A B ...).

    Pair ``i`` is ``(a_values[i], b_values[i])``: the per-step time of the i-th burst of A and
    of the burst of B that followed it. **Direction**: ``ratio`` is the median over pairs of
    ``a_values[i] / b_values[i]``; timing the same work, ``ratio > 1`` means B is faster than A
    (B's speedup over A). Put the current setting in A and the candidate in B, so that the ratio
    reads as "the candidate is ratio x faster". When the arms do different work (batch b vs 2b),
    a step-time ratio is not a gain: convert it with ``rnndoctor.paired.throughput_ratio``.

    Attributes:
        median_a: median of ``a_values`` (in ``unit``).
        median_b: median of ``b_values`` (in ``unit``).
        ratio: median of the paired ratios ``a / b``.
        low: lower bound of the bootstrap percentile interval of ``ratio`` (Efron & Tibshirani
            1993), possibly widened (``widen_factor``).
        high: upper bound of that interval.
        pairs: number of pairs.
        level: coverage of the interval (0.90 for 90%).
        spread_a: (p90 - p10) / median of ``a_values``: the arm's own noise, relative.
        spread_b: the same for ``b_values``.
        a_values: per-step time of each burst of A (in ``unit``), in the order measured.
        b_values: per-step time of each burst of B (in ``unit``).
        a_steps: steps in each burst of A (burst time = ``a_values[i] * a_steps[i]``).
        b_steps: steps in each burst of B.
        unit: the unit of the per-arm values ("ms" for the paired timer).
        cut_short: why the measurement stopped before it had the steps and time it wanted
            (``None``: it had them).
        widen_factor: how much the interval was widened for a noisy machine (1.0: not at all).
    """

    median_a: float
    median_b: float
    ratio: float
    low: float
    high: float
    pairs: int
    level: float
    spread_a: float
    spread_b: float
    a_values: tuple[float, ...]
    b_values: tuple[float, ...]
    a_steps: tuple[int, ...]
    b_steps: tuple[int, ...]
    unit: str = "ms"
    cut_short: str | None = None
    widen_factor: float = 1.0

    def __post_init__(self) -> None:
        sizes = {len(self.a_values), len(self.b_values), len(self.a_steps), len(self.b_steps)}
        if sizes != {self.pairs}:
            raise ValueError(f"{self.pairs} pairs but samples of sizes {sorted(sizes)}")

    @property
    def interval(self) -> Interval:
        """The ratio and its interval, for ``rnndoctor.decide``."""
        return Interval(self.ratio, self.low, self.high, self.level, self.widen_factor)

    @property
    def steps_a(self) -> int:
        """Timed steps of A, all bursts."""
        return sum(self.a_steps)

    @property
    def steps_b(self) -> int:
        """Timed steps of B, all bursts."""
        return sum(self.b_steps)

    @property
    def total_a(self) -> float:
        """Timed time of A, all bursts (in ``unit``)."""
        return sum(v * n for v, n in zip(self.a_values, self.a_steps, strict=True))

    @property
    def total_b(self) -> float:
        """Timed time of B, all bursts (in ``unit``)."""
        return sum(v * n for v, n in zip(self.b_values, self.b_steps, strict=True))


def relative_spread(values: Sequence[float]) -> float:
    """``(p90 - p10) / median`` of ``values``: a robust, unit-free noise figure.

    Raises:
        ValueError: ``values`` is empty or its median is not positive.
    """
    centre = median(values)
    if centre <= 0.0:
        raise ValueError(f"relative spread needs a positive median, not {centre}")
    return (percentile(values, 0.90) - percentile(values, 0.10)) / centre


def _average_ranks(values: Sequence[float]) -> list[float]:
    """The ranks of ``values`` (1 for the smallest), ties given their average rank."""
    order = sorted(range(len(values)), key=values.__getitem__)
    ranks = [0.0] * len(values)
    start = 0
    while start < len(order):
        end = start
        while end + 1 < len(order) and values[order[end + 1]] == values[order[start]]:
            end += 1
        for index in order[start : end + 1]:
            ranks[index] = (start + end) / 2.0 + 1.0
        start = end + 1
    return ranks


@dataclass(frozen=True)
class ChangePoint:
    """The most likely single change in level of a series (Pettitt's test).

    Attributes:
        split: how many values come before the change (the series' ``[:split]`` and
            ``[split:]``), in ``[1, n - 1]``.
        statistic: Pettitt's ``K = max_t |U_t|``.
        p_value: its approximate significance, ``2 exp(-6 K^2 / (n^3 + n^2))``, at most 1.
    """

    split: int
    statistic: float
    p_value: float


def pettitt_change_point(values: Sequence[float]) -> ChangePoint:
    """Pettitt's non-parametric test for one change in level (Pettitt, "A non-parametric approach
    to the change-point problem", Applied Statistics 28(2), 1979, 126-135).

    ``U_t = sum_{i<=t} sum_{j>t} sign(x_i - x_j)``, computed from the ranks ``r`` as
    ``U_t = 2 sum_{i<=t} r_i - t (n + 1)``; the change is at the ``t`` of the largest ``|U_t|``.
    The test takes the values as independent: correlated neighbours (a wandering pace) make
    small p-values more frequent than their level.
    The p-value is Pettitt's approximation (his equation 2.5), conservative for p <= 0.5. It
    corrects for the choice of ``t`` among the ``n - 1`` places a change could be, which a test
    of the two parts at the chosen place (a bootstrap of their medians) does not.

    Raises:
        ValueError: fewer than 2 values.
    """
    n = len(values)
    if n < 2:
        raise ValueError(f"a change point needs 2 values at least, not {n}")
    ranks = _average_ranks(values)
    best, split, running = -1.0, 1, 0.0
    for t in range(1, n):
        running += ranks[t - 1]
        u = abs(2.0 * running - t * (n + 1))
        if u > best:
            best, split = u, t
    p_value = min(1.0, 2.0 * math.exp(-6.0 * best * best / (n**3 + n**2)))
    return ChangePoint(split, best, p_value)
