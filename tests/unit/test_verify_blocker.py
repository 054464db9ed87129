"""When ``--verify`` cannot run after a plain check, it says why (rnndoctor/cli/verify.py:
verify_blocker)."""

from __future__ import annotations


def test_verify_says_why_a_window_without_samples_per_second_cannot_be_verified():
    """A fresh user's generator-fed ``fit`` got "--verify skipped: the plain check did not
    measure its window" after a window of 70 measured steps: the real blocker is that a
    generator's batch size is not known, so the window has no samples per second to compare."""
    from rnndoctor.cli.verify import verify_blocker
    from rnndoctor.facts import Facts, FitConfig, RunInfo, StepTimes

    facts = Facts(run=RunInfo(script="t.py", argv=["t.py"], cwd="/w", outcome="completed"))
    assert verify_blocker(facts) == "the plain check did not measure its window"
    facts.fit = FitConfig(data_kind="python_generator")
    facts.steps = StepTimes(warmup_steps=3, measured_steps=70, median_step_time_ms=14.0)
    reason = verify_blocker(facts)
    assert reason is not None and "samples per second are not known" in reason
    assert "python_generator" in reason
    facts.steps.samples_per_s = 2285.7  # a batch size known: 32 samples in 14 ms
    assert verify_blocker(facts) is None
    facts.steps.samples_per_s = None
    facts.fit.data_kind = "tf.data"  # a bucketed pipeline: its batch size is no constant
    assert "tf.data input's batches have no constant size" in verify_blocker(facts)


def test_a_skipped_verify_is_a_note_and_keeps_the_plain_checks_exit_code(capsys):
    """A new user's trial: "rnndoctor: error: --verify skipped: ..." ended a check that exited
    0. Skipping the A/B runs changes neither the check's outcome nor its exit code, so it is a
    note, and every failure's one "rnndoctor: error:" line (README) stays a failure's."""
    from pathlib import Path

    from rnndoctor.cli.check import _verify
    from rnndoctor.cli.console import Console
    from rnndoctor.engine import evaluate
    from rnndoctor.facts import Facts, FitConfig, RunInfo, StepTimes
    from rnndoctor.options import ExitCode, Options

    facts = Facts(run=RunInfo(script="t.py", argv=["t.py"], cwd="/w", outcome="completed"))
    facts.fit = FitConfig(data_kind="python_generator")
    facts.steps = StepTimes(warmup_steps=3, measured_steps=70, median_step_time_ms=14.0)
    report = evaluate(facts)
    code = _verify(Path("t.py"), [], Options(), None, facts, report, ExitCode.OK, 0.0, Console())
    assert code is ExitCode.OK
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("rnndoctor: note: --verify skipped: ")
    assert "samples per second are not known" in err[-1]
    assert not any("error" in line for line in err)
