"""--verify: statuses from constructed A/B samples (rnndoctor.verify.result)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from rnndoctor.verify.result import (
    CPU_LABEL,
    DECISIVE_PAIRS,
    Status,
    Verified,
    loss_verdict,
    measure,
    paired_speedup,
    sign_interval,
    sort_key,
    status_of,
)
from rnndoctor.verify.run import LOSS_NOT_MEASURED, Candidate, Run


def _candidate(a, b, a_loss=None, b_loss=None) -> Candidate:
    c = Candidate("RD301", Path("/tmp/copy/train.py"))
    for i, (x, y) in enumerate(zip(a, b, strict=True)):
        c.runs.append(Run("A", i, "a", 5.0, x, final_loss=a_loss))
        error = None if y is not None else "ValueError: boom at t.py:3"
        c.runs.append(Run("B", i, "b", 5.0, y, final_loss=b_loss, error=error))
    return c


def _measured(a, b, rules=("RD301",), on_cpu=False, **losses) -> Verified:
    item = Verified(fix=rules[0], rules=list(rules), title="t")
    measure(item, _candidate(a, b, **losses), on_cpu)
    return item


def test_speedup_is_b_throughput_over_a():
    result = paired_speedup([100.0, 110.0, 90.0], [200.0, 220.0, 180.0])
    assert result.ratio == pytest.approx(2.0)
    assert result.low == pytest.approx(2.0) and result.high == pytest.approx(2.0)


@pytest.mark.parametrize(
    ("a", "b", "status"),
    [
        ([100] * 5, [150, 160, 140, 155, 145], Status.CONFIRMED),
        ([100] * 5, [60, 70, 65, 62, 68], Status.SLOWER),
        ([100] * 5, [90, 115, 101, 95, 108], Status.WITHIN_NOISE),
    ],
)
def test_status_from_the_interval(a, b, status):
    item = _measured(a, b)
    assert item.status == status
    assert item.pairs == 5 and item.low <= item.measured <= item.high
    assert item.sign_low <= item.measured <= item.sign_high
    assert "90% interval" in item.measured_text
    assert item.loss == LOSS_NOT_MEASURED


def test_status_of_bounds():
    assert status_of(1.01, 1.5, False) == Status.CONFIRMED
    assert status_of(0.5, 0.99, False) == Status.SLOWER
    assert status_of(1.0, 1.2, False) == Status.WITHIN_NOISE
    assert status_of(1.5, 2.0, True) == Status.UNSAFE


def test_a_patched_run_that_raised_is_failed_with_its_error_line():
    item = _measured([100, 100], [150, None])
    assert item.status == Status.FAILED
    assert item.error == "ValueError: boom at t.py:3"
    assert item.measured is None


def test_fewer_than_two_pairs_is_not_verifiable_over_budget():
    item = _measured([100], [150])
    assert item.status == Status.NOT_VERIFIABLE and "over budget" in item.reason


def test_over_budget_names_the_option_that_set_the_budget():
    """A fresh user ran ``--verify --timeout 30 --verify-budget 100``: the budget was the 14 s
    that --timeout left, and every fix said "raise --verify-budget", already 100."""
    item = Verified(fix="RD301", rules=["RD301"], title="t")
    measure(item, _candidate([100], [150]), False, budget_option="--timeout")
    assert item.reason.endswith("raise --timeout)"), item.reason
    assert "--verify-budget" not in item.reason
    assert _measured([100], [150]).reason.endswith("raise --verify-budget)")


def test_an_original_that_failed_in_its_run_says_so():
    c = Candidate("RD301", Path("/tmp/c.py"))
    c.runs.append(Run("A", 0, "a", 5.0, None, error="OSError: disk full"))
    item = Verified(fix="RD301", rules=["RD301"], title="t")
    measure(item, c, False)
    assert item.status == Status.NOT_VERIFIABLE and "OSError: disk full" in item.reason


def test_a_cudnn_rule_measured_on_cpu_is_labelled_not_shown_as_the_gpu_gain():
    item = _measured([100, 100], [150, 160], rules=("RD101",), on_cpu=True)
    assert item.cpu_label == CPU_LABEL and item.measured_text.endswith(f"({CPU_LABEL})")
    on_gpu = _measured([100, 100], [150, 160], rules=("RD101",), on_cpu=False)
    assert on_gpu.cpu_label is None
    assert _measured([100, 100], [150, 160], on_cpu=True).cpu_label is None  # RD301: any device
    # the all-fixes copy with RD301 in it: its gain may be RD301's; the cuDNN fixes are named
    mixed = _measured([100, 100], [150, 160], rules=("RD301", "RD102", "RD104"), on_cpu=True)
    assert mixed.cpu_label == "measured on CPU: the cuDNN gain of RD102, RD104 needs a GPU"
    group = _measured([100, 100], [150, 160], rules=("RD101", "RD102"), on_cpu=True)
    assert group.cpu_label == CPU_LABEL


def test_loss_nan_or_far_above_the_original_is_unsafe():
    assert loss_verdict([None], [None]) == (LOSS_NOT_MEASURED, False)
    assert loss_verdict([0.5, 0.6], [math.nan, 0.5])[1] is True
    assert loss_verdict([0.5, 0.5], [8.0, 9.0])[1] is True
    text, diverged = loss_verdict([0.5, 0.5], [0.55, 0.45])
    assert not diverged and text.startswith("original 0.5, patched 0.5")
    item = _measured([100, 100], [150, 160], a_loss=0.5, b_loss=math.nan)
    assert item.status == Status.UNSAFE and "not finite" in item.loss
    fine = _measured([100] * 5, [150, 160, 150, 170, 155], a_loss=0.5, b_loss=0.52)
    assert fine.status == Status.CONFIRMED and "patched 0.52" in fine.loss


def test_the_loss_line_gives_the_step_each_arm_logged_it_at():
    """A fresh user's RD403 copy (steps_per_execution=16) had trained 16 times the batches when
    its window's loss was read: "loss original 0.6622, patched 0.4651" read as a fix that
    learns better. The line now gives each arm's step and says it is a divergence check."""
    text, diverged = loss_verdict([0.66, 0.65], [0.47, 0.46], [106, 111], [176, 256])
    assert text == (
        "original 0.655 at step 108, patched 0.465 at step 216 of its epoch (median final "
        "loss: a divergence check, not a comparison of learning)"
    )
    assert not diverged
    assert loss_verdict([0.5], [9.0], [10], [160])[1] is True  # the check still holds
    text, _ = loss_verdict([0.5], [0.52], [], [])  # steps not recorded (older facts)
    assert text == "original 0.5, patched 0.52 (median final loss)"


