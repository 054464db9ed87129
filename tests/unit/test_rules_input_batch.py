"""RD201-RD206, RD301, RD403 and RD404 on fixture facts: pure, no TensorFlow.

Each rule is checked firing (with its measured evidence, gain model, location and fix) and not
firing (below its cut-off, or when what it needs was not measured).
"""

from __future__ import annotations

import json

import pytest

from rnndoctor.engine import evaluate
from rnndoctor.facts import (
    CallbackTime,
    DataFacts,
    DataNode,
    Environment,
    Facts,
    FitConfig,
    GraphEdge,
    InputPipelineSummary,
    PairedRatio,
    ProbeFacts,
    ProbePoint,
    ProfileSummary,
    RunInfo,
    SourceLocation,
    StepBreakdown,
    StepTimes,
)
from rnndoctor.findings import Severity

SCRIPT = "/work/train.py"


def loc(line: int, call: str | None = None) -> SourceLocation:
    return SourceLocation(file=SCRIPT, line=line, code=call, call_source=call)


def node(name: str, op: str, kind: str, line: int, call: str, **extra) -> DataNode:
    return DataNode(name=name, op=op, kind=kind, location=loc(line, call), **extra)


def pipeline(*nodes: DataNode, **fields) -> DataFacts:
    edges = [GraphEdge(a.name, b.name, "feeds") for a, b in zip(nodes, nodes[1:], strict=False)]
    data = DataFacts(kind="tf.data", reiterable=True, nodes=list(nodes), edges=edges)
    data.location = nodes[-1].location
    for key, value in fields.items():
        setattr(data, key, value)
    return data


def generator_pipeline() -> DataFacts:
    return pipeline(
        node("TensorDataset/_1", "TensorDataset", "source", 20, "from_generator(gen)",
             source_kind="tensors"),
        node("FlatMapDataset/_2", "FlatMapDataset", "source", 20, "from_generator(gen)",
             source_kind="generator", python=True),
        node("BatchDatasetV2/_6", "BatchDatasetV2", "batch", 24, "ds.batch(32)",
             attrs={"batch_size": 32}),
        source_kinds=["generator"], batch_kind="batch", prefetch_last=False,
        python_ops=["FlatMapDataset/_2"], cardinality=-2, inject_prefetch=True,
        map_parallelization=True, batch_bytes=2688,
    )  # fmt: skip


def facts(
    step: float = 10.0,
    compute: float | None = 3.0,
    callbacks: float = 0.0,
    real: float | None = None,
    input_only: float | None = 8.0,
    data: DataFacts | None = None,
    epochs: int = 2,
    spe: int = 1,
    gpus: int = 0,
) -> Facts:
    """Facts of a completed CPU run with the probes' numbers filled in as the capture would."""
    f = Facts(run=RunInfo(script=SCRIPT, argv=[SCRIPT], cwd="/work", outcome="completed"))
    f.environment = Environment(
        python="3.11", platform="linux", keras="3.15.1", keras_backend="tensorflow",
        tensorflow="2.21.0", gpu_count=gpus, cpu_count=2,
    )  # fmt: skip
    f.fit = FitConfig(
        data_kind=data.kind if data else "tf.data", batch_size=32, epochs=epochs,
        steps_per_execution=spe, optimizer="adam", loss="mse",
        location=loc(40, "model.fit(ds, epochs=2)"),
    )  # fmt: skip
    f.steps = StepTimes(warmup_steps=1, measured_steps=10, median_step_time_ms=step, batch_size=32)
    f.data = data if data is not None else generator_pipeline()
    p = ProbeFacts(input_only_ms=input_only, input_only_method="fresh iterator",
                   compute_only_ms=compute, compute_only_batches=16, callback_ms=callbacks,
                   real_step_ms=real, memory_limit_mib=10_000.0,
                   memory_limit_source="MemAvailable")  # fmt: skip
    if compute is not None:
        wait = max(0.0, (real if real is not None else step - callbacks) - compute)
        whole = real + callbacks if real is not None else step
        p.input_bound_share = round(min(1.0, wait / whole), 4)
        p.breakdown = StepBreakdown(step_ms=step, input_ms=wait, compute_ms=compute,
                                    host_ms=callbacks,
                                    other_ms=step - wait - compute - callbacks)  # fmt: skip
    else:
        p.compute_only_not_measured = "no batch was sampled: the generator hung"
    if input_only is not None:
        p.input_share_check = round(min(1.0, input_only / step), 4)
    f.probes = p
    return f


