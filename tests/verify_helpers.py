"""Fake findings, facts and runners for the --verify unit tests (no TensorFlow)."""

from __future__ import annotations

import hashlib
from pathlib import Path

from rnndoctor.facts import Facts, Outcome, RunInfo, SourceLocation, StepTimes
from rnndoctor.findings import Finding, Fix, Location, Severity
from rnndoctor.verify import RunEnd


def finding(
    rule_id: str,
    file: Path,
    line: int,
    before: str | None,
    code: str,
    *,
    safety: str = "safe",
    speedup: float | None = None,
) -> Finding:
    """A finding whose fix replaces ``before`` by ``code`` at ``file:line``."""
    return Finding(
        rule_id=rule_id,
        name=f"rule-{rule_id.lower()}",
        severity=Severity.WARNING,
        message=f"{rule_id} fired",
        location=Location(file=str(file), line=line),
        fix=Fix(title=f"fix {rule_id}", code=code, safety=safety, before=before),
        gain=f"estimated by {rule_id}",
        speedup=speedup,
    )


def facts_for(script: Path, root: Path, gpu: bool = False) -> Facts:
    """A plain check's facts (completed) for ``script`` in the work tree ``root``."""
    from rnndoctor.facts import Environment

    facts = Facts(run=RunInfo(script=str(script), argv=[str(script)], cwd=str(root)))
    facts.run.outcome = Outcome.COMPLETED
    facts.run.source_root = str(root)
    facts.environment = Environment(
        python="3.11", platform="linux", keras="3", keras_backend="tensorflow",
        gpu_count=1 if gpu else 0,
    )  # fmt: skip
    return facts


def save_run_facts(
    out: Path,
    script: Path,
    samples_per_s: float | None,
    message: str | None = None,
    error_at: tuple[str, int] | None = None,
) -> None:
    """Writes ``out/facts.json`` as a capture child would: a measured window, or a failure."""
    facts = Facts(run=RunInfo(script=str(script), argv=[str(script)], cwd=str(out)))
    if samples_per_s is None:
        facts.run.outcome = Outcome.SCRIPT_ERROR
        facts.run.message = message
        if error_at:
            facts.run.error_location = SourceLocation(file=error_at[0], line=error_at[1])
    else:
        facts.run.outcome = Outcome.COMPLETED
        facts.steps = StepTimes(warmup_steps=1, measured_steps=4, samples_per_s=samples_per_s)
    facts.save(out / "facts.json")


class FakeRunner:
    """A runner that 'runs' a script by writing facts: ``speed(script, call)`` gives its
    samples/s (None: it raises), and each run advances ``clock`` by ``run_s`` seconds."""

    def __init__(self, speed, run_s: float = 5.0):
        self.speed = speed
        self.run_s = run_s
        self.now = 0.0
        self.calls: list[tuple[Path, Path]] = []

    def clock(self) -> float:
        return self.now

    def __call__(self, script: Path, out: Path, timeout_s: float) -> RunEnd:
        self.calls.append((script, out))
        self.now += self.run_s
        value = self.speed(script, len(self.calls))
        save_run_facts(out, script, value, "ValueError: boom", (str(script), 3))
        return RunEnd(status=0, wall_s=self.run_s)


def tree_hashes(root: Path, skip: Path | None = None) -> dict[str, str]:
    """sha256 of every file under ``root`` (links not followed; ``skip``'s files left out)."""
    hashes = {}
    for path in sorted(root.rglob("*")):
        if skip is not None and (path == skip or skip in path.parents):
            continue
        if path.is_file() and not path.is_symlink():
            hashes[str(path.relative_to(root))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return hashes
