"""The steps_per_execution probe's arithmetic (RD403, Bounds), in one place for the rule and the
probe that feeds it.

The probe times the compute-only step at ``steps_per_execution`` 1 and N in interleaved bursts;
``r`` is the paired ratio step at 1 / step at N (``probes.spe_probe[1].paired``). With a fixed
host cost ``d`` per call of the train function, the compute-only step is ``c + d`` at 1 and
``c + d / N`` at N, so:

- a model compiled with 1 step per call saves ``1 - 1 / r`` of the compute-only step at 1 by
  running N per call;
- a model compiled with N > 1 still pays ``(r - 1) / (N - 1)`` of the compute-only step at N
  per step, the most any larger value could save.

Either share is of the compute-only step; times :func:`real_scale` (the compute-only step's
share of the real step) it is a share of the job's step, the figure RD403 decides on. Both are
increasing in ``r``, so a share cut-off stands for one ratio (:func:`ratio_at_share`): the probe
reads it to decide whether its pairs need a second stage (``capture/probes.py: _spe_probe``).

Under load (:func:`unloaded_ratio`): the same model, a fixed host cost paid once per call and a
compute cost per unit of work, says which way a busy neighbour biases the ratio. On a 2-core
machine one busy core slows a kernel that spreads over both cores by up to 2x, and the one
Python thread that pays the host cost far less, so the ratio reads low: under one core of load
tests/scripts/fit_loop_predict.py's RD403 ratio fell from 1.29–1.40x (idle) to 1.13–1.15x, and
the demo's batch-size ratio from 1.8–1.9x to 1.49x (the README's under-load table at 68a0856).
Taking the load's slowdown out of the compute alone maps 1.14x to 1.28x and 1.49x to 1.84x, near
the idle figures. A rule reads that bound under load only, so that a figure the load pushed below
its cut-off is "inconclusive", not "no finding" (issue 11: under load no finding disappears).

Pure Python: facts in, floats out.
"""

from __future__ import annotations

import math

from rnndoctor.facts import MachinePhase, ProbeFacts
from rnndoctor.paired import INTERVAL_PAIRS


def uses_pairs(probes: ProbeFacts) -> bool:
    """Whether the compute-only probe's pairs give the compute-only step's share of the real
    step: they exist, number at least :data:`rnndoctor.paired.INTERVAL_PAIRS` (the fewest that
    give an interval) and agree with the window (``probes.inconsistent`` is None)."""
    paired = probes.compute_paired
    return (paired is not None and paired.ratio > 0 and paired.pairs >= INTERVAL_PAIRS
            and probes.inconsistent is None)  # fmt: skip


def real_scale(probes: ProbeFacts, compute_ms: float, step_ms: float) -> float:
    """The compute-only step as a share of the real step (the window's: input wait and the
    callbacks' hooks included), in (0, 1].

    Where :func:`uses_pairs`: from the compute-only probe's pairs (``probes.compute_paired``:
    A = the real step without callbacks over B = the compute-only step, timed side by side),
    ``A / (A + callbacks) / ratio``; else ``compute_ms`` (ms, the steps_per_execution probe's
    compute-only step) over the window's median ``step_ms`` (ms). At most 1: the compute-only
    step is part of the real step, so a probe timed slower than the window does not inflate
    a share (RD403, Bounds)."""
    if uses_pairs(probes):
        paired = probes.compute_paired
        real, host = paired.median_a_ms, probes.callback_ms or 0.0
        with_host = real / (real + host) if real > 0 else 1.0
        return min(1.0, with_host / paired.ratio)
    if step_ms <= 0:
        return 1.0
    return min(1.0, compute_ms / step_ms)


def share_at_ratio(ratio: float, scale: float, value: int, compiled: int) -> float:
    """The share of the real step at stake for a paired ratio ``ratio`` (step at 1 / step at
    ``value``) and :func:`real_scale` ``scale``: with ``compiled == 1`` what ``value`` steps per
    call save, ``scale * (1 - 1 / ratio)``; with ``compiled == value > 1`` what the model still
    pays per call, ``scale * (ratio - 1) / (value - 1)``, 0 below ``ratio == 1``."""
    if compiled > 1:
        return scale * max(0.0, ratio - 1.0) / (value - 1)
    return scale * (1.0 - 1.0 / ratio) if ratio > 0 else 0.0


def ratio_at_share(share: float, scale: float, value: int, compiled: int) -> float:
    """The paired ratio at which :func:`share_at_ratio` reaches ``share`` (the inverse, on the
    same arguments); ``math.inf`` where no ratio does (``share >= scale`` at ``compiled == 1``:
    the saving is at most the compute-only step's whole share)."""
    if scale <= 0:
        return math.inf
    if compiled > 1:
        return 1.0 + share * (value - 1) / scale
    if share >= scale:
        return math.inf
    return 1.0 / (1.0 - share / scale)


def compute_slowdown(load: MachinePhase | None) -> float:
    """How much other processes can have slowed the compute over a phase, >= 1: 1 on a quiet
    phase (or one not sampled); on a noisy one ``cpus / (cpus - foreign cores)`` (a kernel that
    spreads over every CPU gets at most the CPUs the others leave it: 2.0 on a 2-CPU machine
    with one busy core), at most the phase's ``widen_factor`` (``rnndoctor.machine
    .MachineLoad.widen_factor``: 1 + foreign cores, capped at 3)."""
    if load is None or not load.noisy or load.widen_factor <= 1.0:
        return 1.0
    left = load.cpus - load.foreign_cores
    bound = load.cpus / left if left > 0 else load.widen_factor
    return max(1.0, min(load.widen_factor, bound))


def unloaded_ratio(ratio: float, per: float, slowdown: float) -> float:
    """A paired ratio measured under load, as it would read had the load slowed only the
    compute, by ``slowdown`` (:func:`compute_slowdown`), and not the fixed host cost.

    The model: arm A pays a fixed host cost ``d`` once per unit of compute ``c``, arm B once
    per ``per`` units, so ``ratio = (c + d) / (c + d / per) = (1 + x) / (1 + x / per)`` with
    ``x = d / c``. That is RD403's step at 1 over the step at N (``per = N``) and RD301's
    samples/s ratio of batch ``k b`` over ``b`` (``per = k``: the step's fixed cost once per
    batch, the compute per sample). Under load ``c`` reads ``slowdown`` times its idle value,
    so the idle ``x`` is ``slowdown`` times the one measured: ``x = (ratio - 1) / (1 - ratio /
    per)``, then the ratio at ``slowdown x``. Outside ``1 < ratio < per`` (no fixed cost to
    amortise, or nothing but) the model says nothing and ``ratio`` comes back unchanged; never
    below ``ratio``.

    Raises:
        ValueError: ``per`` <= 1 or ``slowdown`` < 1.
    """
    if per <= 1.0 or slowdown < 1.0:
        raise ValueError(f"need per > 1 and slowdown >= 1, not {per} and {slowdown}")
    if not 1.0 < ratio < per:
        return ratio
    x = slowdown * (ratio - 1.0) / (1.0 - ratio / per)
    return max(ratio, (1.0 + x) / (1.0 + x / per))