def run(f: Facts, rule_id: str):
    report = evaluate(f, select=[rule_id])
    (outcome,) = [o for o in report.outcomes if o.rule.id == rule_id]
    return outcome, report.findings


def check_finding(finding, rule_id: str) -> None:
    """What every finding of these rules carries: evidence, location, fix code and a gain."""
    assert finding.rule_id == rule_id
    assert finding.evidence and all(e.label for e in finding.evidence)
    assert finding.location is not None and finding.location.line > 0
    assert finding.fix is not None and finding.fix.code.strip()
    assert finding.gain
    json.dumps(finding.to_dict(), default=str)  # it serialises into report.json


# -- RD201 -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("step", "severity"),
    [(10.0, Severity.ERROR), (4.5, Severity.WARNING), (3.3, Severity.INFO)],
)
def test_rd201_severity_follows_the_measured_share(step, severity):
    outcome, (finding,) = run(facts(step=step, compute=3.0), "RD201")
    check_finding(finding, "RD201")
    assert finding.severity is severity
    share = (step - 3.0) / step
    assert finding.speedup == pytest.approx(1 / (1 - share), rel=0.02)
    assert f"input-bound share {share * 100:.0f}% removed" in finding.gain
    assert finding.location.line == 24  # the dataset's last pipeline call
    assert "from_tensor_slices" in finding.fix.code and ".prefetch(tf.data.AUTOTUNE)" in (
        finding.fix.code
    )


def test_rd201_quotes_the_breakdown_and_xprofs_verdict():
    f = facts(step=10.0, compute=3.0)
    f.profile = ProfileSummary(logdir="/tmp/p", xprof_verdict="No step time measured...")
    f.profile.input_pipeline = InputPipelineSummary(
        not_measured="No step time measured. Therefore we cannot tell where the performance "
        "bottleneck is."
    )
    _, (finding,) = run(f, "RD201")
    values = {e.label: e.value for e in finding.evidence}
    assert values["median step time"] == 10.0
    assert values["compute-only step time"] == 3.0
    assert values["waiting for input"] == 7.0
    assert values["input-bound share"] == 70.0
    assert values["xprof input-pipeline analysis"].startswith("No step time measured")


def test_rd201_uses_the_paired_real_step_when_measured():
    # The window's step was taken under heavier load; the paired probe says 5% input wait.
    f = facts(step=30.0, compute=19.0, real=20.0)
    outcome, findings = run(f, "RD201")
    assert f.probes.input_bound_share == pytest.approx(0.05)
    assert [x.severity for x in findings] == [Severity.INFO]
    assert "(1.00 ms of 20.00 ms, timed side by side" in findings[0].message
    assert {e.label: e.value for e in findings[0].evidence}["step on the user's data"] == 20.0


def test_rd201_counts_a_step_difference_only_as_far_as_input_only_time_explains_it():
    # The demo's case: the step difference says 8% waiting, but producing a batch takes 0.2 ms
    # of a 350 ms step; no input fix removes the difference, so no finding.
    f = facts(step=350.0, compute=322.0, input_only=0.2)
    assert f.probes.input_bound_share == pytest.approx(0.08)
    assert run(f, "RD201")[1] == []
    # Half the difference explained: the finding reports the corroborated share, and says so.
    f = facts(step=10.0, compute=3.0, input_only=3.5)
    _, (finding,) = run(f, "RD201")
    assert finding.severity is Severity.WARNING  # 35%, not the 70% step difference
    values = {e.label: e.value for e in finding.evidence}
    assert values["step difference (step - compute-only), as measured"] == 70.0
    assert finding.speedup == pytest.approx(1 / (1 - 0.35), rel=0.02)


