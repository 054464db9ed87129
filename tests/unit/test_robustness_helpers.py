"""The robustness helpers that need no TensorFlow: the script.log tail shown on failure, script.log
redaction, the process-tree cleanup, and the capture child's messages for argparse, stdin and
Keras-backend failures."""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid

import pytest

from rnndoctor import redact
from rnndoctor.capture import __main__ as child
from rnndoctor.cli import app, supervisor
from rnndoctor.options import ExitCode
from rnndoctor.redact import redact_file

LOG = """\
I0000 00:00:1795980155.071496    5807 port.cc:153] oneDNN custom operations are on.
WARNING: All log messages before absl::InitializeLog() is called are written to STDERR
loading data
 1/16 ━━━━━━━━━━━━━━━━━━━━ 5s 368ms/step - loss: 1.6697data file? Traceback (most recent call last):
  File "/home/u/train.py", line 5, in <module>
    path = input("data file? ")
KeyError: 'x'

During handling of the above exception, another exception occurred:

Traceback (most recent call last):
  File "/home/u/train.py", line 7, in <module>
    raise RuntimeError("boom")
RuntimeError: boom
"""


def test_the_log_tail_leaves_out_tracebacks_and_tensorflow_info_lines(tmp_path):
    log = tmp_path / "script.log"
    log.write_text(LOG)
    tail = supervisor.log_tail(log, 12, keep_tracebacks=False)
    assert tail == [
        "loading data",
        " 1/16 ━━━━━━━━━━━━━━━━━━━━ 5s 368ms/step - loss: 1.6697data file? ",
        "KeyError: 'x'",
        "RuntimeError: boom",
    ]
    assert not any("Traceback" in line or "File " in line for line in tail)


def test_the_debug_tail_keeps_everything(tmp_path):
    log = tmp_path / "script.log"
    log.write_text(LOG)
    tail = supervisor.log_tail(log, 200, keep_tracebacks=True)
    assert tail == LOG.splitlines()
    assert supervisor.log_tail(log, 3, keep_tracebacks=True) == LOG.splitlines()[-3:]
    assert supervisor.log_tail(tmp_path / "missing.log", 3, keep_tracebacks=False) == []


def test_redact_file_removes_secrets_and_keeps_other_bytes(tmp_path, monkeypatch):
    monkeypatch.setenv("MY_API_TOKEN", "tok-1234567890")
    log = tmp_path / "script.log"
    log.write_bytes(
        b"token tok-1234567890\n"
        + f"{tmp_path}/data/train.csv\n".encode()
        + b"latin-1 \xe9 stays\n"
    )
    redact_file(log, str(tmp_path))
    data = log.read_bytes()
    assert b"tok-1234567890" not in data and b"<redacted:MY_API_TOKEN>" in data
    assert b"data/train.csv" in data and str(tmp_path).encode() not in data
    assert b"latin-1 \xe9 stays" in data
    assert not (tmp_path / "script.log.redacting").exists()


def test_redact_file_removes_the_scripts_secret_literals_wherever_they_appear(tmp_path):
    """A new user's trial: the script assigned ``API_KEY = "sk-live-..."`` and printed it; the
    report's code context lost the value, ``script.log`` kept it."""
    script = tmp_path / "train.py"
    script.write_text("API_KEY = \"sk-live-9f8e7d6c\"\ndb_password = 'hunter2-long'\nn = 'short'\n")
    log = tmp_path / "script.log"
    log.write_text("calling the API with sk-live-9f8e7d6c\nlogin hunter2-long ok\nshort stays\n")
    redact_file(log, str(tmp_path), script=script)
    text = log.read_text()
    assert "sk-live" not in text and "hunter2" not in text
    assert text.splitlines() == [
        "calling the API with <redacted>",
        "login <redacted> ok",
        "short stays",
    ]
    assert redact.script_secrets(tmp_path / "missing.py") == []


def test_status_text_names_signals():
    assert supervisor.status_text(70) == "status 70"
    assert supervisor.status_text(-signal.SIGSEGV) == "killed by SIGSEGV"
    assert "out-of-memory killer" in supervisor.status_text(-signal.SIGKILL)
    assert supervisor.status_text(None) == "no status"


