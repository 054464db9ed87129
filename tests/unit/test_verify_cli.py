"""--verify's options and its child command line (no child is started)."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rnndoctor.cli import app
from rnndoctor.cli.supervisor import capture_command
from rnndoctor.options import DEFAULTS, Options, OptionsError, resolve
from rnndoctor.verify.run import default_budget


def test_verify_is_off_by_default_and_its_budget_follows_the_plain_check():
    assert DEFAULTS.verify is False and DEFAULTS.verify_budget is None
    assert default_budget(20.0) == pytest.approx(60.0)
    options = resolve({"verify": True, "verify_budget": 90.0})
    assert options.verify and options.verify_budget == 90.0


@pytest.mark.parametrize("budget", [0.0, -5.0])
def test_a_budget_of_zero_or_less_is_a_usage_error(budget):
    with pytest.raises(OptionsError, match="--verify-budget must be more than 0"):
        Options(verify_budget=budget).validate_window()


def test_the_help_lists_verify():
    result = CliRunner().invoke(app, ["check", "--help"], env={"COLUMNS": "200"})
    assert "--verify" in result.output and "--verify-budget" in result.output


def test_a_verify_run_has_the_plain_checks_command_line_and_window(tmp_path):
    script = tmp_path / "train.py"
    script.write_text("")
    plain = Options(out=str(tmp_path / "out"), steps=8, warmup=2)
    run = dataclasses.replace(plain, out=str(tmp_path / "run"), no_probes=True, profile_steps=0,
                              probe_fast_path=False)  # fmt: skip
    a = capture_command(script, ["--epochs", "1"], plain)
    b = capture_command(script, ["--epochs", "1"], run)
    assert a[:4] == [sys.executable, "-P", "-m", "rnndoctor.capture"] == b[:4]
    assert a[-3:] == b[-3:] == [str(Path(script).resolve()), "--epochs", "1"]
    for flag, value in (("--steps", "8"), ("--warmup", "2")):
        assert b[b.index(flag) + 1] == value == a[a.index(flag) + 1]
    assert "--no-probes" in b and b[b.index("--profile-steps") + 1] == "0"


def test_a_runs_first_estimate_is_a_window_of_the_plain_checks_steps_else_its_run():
    from rnndoctor.cli.verify import run_estimate_s
    from rnndoctor.facts import Facts, PhaseTime, RunInfo

    facts = Facts(run=RunInfo(script="t.py", argv=[], cwd="/"))
    assert run_estimate_s(facts, 30.0) == 30.0
    facts.run.phases = [PhaseTime("warm-up steps", 4.0), PhaseTime("measured steps", 8.0),
                        PhaseTime("profiled steps", 12.0), PhaseTime("done", 26.0)]  # fmt: skip
    assert run_estimate_s(facts, 30.0) == pytest.approx(13.0)
    # a measured window: the runs are windows of warm arms (5 steps and one more, plus 1 s)
    from rnndoctor.facts import StepTimes

    facts.steps = StepTimes(warmup_steps=3, measured_steps=20, requested_steps=20,
                            median_step_time_ms=400.0)  # fmt: skip
    assert run_estimate_s(facts, 30.0) == pytest.approx(6 * 0.4 + 1.0)
    # tiny steps: the window goes on to its time floor, ARM_WINDOW_S (0.2 s), then one step more
    facts.steps.median_step_time_ms = 10.0
    assert run_estimate_s(facts, 30.0) == pytest.approx(0.2 + 0.01 + 1.0)


def test_with_redact_the_fixes_come_from_the_unredacted_facts(monkeypatch):
    import types

    import rnndoctor.engine
    from rnndoctor.cli.verify import _findings
    from rnndoctor.facts import Facts, RunInfo

    raw = Facts(run=RunInfo(script="/home/alice/t.py", argv=[], cwd="/home/alice"))
    redacted = types.SimpleNamespace(findings=["redacted"])
    seen = []

    def evaluate(facts, **kwargs):
        seen.append(facts)
        return types.SimpleNamespace(findings=["raw"])

    monkeypatch.setattr(rnndoctor.engine, "evaluate", evaluate)
    assert _findings(raw, redacted, Options(redact=False)) == ["redacted"]
    assert _findings(raw, redacted, Options(redact=True)) == ["raw"] and seen == [raw]


def test_the_files_the_script_wrote_are_put_back_after_the_verify_runs(tmp_path):
    """A new user's ``json.dump(vars(args), f)`` held RD301's batch size, 32, after --verify
    (the copy ran in the user's working directory), where the user ran 8: the files the plain
    check saw the script write are put back as it left them, with a note each."""
    from rnndoctor.cli.verify import UserFiles

    config, vocab, fresh = tmp_path / "run_config.json", tmp_path / "vocab.txt", tmp_path / "new"
    config.write_text('{"batch_size": 8}')
    vocab.write_text("a\nb\n")
    kept = UserFiles.keep([str(config), str(vocab), str(fresh)])
    config.write_text('{"batch_size": 32}')  # a fix's copy ran with its own values
    fresh.write_text("made by a run")
    notes = kept.put_back()
    assert config.read_text() == '{"batch_size": 8}' and vocab.read_text() == "a\nb\n"
    assert not fresh.exists()  # it did not exist before the runs
    assert len(notes) == 2 and all("is put back as the plain check left it" in n for n in notes)
    assert kept.put_back() == []  # nothing changed since