def test_rd201s_milliseconds_agree_with_its_capped_share_and_its_info_can_be_inconclusive():
    """A new user's Bidirectional GRU: "7% (90% interval 0–7%) of the step (2.54 ms of 31.14
    ms ...)": the share was counted up to the input-only probe (1.95 ms of a 29.26 ms window)
    while the milliseconds were the step difference as measured (8.2%), and an interval down to
    0% read as a plain claim that the step waits for its input."""
    f = facts(step=29.26, compute=29.13, real=31.14, input_only=1.95)
    f.probes.compute_paired = PairedRatio(
        ratio=1.09, low=1.0, high=1.12, pairs=6, median_a_ms=31.14, median_b_ms=29.13,
        steps_a=60, steps_b=60, phase="compute-only probe",
    )  # fmt: skip
    # as the capture wrote them: the wait from the pairs' ratio, 31.14 x (1 - 1 / 1.0889)
    f.probes.breakdown.input_ms, f.probes.input_bound_share = 2.5425, 0.0817
    _, (finding,) = run(f, "RD201")
    assert finding.severity is Severity.INFO
    assert finding.message.startswith(
        "The training step waits for its input: inconclusive: 7% (90% interval 0–7%) of the step "
        "(2.07 ms of 31.14 ms, counted up to what the input-only probe explains; 2.54 ms as "
        "measured, timed side by side with the same step on cached batches: 1.09x its time"
    )
    assert finding.speedup is None and finding.gain.startswith("inconclusive: 7%")
    # a share the cross-check caps at half the step difference: the milliseconds with it
    f = facts(step=10.0, compute=3.0, input_only=3.5)
    _, (finding,) = run(f, "RD201")
    assert (
        "(3.50 ms of 10.00 ms, counted up to what the input-only probe explains; 7.00 ms as "
        "measured)" in finding.message
    )
    # a long step whose share the cross-check does not cap keeps its milliseconds as measured,
    # whatever the rounding of the recorded share (review: 123.21 against 123.22 ms read as a cap)
    f = facts(step=412.35, compute=289.12, input_only=400.0)
    _, (finding,) = run(f, "RD201")
    assert "(123.23 ms of 412.35 ms) is spent" in finding.message
    assert "counted up to" not in finding.message
    assert (
        "(1.00 ms of 20.00 ms, timed side by side"
        in run(facts(step=30.0, compute=19.0, real=20.0), "RD201")[1][0].message
    )


def test_rd201_does_not_fire_below_xprofs_cut_off_or_when_not_measured():
    assert run(facts(step=3.1, compute=3.0), "RD201")[1] == []
    outcome, findings = run(facts(compute=None), "RD201")
    assert findings == [] and outcome.status == "passed"
    assert outcome.rule.needs == ("probes", "steps", "fit")


def test_rd201_is_not_evaluated_without_probes():
    f = facts()
    f.probes = None
    outcome, findings = run(f, "RD201")
    assert outcome.status == "not_evaluated" and "'probes'" in outcome.reason


def test_fit_probes_rules_are_not_evaluated_for_a_custom_loop():
    f = facts()
    f.fit = None  # a custom training loop: the probes run inside fit only
    for rule_id in ("RD201", "RD301", "RD403", "RD404"):
        outcome, _ = run(f, rule_id)
        assert outcome.status == "not_evaluated" and "'fit'" in outcome.reason


# -- RD202 -----------------------------------------------------------------------------------


def test_rd202_is_info_when_tf_data_injects_the_prefetch():
    _, (finding,) = run(facts(), "RD202")
    check_finding(finding, "RD202")
    assert finding.severity is Severity.INFO and finding.speedup is None
    assert "inject_prefetch" in finding.gain
    assert finding.fix.code == "ds.batch(32).prefetch(tf.data.AUTOTUNE)"
    assert finding.fix.safety == "safe"


def test_rd202_estimates_the_overlap_when_nothing_adds_a_prefetch():
    data = generator_pipeline()
    data.inject_prefetch = False
    _, (finding,) = run(facts(step=10.0, compute=3.0, input_only=6.0, data=data), "RD202")
    assert finding.severity is Severity.WARNING
    assert finding.speedup == pytest.approx(10.0 / 6.0, rel=0.01)
    assert "max(input-only 6.00 ms, compute 3.00 ms)" in finding.gain


def test_rd202_passes_a_pipeline_ending_in_prefetch():
    data = generator_pipeline()
    data.prefetch_last = True
    assert run(facts(data=data), "RD202")[1] == []
    numpy = DataFacts(kind="numpy")
    assert run(facts(data=numpy), "RD202")[1] == []


# -- RD203 -----------------------------------------------------------------------------------


def map_pipeline(**map_attrs) -> DataFacts:
    return pipeline(
        node("TensorSliceDataset/_1", "TensorSliceDataset", "source", 10,
             "tf.data.Dataset.from_tensor_slices(x)", source_kind="tensor_slices"),
        node("MapDataset/_2", "MapDataset", "map", 11, "ds.map(augment)", attrs=map_attrs),
        node("BatchDatasetV2/_3", "BatchDatasetV2", "batch", 12, "ds.batch(32)"),
        source_kinds=["tensor_slices"], batch_kind="batch", prefetch_last=False,
        cardinality=100, inject_prefetch=True, map_parallelization=True,
        sequential_maps=0 if map_attrs.get("auto_parallel") else 1, batch_bytes=4096,
    )  # fmt: skip