def test_failed_and_slower_sort_first():
    items = [
        Verified("RD1", ["RD1"], "t", status=Status.CONFIRMED, measured=2.0),
        Verified("RD2", ["RD2"], "t", status=Status.NOT_VERIFIABLE),
        Verified("RD3", ["RD3"], "t", status=Status.SLOWER, measured=0.5),
        Verified("all", ["RD1"], "t", status=Status.CONFIRMED, measured=1.5),
        Verified("RD4", ["RD4"], "t", status=Status.FAILED),
    ]
    assert [i.fix for i in sorted(items, key=sort_key)] == ["RD4", "RD3", "all", "RD1", "RD2"]


def test_the_sign_test_interval_needs_five_pairs_at_90_percent():
    assert DECISIVE_PAIRS == 5
    assert sign_interval([1.5, 1.6]) is None  # their range holds the median half the time
    assert sign_interval([1.5, 1.6, 1.7, 1.8]) is None  # 87.5%
    assert sign_interval([1.9, 1.5, 1.6, 1.7, 1.8]) == (1.5, 1.9)  # 93.75%
    assert sign_interval([float(i) for i in range(10)]) == (1.0, 8.0)  # k = 2: 97.9%


def test_two_pairs_are_too_few_to_decide_even_when_both_are_faster():
    item = _measured([100, 100], [300, 310])
    assert item.status == Status.NOT_VERIFIABLE and item.measured == pytest.approx(3.05)
    assert item.reason == (
        "too few pairs to decide: 2 (a 90% interval needs 5; raise --verify-budget)"
    )


def test_one_slow_pair_in_five_keeps_a_fix_within_noise():
    item = _measured([100] * 5, [150, 160, 90, 155, 145])
    assert item.status == Status.WITHIN_NOISE and item.sign_low == pytest.approx(0.9)


def test_a_copy_whose_fit_ends_before_a_window_is_not_verifiable_not_failed():
    candidate = Candidate("RD403", Path("c.py"))
    candidate.runs = [
        Run("A", 0, "a", 1.0, samples_per_s=100.0),
        Run("B", 0, "b", 9.0, error="fit ended before a window of 5 measured steps", ran_out=True),
    ]
    item = Verified(fix="RD403", rules=["RD403"], title="t")
    measure(item, candidate, on_cpu=True)
    assert candidate.failed is None and item.status == Status.NOT_VERIFIABLE
    assert item.reason == "not measured: the copy's fit ended before a window of 5 measured steps"
