"""Workers started by the user's own launcher (a multi-worker ``TF_CONFIG``, no --workers): the
task and the profiler ports every worker derives from it, the chief's bounded wait for the
others' facts, and ``rnndoctor merge`` on saved facts (tests/data/distribute). Pure, no
TensorFlow."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from rnndoctor import cluster
from rnndoctor.cli.console import Console
from rnndoctor.cli.launched import run_merge, wait_for_facts
from rnndoctor.facts import Facts
from rnndoctor.options import ExitCode

DATA = Path(__file__).parents[1] / "data" / "distribute"


def _config(task: dict, chief: bool = False) -> dict[str, str]:
    spec = {"worker": ["10.0.0.2:2222", "10.0.0.3:2222"]}
    if chief:
        spec["chief"] = ["10.0.0.1:2000"]
    return {"TF_CONFIG": json.dumps({"cluster": spec, "task": task})}


def test_the_task_of_a_multi_worker_tf_config():
    task = cluster.launched_task(_config({"type": "worker", "index": 1}))
    assert task.index == 1 and task.count == 2 and task.hosts == ("10.0.0.2", "10.0.0.3")
    with_chief = cluster.launched_task(_config({"type": "worker", "index": 1}, chief=True))
    assert with_chief.index == 2 and with_chief.ports == (2000, 2222, 2222)  # chief first
    assert cluster.launched_task(_config({"type": "chief", "index": 0}, chief=True)).index == 0


def test_no_task_without_a_multi_worker_tf_config():
    assert cluster.launched_task({}) is None
    assert cluster.launched_task(_config({"type": "evaluator", "index": 0})) is None
    one = {"cluster": {"worker": ["127.0.0.1:2222"]}, "task": {"type": "worker", "index": 0}}
    assert cluster.launched_task({"TF_CONFIG": json.dumps(one)}) is None
    with pytest.raises(ValueError, match="not host:port"):
        bad = {"cluster": {"worker": ["a", "b:1"]}, "task": {"type": "worker", "index": 0}}
        cluster.launched_task({"TF_CONFIG": json.dumps(bad)})


def test_every_worker_derives_the_same_profiler_ports():
    env = _config({"type": "worker", "index": 0}, chief=True)
    task = cluster.launched_task(env)
    assert cluster.profiler_ports(task, env) == [3000, 3222, 3222]  # TF_CONFIG port + 1000
    assert cluster.profiler_ports(task, {**env, cluster.PROFILER_OFFSET_VAR: "7"}) == [
        2007, 2229, 2229,
    ]  # fmt: skip
    given = {**env, cluster.PROFILER_PORTS_VAR: "9001,9002,9003"}
    assert cluster.profiler_ports(task, given) == [9001, 9002, 9003]
    with pytest.raises(ValueError, match="2 ports for 3 tasks"):
        cluster.profiler_ports(task, {**env, cluster.PROFILER_PORTS_VAR: "9001,9002"})
    with pytest.raises(ValueError, match="out of range"):
        cluster.profiler_ports(task, {**env, cluster.PROFILER_OFFSET_VAR: "64000"})


def test_the_chief_traces_every_host_the_others_only_serve():
    chief = cluster.worker_environment(0, [3000, 3222], ["10.0.0.2", "10.0.0.3"], "/o", 1500)
    services = "grpc://10.0.0.2:3000,grpc://10.0.0.3:3222"
    assert chief[cluster.TRACE_SERVICES_VAR] == services
    assert chief[cluster.TRACE_LOGDIR_VAR] == os.path.join("/o", "profile")
    other = cluster.worker_environment(1, [3000, 3222], ["10.0.0.2", "10.0.0.3"], "/o", 1500)
    assert other == {
        cluster.PROFILER_PORT_VAR: "3222",
        cluster.TRACE_DONE_VAR: os.path.join("/o", "workers", "trace.done"),
    }


def test_the_chief_waits_a_bounded_time_and_leaves_an_earlier_jobs_facts(tmp_path):
    task = cluster.LaunchedTask(index=0, hosts=("10.0.0.2", "10.0.0.3", "10.0.0.4"),
                                ports=(2222, 2222, 2222))  # fmt: skip
    job = cluster.job_id(task, "b" * 32)
    facts = Facts.from_dict(json.loads((DATA / "straggler-custom-loop.json").read_text()))
    facts.run.job_id = cluster.job_id(task, "a" * 32)  # an earlier run of the same cluster
    facts.save(tmp_path / cluster.WORKER_FACTS.format(2))
    facts.run.job_id = job
    ours = tmp_path / cluster.WORKER_FACTS.format(1)
    facts.save(ours)
    an_hour_ago = time.time() - 3600  # its host's clock runs an hour behind the chief's
    os.utime(ours, (an_hour_ago, an_hour_ago))
    begin = time.monotonic()
    loaded, why = wait_for_facts(tmp_path, 3, job, 0.5)
    assert 0.5 <= time.monotonic() - begin < 5
    assert loaded[1] is not None and why[1] == ""
    assert loaded[2] is None and why[2] == "worker 2's facts did not arrive within 0.5 s"


def test_a_worker_reads_the_job_the_chief_announced(tmp_path):
    from rnndoctor.cli.launched import _announce, announced_job

    assert announced_job(tmp_path) is None  # no shared filesystem: nothing announced
    task = cluster.LaunchedTask(index=0, hosts=("127.0.0.1",) * 2, ports=(2222, 2223))
    job = cluster.job_id(task, "c" * 32)
    assert job == "127.0.0.1:2222,127.0.0.1:2223#" + "c" * 32
    _announce(tmp_path, job)
    assert announced_job(tmp_path) == job
    (tmp_path / cluster.JOB_FILE).write_text("not json")
    assert announced_job(tmp_path) is None


def test_merge_command_orders_the_workers_by_their_task(tmp_path):
    doc = json.loads((DATA / "straggler-custom-loop.json").read_text())
    files, rows = [], doc["strategy"]["per_worker"]  # each worker's own row, as it saves it
    for i in (1, 0):  # given out of order
        doc["strategy"]["task_id"] = i
        doc["strategy"]["per_worker"] = [rows[i] | {"index": 0}]
        path = tmp_path / f"from-host-{i}.json"
        path.write_text(json.dumps(doc))
        files.append(path)
    out = tmp_path / "merged"
    cli = {"out": str(out), "format": ["json"], "fail_on": "never"}
    assert run_merge(files, cli, Console()) == ExitCode.OK
    merged = json.loads((out / "report.json").read_text())["facts"]
    rows = merged["strategy"]["per_worker"]
    assert [r["facts_file"] for r in rows] == ["from-host-0.json", "from-host-1.json"]
    assert [r["task"] for r in rows] == ["worker:0", "worker:1"]
    assert "merged from 2 workers" in " ".join(merged["run"]["notes"])
    assert run_merge([tmp_path / "missing.json"], cli, Console()) == ExitCode.USAGE
    from typer.testing import CliRunner

    from rnndoctor.cli.app import app

    again = tmp_path / "again"
    result = CliRunner().invoke(app, ["merge", *map(str, files), "--out", str(again),
                                      "--format", "md", "--fail-on", "warning"])  # fmt: skip
    assert result.exit_code == ExitCode.FINDINGS, result.output  # RD701 is a warning there
    assert "| 1 | worker:1 |" in (again / "report.md").read_text()


def test_a_tf_config_that_cannot_be_read_is_a_usage_error(tmp_path):
    from typer.testing import CliRunner

    from rnndoctor.cli.app import app

    script = tmp_path / "train.py"
    script.write_text("print('never run')\n")
    result = CliRunner(env={"TF_CONFIG": "{not json"}).invoke(app, ["check", str(script)])
    assert result.exit_code == ExitCode.USAGE and "TF_CONFIG cannot be read" in result.output


def test_the_terminal_summary_gives_the_strategy_line():
    from rnndoctor.engine import evaluate
    from rnndoctor.reports.terminal import summary_lines

    doc = json.loads((DATA / "straggler-custom-loop.json").read_text())
    facts = Facts.from_dict(doc)
    lines = summary_lines(evaluate(facts))
    st = doc["strategy"]
    assert (
        f"strategy: MultiWorkerMirroredStrategy, 2 replicas, 2 workers, per-replica batch "
        f"{st['per_replica_batch_size']} (global {st['global_batch_size']})"
    ) in lines
    facts.strategy = None
    assert not any(line.startswith("strategy:") for line in summary_lines(evaluate(facts)))


def test_the_chief_writes_a_partial_report_naming_the_worker_that_did_not_arrive(tmp_path):
    from rnndoctor.cli.launched import gather_facts, merge_and_report
    from rnndoctor.cli.supervisor import ChildRun
    from rnndoctor.options import Options

    chief = Facts.from_dict(json.loads((DATA / "straggler-custom-loop.json").read_text()))
    chief.strategy.per_worker = chief.strategy.per_worker[:1]
    task = cluster.LaunchedTask(index=0, hosts=("127.0.0.1",) * 2, ports=(2222, 2223))
    options = Options(out=str(tmp_path), format=["json"], fail_on="never")
    job = cluster.job_id(task, "d" * 32)
    loaded, why = gather_facts(tmp_path, task, chief, job, 0.3)
    code = merge_and_report(task, loaded, why, ChildRun(status=0), options, Console())
    assert code == ExitCode.OK
    facts = json.loads((tmp_path / "report.json").read_text())["facts"]
    (_, missing) = facts["strategy"]["per_worker"]
    assert missing["outcome"] == "no facts"
    assert missing["message"] == "not merged: worker 1's facts did not arrive within 0.3 s"
    assert any(n.startswith("not merged: worker 1's facts") for n in facts["run"]["notes"])


def _ended(status: int | None) -> Facts:
    facts = Facts.from_dict(json.loads((DATA / "straggler-custom-loop.json").read_text()))
    facts.run.exit_status = status
    return facts


def test_a_native_crash_runs_a_launched_job_again_only_where_every_other_worker_completed():
    abrt, segv = -int(signal.SIGABRT), -int(signal.SIGSEGV)
    assert cluster.launched_crash([_ended(0), _ended(abrt)]) == (1, abrt)
    assert cluster.launched_crash([_ended(segv), _ended(0), _ended(abrt)]) == (0, segv)
    assert cluster.launched_crash([_ended(0), _ended(0)]) is None  # nothing crashed
    assert cluster.launched_crash([_ended(1), _ended(abrt)]) is None  # worker 0 failed too
    assert cluster.launched_crash([None, _ended(abrt)]) is None  # worker 0 cannot be told
    assert cluster.launched_crash([_ended(None), _ended(abrt)]) is None  # worker 0 was killed
    # the out-of-memory killer's SIGKILL is no crash in native code: running again would not help
    assert cluster.launched_crash([_ended(0), _ended(-int(signal.SIGKILL))]) is None
    assert cluster.launched_crash([]) is None


def test_a_worker_waits_a_bounded_time_for_the_chiefs_word_on_its_own_job(tmp_path):
    from rnndoctor.cli.launched import say_word, wait_for_word

    task = cluster.LaunchedTask(index=0, hosts=("127.0.0.1",) * 2, ports=(2222, 2223))
    earlier, job, again = (cluster.job_id(task, c * 32) for c in "efa")
    say_word(tmp_path, earlier, again, "an earlier run's word")
    begin = time.monotonic()
    assert wait_for_word(tmp_path, job, 0.5) is None  # an earlier job's word does not count
    assert 0.5 <= time.monotonic() - begin < 5
    say_word(tmp_path, job, again, "worker 1 was ended by SIGABRT")
    word = wait_for_word(tmp_path, job, 0.5)
    assert word == {"job": job, "again": again, "why": "worker 1 was ended by SIGABRT"}
    say_word(tmp_path, job, None, "")
    assert wait_for_word(tmp_path, job, 0.5)["again"] is None
    (tmp_path / cluster.WORD_FILE).write_text("not json")
    assert wait_for_word(tmp_path, job, 0.2) is None


def test_the_parent_records_the_captures_exit_status():
    from rnndoctor.cli.check import settle
    from rnndoctor.cli.supervisor import ChildRun

    facts = _ended(None)
    settle(facts, ChildRun(status=-int(signal.SIGABRT)), 240)
    assert facts.run.exit_status == -int(signal.SIGABRT)
    assert Facts.from_dict(facts.to_dict()).run.exit_status == -int(signal.SIGABRT)
    settle(facts, ChildRun(status=None, timed_out=True), 240)
    assert facts.run.exit_status is None


def test_the_merged_run_and_the_log_shown_are_the_failed_workers():
    from rnndoctor.facts import Outcome

    done, failed, timed_out = _ended(0), _ended(1), _ended(None)
    failed.run.outcome, timed_out.run.outcome = Outcome.SCRIPT_ERROR, Outcome.TIMEOUT
    assert cluster.failed_worker([failed, done]) == 0  # worker 0's own failure
    assert cluster.failed_worker([done, timed_out, failed]) == 2  # a failure before a timeout
    assert cluster.failed_worker([done, None, timed_out]) == 2
    assert cluster.failed_worker([done, None, done]) is None
    merged = cluster.merge([_ended(0), failed], ["a.json", "b.json"])
    assert merged.run.outcome == Outcome.SCRIPT_ERROR