def test_rd203_fires_at_a_stateful_map_with_the_rewritten_call():
    data = map_pipeline(stateful_ops=["RandomUniform"], force_synchronous=False)
    _, (finding,) = run(facts(step=10.0, compute=6.0, data=data), "RD203")
    check_finding(finding, "RD203")
    assert finding.location.line == 11
    assert finding.fix.code == "ds.map(augment, num_parallel_calls=tf.data.AUTOTUNE)"
    assert finding.fix.safety == "unsafe"  # random ops draw in another order
    assert "RandomUniform" in finding.message
    assert finding.severity is Severity.WARNING  # 40% input


def test_rd203_skips_maps_tf_data_parallelises_itself_and_insignificant_input():
    auto = map_pipeline(stateful_ops=[], auto_parallel=True)
    assert run(facts(step=10.0, compute=3.0, data=auto), "RD203")[1] == []
    stateful = map_pipeline(stateful_ops=["PyFunc"])
    assert run(facts(step=3.1, compute=3.0, input_only=0.1, data=stateful), "RD203")[1] == []


# -- RD204 -----------------------------------------------------------------------------------


def test_rd204_points_at_from_generator():
    _, (finding,) = run(facts(step=10.0, compute=3.0), "RD204")
    check_finding(finding, "RD204")
    assert finding.location.line == 20
    assert "Dataset.from_generator" in finding.message
    assert finding.severity is Severity.WARNING
    assert "from_tensor_slices" in finding.fix.code


def test_rd204_covers_a_python_generator_passed_to_fit():
    data = DataFacts(kind="python_generator", reiterable=False, location=loc(5, None))
    f = facts(step=10.0, compute=None, input_only=4.0, data=data)
    _, (finding,) = run(f, "RD204")  # the cross-check share (40%) stands in for the probe
    assert finding.location.line == 5 and "input-only time / step" in str(finding.evidence)


def test_rd204_does_not_fire_without_python_or_when_input_is_cheap():
    assert run(facts(step=10.0, compute=3.0, data=map_pipeline()), "RD204")[1] == []
    assert run(facts(step=3.05, compute=3.0, input_only=0.1), "RD204")[1] == []


# -- RD205 -----------------------------------------------------------------------------------


def test_rd205_fires_for_a_small_finite_dataset_trained_for_several_epochs():
    data = map_pipeline(stateful_ops=[], auto_parallel=True)
    _, (finding,) = run(facts(step=10.0, compute=7.0, data=data, epochs=5), "RD205")
    check_finding(finding, "RD205")
    assert finding.fix.code.startswith("ds.map(augment).cache()")
    assert finding.fix.safety == "safe"
    assert finding.gain.startswith("epochs 2 to 5 skip the cached work")


def test_rd205_needs_more_than_one_epoch_a_known_length_and_room_in_memory():
    data = map_pipeline(stateful_ops=[], auto_parallel=True)
    assert run(facts(step=10.0, compute=7.0, data=data, epochs=1), "RD205")[1] == []
    data.cardinality = -2
    assert run(facts(step=10.0, compute=7.0, data=data, epochs=5), "RD205")[1] == []
    data.cardinality = 10**7  # 10M batches of 4 KiB: 38 GiB, over half the probes' memory
    assert run(facts(step=10.0, compute=7.0, data=data, epochs=5), "RD205")[1] == []


def test_rd205_never_caches_after_a_random_map():
    # Caching after the only (random) map would replay the first epoch's draws in every epoch:
    # the fix says it cannot be cached as built, and stays display-only (stricter than unsafe).
    data = map_pipeline(stateful_ops=["RandomUniform"])
    _, (finding,) = run(facts(step=10.0, compute=7.0, data=data, epochs=3), "RD205")
    assert finding.fix.safety == "display-only"
    assert finding.fix.before is None
    assert "ds.map(augment).cache()" not in finding.fix.code
    assert "cannot be cached as built" in finding.message
    assert "RandomUniform" in finding.message


def test_rd205_caches_before_the_random_map():
    data = pipeline(
        node("TensorSliceDataset/_1", "TensorSliceDataset", "source", 10,
             "tf.data.Dataset.from_tensor_slices(x)", source_kind="tensor_slices"),
        node("MapDataset/_2", "MapDataset", "map", 11, "ds.map(decode)",
             attrs={"stateful_ops": []}),
        node("MapDataset/_3", "MapDataset", "map", 12, "ds.map(augment)",
             attrs={"stateful_ops": ["RandomUniform"]}),
        node("BatchDatasetV2/_4", "BatchDatasetV2", "batch", 13, "ds.batch(32)"),
        source_kinds=["tensor_slices"], batch_kind="batch", prefetch_last=False,
        cardinality=100, inject_prefetch=True, map_parallelization=True, batch_bytes=4096,
    )  # fmt: skip
    _, (finding,) = run(facts(step=10.0, compute=7.0, data=data, epochs=3), "RD205")
    assert finding.location.line == 11
    assert finding.fix.before == "ds.map(decode)"
    assert finding.fix.code == "ds.map(decode).cache()"
    assert finding.fix.safety == "safe"


