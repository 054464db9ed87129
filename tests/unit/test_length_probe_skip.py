"""When the sequence length probe runs (``rnndoctor/capture/probes.py: _length_skip``): only where
RD501 or RD502 can report, on one sequence input given as one array, and not, for its cost, on
steps over 100 ms (the bundled demo's 0.28 s steps: 3.5 s of its check, 2.25x a bare run against
1.90x without it). No TensorFlow: the batches are numpy arrays."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from rnndoctor.capture import probes
from rnndoctor.capture.sampling import Batches
from rnndoctor.facts import Facts, RunInfo, SequenceFacts, SequenceInput, StepTimes


def _session(padded: float, step_ms: float, global_max: bool = False, inputs: int = 1):
    facts = Facts(run=RunInfo(script="train.py", argv=[], cwd="."))
    facts.sequences = SequenceFacts(inputs=[
        SequenceInput(input=f"in{i}", padded_fraction=padded, global_max_padding=global_max)
        for i in range(inputs)
    ])  # fmt: skip
    facts.steps = StepTimes(warmup_steps=3, measured_steps=20, median_step_time_ms=step_ms)
    return SimpleNamespace(facts=facts)


BATCHES = Batches(raw=[(np.zeros((16, 40), "int32"), np.zeros((16, 1), "float32"))] * 2)


def test_the_probe_runs_where_a_padding_rule_can_report_and_the_step_is_short():
    assert probes._length_skip(_session(0.45, 50.0), BATCHES) is None
    assert probes._length_skip(_session(0.06, 50.0, global_max=True), BATCHES) is None
    # nothing for it to do: no reason recorded
    assert probes._length_skip(_session(0.20, 50.0), BATCHES) == ""
    assert probes._length_skip(_session(0.04, 50.0, global_max=True), BATCHES) == ""


def test_the_probe_says_why_it_did_not_run():
    why = probes._length_skip(_session(0.58, 280.0), BATCHES)
    assert why.startswith("not run, for its cost: the window's step takes 280 ms, over 100 ms")
    why = probes._length_skip(_session(0.58, 50.0, inputs=2), BATCHES)
    assert why == "not run: it cuts one sequence input; the model has 2"
    short = Batches(raw=[(np.zeros((16, 3), "int32"), np.zeros((16, 1), "float32"))])
    assert probes._length_skip(_session(0.58, 50.0), short).endswith(
        "3 timesteps, too few to halve"
    )
    named = Batches(raw=[({"tokens": np.zeros((16, 40), "int32")}, np.zeros((16, 1)))])
    assert "not one array with a time axis" in probes._length_skip(_session(0.58, 50.0), named)