def test_the_process_tree_is_killed_escaped_processes_included():
    """A group leader with a child in its group and one in a new session: all three end."""
    run_id = uuid.uuid4().hex
    code = (
        "import subprocess, sys, time\n"
        "s = [sys.executable, '-c', 'import time; time.sleep(120)']\n"
        "subprocess.Popen(s)\n"
        "subprocess.Popen(s, start_new_session=True)\n"
        "print('started', flush=True)\n"
        "time.sleep(120)\n"
    )
    env = dict(os.environ, **{supervisor.RUN_ID_VAR: run_id})
    proc = subprocess.Popen(
        [sys.executable, "-c", code], env=env, start_new_session=True, stdout=subprocess.PIPE
    )
    assert proc.stdout.readline().strip() == b"started"
    deadline = time.monotonic() + 10
    while len(supervisor.marked_processes(run_id)) < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(supervisor.marked_processes(run_id)) == 3
    escaped = supervisor.end_process_tree(proc, run_id)
    assert len(escaped) == 1  # the one in its own session
    assert supervisor.marked_processes(run_id) == []
    assert proc.returncode == -signal.SIGKILL


def _parse_error(argv: list[str]) -> SystemExit:
    parser = argparse.ArgumentParser(prog="train.py")
    parser.add_argument("--data", required=True)
    with pytest.raises(SystemExit) as info:
        parser.parse_args(argv)
    return info.value


def test_an_argparse_exit_is_explained(capsys):
    message = child._exit_message(_parse_error([]), fit_called=False)
    assert message.startswith(
        "the script's argument parser rejected its arguments (sys.exit(2)): the following "
        "arguments are required: --data; give the script's own arguments after `--`"
    )
    assert child._exit_message(SystemExit(0), fit_called=True) == (
        "the script called sys.exit(0) during the diagnosis"
    )


def test_eof_on_stdin_says_how_to_give_input():
    message = child._error_message(EOFError("EOF when reading a line"))
    assert message.startswith("EOFError: EOF when reading a line (the check gives the script")
    assert "rnndoctor check SCRIPT < FILE" in message


def test_the_requested_backend_follows_keras_config(tmp_path, monkeypatch):
    monkeypatch.delenv("KERAS_BACKEND", raising=False)
    monkeypatch.setenv("KERAS_HOME", str(tmp_path))
    assert child._requested_backend() == ("tensorflow", "Keras' default")
    (tmp_path / "keras.json").write_text(json.dumps({"backend": "torch"}))
    assert child._requested_backend() == ("torch", str(tmp_path / "keras.json"))
    monkeypatch.setenv("KERAS_BACKEND", "jax")
    assert child._requested_backend() == ("jax", "the KERAS_BACKEND environment variable")


def test_the_backend_watch_stops_a_switch_away_from_tensorflow():
    child._watch_backend("os.putenv", ("KERAS_BACKEND", "tensorflow"))
    child._watch_backend("os.putenv", ("OTHER", "jax"))
    with pytest.raises(child.BackendSwitch) as info:
        child._watch_backend("os.putenv", (b"KERAS_BACKEND", b"jax"))
    assert info.value.args == ("jax",)


def test_an_unknown_check_option_points_at_the_script_arguments(tmp_path):
    from typer.testing import CliRunner

    script = tmp_path / "train.py"
    script.write_text("")
    result = CliRunner(env={"COLUMNS": "200"}).invoke(app, ["check", str(script), "--epochs", "3"])
    assert result.exit_code == ExitCode.USAGE
    assert "No such option: --epochs. Arguments for your script go after `--`" in result.output


def test_script_secrets_come_from_its_folder_defaults_included_and_stay_whole_words(tmp_path):
    """A review: a key in an imported config.py and an environment variable's default were
    kept; ``tokenizer_name = "bert-base-uncased"`` was taken for a secret and its value removed
    from every report."""
    script = tmp_path / "train.py"
    script.write_text(
        'import config\ntoken = os.getenv("HF_TOKEN", "hf_abcdef123")\n'
        'tokenizer_name = "bert-base-uncased"\nnum_tokens = "float32x"\n'
    )
    (tmp_path / "config.py").write_text('API_KEY = "sk-cfg-4242"\n')
    assert redact.script_secrets(script) == ["hf_abcdef123", "sk-cfg-4242"]
    scrub = redact.make_scrubber(str(tmp_path), script=script)
    assert scrub("key sk-cfg-4242, token hf_abcdef123.") == "key <redacted>, token <redacted>."
    assert scrub("model bert-base-uncased") == "model bert-base-uncased"
    assert scrub("xsk-cfg-42420") == "xsk-cfg-42420"  # part of another word: kept