def test_rd205_does_not_cache_after_a_shuffle():
    data = pipeline(
        node("TensorSliceDataset/_1", "TensorSliceDataset", "source", 10,
             "tf.data.Dataset.from_tensor_slices(x)", source_kind="tensor_slices"),
        node("ShuffleDatasetV3/_2", "ShuffleDatasetV3", "shuffle", 11, "ds.shuffle(1000)"),
        node("MapDataset/_3", "MapDataset", "map", 12, "ds.map(decode)",
             attrs={"stateful_ops": []}),
        node("BatchDatasetV2/_4", "BatchDatasetV2", "batch", 13, "ds.batch(32)"),
        source_kinds=["tensor_slices"], batch_kind="batch", prefetch_last=False,
        cardinality=100, inject_prefetch=True, map_parallelization=True, batch_bytes=4096,
    )  # fmt: skip
    _, (finding,) = run(facts(step=10.0, compute=7.0, data=data, epochs=3), "RD205")
    assert finding.fix.safety == "display-only"
    assert "ShuffleDatasetV3" in finding.message


# -- RD206 -----------------------------------------------------------------------------------


def pydataset(workers: int = 1, multiprocessing: bool = False) -> DataFacts:
    return DataFacts(
        kind="keras.PyDataset", reiterable=True, workers=workers,
        use_multiprocessing=multiprocessing, max_queue_size=10, location=loc(15, None),
    )  # fmt: skip


def test_rd206_fires_for_a_single_worker_pydataset():
    _, (finding,) = run(facts(step=10.0, compute=3.0, data=pydataset()), "RD206")
    check_finding(finding, "RD206")
    assert finding.location.line == 15
    assert "workers=2, use_multiprocessing=True" in finding.fix.code  # 2 CPU cores
    assert finding.severity is Severity.WARNING


def tf_keras_sequence() -> DataFacts:
    """A single-worker tf_keras ``Sequence`` (Keras 2: ``fit`` holds its workers)."""
    return DataFacts(
        kind="tf_keras.Sequence", reiterable=True, workers=1, use_multiprocessing=False,
        max_queue_size=10, location=loc(15, None),
    )  # fmt: skip


def test_rd206_rewrites_the_fit_call_for_a_single_worker_tf_keras_sequence():
    f = facts(step=10.0, compute=3.0, data=tf_keras_sequence())
    f.fit.location = loc(40, "model.fit(seqs, epochs=3)  # train")
    _, (finding,) = run(f, "RD206")
    check_finding(finding, "RD206")
    assert finding.location.line == 40  # the fit call holds the settings in Keras 2
    # the user's other arguments and comment kept (rnndoctor/rewrite.py)
    assert finding.fix.code == (
        "model.fit(seqs, epochs=3, workers=2, use_multiprocessing=True)  # train"
    )
    assert finding.fix.before == "model.fit(seqs, epochs=3)  # train"
    assert "tf_keras Sequence" in finding.message
    assert {e.label: e.source for e in finding.evidence}["workers"] == "fit"
    parallel = DataFacts(kind="tf_keras.Sequence", workers=3, use_multiprocessing=False)
    assert run(facts(step=10.0, compute=3.0, data=parallel), "RD206")[1] == []


def test_rd206_passes_parallel_workers_and_other_inputs():
    assert run(facts(data=pydataset(workers=4)), "RD206")[1] == []
    assert run(facts(data=pydataset(workers=1, multiprocessing=True)), "RD206")[1] == []
    assert run(facts(), "RD206")[1] == []


# -- RD301 -----------------------------------------------------------------------------------


def with_batch_probe(f: Facts, points: list[tuple[int, float | None, str | None]]) -> Facts:
    f.probes.batch_probe = [
        ProbePoint(value=b, step_time_ms=ms, samples_per_s=b * 1000 / ms if ms else None,
                   steps=20, stopped=stopped)
        for b, ms, stopped in points
    ]  # fmt: skip
    return f


