"""`rnndoctor check` under tf.distribute, through the real CLI and capture children (slow): a
MirroredStrategy script over 2 logical CPU devices, and `--workers 2` on MultiWorkerMirroredStrategy
scripts (tf_keras fit, a Keras 3 custom loop with a slow worker, Keras 3 fit that fails). One run
per script, shared by its asserts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

pytestmark = pytest.mark.slow

SCRIPTS = Path(__file__).parents[1] / "scripts"
FAST = ["--steps", "4", "--warmup", "1", "--profile-steps", "1", "--timeout", "240"]


def _line_of(path: Path, needle: str) -> int:
    return next(i for i, t in enumerate(path.read_text().splitlines(), 1) if needle in t)


@pytest.fixture(scope="module")
def mirrored(tmp_path_factory) -> tuple[subprocess.CompletedProcess, dict, Path]:
    """One check of the MirroredStrategy script, probes on (the batch-size and
    steps_per_execution probes' tests read them; the strategy's tests read the facts that
    ``distribute.collect`` gathers after the probes) and one profiled step."""
    out = tmp_path_factory.mktemp("mirrored") / "r"
    result = subprocess.run(
        [sys.executable, "-m", "rnndoctor", "check", str(SCRIPTS / "mirrored_lstm.py"),
         "--out", str(out), "--format", "json,md,html", "--fail-on", "never", *FAST],
        cwd=out.parent, capture_output=True, text=True, timeout=300,
        env=dict(os.environ, COLUMNS="200"),
    )  # fmt: skip
    report = out / "report.json"
    return result, json.loads(report.read_text()) if report.is_file() else {}, out


def test_the_strategy_its_two_replicas_and_the_per_replica_batch(mirrored):
    result, doc, _ = mirrored
    assert result.returncode == 0, result.stderr
    st = doc["facts"]["strategy"]
    assert st["strategy"] == "MirroredStrategy" and st["replicas"] == 2 and st["workers"] == 1
    assert st["global_batch_size"] == 32 and st["per_replica_batch_size"] == 16
    assert st["distributed_by"] == "keras"  # fit distributed the dataset itself
    assert st["auto_shard_policy"] == "AUTO" and st["auto_shard_resolved"] == "OFF"
    script = SCRIPTS / "mirrored_lstm.py"
    assert st["dataset_location"]["line"] == _line_of(script, "# the dataset line")
    (worker,) = st["per_worker"]
    assert worker["task"] == "local" and worker["outcome"] == "completed"
    assert worker["median_step_time_ms"] == doc["facts"]["steps"]["median_step_time_ms"]


def test_the_usual_findings_under_the_strategy(mirrored):
    _, doc, _ = mirrored
    assert doc["facts"]["run"]["outcome"] == "completed"
    (rd101,) = [f for f in doc["findings"] if f["rule_id"] == "RD101"]
    assert rd101["location"]["line"] == _line_of(SCRIPTS / "mirrored_lstm.py", "# RD101")


def test_the_reports_show_the_strategy_section(mirrored):
    _, _, out = mirrored
    md = (out / "report.md").read_text()
    assert "## Distribution strategy" in md and "`MirroredStrategy`: 2 replicas in sync" in md
    assert "per replica 16" in md
    html = (out / "report.html").read_text()
    assert '<section id="strategy">' in html and "<code>MirroredStrategy</code>" in html
    line = "strategy: MirroredStrategy, 2 replicas, 1 worker, per-replica batch 16 (global 32)"
    assert line in mirrored[0].stdout  # the terminal summary


@pytest.fixture(scope="module")
def mirrored_probes(mirrored) -> tuple[subprocess.CompletedProcess, dict]:
    """The probes' view of the same check (the probes ran in it)."""
    return mirrored[:2]


def test_rd702_end_to_end_a_small_per_replica_batch(mirrored_probes):
    result, doc = mirrored_probes
    assert result.returncode == 0, result.stderr[-3000:]
    assert len([p for p in doc["facts"]["probes"]["batch_probe"] if p["samples_per_s"]]) >= 2
    (rd702,) = [f for f in doc["findings"] if f["rule_id"] == "RD702"]
    assert "Per-replica batch 16 (global 32 over 2 replicas)" in rd702["message"]


