"""`rnndoctor check` end to end: the real CLI, a real child process, real TF (slow)."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from html.parser import HTMLParser
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

SCRIPTS = Path(__file__).parents[1] / "scripts"
FAST = ["--steps", "3", "--warmup", "1", "--profile-steps", "2", "--timeout", "240"]


def rnndoctor(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "rnndoctor", *args],
        cwd=cwd, capture_output=True, text=True, timeout=300,
        env=dict(os.environ, COLUMNS="200"),
    )  # fmt: skip


def _line_of(path: Path, needle: str) -> int:
    return next(i for i, t in enumerate(path.read_text().splitlines(), 1) if needle in t)


class _Dom(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """One real check of tests/scripts/tiny_lstm.py, copied into a folder whose name is HTML."""
    work = tmp_path_factory.mktemp("tiny") / "<img src=x onerror=alert(1)>"
    work.mkdir()
    shutil.copy(SCRIPTS / "tiny_lstm.py", work)
    out = work / "report"
    # no test here reads the batch-size or steps_per_execution probe: their rules, and so the
    # probes, are left out (the exit code rests on RD101, a model rule)
    focus = ["--ignore", "RD301,RD702,RD403"]
    result = rnndoctor(
        "check", "tiny_lstm.py", "--out", str(out), "--fail-on", "warning", *FAST, *focus, cwd=work
    )
    return work, out, result


def test_fail_on_warning_exits_1_with_rd101_in_the_summary(tiny):
    work, out, result = tiny
    assert result.returncode == 1, result.stderr
    assert "RD101 warning" in result.stdout
    assert f"html report: {out / 'report.html'}" in result.stdout
    assert "Traceback" not in result.stdout + result.stderr


def test_rd101_points_at_the_users_lstm_line(tiny):
    work, out, _ = tiny
    doc = json.loads((out / "report.json").read_text())
    (finding,) = [f for f in doc["findings"] if f["rule_id"] == "RD101"]
    assert finding["location"]["file"] == str(work / "tiny_lstm.py")
    assert finding["location"]["line"] == _line_of(work / "tiny_lstm.py", "layers.LSTM(")
    # the user's call as written (double quotes kept), recurrent_dropout out, dropout in
    assert finding["fix"]["code"] == 'layers.LSTM(8, name="encoder", dropout=0.2)'
    assert "recurrent_dropout" not in finding["fix"]["code"]
    assert finding["evidence"] and finding["severity"] == "warning"


def test_the_script_runs_on_after_the_window_and_is_stopped_before_its_save(tiny):
    work, out, _ = tiny
    log = (out / "script.log").read_text()
    assert "SWALLOWED" not in log  # fit returned: no exception reached the user's except
    assert "AFTER FIT" in log  # the run-on after a single fit (issue 12)
    assert not (work / "tiny_lstm.keras").exists()
    ow = json.loads((out / "facts.json").read_text())["outside_window"]
    assert ow["ended"] == "a write" and ow["detail"] == "the script was about to write (model.save)"
    neutralised = json.loads((out / "facts.json").read_text())["run"]["neutralised"]
    assert not [n for n in neutralised if n["what"] == "model.save"]  # stopped before the call


def test_facts_hold_steps_model_environment_and_profile(tiny):
    _, out, _ = tiny
    facts = json.loads((out / "facts.json").read_text())
    assert facts["run"]["outcome"] == "completed"
    assert facts["steps"]["measured_steps"] == 3
    assert facts["steps"]["median_step_time_ms"] > 0
    assert facts["environment"]["keras"].startswith("3.")
    (rnn,) = facts["model"]["rnn_layers"]
    assert rnn["args"]["recurrent_dropout"] == pytest.approx(0.2)
    assert rnn["fast_path"]["blocking_args"] == ["recurrent_dropout"]
    profile = facts["profile"]
    assert profile["error"] is None, profile["error"]
    assert profile["xspace_files"] and Path(profile["xspace_files"][0]).is_file()
    assert profile["top_op_types"] and profile["host_self_time_us"] > 0
    assert profile["cudnn_rnn_ops"] is None and "not measured" in profile["cudnn_not_measured"]
    logdir = shlex.quote(str(out / "profile"))
    assert profile["tensorboard_command"] == f"tensorboard --logdir {logdir}"


def test_html_escapes_the_hostile_script_path_and_source_line(tiny):
    _, out, _ = tiny
    html = (out / "report.html").read_text()
    dom = _Dom()
    dom.feed(html)
    assert "img" not in dom.tags and "script" not in dom.tags
    assert "&lt;img src=x onerror=alert(1)&gt;" in html  # the folder name, in the script path
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html  # the comment on the LSTM line


def test_fail_on_error_exits_0_for_warnings_only(tmp_path):
    shutil.copy(SCRIPTS / "tiny_lstm.py", tmp_path)
    # no probes: a measured finding at error (RD403 near its 50%) would decide the exit code
    result = rnndoctor("check", "tiny_lstm.py", "--out", "r", "--format", "json", "--no-probes",
                       *FAST, "--profile-steps", "0", "--", "2", cwd=tmp_path)  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "r" / "report.json").is_file()
    assert not (tmp_path / "r" / "report.html").exists()
    facts = json.loads((tmp_path / "r" / "facts.json").read_text())
    assert facts["run"]["argv"][1:] == ["2"] and facts["fit"]["epochs"] == 2
    findings = json.loads((tmp_path / "r" / "report.json").read_text())["findings"]
    assert "warning" in {f["severity"] for f in findings if f["rule_id"] == "RD101"}
    assert "RD101 warning" in result.stdout  # a warning, and still exit 0 at --fail-on error


def test_script_that_raises_before_fit_exits_3_with_a_partial_report(tmp_path):
    script = SCRIPTS / "raises_before_fit.py"
    result = rnndoctor("check", str(script), "--out", "r", *FAST, cwd=tmp_path)
    assert result.returncode == 3
    err = result.stderr.strip().splitlines()[-1]
    assert err.startswith("rnndoctor: error: ValueError: could not find the training data")
    assert f"{script}:4" in err
    assert "Traceback" not in result.stdout + result.stderr
    doc = json.loads((tmp_path / "r" / "report.json").read_text())
    assert doc["facts"]["run"]["outcome"] == "script_error"
    assert doc["facts"]["environment"] is not None
    statuses = {r["rule_id"]: r["status"] for r in doc["rules"]}
    # RD603 (a GPU on the machine that TF does not see) needs only the environment facts
    assert statuses.pop("RD603") in ("passed", "not_evaluated")
    assert set(statuses.values()) == {"not_evaluated"}


def test_timeout_exits_4_and_leaves_no_process(tmp_path):
    script = SCRIPTS / "sleeps_before_fit.py"
    start = time.monotonic()
    result = rnndoctor("check", str(script), "--out", "r", "--timeout", "15", cwd=tmp_path)
    assert result.returncode == 4
    assert time.monotonic() - start < 40
    assert "timeout" in result.stderr.lower()
    doc = json.loads((tmp_path / "r" / "report.json").read_text())
    assert doc["facts"]["run"]["outcome"] == "timeout"
    leftovers = []
    for proc in Path("/proc").iterdir():
        try:
            cmd = (proc / "cmdline").read_bytes()
        except OSError:
            continue
        if str(script).encode() in cmd:
            leftovers.append(proc.name)
    assert leftovers == []


def test_a_crash_in_native_code_leaves_no_core_file_in_the_users_tree(tmp_path):
    """The check runs the script with a core-file limit of 0, even where the user's shell
    allows core files (the test raises its own soft limit to the hard one): a crash in native
    code leaves the user's folder as it was, but for --out."""
    import resource

    _, hard = resource.getrlimit(resource.RLIMIT_CORE)
    if hard == 0:
        pytest.skip("core files are not allowed on this machine at all")
    script = tmp_path / "aborts.py"
    script.write_text(
        "import os, resource, sys\n"
        "print('core limit', resource.getrlimit(resource.RLIMIT_CORE)[0], flush=True)\n"
        "os.abort()\n"
    )

    def allow_core_files():
        resource.setrlimit(resource.RLIMIT_CORE, (hard, hard))

    result = subprocess.run(
        [sys.executable, "-m", "rnndoctor", "check", "aborts.py", "--out", "r", *FAST],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
        env=dict(os.environ, COLUMNS="200"), preexec_fn=allow_core_files,
    )  # fmt: skip
    assert result.returncode != 0 and "Traceback" not in result.stderr
    assert "core limit 0" in (tmp_path / "r" / "script.log").read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["aborts.py", "r"]