def test_rd301_fires_with_the_samples_per_second_of_each_batch_size():
    f = with_batch_probe(facts(), [(4, 2.0, None), (8, 2.2, None), (16, 2.6, None)])
    _, (finding,) = run(f, "RD301")
    check_finding(finding, "RD301")
    rows = {e.label: (e.value, e.unit) for e in finding.evidence}
    assert rows["batch 4"] == (2000.0, "samples/s")
    assert rows["batch 16"][1] == "samples/s" and rows["batch 16"][0] == pytest.approx(6153.8, 0.01)
    assert finding.speedup == pytest.approx(6153.8 / 2000.0, rel=0.01)
    assert finding.speedup_interval is None  # unpaired points: no interval for the verdict
    # paired (schema 1.2 on): the interval the finding quotes, beside the verdict's estimate
    f.probes.batch_probe[2].paired = PairedRatio(ratio=0.77, low=0.7, high=0.8, pairs=10,
                                                 median_a_ms=2.0, median_b_ms=2.6)  # fmt: skip
    _, (paired,) = run(f, "RD301")
    assert paired.speedup_interval == "90% interval 2.8–3.2x"
    assert f"3.1x ({paired.speedup_interval})" in paired.message
    assert finding.fix.code == "ds.batch(16)" and finding.location.line == 24
    assert "learning rate" in finding.fix.title


@pytest.mark.parametrize(
    ("optimizer", "advice"),
    [
        ("SGD", "scale the learning rate with it (x4, the linear scaling rule for SGD)"),
        ("adam", "scale the learning rate with it (about x2.0, the square-root rule for Adam "
                 "and RMSprop; adam is adaptive)"),
        ("rm_sprop", "scale the learning rate with it (about x2.0, the square-root rule for "
                     "Adam and RMSprop; rm_sprop is adaptive)"),  # Keras 3's auto name
        ("adam_w_1", "scale the learning rate with it (about x2.0"),
        ("sgd_2", "scale the learning rate with it (x4, the linear scaling rule for SGD)"),
        (None, "retune the learning rate for it (x4, the linear scaling rule for SGD; about "
               "x2.0, the square-root rule for Adam and RMSprop)"),
        ("loss_scale_optimizer", "retune the learning rate for it (x4"),  # the inner one unknown
    ],
)  # fmt: skip
def test_rd301_advises_the_learning_rate_by_the_compiled_optimizer(optimizer, advice):
    """A new user compiled with "adam" and read "scale the learning rate with it (x4, the
    linear scaling rule)": a rule for SGD (Goyal et al. 2017); Adam's is the square root
    (Malladi et al. 2022)."""
    f = with_batch_probe(facts(), [(4, 2.0, None), (8, 2.2, None), (16, 2.6, None)])
    f.fit.optimizer = optimizer
    _, (finding,) = run(f, "RD301")
    assert f"Use batch size 16, and {advice}" in finding.fix.title


def test_rd301_shows_the_first_point_timed_again_beside_the_real_step():
    """Where the first point disagreed with the window and was timed again beside the real step
    in the probe's phase (``probes.batch_real_paired``), the finding says so, with both
    numbers: the report shows what the consistency check rested on."""

    f = with_batch_probe(facts(), [(4, 2.0, None), (8, 2.2, None), (16, 2.6, None)])
    f.probes.batch_real_paired = PairedRatio(ratio=1.01, low=0.97, high=1.04, pairs=5,
                                             median_a_ms=2.02, median_b_ms=2.0)  # fmt: skip
    _, (finding,) = run(f, "RD301")
    rows = {e.label: (e.value, e.source) for e in finding.evidence}
    value, source = rows["batch 4 beside the real step"]
    assert value == "2.00 ms against 2.02 ms" and source.startswith("5 pairs in the batch-size")


def test_rd301_rewrites_the_fit_call_for_arrays():
    f = with_batch_probe(
        facts(data=DataFacts(kind="numpy")), [(4, 2.0, None), (8, 2.1, None), (16, None, "x")]
    )
    f.fit.location = loc(40, "model.fit(x, y, batch_size=4)")
    _, (finding,) = run(f, "RD301")
    assert finding.fix.code == "model.fit(x, y, batch_size=8)"
    assert "batch 16" in [e.label for e in finding.evidence]  # the stopped point stays listed


def test_rd301_passes_when_larger_batches_gain_less_than_1_5x():
    f = with_batch_probe(facts(), [(512, 10.0, None), (1024, 15.0, None), (2048, 30.0, None)])
    assert run(f, "RD301")[1] == []


def test_rd301_flags_a_small_gpu_batch_at_once_when_the_probe_did_not_run():
    f = facts(gpus=1)
    f.probes.batch_probe_not_measured = "the compute-only probe did not run"
    _, (finding,) = run(f, "RD301")
    assert finding.severity is Severity.INFO and finding.speedup is None
    assert finding.gain.startswith("not measured")
    assert run(facts(gpus=0), "RD301")[1] == []  # on CPU nothing is flagged unmeasured