def test_the_steps_per_execution_probe_under_mirrored_strategy_says_why(mirrored_probes):
    _, doc = mirrored_probes
    why = doc["facts"]["probes"]["spe_probe_not_measured"]
    assert why.startswith("not measured: Keras' train function for steps_per_execution 16")
    assert "MirroredStrategy with 2 replicas (InvalidArgumentError" in why
    assert "RD403" not in {f["rule_id"] for f in doc["findings"]}


# -- rnndoctor check --workers 2 (MultiWorkerMirroredStrategy on 127.0.0.1) -------------------


def _workers_check(tmp_path_factory, name: str, script: str, **env: str):
    out = tmp_path_factory.mktemp(name) / "r"
    begin = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "rnndoctor", "check", str(SCRIPTS / script), "--workers", "2",
         "--out", str(out), "--format", "json,md", "--fail-on", "error", *FAST],
        cwd=out.parent, capture_output=True, text=True, timeout=300,
        env=dict(os.environ, COLUMNS="200", **env),
    )  # fmt: skip
    report = out / "report.json"
    doc = json.loads(report.read_text()) if report.is_file() else {}
    left = [
        p.pid
        for p in psutil.process_iter(["cmdline"], ad_value=None)
        if any(str(out) in part for part in p.info["cmdline"] or [])
    ]
    return result, doc, out, time.monotonic() - begin, left


@pytest.fixture(scope="module")
def keras2_fit(tmp_path_factory):
    pytest.importorskip("tf_keras")
    return _workers_check(
        tmp_path_factory, "k2", "mwms_fit.py", TF_USE_LEGACY_KERAS="1", MWMS_FIT_DIR="."
    )


@pytest.fixture(scope="module")
def keras3_loop(tmp_path_factory):
    return _workers_check(
        tmp_path_factory, "loop", "mwms_custom_loop.py", SLOW_WORKER="1", SLOW_MS="40"
    )


@pytest.fixture(scope="module")
def keras3_fit(tmp_path_factory):
    return _workers_check(
        tmp_path_factory, "k3", "mwms_fit.py", TF_USE_LEGACY_KERAS="0", MWMS_FIT_DIR="."
    )


def _both_workers_diagnosed(doc: dict, out: Path) -> dict:
    st = doc["facts"]["strategy"]
    assert st["strategy"] == "MultiWorkerMirroredStrategy" and st["workers"] == 2
    assert st["replicas"] == 2 and st["per_replica_batch_size"] == 8
    rows = st["per_worker"]
    assert [r["task"] for r in rows] == ["worker:0", "worker:1"]
    for i, row in enumerate(rows):
        assert row["outcome"] == "completed" and row["median_step_time_ms"] > 0
        assert row["outside_collectives_ms"] is not None  # from the chief's trace
        assert (out / f"facts-worker-{i}.json").is_file()
    # one profile run, with both workers' hosts (all on 127.0.0.1)
    runs = list((out / "profile" / "plugins" / "profile").iterdir())
    assert len(runs) == 1
    hosts = sorted(p.name for p in runs[0].glob("*.xplane.pb"))
    assert len(hosts) == 2 and all(h.startswith("127.0.0.1_") for h in hosts)
    assert sorted(st["profile_hosts"]) == [h[: -len(".xplane.pb")] for h in hosts]
    assert "tensorboard --logdir" in (out / "report.md").read_text()
    return st


def test_tf_keras_fit_under_mwms_two_workers_one_report(keras2_fit):
    result, doc, out, _, left = keras2_fit
    assert result.returncode == 0, result.stderr[-3000:]
    assert doc["facts"]["environment"]["keras_flavour"].startswith("tf_keras 2.")
    st = _both_workers_diagnosed(doc, out)
    assert st["distributed_by"] == "keras"
    for i in (0, 1):
        config = json.loads((out / f"facts-worker-{i}.json").read_text())
        assert config["strategy"]["task_id"] == i
    assert left == []


def test_data_sharding_over_files_at_the_dataset_line(keras2_fit):
    _, doc, _, _, _ = keras2_fit
    st = doc["facts"]["strategy"]
    assert st["auto_shard_policy"] == "DATA" and st["auto_shard_resolved"] == "DATA"
    (rd704,) = [f for f in doc["findings"] if f["rule_id"] == "RD704"]
    assert rd704["location"]["line"] == _line_of(SCRIPTS / "mwms_fit.py", "# the dataset line")


