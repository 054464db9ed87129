"""--verify end to end with a fake runner (no TensorFlow, no child process): the order of the
runs, the budget, a failing fix, the patch and the files written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from verify_helpers import FakeRunner, facts_for, finding, tree_hashes

from rnndoctor.reports.markdown import render_verify_markdown
from rnndoctor.reports.verified import terminal_lines
from rnndoctor.verify import Job, RunEnd, verify
from rnndoctor.verify.output import summarise, write_json
from rnndoctor.verify.result import Status

SCRIPT = """import helpers
model = build(units=16, recurrent_dropout=0.2)
model.fit(x, y, batch_size=8)
"""


@pytest.fixture
def project(tmp_path: Path):
    root = tmp_path / "<b>proj"
    root.mkdir()
    script = root / "train.py"
    script.write_text(SCRIPT)
    (root / "helpers.py").write_text("X = 1\n")
    findings = [
        finding("RD301", script, 3, "batch_size=8", "batch_size=32", speedup=2.5),
        finding("RD101", script, 2, "recurrent_dropout=0.2", "dropout=0.2", safety="unsafe"),
        finding("RD201", script, 3, None, "ds.prefetch()", safety="display-only", speedup=1.1),
        finding(
            "RD403", script, 3, "model.fit(x, y, batch_size=8)", "model.compile(x)", speedup=1.3
        ),
    ]
    return root, script, findings


def _speed(script: Path, call: int) -> float | None:
    text = script.read_text()
    if "model.compile(x)" in text:
        return None  # the patched script raises
    speed = 100.0 + call % 3  # a little noise
    speed *= 3.0 if "batch_size=32" in text else 1.0
    speed *= 1.5 if "dropout=0.2" in text and "recurrent_" not in text else 1.0
    return speed


def _verify(project, budget=1000.0, run_s=5.0, estimate_s=None):
    root, script, findings = project
    runner = FakeRunner(_speed, run_s)
    job = Job(script=script, out=root / "report", runner=runner, budget_s=budget,
              run_timeout_s=60, estimate_s=estimate_s or run_s)  # fmt: skip
    job.out.mkdir(exist_ok=True)
    return verify(findings, facts_for(script, root), job, clock=runner.clock), runner


def test_each_fix_gets_a_status_all_first_then_by_estimate(project):
    root, script, _ = project
    before = tree_hashes(root, skip=root / "report")
    result, runner = _verify(project)
    by_fix = {i.fix: i for i in result.items}
    assert by_fix["all"].rules == ["RD301", "RD101"] and by_fix["all"].status == Status.CONFIRMED
    assert by_fix["all"].measured == pytest.approx(4.5, rel=0.05)
    assert by_fix["RD301"].status == Status.CONFIRMED and by_fix["RD301"].estimate == 2.5
    assert by_fix["RD101"].status == Status.CONFIRMED
    assert by_fix["RD101"].cpu_label == "measured on CPU: the cuDNN gain needs a GPU"
    assert by_fix["RD201"].reason == "display-only fix"
    assert by_fix["RD403"].status == Status.FAILED
    assert by_fix["RD403"].error.startswith("ValueError: boom at ")
    assert result.items[0].fix == "RD403"  # failed first
    order = [out.name for _, out in runner.calls]
    assert order[:4] == ["all-1A", "all-1B", "all-2A", "all-2B"]
    assert order[4:8] == ["RD301-1A", "RD301-1B", "RD301-2A", "RD301-2B"]
    assert order[8:10] == ["RD403-1A", "RD403-1B"]  # its B failed: no more pairs
    assert order[10:14] == ["RD101-1A", "RD101-1B", "RD101-2A", "RD101-2B"]
    assert len(order) == 14 + 3 * 2 * 3  # then up to 5 pairs each while the budget allows
    originals = {s for s, out in runner.calls if out.name.endswith("A")}
    assert originals == {script}
    assert tree_hashes(root, skip=root / "report") == before
    assert "RD403 is not in the all-fixes copy: it overlaps RD301, estimated larger" in result.notes


def test_the_patch_holds_exactly_the_confirmed_fixes(project):
    root, _, _ = project
    result, _ = _verify(project)
    assert "# RD301 " in result.patch and "# RD101 " in result.patch
    assert "RD403" not in result.patch and "RD201" not in result.patch
    assert "+model = build(units=16, dropout=0.2)" in result.patch
    assert (root / "report" / "fixes.patch").read_text() == result.patch
    assert {i.fix for i in result.items if i.in_patch} == {"RD301", "RD101"}


def test_a_small_budget_leaves_later_fixes_over_budget(project):
    result, runner = _verify(project, budget=42.0, run_s=5.0)
    by_fix = {i.fix: i for i in result.items}
    assert by_fix["all"].pairs == 2 and by_fix["RD301"].pairs == 2
    assert "too few pairs to decide" in by_fix["all"].reason
    assert by_fix["RD101"].status == Status.NOT_VERIFIABLE
    assert "over budget" in by_fix["RD101"].reason
    assert runner.now <= 42.0 + 5.0
    assert result.patch == ""


def test_after_two_pairs_each_the_candidates_are_completed_in_order(project):
    result, runner = _verify(project, budget=100.0, run_s=5.0)
    names = [out.name for _, out in runner.calls]
    assert names[14:20] == ["all-3A", "all-3B", "all-4A", "all-4B", "all-5A", "all-5B"]
    by_fix = {i.fix: i for i in result.items}
    assert by_fix["all"].status == Status.CONFIRMED and by_fix["all"].pairs == 5
    assert by_fix["RD301"].pairs < 5 and by_fix["RD301"].status == Status.NOT_VERIFIABLE


def test_outputs_are_written_escaped_and_scrubbed(project):
    root, _, _ = project
    result, _ = _verify(project)
    out = root / "report"
    data = json.loads(write_json(summarise(result), out).read_text())
    assert [v["fix"] for v in data["verified"]][0] == "RD403"
    assert data["verified"][0]["status"] == "failed" and data["measured_on"] == "cpu"
    md = render_verify_markdown(summarise(result))
    assert "<b>" not in md and "&lt;b&gt;proj" in md
    assert "| **RD403** | **failed: ValueError: boom at" in md
    scrubbed = summarise(result, scrub=lambda s: s.replace("proj", "P"))
    assert len(scrubbed.items) == len(result.items) and "proj" not in json.dumps(scrubbed.to_dict())
    lines = terminal_lines(summarise(result))
    assert lines[1][1] is True and lines[1][0].strip().startswith("RD403")
    assert lines[-1][0].endswith("fixes.patch'") and "git apply" in lines[-1][0]  # quoted


def test_later_fixes_are_budgeted_on_the_runs_so_far_not_on_the_first_estimate(project):
    result, runner = _verify(project, budget=45.0, run_s=5.0, estimate_s=10.0)
    by_fix = {i.fix: i for i in result.items}
    assert by_fix["all"].pairs == 2 and by_fix["RD301"].pairs == 2  # 2 x 2 x 10 s would not fit
    assert runner.now <= 45.0


def test_a_candidate_whose_two_pairs_cannot_fit_is_not_started(project):
    result, runner = _verify(project, budget=30.0, run_s=5.0, estimate_s=10.0)
    assert runner.calls == []
    reasons = {i.fix: i.reason for i in result.items}
    assert reasons["all"] == (
        "over budget (0 of 2 A/B pairs run: the rest needs about 40 s, 30 s of the budget was "
        "left; raise --verify-budget)"
    )


@pytest.mark.parametrize("at_call", [2, 3])  # during a B run, during an A run
def test_ctrl_c_stops_the_runs_and_says_so(project, at_call):
    root, script, findings = project
    runner = FakeRunner(_speed)

    def interrupted(script, out, timeout_s):
        runner(script, out, timeout_s)
        return RunEnd(status=None, interrupted=len(runner.calls) == at_call, wall_s=5.0)

    job = Job(script=script, out=root / "report", runner=interrupted, budget_s=1000.0,
              run_timeout_s=60, estimate_s=5.0)  # fmt: skip
    job.out.mkdir()
    result = verify(findings, facts_for(script, root), job, clock=runner.clock)
    assert result.interrupted and len(runner.calls) == at_call
    reasons = {i.fix: i.reason for i in result.items}
    stopped = "interrupted (Ctrl-C or a stop signal)"
    assert reasons["all"] == stopped and reasons["RD101"] == stopped


class _WarmFake(FakeRunner):
    """A warm runner: ``prepare`` starts every script's process at once (``start_s``), and each
    run is then a window (``run_s``); a script not prepared pays its start at its first run."""

    def __init__(self, speed, run_s: float = 1.0, start_s: float = 20.0):
        super().__init__(speed, run_s)
        self.start_s = start_s
        self.started: set[Path] = set()
        self.prepared: list[Path] = []

    def prepare(self, scripts, timeout_s):
        self.prepared = list(scripts)
        self.started |= {s.resolve() for s in scripts}
        self.now += self.start_s  # the starts overlap: one start's time for them all

    def __call__(self, script, out, timeout_s):
        start = 0.0 if script.resolve() in self.started else self.start_s
        self.started.add(script.resolve())
        self.now += start
        end = super().__call__(script, out, timeout_s)
        return RunEnd(end.status, wall_s=end.wall_s + start)


def test_a_warm_runner_starts_the_original_and_every_copy_before_the_first_window(project):
    root, script, findings = project
    runner = _WarmFake(_speed)
    job = Job(script=script, out=root / "report", runner=runner, budget_s=200.0,
              run_timeout_s=60, estimate_s=30.0)  # fmt: skip
    job.out.mkdir(exist_ok=True)
    result = verify(findings, facts_for(script, root), job, clock=runner.clock)
    assert runner.prepared[0] == script
    assert {p.parent.name for p in runner.prepared[1:]} == {"all", "RD301", "RD101", "RD403"}
    statuses = {v.fix: v.status for v in result.items}
    assert statuses["RD301"] == Status.CONFIRMED and statuses["all"] == Status.CONFIRMED
    by_fix = {v.fix: v.pairs for v in result.items}
    assert by_fix["RD301"] == by_fix["RD101"] == 5  # 1 s windows: every fix gets its 5 pairs
    assert result.spent_s <= 200.0


def test_the_budget_counts_a_copys_start_beyond_its_windows(project):
    from rnndoctor.verify.run import Candidate, Schedule, _fits

    root, script, _ = project
    runner = _WarmFake(_speed, run_s=1.0, start_s=20.0)
    schedule = Schedule(script, runner, root / "runs", budget_s=30.0, run_timeout_s=60,
                        clock=runner.clock)  # fmt: skip
    seen = Candidate("seen", script)
    for pair in range(2):  # the original's first run pays its start, the others are windows
        schedule.one(seen, "A", pair)
    assert schedule.first_walls == [21.0] and schedule.later_walls == [1.0]
    fresh = Candidate("fresh", root / "copy.py")
    assert not _fits(schedule, fresh, 1.0, 2)  # 2 pairs of 1 s windows + a 20 s start > 8 s left
    assert fresh.budget_note == (24.0, 8.0)


def test_an_overlap_between_fixes_without_estimates_is_not_called_estimated_larger():
    """A fresh user's GRU with recurrent_dropout and activation='relu': RD101 and RD102 rewrite
    the same layer call and, on a CPU, neither estimates a gain; the note read "RD102 is not in
    the all-fixes copy: it overlaps RD101, estimated larger"."""
    from types import SimpleNamespace

    from rnndoctor.verify.session import _overlap

    def rewrite(fix_id, speedup):
        return SimpleNamespace(fix_id=fix_id, finding=SimpleNamespace(speedup=speedup))

    assert _overlap(rewrite("RD102", None), rewrite("RD101", None)) == (
        "it rewrites the same lines as RD101, and neither has an estimated gain (the earlier "
        "finding, RD101, is kept)"
    )
    assert _overlap(rewrite("RD403", 1.2), rewrite("RD301", 2.5)) == (
        "it overlaps RD301, estimated larger"
    )
    assert _overlap(rewrite("RD101", None), rewrite("RD301", 2.5)) == (
        "it overlaps RD301, estimated larger"
    )


def test_a_fix_whose_gain_is_after_fit_is_not_timed_by_the_fit_windows_pairs(project):
    """A new user's trial: --verify timed RD406's predict_on_batch rewrite by the fit window's
    samples/s, which the predict calls after fit never enter; it is left out, with the reason,
    and the patch holds it not."""
    root, script, findings = project
    rd406 = finding(
        "RD406", script, 3, "model.fit(x, y, batch_size=8)", "model.fit(x, y, batch_size=8)  #",
        speedup=3.0,
    )  # fmt: skip
    result, runner = _verify((root, script, [*findings, rd406]))
    by_fix = {i.fix: i for i in result.items}
    assert by_fix["RD406"].reason.startswith("its gain is in what runs after fit")
    assert by_fix["RD406"].status != Status.CONFIRMED
    assert not any(out.name.startswith("RD406") for _, out in runner.calls)
    assert "# RD406 " not in result.patch