# -- RD403 -----------------------------------------------------------------------------------


def with_spe(f: Facts, one: float, sixteen: float) -> Facts:
    f.probes.spe_probe = [ProbePoint(1, one), ProbePoint(16, sixteen)]
    return f


def test_rd403_fires_when_dispatch_is_a_large_share_of_the_step():
    f = with_spe(facts(step=4.0, compute=3.8), one=3.8, sixteen=1.6)
    _, (finding,) = run(f, "RD403")
    check_finding(finding, "RD403")
    assert finding.severity is Severity.ERROR  # 2.2 ms of a 4 ms step
    # No compile call recorded: a sketch that says to keep the user's arguments, never a call
    # rebuilt from the optimizer and loss alone (that drops the metrics).
    assert finding.fix.code.startswith("model.compile(..., steps_per_execution=16)")
    assert finding.fix.before is None
    assert finding.speedup == pytest.approx(4.0 / 1.8, rel=0.01)


def test_rd403_rewrites_the_users_compile_call_losslessly_at_its_line():
    f = with_spe(facts(step=4.0, compute=3.8), one=3.8, sixteen=1.6)
    call = 'model.compile(loss="categorical_crossentropy", optimizer="adam", metrics=["accuracy"])'
    f.fit.compile_location = loc(7, call)
    _, (finding,) = run(f, "RD403")
    assert finding.location.line == 7
    assert finding.fix.before == call
    assert finding.fix.code == (
        'model.compile(loss="categorical_crossentropy", optimizer="adam", metrics=["accuracy"], '
        "steps_per_execution=16)"
    )
    assert finding.fix.safety == "safe"


def test_rd403_passes_small_savings_and_models_already_using_it_and_needs_its_probe():
    assert run(with_spe(facts(step=10.0), one=3.0, sixteen=2.5), "RD403")[1] == []
    assert run(with_spe(facts(step=4.0, spe=8), one=3.8, sixteen=1.6), "RD403")[1] == []
    outcome, findings = run(facts(step=4.0), "RD403")  # the probe timed nothing: no pass
    assert findings == [] and outcome.status == "not_evaluated"


# -- RD404 -----------------------------------------------------------------------------------


def test_rd404_names_the_callback_and_its_line():
    f = facts(step=8.0, compute=2.0, callbacks=4.0)
    f.probes.callbacks = [
        CallbackTime("SleepyLogger", 4.0, loc(27, "SleepyLogger()")),
        CallbackTime("Tiny", 0.01, loc(28, "Tiny()")),
    ]
    _, findings = run(f, "RD404")
    (finding,) = findings  # Tiny is below 2% of the step: no finding of its own
    check_finding(finding, "RD404")
    assert "SleepyLogger" in finding.message and finding.location.line == 27
    assert finding.severity is Severity.ERROR  # 50% of the step
    assert finding.speedup == pytest.approx(2.0)


def test_rd404_passes_cheap_callbacks():
    f = facts(step=8.0, callbacks=0.4)
    f.probes.callbacks = [CallbackTime("Cheap", 0.4, loc(27))]
    assert run(f, "RD404")[1] == []


def test_rule_docs_have_every_section():
    from rnndoctor.rules import get_rule

    for rule_id in ("RD201", "RD202", "RD203", "RD204", "RD205", "RD206", "RD301", "RD403",
                    "RD404"):  # fmt: skip
        doc = get_rule(rule_id).doc
        for section in ("What it detects:", "Why it slows training:", "Evidence:", "Example:",
                        "Use instead:", "Fix safety:", "References:"):  # fmt: skip
            assert section in doc, (rule_id, section)


def test_rd301_fix_on_a_bucketed_pipeline_rewrites_its_bucket_batch_sizes():
    from rnndoctor.rules.rd301_small_batch import _with_bucket_batch_sizes

    call = "ds.bucket_by_sequence_length(length, BOUNDARIES, [64] * 9)"
    assert _with_bucket_batch_sizes(call, 128) == (
        "ds.bucket_by_sequence_length(length, BOUNDARIES, [128] * (len(BOUNDARIES) + 1))"
    )
    # sizes read from a name: a list over it would leave BATCH_SIZES unused (RD301 then gives
    # its display-only sketch)
    named = "ds.bucket_by_sequence_length(length, BOUNDARIES, BATCH_SIZES)"
    assert _with_bucket_batch_sizes(named, 128) is None
    keywords = "ds.bucket_by_sequence_length(f, bucket_boundaries=[3, 5], bucket_batch_sizes=[4])"
    assert _with_bucket_batch_sizes(keywords, 8).endswith(
        "bucket_batch_sizes=[8] * (len([3, 5]) + 1))"
    )