def test_keras3_custom_loop_under_mwms_and_the_straggler(keras3_loop):
    result, doc, out, _, left = keras3_loop
    assert result.returncode == 0, result.stderr[-3000:]
    st = _both_workers_diagnosed(doc, out)
    assert st["distributed_by"] == "experimental_distribute_dataset"
    script = SCRIPTS / "mwms_custom_loop.py"
    assert st["distribute_location"]["line"] == _line_of(script, "# the distribute line")
    (rd701,) = [f for f in doc["findings"] if f["rule_id"] == "RD701"]
    assert "worker 1 (worker:1) is a straggler" in rd701["message"]
    assert "extra input" in rd701["message"]
    assert left == []


def test_keras3_fit_under_mwms_is_the_preflight_error(keras3_fit):
    result, doc, _, wall_s, left = keras3_fit
    assert result.returncode == 1, result.stderr[-3000:]  # --fail-on error
    (rd706,) = [f for f in doc["findings"] if f["rule_id"] == "RD706"]
    assert rd706["severity"] == "error" and "keras-team/keras/issues/20585" in rd706["message"]
    failure = doc["facts"]["strategy"]["fit_failure"]
    assert failure["keras_function"] == "_maybe_symbolic_build"
    assert failure["keras_file"].endswith("trainer.py")
    assert rd706["location"]["line"] == _line_of(SCRIPTS / "mwms_fit.py", "# the fit line")
    assert wall_s < 200 and left == []  # no hang: both workers ended, none left behind


# -- workers started by the user's own launcher (TF_CONFIG each, no --workers) -----------------


def _launch(script: Path, out: Path, **env: str):
    """Two `rnndoctor check` processes, each with its own TF_CONFIG and one shared --out, as a
    user's launcher starts them; returns their exit codes and outputs, the merged report (or
    {}), and the pids of any process of theirs left behind."""
    from rnndoctor.cluster import free_ports

    workers = [f"127.0.0.1:{p}" for p in free_ports(2)]
    procs = []
    for i in (0, 1):
        config = {"cluster": {"worker": workers}, "task": {"type": "worker", "index": i}}
        environ = dict(os.environ, COLUMNS="200", TF_CONFIG=json.dumps(config), **env)
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "rnndoctor", "check", str(script),
             "--out", str(out), "--format", "json,md", "--fail-on", "error", *FAST],
            cwd=out.parent, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            env=environ,
        ))  # fmt: skip
    try:
        outputs = [p.communicate(timeout=300)[0] for p in procs]
    finally:
        for p in procs:
            p.kill()
    report = out / "report.json"
    doc = json.loads(report.read_text()) if report.is_file() else {}
    left = [
        p.pid
        for p in psutil.process_iter(["cmdline"], ad_value=None)
        if any(str(out) in part for part in p.info["cmdline"] or [])
    ]
    return [p.returncode for p in procs], outputs, doc, left


@pytest.fixture(scope="module")
def launched(tmp_path_factory):
    """The custom loop's two workers as a user's launcher starts them (worker 1 slow in its
    input)."""
    out = tmp_path_factory.mktemp("launched") / "r"
    begin = time.monotonic()
    codes, outputs, doc, left = _launch(SCRIPTS / "mwms_custom_loop.py", out, SLOW_WORKER="1")
    return codes, outputs, doc, out, time.monotonic() - begin, left


def test_workers_of_the_users_launcher_one_merged_report_and_one_trace(launched):
    codes, outputs, doc, out, _, left = launched
    assert codes == [0, 0], outputs
    st = _both_workers_diagnosed(doc, out)
    assert st["distributed_by"] == "experimental_distribute_dataset"
    assert not (out / "workers" / "worker-1" / "report.json").exists()  # the chief reports
    assert "the chief (worker 0) merges the report" in outputs[1]
    line = "strategy: MultiWorkerMirroredStrategy, 2 replicas, 2 workers, per-replica batch 8"
    assert line in outputs[0]  # the chief's terminal summary
    (rd701,) = [f for f in doc["findings"] if f["rule_id"] == "RD701"]
    assert "worker 1 (worker:1) is a straggler" in rd701["message"]
    assert left == []


def _the_third_attempts_report(doc: dict, logs: list[Path]) -> None:
    """The report of a run whose first two attempts worker 1's crash ended (``logs``: its
    kept logs): completed, the third attempt's, with a note that names both crashes."""
    assert doc["facts"]["run"]["outcome"] == "completed"
    (note,) = [n for n in doc["facts"]["run"]["notes"] if "ended by SIGABRT" in n]
    assert all(str(log) in note for log in logs)
    assert note.endswith("the workers ran twice more; this report is the third's")
    rows = doc["facts"]["strategy"]["per_worker"]
    assert [r["outcome"] for r in rows] == ["completed", "completed"]


