"""The paired comparisons' wall allowance inside a phase's budget (``rnndoctor.capture.budget``;
no TensorFlow)."""

from __future__ import annotations

import time

import pytest

from rnndoctor.capture.budget import PAIRED_WALL_S, Budget, paired_left


def test_a_comparisons_allowance_scales_with_its_arms_and_ends_with_its_phase():
    """The sequence length probe's three arms get 1.5x its two arms' 2 s, so that each keeps its
    time; neither outlasts the phase's own budget."""
    now = time.monotonic()
    phase = Budget("sequence length probe", 60.0, now + 60.0)
    assert PAIRED_WALL_S[phase.phase] == 2.0
    assert paired_left(phase)() == pytest.approx(2.0, abs=0.1)
    assert paired_left(phase, 3 / 2)() == pytest.approx(3.0, abs=0.1)
    short = Budget("sequence length probe", 1.0, now + 1.0)
    assert paired_left(short, 3 / 2)() == pytest.approx(1.0, abs=0.1)
