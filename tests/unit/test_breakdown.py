"""The input-bound share and the step breakdown built from the paired compute-only probe
(``capture/probes.py: _breakdown``), on the figures of a real CI run of
tests/scripts/input_fast_pipeline.py: the arms' medians 5.85 and 4.42 ms (a 24% share read from
them), the pairs' median ratio 1.08 (an 8% share), the window's median step 4.54 ms."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from rnndoctor.capture.probes import _breakdown
from rnndoctor.facts import Facts, PairedRatio, ProbeFacts, RunInfo, StepTimes
from rnndoctor.rules._measured import share_interval


def _probes(ratio: float, real: float = 5.8457, compute: float = 4.4239) -> ProbeFacts:
    paired = PairedRatio(ratio=ratio, low=1.004, high=1.5195, pairs=5, median_a_ms=real,
                         median_b_ms=compute, phase="compute-only probe")  # fmt: skip
    return ProbeFacts(compute_only_ms=compute, real_step_ms=real, compute_paired=paired,
                      callback_ms=0.0, input_only_ms=0.2388)  # fmt: skip


def _session(step_ms: float) -> SimpleNamespace:
    steps = SimpleNamespace(median_step_time_ms=step_ms)
    return SimpleNamespace(facts=SimpleNamespace(steps=steps))


def test_the_paired_share_is_the_pairs_median_ratio_not_the_arms_medians():
    probes = _probes(1.0848)
    _breakdown(_session(4.5399), probes)
    assert probes.input_bound_share == pytest.approx(1 - 1 / 1.0848, abs=1e-4)  # 7.8%, not 24%
    b = probes.breakdown
    assert b.input_ms == pytest.approx(5.8457 * (1 - 1 / 1.0848), abs=1e-3)
    assert b.input_ms + b.compute_ms + b.host_ms + b.other_ms == pytest.approx(b.step_ms, abs=1e-3)


def test_the_point_is_the_one_the_share_interval_maps_from_the_ratio():
    probes = _probes(1.30)
    probes.callback_ms = 1.0
    _breakdown(_session(6.0), probes)
    steps = StepTimes(warmup_steps=1, measured_steps=1, median_step_time_ms=6.0)
    facts = Facts(run=RunInfo("train.py", [], "."), steps=steps, probes=probes)
    probes.input_share_check = None  # no input-only cap: compare the raw mapping
    interval = share_interval(facts)
    scale = 5.8457 / (5.8457 + 1.0)
    assert probes.input_bound_share == pytest.approx((1 - 1 / 1.30) * scale, abs=1e-4)
    assert interval.value == probes.input_bound_share  # the point, not clamped into the bounds
    assert interval.low == pytest.approx((1 - 1 / 1.004) * scale, abs=1e-4)
    assert interval.high == pytest.approx((1 - 1 / 1.5195) * scale, abs=1e-4)
    assert interval.low < interval.value < interval.high  # mapped, each from its own ratio


def test_on_a_steady_machine_it_is_the_real_step_minus_compute_only():
    probes = _probes(5.8457 / 4.4239)
    _breakdown(_session(5.9), probes)
    assert probes.breakdown.input_ms == pytest.approx(5.8457 - 4.4239, abs=1e-3)


def test_a_ratio_under_one_is_no_wait_and_a_degenerate_one_falls_back_to_the_arms():
    probes = _probes(0.95)  # the cached step slower than the real one in the pairs
    _breakdown(_session(5.9), probes)
    assert probes.input_bound_share == 0.0 and probes.breakdown.input_ms == 0.0
    probes = _probes(0.0)  # no ratio: the arms' medians
    _breakdown(_session(5.9), probes)
    assert probes.breakdown.input_ms == pytest.approx(5.8457 - 4.4239, abs=1e-3)


def test_unpaired_the_share_is_of_the_windows_step():
    probes = ProbeFacts(compute_only_ms=300.0, callback_ms=20.0)
    _breakdown(_session(400.0), probes)
    assert probes.input_bound_share == pytest.approx(80 / 400)
    assert probes.breakdown.input_ms == pytest.approx(80.0)
