"""xprof's input_pipeline_analyzer output summarised into the facts (no TensorFlow, no xprof).

``input_pipeline_analyzer_cpu.json`` is xprof 2.24's own output for a CPU-only profile of a tiny
LSTM ``fit`` with step markers (``Trace("train", step_num=..., _r=1)``).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

from rnndoctor.capture.profile import summarize_input_pipeline

CPU = json.loads(
    (Path(__file__).parents[1] / "data" / "xprof" / "input_pipeline_analyzer_cpu.json").read_text()
)


def test_cpu_profile_keeps_xprofs_verdict_and_the_slowest_tf_data_ops():
    summary = summarize_input_pipeline(CPU)
    assert summary.input_share is None
    assert summary.not_measured == (
        "No step time measured. Therefore we cannot tell where the performance bottleneck is."
    )
    names = [op.name for op in summary.slowest_ops]
    assert names[0] == "Iterator::Root::Prefetch::BatchV2::TensorSlice"
    assert all(op.host_or_device == "Host" and op.op_type == "Preprocessing"
               for op in summary.slowest_ops)  # fmt: skip
    assert sum(op.share for op in summary.slowest_ops) <= 1.0 + 1e-9
    assert summary.slowest_ops[0].self_time_us == 136.519


def test_a_measured_step_time_gives_xprofs_input_share():
    gpu = copy.deepcopy(CPU)
    props = gpu[1]["p"]
    props.update(
        steptime_ms_average="12.5",
        infeed_percent_average="62.0",
        input_conclusion="Your program is HIGHLY input-bound because 62.0% of the total step "
        "time sampled is waiting for input.",
    )
    summary = summarize_input_pipeline(gpu)
    assert summary.input_share == 0.62
    assert summary.verdict.startswith("Your program is HIGHLY input-bound")
    assert summary.not_measured is None


def test_no_tables_says_so():
    assert summarize_input_pipeline([]).not_measured
    assert summarize_input_pipeline(None).slowest_ops == []