def test_rd205_warns_only_when_the_whole_share_interval_clears_the_cut_off():
    """keras-io's weather example: a 45% input share whose paired interval ran 0-51% was a
    warning on its median alone; now it is info, and a tight interval still warns."""

    data = map_pipeline(stateful_ops=[], auto_parallel=True)
    f = facts(step=10.0, compute=7.0, real=10.0, data=data, epochs=5)  # a 30% share
    f.probes.compute_paired = PairedRatio(ratio=10 / 7, low=0.9, high=1.6, pairs=6,
                                          median_a_ms=10.0, median_b_ms=7.0)  # fmt: skip
    _, (finding,) = run(f, "RD205")
    assert finding.severity is Severity.INFO
    assert {e.label: e.value for e in finding.evidence}["input share, 90% interval low"] == 0.0
    f.probes.compute_paired = PairedRatio(ratio=10 / 7, low=1.38, high=1.5, pairs=12,
                                          median_a_ms=10.0, median_b_ms=7.0)  # fmt: skip
    _, (finding,) = run(f, "RD205")
    assert finding.severity is Severity.WARNING


def test_rd201_quotes_the_pairs_ratio_its_share_rests_on():
    """The paired share is ``real x (1 - 1 / r)``: the message gives ``r`` beside the arms'
    medians, which need not differ by the wait it quotes (capture/probes.py: _breakdown)."""

    f = facts(step=10.0, compute=4.0, real=10.0)  # the arms: 60%; the pairs' median ratio: 2x
    f.probes.compute_paired = PairedRatio(ratio=2.0, low=1.9, high=2.1, pairs=12,
                                          median_a_ms=10.0, median_b_ms=4.0)  # fmt: skip
    _, (finding,) = run(f, "RD201")
    assert "timed side by side with the same step on cached batches: 2.00x its time" in (
        finding.message
    )
    bases = {e.label: e.source for e in finding.evidence}
    assert bases["waiting for input"] == (
        "step on the user's data x (1 - 1 / the pairs' median ratio to compute-only)"
    )
    f.probes.compute_paired = None  # facts from before 1.2: the medians' difference
    _, (finding,) = run(f, "RD201")
    bases = {e.label: e.source for e in finding.evidence}
    assert bases["waiting for input"] == "step on the user's data - compute-only"


def test_an_input_share_of_too_few_pairs_is_quoted_as_no_interval():
    """The review after a new user's trial: the share's interval, mapped from the compute-only
    probe's ratio, dropped the ratio's "no interval" mark, so RD201 and RD205 quoted the 10x
    span that keeps their decision from clearing as a "90% interval"."""

    data = map_pipeline(stateful_ops=[], auto_parallel=True)
    f = facts(step=10.0, compute=4.0, real=10.0, data=data, epochs=5)  # a 60% share
    f.probes.compute_paired = PairedRatio(ratio=2.5, low=2.4, high=2.6, pairs=2,
                                          median_a_ms=10.0, median_b_ms=4.0)  # fmt: skip
    _, (rd201,) = run(f, "RD201")
    assert "(no interval: 2 pairs)" in rd201.message and "90% interval" not in rd201.message
    assert rd201.severity is Severity.INFO  # no interval: inconclusive, whatever the median
    _, (rd205,) = run(f, "RD205")
    row = {e.label: (e.value, e.unit) for e in rd205.evidence}["input share, 90% interval low"]
    assert row == ("no interval: 2 pairs", "")


def test_rd201_sketch_writes_autotune_as_the_users_file_can():
    """A new user's keras.utils.timeseries_dataset_from_array script imported only keras, and
    RD201's sketch appended .prefetch(tf.data.AUTOTUNE) to it (a NameError on tf); RD202
    already writes -1, AUTOTUNE's value, there."""
    f = facts(step=10.0, compute=3.0, input_only=8.0, data=map_pipeline())
    _, (finding,) = run(f, "RD201")
    assert ".prefetch(tf.data.AUTOTUNE))" in finding.fix.code
    f.run.tensorflow_names = {SCRIPT: []}  # the script binds no name to tensorflow
    _, (finding,) = run(f, "RD201")
    assert ".prefetch(-1))  # overlap input with the train step" in finding.fix.code
    assert ".map(preprocess, num_parallel_calls=-1)" in finding.fix.code  # a sequential map
    assert "tf." not in finding.fix.code