@pytest.mark.parametrize(
    ("line", "secret"),
    [
        ('secretKey = "abcdefgh1"', True),
        ('authToken = "abcdefgh1"', True),
        ('aws_secret_access_key = "abcdefgh1"', True),
        ('GITHUB_TOKEN="ghp_123456"', True),
        ('"api_key": "abcdefgh1"', True),
        ('TOKENIZER_NAME = "bert-base"', False),
        ('tokenizer = "bert-base"', False),
        ('num_tokens = "abcdefgh1"', False),
    ],
)
def test_secret_names_end_in_a_secret_word_snake_or_camel_case(line, secret):
    assert bool(redact._QUOTED_SECRET.search(line)) is secret


def test_secret_names_with_a_digit_tail_are_secrets_too():
    """A review: API_KEY2 and TOKEN2=... were caught before the name boundaries and missed after."""
    assert redact._QUOTED_SECRET.search('API_KEY2 = "abcdefgh1"')
    assert redact._QUOTED_SECRET.search('hf_token1 = "abcdefgh1"')
    assert redact._ASSIGNED_SECRET.search("TOKEN2=abcdefgh1")
    assert not redact._ASSIGNED_SECRET.search("TOKENIZERS_PARALLELISM=falsey")


def test_the_watchdog_saves_the_steps_of_a_running_window_again_until_it_saves_its_own(tmp_path):
    """A new user's BiLSTM under ``--timeout 9``: the watchdog woke during the warm-up's trace,
    saved 0 steps once, and the 4 steps measured before the kill were lost. It now saves again
    while the window runs (one note, its count updated), and stops once the window has saved
    its own step times, which it never replaces."""
    from rnndoctor.capture.session import PROGRESS_NOTE, CaptureSession
    from rnndoctor.capture.step_window import WindowOptions
    from rnndoctor.facts import DataKind, Facts, FitConfig, RunInfo, StepTimes

    class Window:
        model = None
        steps_done = 3

        def __init__(self):
            self.step_ms: list[float] = []

        def step_times(self, batch_size):
            return StepTimes(warmup_steps=3, measured_steps=len(self.step_ms),
                             step_time_ms=list(self.step_ms), batch_size=batch_size)  # fmt: skip

    run = RunInfo(script="train.py", argv=[], cwd=str(tmp_path))
    facts = Facts(run=run, fit=FitConfig(data_kind=DataKind.NUMPY, batch_size=32))
    session = CaptureSession(facts, WindowOptions(), tmp_path / "facts.json")
    window = session.window = Window()
    first = child._save_window_progress(session)
    assert first is not None and first.measured_steps == 0
    window.step_ms += [80.0, 82.0, 81.0, 79.0]
    window.steps_done = 7
    second = child._save_window_progress(session, written=first)
    saved = json.loads((tmp_path / "facts.json").read_text())
    assert second.measured_steps == saved["steps"]["measured_steps"] == 4
    notes = [n for n in saved["run"]["notes"] if n.startswith(PROGRESS_NOTE)]
    assert len(notes) == 1 and "(7 steps done)" in notes[0]
    own = facts.steps = StepTimes(warmup_steps=3, measured_steps=20)  # the window's own save
    assert child._save_window_progress(session, written=second) is None
    assert facts.steps is own


def test_a_script_that_does_not_compile_is_reported_before_tensorflow_is_imported(tmp_path):
    """A new user waited for TensorFlow's import (about 3 s) to be told of a syntax error: the
    child now compiles the script first and records the error at the user's line."""
    from rnndoctor.facts import Outcome

    bad = tmp_path / "bad.py"
    bad.write_text("import keras\n\nepochs = = 3\n")
    facts = child._new_facts(str(bad), [str(bad)], time.monotonic())
    assert child._syntax_error(facts, str(bad))
    run = facts.run
    assert run.outcome == Outcome.SCRIPT_ERROR and run.error_type == "SyntaxError"
    assert run.message == "SyntaxError: invalid syntax"
    assert run.error_location.file == str(bad) and run.error_location.line == 3
    good = tmp_path / "good.py"
    good.write_text("import keras\n")
    assert not child._syntax_error(child._new_facts(str(good), [], time.monotonic()), str(good))
    assert not child._syntax_error(facts, str(tmp_path / "missing.py"))  # the run says why