def test_a_launched_worker_crashing_in_native_code_runs_the_workers_again(tmp_path):
    """The same under the user's launcher, where worker 1 crashes in two attempts: its check
    reports each crash in its facts, the chief's word (`<out>/attempt.json`) on each attempt
    makes both run once more, and the report is the third attempt's."""
    out, marker = tmp_path / "r", tmp_path / "crashed"
    codes, outputs, doc, left = _launch(
        SCRIPTS / "crash_once.py", out, CRASH_MARKER=str(marker), CRASH_TIMES="2"
    )
    assert codes == [0, 0], outputs
    assert marker.read_text() == "crashed\n" * 2  # worker 1 did abort twice
    logs = [out / f"workers-attempt-{k}" / "worker-1" / "script.log" for k in (1, 2)]
    assert all("Fatal Python error: Aborted" in log.read_text() for log in logs)
    assert outputs[0].count("running the workers once more") == 2
    said = "the chief runs the workers once more: worker 1 was ended by SIGABRT"
    assert outputs[1].count(said) == 2
    _the_third_attempts_report(doc, logs)
    worker_1 = json.loads((out / "facts-worker-1.json").read_text())
    assert worker_1["run"]["exit_status"] == 0  # the third attempt's facts, of the third job
    # the chief's last word is on the job it announced last, which both workers' facts carry
    word = json.loads((out / "attempt.json").read_text())
    announced = json.loads((out / "job.json").read_text())
    assert word["again"] is None and word["job"] == worker_1["run"]["job_id"]
    assert doc["facts"]["run"]["job_id"] == worker_1["run"]["job_id"]
    assert announced == {"job": word["job"]}
    assert left == []


def test_a_worker_crashing_in_native_code_runs_the_workers_again_up_to_three_times(tmp_path):
    """A worker ended by SIGABRT in two attempts (TF's profiler has done that when the chief's
    trace of the workers ended, in both attempts of one CI run): the workers run a third time,
    each crashed attempt's logs are kept, the report says so and is the third attempt's."""
    out, marker = tmp_path / "r", tmp_path / "crashed"
    result = subprocess.run(
        [sys.executable, "-m", "rnndoctor", "check", str(SCRIPTS / "crash_once.py"),
         "--workers", "2", "--out", str(out), "--format", "json", "--fail-on", "never", *FAST],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
        env=dict(os.environ, COLUMNS="200", CRASH_MARKER=str(marker), CRASH_TIMES="2"),
    )  # fmt: skip
    # crash_once.py builds no strategy: its third attempt's report is written, and the check
    # exits 2 for --workers on separate trainings (test_workers_on_a_script_without_a_strategy)
    assert result.returncode == 2, result.stderr[-3000:]
    assert "the script builds no tf.distribute strategy" in result.stderr
    assert marker.read_text() == "crashed\n" * 2  # worker 1 did abort twice
    logs = [out / f"workers-attempt-{k}" / "worker-1" / "script.log" for k in (1, 2)]
    assert all("Fatal Python error: Aborted" in log.read_text() for log in logs)
    assert result.stderr.count("running the workers once more") == 2
    assert "worker 1 was ended by SIGABRT (a crash in native code) in the second" in result.stderr
    doc = json.loads((out / "report.json").read_text())
    _the_third_attempts_report(doc, logs)


def test_workers_on_a_script_without_a_strategy_is_a_usage_error(tmp_path_factory):
    """A fresh user's ``--workers 2`` on a script that builds no strategy exited 0 with "no
    findings" (the workers run no probes), where a plain check of the script gives an RD301
    warning: a CI gate passed that should not. The workers were two separate trainings."""
    result, doc, out, _, left = _workers_check(tmp_path_factory, "nostrat", "tiny_lstm.py")
    assert result.returncode == 2, result.stderr[-3000:]
    assert "the script builds no tf.distribute strategy, so the workers ran separate" in (
        result.stderr
    )
    why = doc["facts"]["strategy"]["not_measured"]
    assert why.startswith("no worker's capture saw a tf.distribute strategy: the 2 workers")
    assert (out / "report.md").is_file() and left == []  # the report is written, no process left
