"""The bad-input corpus (issue 6): `rnndoctor check` on broken, hostile and unusual scripts.

Each case asserts its exit code, its one-line message, that no Python traceback reaches the
terminal (unless --debug), a parseable partial report.json wherever facts were gathered, and that
no process of the check survives it (the process table is scanned for an environment marker that
every process of the case inherits). The cases run in parallel threads, each in its own folder,
so that the whole corpus stays within a few minutes on 2 cores; cases that are not about the
probes pass --no-probes.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slow

CORPUS = Path(__file__).parents[1] / "corpus"
# --fail-on never: a completed case exits 0 whatever the rules find on its tiny model
FAST = ["--steps", "3", "--warmup", "1", "--profile-steps", "1", "--fail-on", "never"]
MARK = "RNNDOCTOR_CORPUS_MARK"
TOKEN = "corpus-s3cr3t-0123456789"
WORKERS = 3  # parallel checks: most cases wait on a timeout or on TF's import
BUDGET_S = 300.0  # issue 6: the whole corpus in under 5 minutes on 2 cores
SYNTAX_ERROR = "import keras\n\nmodel = keras.Sequential([keras.layers.LSTM(8)])\nepochs = = 3\n"


@dataclass(frozen=True)
class Case:
    """One corpus case: what to run, and what it must give.

    ``message`` is a regular expression: for a failure (exit 2 and up) it must match the last
    line on stderr after ``rnndoctor: error: ``; for a success, one line of stdout.
    """

    name: str
    script: str | None  # a file in tests/corpus; None: the case makes its own input
    exit_code: int
    message: str
    timeout: float = 120.0
    probes: bool = False
    script_args: tuple[str, ...] = ()
    options: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    stdin: bytes | None = None
    report: bool = True  # facts were gathered: report.json must exist and parse
    outcome: str | None = None  # facts.run.outcome
    debug: bool = False
    project: bool = False  # copy the script and _tiny.py into the working folder and run there


@dataclass
class Run:
    case: Case
    work: Path
    out: Path
    result: subprocess.CompletedProcess
    seconds: float
    leftovers: list[str]
    tree_before: dict[str, str] | None = None
    tree_after: dict[str, str] | None = None

    @property
    def doc(self) -> dict[str, Any]:
        return json.loads((self.out / "report.json").read_text())


def _corpus(name: str) -> str:
    return re.escape(str(CORPUS / name))


CASES = [
    Case("missing_file", None, 2, r"script not found: .*missing\.py$", report=False),
    Case("directory", None, 2, r"not a file: .* \(give the training script's \.py file\)$",
         report=False),
    Case("syntax_error", None, 3, r"SyntaxError: invalid syntax at .*syntax_error\.py:4 "
         r"\(partial report written", outcome="script_error"),
    Case("import_error", "import_error.py", 3,
         r"ModuleNotFoundError: No module named 'rnndoctor_corpus_no_such_module' at "
         + _corpus("import_error.py") + ":2 ", outcome="script_error"),
    Case("no_fit", "no_fit.py", 3,
         r"the script ended without calling Model\.fit or applying gradients with a Keras "
         r"optimizer \(partial", outcome="no_fit"),
    Case("loops_before_fit", "loops_before_fit.py", 4,
         r"--timeout 20 s reached during phase 'running the script until its first Model\.fit "
         r"call or gradient update'; the script was stopped$", timeout=20, outcome="timeout"),
    Case("crash_in_window", "crash_in_window.py", 3,
         r"RuntimeError: simulated crash in the middle of training at "
         + _corpus("crash_in_window.py") + ":10 ", outcome="script_error"),
    Case("sys_exit_in_callback", "sys_exit_in_callback.py", 3,
         r"the script called sys\.exit\(0\) during the diagnosis at "
         + _corpus("sys_exit_in_callback.py") + ":12 ", outcome="script_error"),
    Case("os_exit_in_callback", None, 3,
         r"the script called os\._exit\(3\) during the diagnosis at .*os_exit_in_callback\.py:10 ",
         outcome="script_error"),
    Case("interrupted", "loops_before_fit.py", 130,
         r"^interrupted \(Ctrl-C\) during phase 'running the script until its first Model\.fit "
         r"call or gradient update'$", timeout=120, outcome="interrupted"),
    Case("terminated", "loops_before_fit.py", 130,
         r"^interrupted \(SIGTERM\) during phase 'running the script until its first "
         r"Model\.fit call or gradient update'$", timeout=120, outcome="interrupted"),
    Case("hanging_generator", "hanging_generator.py", 4,
         r"--timeout 30 s reached during phase 'measured steps'; the script was stopped$",
         timeout=30, outcome="timeout"),
    Case("infinite_dataset", "infinite_dataset.py", 0, r"^step time: median [\d.]+ ms",
         probes=True, outcome="completed"),
    Case("probe_out_of_memory", "probe_out_of_memory.py", 0,
         r"^batch-size probe stopped at batch size \d+: (not run: estimated [\d.]+ MiB more "
         r"memory, over the 1 MiB limit \(RNNDOCTOR_PROBE_MEMORY_MIB\)|out of memory)$",
         probes=True, env={"RNNDOCTOR_PROBE_MEMORY_MIB": "1"}, outcome="completed"),
    Case("no_rnn", "no_rnn.py", 0,
         r"^model 'convnet' has no RNN layer: the RD1xx rules found nothing$", probes=True,
         outcome="completed"),
    Case("keras_backend_env", "no_fit.py", 3,
         r"Keras backend is 'jax' \(from the KERAS_BACKEND environment variable\); rnndoctor "
         r"diagnoses the TensorFlow backend only: run the check with KERAS_BACKEND=tensorflow",
         env={"KERAS_BACKEND": "jax"}, outcome="capture_error"),
    Case("script_sets_backend", "sets_other_backend.py", 3,
         r"the script sets KERAS_BACKEND='jax', but rnndoctor diagnoses the TensorFlow backend "
         r"only .* at " + _corpus("sets_other_backend.py") + ":5 ", outcome="capture_error"),
    Case("dict_inputs", "dict_inputs.py", 0, r"^step time: median [\d.]+ ms", probes=True,
         outcome="completed"),
    Case("worker_processes", "worker_processes.py", 0, r"^step time: median [\d.]+ ms",
         probes=True, outcome="completed"),
    Case("reads_stdin", "reads_stdin.py", 3,
         r"EOFError: EOF when reading a line \(the check gives the script an empty standard "
         r"input: redirect one .* at " + _corpus("reads_stdin.py") + ":5 ",
         outcome="script_error"),
    Case("reads_redirected_stdin", "reads_stdin.py", 0, r"^step time: median [\d.]+ ms",
         stdin=b"train.csv\n", outcome="completed"),
    Case("needs_arguments", "needs_arguments.py", 3,
         r"the script's argument parser rejected its arguments \(sys\.exit\(2\)\): the following "
         r"arguments are required: --epochs, --batch-size; give the script's own arguments "
         r"after `--`", outcome="no_fit"),
    Case("arguments_after_dashdash", "needs_arguments.py", 0, r"^step time: median [\d.]+ ms",
         script_args=("--epochs", "1", "--batch-size", "8"), outcome="completed"),
    Case("debug_shows_the_traceback", "crash_in_window.py", 3,
         r"RuntimeError: simulated crash in the middle of training at ", options=("--debug",),
         debug=True, outcome="script_error"),
    Case("redacted_script_log", "prints_a_secret.py", 3, r"FileNotFoundError: no training data "
         r"next to ", options=("--redact",), env={"RNNDOCTOR_CORPUS_TOKEN": TOKEN},
         outcome="script_error", project=True),
    Case("plain_file_write", "writes_plain_file.py", 0,
         r"^note: the script wrote outside --out during the check .*vocab\.txt \(open\('w'\) at ",
         outcome="completed", project=True),
    Case("child_commands", "runs_child_commands.py", 0,
         r"^note: the script ran commands in child processes \(recorded, not blocked\): "
         r"os\.system 'echo hi > made_by_child\.txt' at ", outcome="completed", project=True),
    Case("fit_loop_writes", "fit_loop_writes.py", 0, r"^step time: median [\d.]+ ms",
         outcome="completed", project=True),
    Case("saves_everything", "saves_everything.py", 0, r"^neutralised: ModelCheckpoint callback "
         r"\(would have written ckpt/epoch\{epoch\}-batch\.keras\) at saves_everything\.py:25$",
         outcome="completed", project=True),
]  # fmt: skip
BY_NAME = {c.name: c for c in CASES}


# -- running -----------------------------------------------------------------------------------
def _tree(root: Path, skip: Path) -> dict[str, str]:
    """sha256 of every file under ``root`` (and every folder, as ``<dir>``), ``skip`` excluded."""
    digests = {}
    for path in sorted(root.rglob("*")):
        if path == skip or skip in path.parents:
            continue
        rel = str(path.relative_to(root))
        digests[rel] = "<dir>" if path.is_dir() else hashlib.sha256(path.read_bytes()).hexdigest()
    return digests


def _marked(mark: str) -> list[tuple[int, str]]:
    """Live processes whose environment holds ``MARK=mark`` (zombies have none)."""
    needle = f"{MARK}={mark}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            environ = Path(f"/proc/{entry}/environ").read_bytes()
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        if needle in environ.split(b"\0"):
            found.append((int(entry), cmdline.replace(b"\0", b" ").decode(errors="replace")))
    return found


def _interrupt(
    command: list[str],
    work: Path,
    env: dict[str, str],
    facts: Path,
    phase: str,
    signum: int = signal.SIGINT,
) -> subprocess.CompletedProcess:
    """Runs the CLI and sends it SIGINT (what Ctrl-C sends; or ``signum``, to the CLI's process
    alone, as ``kill`` does) once the child reaches ``phase``.

    The CLI starts with SIGINT at its default, as a command in a terminal's foreground does: a
    pytest started in the background by a non-interactive shell (``.ci/run &``) ignores SIGINT,
    its children inherit that, and a Python started with SIGINT ignored raises no
    KeyboardInterrupt (what rnndoctor's Ctrl-C handling rests on, and rightly honours)."""
    foreground = [sys.executable, "-c", "import os, signal, sys; signal.signal(signal.SIGINT, "
                  "signal.SIG_DFL); os.execv(sys.argv[1], sys.argv[1:])"]  # fmt: skip
    proc = subprocess.Popen(
        [*foreground, *command], cwd=work, env=env, stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        try:
            if json.loads(facts.read_text())["run"]["phase"].startswith(phase):
                break
        except (OSError, ValueError, KeyError):
            pass
        time.sleep(0.2)
    time.sleep(1.0)  # the loop before fit is running
    proc.send_signal(signum)
    stdout, stderr = proc.communicate(timeout=60)
    return subprocess.CompletedProcess(command, proc.returncode, stdout, stderr)


def _run(case: Case, root: Path) -> Run:
    work = root / case.name
    work.mkdir(parents=True)
    out = work / "report"
    if case.name == "missing_file":
        script = work / "missing.py"
    elif case.name == "directory":
        script = work
    elif case.name == "syntax_error":
        script = work / "syntax_error.py"
        script.write_text(SYNTAX_ERROR)
    elif case.name == "os_exit_in_callback":
        script = work / "os_exit_in_callback.py"
        script.write_text(
            "import os\n\nimport keras\nfrom _tiny import data, lstm_model\n\n\n"
            "class Leave(keras.callbacks.Callback):\n"
            "    def on_train_batch_end(self, batch, logs=None):\n"
            "        if batch == 2:\n            os._exit(3)\n\n\n"
            "x, y = data()\nlstm_model().fit(x, y, batch_size=16, callbacks=[Leave()])\n"
        )
        shutil.copy(CORPUS / "_tiny.py", work)
    elif case.project:
        shutil.copy(CORPUS / "_tiny.py", work)
        shutil.copy(CORPUS / case.script, work)
        script = Path(case.script)  # relative: the user runs it from its own folder
        out = work / "rnndoctor-report"
    else:
        script = CORPUS / case.script
    mark = uuid.uuid4().hex
    command = [
        sys.executable, "-m", "rnndoctor", "check", str(script), "--out", str(out), *FAST,
        "--timeout", f"{case.timeout:g}", *([] if case.probes else ["--no-probes"]),
        *case.options, *(["--", *case.script_args] if case.script_args else []),
    ]  # fmt: skip
    env = dict(os.environ, COLUMNS="200", TF_CPP_MIN_LOG_LEVEL="2", **case.env)
    env[MARK] = mark
    before = _tree(work, out) if case.project else None
    started = time.monotonic()
    if case.name in ("interrupted", "terminated"):
        signum = signal.SIGINT if case.name == "interrupted" else signal.SIGTERM
        result = _interrupt(command, work, env, out / "facts.json", "running the script", signum)
    else:
        result = subprocess.run(
            command, cwd=work, env=env, capture_output=True, text=True,
            timeout=case.timeout + 120,
            input=case.stdin.decode() if case.stdin is not None else None,
            stdin=None if case.stdin is not None else subprocess.DEVNULL,
        )  # fmt: skip
    seconds = time.monotonic() - started
    leftovers = _marked(mark)
    for pid, _ in leftovers:  # the test started them: do not let them outlive it
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    after = _tree(work, out) if case.project else None
    return Run(case, work, out, result, seconds, [c for _, c in leftovers], before, after)


@pytest.fixture(scope="module")
def runs(request, tmp_path_factory) -> dict[str, Run]:
    """Runs the selected cases in parallel threads; ``runs[name]`` is each one's result."""
    selected = {
        item.callspec.params["case"]
        for item in request.session.items
        if item.module is request.module and hasattr(item, "callspec")
        and "case" in item.callspec.params
    } or set(BY_NAME)  # fmt: skip
    root = tmp_path_factory.mktemp("corpus")
    started = time.monotonic()
    with ThreadPoolExecutor(WORKERS) as pool:
        # the timeouts first: they mostly wait, so the other cases overlap with them
        waits = (4, 130)  # the cases that wait on a timeout or a Ctrl-C
        ordered = sorted(
            (BY_NAME[n] for n in selected), key=lambda c: (c.exit_code not in waits, c.name)
        )
        runs = pool.map(lambda c: _run(c, root), ordered)
        done = {c.name: r for c, r in zip(ordered, runs, strict=True)}
    total = time.monotonic() - started
    timings = ", ".join(f"{n} {r.seconds:.1f} s" for n, r in sorted(done.items()))
    print(f"\ncorpus: {len(done)} cases in {total:.1f} s wall ({timings})")
    done["__total__"] = total  # type: ignore[assignment]
    return done


# -- the assertions every case gets ------------------------------------------------------------
def _message_line(run: Run) -> str:
    case, result = run.case, run.result
    if case.exit_code >= 2:
        last = result.stderr.strip().splitlines()[-1]
        assert last.startswith("rnndoctor: error: "), result.stderr
        return last.removeprefix("rnndoctor: error: ")
    pattern = re.compile(case.message)
    return next((line for line in result.stdout.splitlines() if pattern.search(line)), "")


@pytest.mark.parametrize("case", [c.name for c in CASES])
def test_case(case: str, runs: dict[str, Run]):
    run = runs[case]
    spec, result = run.case, run.result
    output = result.stdout + result.stderr
    assert result.returncode == spec.exit_code, output
    assert re.search(spec.message, _message_line(run)), output
    if spec.debug:
        assert "Traceback (most recent call last)" in result.stderr
    else:
        assert "Traceback" not in output
    if spec.report:
        doc = run.doc
        assert doc["facts"]["run"]["argv"][1:] == list(spec.script_args)
        if spec.outcome:
            assert doc["facts"]["run"]["outcome"] == spec.outcome
        assert {"facts", "findings", "rules"} <= set(doc)
    else:
        assert not (run.out / "report.json").exists()
    assert run.leftovers == [], f"processes left behind: {run.leftovers}"


def test_the_corpus_runs_within_its_budget(runs):
    assert runs["__total__"] < BUDGET_S


# -- what particular cases must also show ------------------------------------------------------


def test_a_timeout_names_the_phase_cut_short_and_kills_escaped_processes(runs):
    run = runs["loops_before_fit"]
    facts = run.doc["facts"]
    phase = "running the script until its first Model.fit call or gradient update"
    assert facts["run"]["phase"] == phase
    assert facts["run"]["cut_short"][-1]["phase"] == phase
    assert "--timeout 20 s reached" in facts["run"]["cut_short"][-1]["reason"]
    assert any("left its process group" in n for n in facts["run"]["notes"])
    assert run.seconds < 20 + 30
    assert f"cut short: {phase}: --timeout 20 s reached" in run.result.stdout


def test_ctrl_c_ends_every_process_and_keeps_the_partial_report(runs):
    run = runs["interrupted"]
    facts = run.doc["facts"]
    assert facts["run"]["cut_short"][-1]["reason"].startswith("interrupted (Ctrl-C)")
    assert facts["environment"] is not None
    assert run.leftovers == []


def test_sigterm_to_the_cli_alone_ends_the_scripts_processes_as_ctrl_c_does(runs):
    """The capture child has its own session, so a signal to the CLI never reaches it: before,
    SIGTERM killed the CLI at once and left the script running past --timeout."""
    run = runs["terminated"]
    facts = run.doc["facts"]
    assert facts["run"]["cut_short"][-1]["reason"].startswith("interrupted (SIGTERM)")
    assert run.leftovers == [] and run.seconds < 60


def test_a_hanging_generator_keeps_the_steps_measured_before_the_hang(runs):
    facts = runs["hanging_generator"].doc["facts"]
    assert facts["run"]["cut_short"][-1]["phase"] == "measured steps"
    assert facts["steps"]["measured_steps"] >= 1 and facts["steps"]["median_step_time_ms"] > 0
    assert facts["model"]["rnn_layers"][0]["class_name"] == "LSTM"


def test_os_exit_in_the_window_keeps_the_partial_facts(runs):
    facts = runs["os_exit_in_callback"].doc["facts"]
    assert facts["steps"]["measured_steps"] >= 1
    assert facts["model"]["rnn_layers"][0]["class_name"] == "LSTM"


def test_a_crash_in_the_window_keeps_the_partial_facts(runs):
    run = runs["crash_in_window"]
    facts = run.doc["facts"]
    assert facts["steps"]["measured_steps"] >= 1
    assert facts["model"]["rnn_layers"]
    assert "  | RuntimeError: simulated crash in the middle of training" in run.result.stderr


def test_the_model_without_rnn_is_still_evaluated(runs):
    doc = runs["no_rnn"].doc
    assert doc["facts"]["model"]["rnn_layers"] == []
    statuses = {r["rule_id"]: r["status"] for r in doc["rules"]}
    assert statuses["RD101"] == "passed"  # evaluated, on a model that has no RNN
    # the general input and host rules are evaluated as on any model
    assert statuses["RD201"] != "not_evaluated" and statuses["RD403"] != "not_evaluated"
    assert doc["facts"]["steps"]["median_step_time_ms"] > 0


def test_another_backend_saves_the_run_facts(runs):
    facts = runs["keras_backend_env"].doc["facts"]
    assert facts["run"]["error_type"] == "KerasBackend"
    assert facts["environment"] is None and facts["model"] is None


def test_an_infinite_dataset_is_diagnosed_within_the_budgets(runs):
    run = runs["infinite_dataset"]
    facts = run.doc["facts"]
    assert facts["fit"]["steps_per_epoch"] is None and facts["fit"]["data_kind"] == "tf.data"
    assert facts["steps"]["measured_steps"] == 3
    assert facts["probes"]["compute_only_ms"] is not None
    assert run.seconds < 120


def test_the_batch_size_probe_stops_cleanly_at_its_memory_cap(runs):
    facts = runs["probe_out_of_memory"].doc["facts"]
    points = facts["probes"]["batch_probe"]
    assert points[0]["step_time_ms"] > 0  # the user's own batch size was measured
    assert points[-1]["stopped"] and points[-1]["step_time_ms"] is None


def test_dict_inputs_are_diagnosed(runs):
    facts = runs["dict_inputs"].doc["facts"]
    assert facts["fit"]["data_kind"] == "numpy (multi-input)"
    assert [r["class_name"] for r in facts["model"]["rnn_layers"]] == ["GRU"]


def test_arguments_after_dashdash_reach_the_script(runs):
    facts = runs["arguments_after_dashdash"].doc["facts"]
    assert facts["fit"]["batch_size"] == 8 and facts["fit"]["epochs"] == 1


def test_the_debug_flag_shows_the_script_traceback(runs):
    stderr = runs["debug_shows_the_traceback"].result.stderr
    assert 'crash_in_window.py", line 10, in on_train_batch_end' in stderr


def test_redact_cleans_script_log_and_the_terminal(runs):
    run = runs["redacted_script_log"]
    log = (run.out / "script.log").read_text()
    assert TOKEN not in log and TOKEN not in run.result.stdout + run.result.stderr
    assert "<redacted:RNNDOCTOR_CORPUS_TOKEN>" in log
    assert str(run.work) not in log  # paths under the script's folder became relative
    assert "prints_a_secret.py" in log


def test_plain_writes_are_reported_not_blocked(runs):
    run = runs["plain_file_write"]
    assert (run.work / "vocab.txt").read_text() == "a\nb\n"
    assert run.tree_after != run.tree_before


def test_child_commands_are_listed_with_their_line_and_what_they_wrote(runs):
    run = runs["child_commands"]
    assert (run.work / "made_by_child.txt").read_text() == "hi\n"  # recorded, not blocked
    new = set(run.tree_after) - set(run.tree_before)
    assert new == {"made_by_child.txt", "unpacked", "unpacked/data.csv"}
    system, popen = run.doc["facts"]["run"]["child_commands"]
    assert (system["how"], system["command"]) == ("os.system", "echo hi > made_by_child.txt")
    assert system["location"]["line"] == 9 and system["calls"] == 1
    assert system["wrote"] == [str(run.work / "made_by_child.txt")]
    assert popen["how"] == "subprocess.Popen" and popen["location"]["line"] == 10
    assert popen["command"] == "sh -c 'mkdir -p unpacked && echo 1,2 > unpacked/data.csv'"
    assert popen["wrote"] == [str(run.work / "unpacked" / "data.csv")]
    (note,) = [n for n in run.doc["facts"]["run"]["notes"] if "child processes" in n]
    assert "which wrote " + str(run.work / "made_by_child.txt") in note


def test_a_fit_loop_runs_on_after_the_window_and_stops_before_its_first_write(runs):
    run = runs["fit_loop_writes"]
    assert run.tree_before and run.tree_after == run.tree_before  # rounds.log never written
    facts = run.doc["facts"]
    assert facts["fit"]["fit_in_loop"]["calls"] == 3
    ow = facts["outside_window"]
    assert ow["ended"] == "a write" and "rounds.log" in ow["detail"]
    assert [(c["method"], c["calls"]) for c in ow["calls"]] == [("evaluate", 1)]
    assert facts["run"]["outcome"] == "completed"


def test_saving_is_neutralised_and_the_project_folder_is_unchanged(runs):
    """The checksum test: a script that saves a checkpoint every batch, a CSV log, TensorBoard
    logs, weights from a callback, an export and a model after fit leaves its folder as it was,
    apart from --out."""
    run = runs["saves_everything"]
    assert run.tree_before and run.tree_after == run.tree_before
    neutralised = run.doc["facts"]["run"]["neutralised"]
    what = {n["what"]: n for n in neutralised}
    assert set(what) >= {
        "model.save_weights", "tf.train.Checkpoint.save", "tf.summary.create_file_writer",
        "ModelCheckpoint callback", "BackupAndRestore callback", "CSVLogger callback",
        "TensorBoard callback", "keras.saving.save_model", "model.export",
    }  # fmt: skip
    checkpoint = str(run.work / "ckpt/epoch{epoch}-batch.keras")
    assert what["ModelCheckpoint callback"]["detail"] == checkpoint
    assert what["CSVLogger callback"]["location"]["line"] == 27
    per_batch = [n for n in neutralised if n["detail"] == str(run.work / "callback.weights.h5")]
    assert per_batch and per_batch[0]["calls"] == 5  # 1 warm-up + 3 measured + 1 profiled step
    assert "model.save" not in what  # the run-on after fit stopped before it: never called
    assert not any("wrote outside --out" in n for n in run.doc["facts"]["run"]["notes"])