def test_the_watchdog_thread_saves_each_new_step_and_stops_at_the_windows_own_save(tmp_path):
    """The watchdog's loop itself: awake before the window exists, it waits for it, saves the
    steps as they come, and ends once the window has saved its own step times."""
    from rnndoctor.capture.session import CaptureSession
    from rnndoctor.capture.step_window import WindowOptions
    from rnndoctor.facts import DataKind, Facts, FitConfig, RunInfo, StepTimes

    class Window:
        model = None

        def __init__(self):
            self.step_ms: list[float] = []

        @property
        def steps_done(self):
            return 3 + len(self.step_ms)

        def step_times(self, batch_size):
            return StepTimes(warmup_steps=3, measured_steps=len(self.step_ms),
                             step_time_ms=list(self.step_ms), batch_size=batch_size)  # fmt: skip

    def saved_steps() -> int | None:
        try:
            steps = json.loads((tmp_path / "facts.json").read_text()).get("steps")
        except (OSError, ValueError):
            return None
        return steps["measured_steps"] if steps else None

    def wait_for(test, seconds: float = 5.0) -> bool:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if test():
                return True
            time.sleep(0.02)
        return False

    run = RunInfo(script="train.py", argv=[], cwd=str(tmp_path))
    facts = Facts(run=run, fit=FitConfig(data_kind=DataKind.NUMPY, batch_size=32))
    # a 3 s timeout leaves no time before the watchdog's wake (RESERVE_S = 3 s)
    session = CaptureSession(facts, WindowOptions(timeout_s=3.0), tmp_path / "facts.json")
    child._start_watchdog(session)
    time.sleep(0.2)
    assert saved_steps() is None  # no window yet: nothing saved, the watchdog waits
    window = session.window = Window()
    assert wait_for(lambda: saved_steps() == 0)
    window.step_ms += [80.0, 81.0]
    assert wait_for(lambda: saved_steps() == 2)
    window.step_ms.append(82.0)
    assert wait_for(lambda: saved_steps() == 3)
    assert session.watchdog_from_step == 0
    with session.progress_lock:  # the window's own save
        facts.steps = StepTimes(warmup_steps=3, measured_steps=20)
    window.step_ms.append(83.0)  # a step after it: the watchdog must not replace the window's
    time.sleep(0.3)
    assert facts.steps.measured_steps == 20
    threads = [t for t in threading.enumerate() if t.name == "rnndoctor watchdog"]
    assert all(not t.is_alive() for t in threads) or wait_for(
        lambda: not any(t.is_alive() for t in threads)
    )


def test_error_gist_gives_the_line_that_says_what_failed():
    """The probes' failure reasons: a graph error's assertion, an autograph error's own last
    line (a new user's tf_keras length probe was cut at 300 characters of its frames), Keras
    3's layer-call wrapper without its arguments."""
    from rnndoctor.capture.probes import error_gist

    graph = RuntimeError()
    graph.message = (
        'Graph execution error:\n\nDetected at node x\n  File "a.py", line 1\nassertion '
        "failed: [Condition x == y did not hold element-wise:] [x (loss/Shape_1:0) = ] [16 30] "
        "[y (loss/strided_slice:0) = ] [16 16]\n\t [[{{node loss/Assert}}]] [Op:__inference_f_1]"
    )
    assert error_gist(graph) == (
        "RuntimeError: assertion failed: [Condition x == y did not hold element-wise:] "
        "[x = ] [16 30] [y = ] [16 16]"
    )
    autograph = ValueError(
        'in user code:\n\n    File "t.py", line 3, in train_function  *\n        return x\n\n'
        '    ValueError: Input 0 of layer "sequential" is incompatible with the layer: expected '
        "shape=(None, 60), found shape=(16, 30)\n"
    )
    assert error_gist(autograph).startswith('ValueError: Input 0 of layer "sequential" is incom')
    wrapped = ValueError(
        'Exception encountered when calling Functional.call().\n\nInput 0 of layer "lstm" is '
        "incompatible with the layer: expected shape=(None, 40, 8), found shape=(16, 20, 8)\n\n"
        "Arguments received by Functional.call():\n  • inputs=x\n  • mask=None"
    )
    assert error_gist(wrapped).endswith("expected shape=(None, 40, 8), found shape=(16, 20, 8)")
    assert error_gist(ValueError("expected (float32)")) == "ValueError: expected (float32)"
