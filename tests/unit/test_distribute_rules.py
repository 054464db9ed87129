"""The tf.distribute rules (RD701-RD706) and the --workers merge, on real facts saved from
`rnndoctor check` runs (tests/data/distribute/*.json) and on small edits of them: pure, no
TensorFlow."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from rnndoctor import cluster
from rnndoctor.engine import Status, evaluate
from rnndoctor.facts import Facts, Outcome, StrategyFacts, WorkerFacts
from rnndoctor.findings import FixSafety, Severity

DATA = Path(__file__).parents[1] / "data" / "distribute"


def load(name: str) -> Facts:
    return Facts.from_dict(json.loads((DATA / name).read_text()))


def outcome(facts: Facts, rule_id: str):
    return next(o for o in evaluate(facts).outcomes if o.rule.id == rule_id)


def found(facts: Facts, rule_id: str) -> list:
    return [f for f in evaluate(facts).findings if f.rule_id == rule_id]


def test_the_strategy_facts_round_trip():
    facts = load("straggler-custom-loop.json")
    again = Facts.from_dict(json.loads(json.dumps(facts.to_dict())))
    assert again.strategy == facts.strategy
    assert again.strategy.per_worker[1].task == "worker:1"


def test_rd701_names_the_slow_worker_and_its_input():
    facts = load("straggler-custom-loop.json")  # worker 1 slept 40 ms in its input per batch
    # measured on a loaded machine: one trace's 35x, widened by the load, does not clear 1.2x
    assert max(m.widen_factor for m in facts.run.machine) > 2.9
    (f,) = found(facts, "RD701")
    assert f.severity is Severity.INFO and f.message.startswith("inconclusive (one trace")
    facts.run.machine = []  # the same figures on a quiet machine: the span 3.5x-350x clears
    (f,) = found(facts, "RD701")
    assert f.severity is Severity.WARNING and "worker 1 (worker:1) is a straggler" in f.message
    assert "extra input" in f.message
    assert f.location.line == facts.strategy.dataset_location.line
    assert f.fix.safety is FixSafety.DISPLAY_ONLY


def test_rd701_passes_on_balanced_workers_and_is_inconclusive_without_the_wait():
    facts = load("straggler-custom-loop.json")
    fast, slow = facts.strategy.per_worker
    balanced = dataclasses.replace(slow, outside_collectives_ms=fast.outside_collectives_ms * 1.1)
    facts.strategy.per_worker = [fast, balanced]
    assert found(facts, "RD701") == []
    facts.run.machine = []
    # the slow one waits longer in the collectives than the others: not a clear straggler
    waits = dataclasses.replace(slow, collective_ms=fast.collective_ms * 2)
    facts.strategy.per_worker = [fast, waits]
    (f,) = found(facts, "RD701")
    assert f.severity is Severity.INFO and "the others do not wait longer" in f.message
    # a 1.4x ratio from one trace is inconclusive even on a quiet machine (its span 0.14x-14x)
    facts.strategy.per_worker = [
        fast,
        dataclasses.replace(slow, outside_collectives_ms=1.4 * fast.outside_collectives_ms),
    ]
    (f,) = found(facts, "RD701")
    assert f.severity is Severity.INFO and f.message.startswith("inconclusive")


def test_the_trace_rules_are_not_evaluated_without_the_trace():
    facts = load("mirrored-probes.json")  # MirroredStrategy: one process, no workers' trace
    for rule_id in ("RD701", "RD703", "RD705"):
        assert outcome(facts, rule_id).status is Status.NOT_EVALUATED, rule_id


def test_rd703_at_xprofs_cut_off_with_the_gradient_bytes():
    facts = load("straggler-custom-loop.json")
    (f,) = found(facts, "RD703")
    assert "1,572 gradient bytes per step" in f.message
    facts.strategy.collective_share = 0.059
    assert found(facts, "RD703") == []


def test_rd704_data_sharding_over_files_at_the_dataset_line():
    facts = load("data-sharding-over-files.json")  # tf_keras fit, TextLineDataset, DATA
    (f,) = found(facts, "RD704")
    assert "sharded DATA" in f.message and "reads every file" in f.message
    assert f.location.line == facts.strategy.dataset_location.line
    assert "AutoShardPolicy.FILE" in f.fix.code


def test_rd704_off_with_several_workers_and_data_on_arrays_passes():
    facts = load("straggler-custom-loop.json")  # DATA over in-memory arrays: TF's fallback
    assert found(facts, "RD704") == []
    facts.strategy.auto_shard_resolved = "OFF"
    (f,) = found(facts, "RD704")
    assert "whole dataset" in f.message


def test_rd705_input_bound_on_one_worker_only():
    facts = load("straggler-custom-loop.json")
    (f,) = found(facts, "RD705")
    assert "worker 1 (worker:1)" in f.message and "worker 0" not in f.message


def test_rd702_per_replica_batch_below_the_probes_efficient_point():
    facts = load("mirrored-probes.json")  # global 32 over 2 replicas; the probe at 32, 64, 128
    (f,) = found(facts, "RD702")  # 128 is the only point within 90% of the best samples/s
    assert "Per-replica batch 16 (global 32 over 2 replicas)" in f.message
    assert "global batch of 128 (64 per replica)" in f.message
    assert "PER_REPLICA_BATCH = 64" in f.fix.code
    facts.strategy.global_batch_size = 128
    assert found(facts, "RD702") == []


def test_rd706_the_keras3_fit_failure_is_an_error_with_both_ways_out():
    facts = load("keras3-fit-fails.json")
    (f,) = found(facts, "RD706")
    assert f.severity is Severity.ERROR
    assert "keras-team/keras/issues/20585" in f.message and "72388" in f.message
    assert "TF_USE_LEGACY_KERAS=1" in f.fix.code and "strategy.run" in f.fix.code
    assert f.location.line == facts.strategy.fit_failure.location.line
    facts.strategy.fit_failure = None
    assert found(facts, "RD706") == []


def test_tf_config_and_the_trace_services_are_on_loopback():
    ports = cluster.free_ports(4)
    assert len(set(ports)) == 4
    config = json.loads(cluster.tf_config(ports[:2], 1))
    assert config["task"] == {"type": "worker", "index": 1}
    assert config["cluster"]["worker"] == [f"127.0.0.1:{p}" for p in ports[:2]]
    assert cluster.trace_services(ports[2:]) == ",".join(f"grpc://127.0.0.1:{p}" for p in ports[2:])


def test_merge_folds_the_chiefs_trace_figures_and_a_failed_worker():
    chief = load("straggler-custom-loop.json")
    traced = [dataclasses.replace(w) for w in chief.strategy.per_worker]
    chief.strategy.traced = traced
    chief.strategy.per_worker = [WorkerFacts(index=0, task="worker:0")]
    other = load("straggler-custom-loop.json")
    other.run.outcome, other.run.message = Outcome.SCRIPT_ERROR, "ValueError: boom"
    merged = cluster.merge([chief, other], ["facts-worker-0.json", "facts-worker-1.json"])
    rows = merged.strategy.per_worker
    assert [r.index for r in rows] == [0, 1] and rows[1].facts_file == "facts-worker-1.json"
    assert rows[1].outside_collectives_ms == traced[1].outside_collectives_ms
    assert merged.run.outcome == Outcome.SCRIPT_ERROR and merged.run.message == "ValueError: boom"


def test_merge_of_workers_without_facts():
    assert cluster.merge([None, None], ["a", "b"]) is None
    lone = load("keras3-fit-fails.json")
    lone.strategy = None
    merged = cluster.merge([None, lone], ["a", "b"])
    assert merged.strategy.not_measured and merged.strategy.per_worker[0].outcome == "no facts"
    assert isinstance(merged.strategy, StrategyFacts)


@pytest.mark.parametrize(
    ("policy", "workers", "files", "resolved"),
    [("AUTO", 1, True, "OFF"), ("AUTO", 2, True, "FILE"), ("AUTO", 2, False, "DATA"),
     ("OFF", 2, True, "OFF"), ("DATA", 2, True, "DATA"), ("AUTO", 2, None, None)],
)  # fmt: skip
def test_auto_shard_resolves_as_tf_data_does(policy, workers, files, resolved):
    from rnndoctor.capture.distribute import resolve_auto_shard

    assert resolve_auto_shard(policy, workers, files)[0] == resolved


def test_the_reports_give_the_per_worker_table_with_each_workers_findings():
    from rnndoctor.reports import RENDERERS

    report = evaluate(load("straggler-custom-loop.json"))
    md = RENDERERS["md"](report)
    row = next(line for line in md.splitlines() if line.startswith("| 1 | worker:1 |"))
    assert "332.59" in row and "RD701" in row and "RD705" in row
    assert next(line for line in md.splitlines() if line.startswith("| 0 |")).endswith("| — |")
    html = RENDERERS["html"](report)
    assert '<section id="strategy">' in html and "<code>MultiWorkerMirroredStrategy</code>" in html
    assert "tensorboard --logdir" in html and "<code>RD701</code>" in html


def test_workers_usage_errors():
    from rnndoctor.options import Options, OptionsError

    Options(workers=2).validate_window()
    with pytest.raises(OptionsError, match="--workers must be at least 1"):
        Options(workers=0).validate_window()
    with pytest.raises(OptionsError, match="drop --workers"):
        Options(workers=2, verify=True).validate_window()


def test_rd403_not_evaluated_when_the_multi_step_function_fails_under_the_strategy():
    facts = load("mirrored-probes.json")  # the 16-step point failed: InvalidArgumentError
    assert "InvalidArgumentError" in facts.probes.spe_probe[1].stopped
    facts.probes.spe_probe_not_measured = "not measured: Keras' train function ... fails"
    result = outcome(facts, "RD403")
    assert result.status is Status.NOT_EVALUATED
    assert result.reason == "steps_per_execution probe: " + facts.probes.spe_probe_not_measured


@pytest.mark.parametrize(
    ("key", "option", "constant"),
    [
        ("RD703", "min_collective_share", "kAllReduceBoundThresholdInPercent = 6"),
        ("RD705", "min_input_share", "kHighlyInfeedBoundThresholdInPercent = 20"),
    ],
)
def test_the_xprof_cut_offs_cite_their_constant_and_say_the_denominator_differs(
    key, option, constant
):
    from rnndoctor.rules import get_rule

    rule = get_rule(key)
    opt = next(o for o in rule.options if o.name == option)
    value = int(constant.rsplit("= ", 1)[1])
    assert opt.default == value / 100
    xprof_file = "openxla/xprof xprof/convert/op_stats_to_input_pipeline_analysis.cc"
    assert xprof_file in opt.source and constant in opt.source
    assert "step time there" in opt.source
    bounds = rule.doc.split("Bounds:", 1)[1].split("\n\n", 1)[0]
    assert "denominator is not xprof's" in bounds and "step time" in bounds


DISTRIBUTED_RULES = ("RD701", "RD702", "RD703", "RD704", "RD705", "RD706")


def test_a_job_without_a_strategy_passes_every_distributed_rule():
    """A plain fit (no tf.distribute strategy seen, its window measured): nothing to check, so
    the RD7xx rules pass instead of reading "facts missing" on every ordinary check."""
    path = Path(__file__).parents[1] / "data" / "host_hw" / "fit-run-eagerly.json"
    facts = Facts.from_dict(json.loads(path.read_text()))
    assert facts.strategy is None and facts.steps is not None
    for rule_id in DISTRIBUTED_RULES:
        assert outcome(facts, rule_id).status is Status.PASSED, rule_id


def test_without_a_strategy_and_without_a_window_the_distributed_rules_are_not_evaluated():
    path = Path(__file__).parents[1] / "data" / "host_hw" / "fit-run-eagerly.json"
    facts = dataclasses.replace(Facts.from_dict(json.loads(path.read_text())), steps=None)
    for rule_id in ("RD701", "RD703", "RD704", "RD705", "RD706"):
        result = outcome(facts, rule_id)
        assert result.status is Status.NOT_EVALUATED, rule_id
        assert "facts section 'strategy' was not gathered" in result.reason, rule_id


def test_merge_of_workers_that_saw_no_strategy_says_they_were_separate_trainings():
    """A fresh user's ``--workers 2`` on a script with no strategy read "strategy: not seen (the
    chief's capture saw no tf.distribute strategy)" and "no findings": two separate trainings,
    each timed beside the other, with nothing saying so."""
    path = Path(__file__).parents[1] / "data" / "host_hw" / "fit-run-eagerly.json"
    workers = [Facts.from_dict(json.loads(path.read_text())) for _ in range(2)]
    assert all(w.strategy is None and w.steps is not None for w in workers)
    merged = cluster.merge(workers, ["facts-worker-0.json", "facts-worker-1.json"])
    why = merged.strategy.not_measured
    assert why.startswith("no worker's capture saw a tf.distribute strategy: the 2 workers each")
    assert "separate copy of the model" in why and "without --workers" in why
    from rnndoctor.reports.terminal import _strategy_line

    assert _strategy_line(merged).startswith("strategy: not seen (no worker's capture saw")
