"""One verification, start to end: locate the fixes, build the copies, run A/B, decide, patch.

:func:`verify` is what the CLI calls after a plain check; it writes ``<out>/verify/`` (the
copies and each run's folder), ``<out>/verify.json``, ``<out>/verify.md`` and
``<out>/fixes.patch``, and never writes into the user's tree.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from rnndoctor.facts import Facts
from rnndoctor.findings import Finding
from rnndoctor.verify import patch as px
from rnndoctor.verify.patchfile import OutsideRoot, build_patch
from rnndoctor.verify.result import (
    GPU_ONLY,
    OUTSIDE_WINDOW,
    Status,
    Verified,
    is_gpu_only,
    is_outside_window,
    measure,
    sort_key,
)
from rnndoctor.verify.run import Candidate, Runner, Schedule, run_all

VERIFY_DIR = "verify"
ALL = "all"
PATCH_NAME = "fixes.patch"


@dataclass(frozen=True)
class Job:
    """What a verification runs and where.

    Attributes:
        script: the user's script (as the plain check ran it).
        out: the check's report folder.
        runner: starts one capture child (:data:`rnndoctor.verify.run.Runner`).
        budget_s: seconds for all the runs together.
        run_timeout_s: the time limit of one run (seconds).
        estimate_s: a run's expected wall time before one was timed (seconds).
        budget_option: the option that set ``budget_s`` (``--verify-budget``, or ``--timeout``
            where what it left after the plain check was less): what a fix that ran out of
            budget tells the user to raise.
    """

    script: Path
    out: Path
    runner: Runner
    budget_s: float
    run_timeout_s: float
    estimate_s: float
    budget_option: str = "--verify-budget"


@dataclass
class Verification:
    """A verification's outcome.

    Attributes:
        items: one entry per fix with a location or a fix, one per call whose fixes merged
            into one rewrite (``RD101+RD102``), and ``all`` (the compatible fixes together) when
            the copy holds two or more rewrites; failed and slower first.
        root: the folder ``fixes.patch`` is relative to (``facts.run.source_root``: the work
            tree root, else the cwd where it holds the script, else the script's folder).
        patch: the patch's text (empty: no confirmed fix).
        patch_path: where it was written.
        budget_s: the budget (seconds).
        spent_s: what the runs took (seconds).
        on_cpu: the runs had no GPU.
        notes: what the reader should know (fixes left out of the all-fixes copy or the patch).
        interrupted: Ctrl-C stopped the runs.
    """

    items: list[Verified]
    root: str
    patch: str = ""
    patch_path: str | None = None
    budget_s: float = math.inf
    spent_s: float = 0.0
    on_cpu: bool = True
    notes: list[str] = field(default_factory=list)
    interrupted: bool = False


def _item(finding: Finding, fix_id: str) -> Verified:
    """A fix's entry before it is measured."""
    fix = finding.fix
    where = (fix.location if fix else None) or finding.location
    return Verified(
        fix=fix_id,
        rules=[fix_id],
        title=fix.title if fix else finding.message,
        file=where.file if where else None,
        line=where.line if where else None,
        safety=str(fix.safety) if fix else None,
        estimate=finding.speedup,
        estimate_text=finding.gain,
    )


def _locate_all(
    findings: Sequence[Finding], script_dir: Path, on_cpu: bool
) -> tuple[dict[str, Verified], list[px.Rewrite]]:
    """Every finding with a fix gets an entry; the rewrites that can be tried are returned."""
    items: dict[str, Verified] = {}
    rewrites = []
    for finding, fix_id in zip(findings, px.fix_ids(findings), strict=True):
        if finding.fix is None:
            continue
        item = items[fix_id] = _item(finding, fix_id)
        if on_cpu and is_gpu_only(finding.rule_id):
            item.reason = GPU_ONLY
            continue
        if is_outside_window(finding.rule_id):
            item.reason = OUTSIDE_WINDOW
            continue
        try:
            rewrites.append(px.locate(finding, fix_id, script_dir))
        except px.NotVerifiable as exc:
            item.reason = str(exc)
    return items, rewrites


def _overlap(dropped: px.Rewrite, kept: px.Rewrite) -> str:
    """Why ``dropped`` lost its overlap with ``kept`` (:func:`rnndoctor.verify.patch.compatible`):
    ``kept``'s larger estimated gain, or, where neither finding estimated one (``speedup``
    None: a cuDNN fix on a CPU, an inconclusive gain such as RD502's), its place as the earlier
    finding."""
    if kept.finding.speedup is None and dropped.finding.speedup is None:
        return (
            f"it rewrites the same lines as {kept.fix_id}, and neither has an estimated gain "
            f"(the earlier finding, {kept.fix_id}, is kept)"
        )
    return f"it overlaps {kept.fix_id}, estimated larger"


def _candidates(
    job: Job, root: Path, items: dict[str, Verified], rewrites: list[px.Rewrite], notes: list[str]
) -> tuple[list[Candidate], dict[str, px.Rewrite]]:
    """Builds the copies: all compatible fixes together first (unless they are one call's merged
    fixes alone), then each call's merged fixes (:func:`_group_item`; every group, in the
    all-fixes copy or not), then each fix by its estimated gain (largest first).

    Returns:
        The candidates, and the merged rewrites by their entry's name (``RD101+RD102``).
    """
    base = job.out / VERIFY_DIR
    skip = [job.out, base]  # never mirror the report folder (or the copies) into a copy
    kept, dropped = px.compatible(rewrites)
    by_id = {r.fix_id: r for r in (*rewrites, *kept)}
    for fix_id, by in dropped.items():
        notes.append(f"{fix_id} is not in the all-fixes copy: {_overlap(by_id[fix_id], by_id[by])}")
    groups = {r.fix_id: r for r in px.merge_groups(rewrites)}
    singles = sorted(rewrites, key=lambda r: -r.speedup)
    copies: list[tuple[str, list[px.Rewrite]]] = []
    if len(kept) >= 2:
        members = [f for r in kept for f in r.members]
        estimate = parts_estimate([items[f] for f in members])
        items[ALL] = Verified(
            fix=ALL, rules=members, title="all compatible fixes", estimate_text=estimate
        )
        copies.append((ALL, kept))
    for name, group in groups.items():
        items[name] = _group_item(group, items)
        copies.append((name, [group]))
    copies += [(r.fix_id, [r]) for r in singles]
    candidates = []
    for name, applied in copies:
        try:
            copy = px.build_copy(base / name, job.script, root, applied, skip)
        except px.NotVerifiable as exc:
            items[name].reason = str(exc)
            continue
        candidates.append(Candidate(name, copy))
    return candidates, groups


def _group_item(group: px.Rewrite, items: dict[str, Verified]) -> Verified:
    """The entry of one call's fixes merged into one rewrite (:func:`rnndoctor.verify.patch.
    merge_same_call`), measured as one fix: each of RD101 and RD102 alone can leave a layer off
    the cuDNN kernel, so only the two together show the gain, and a confirmed group puts both
    in the patch whatever each measured alone (a part measured slower alone gets a note:
    :func:`_slower_part_notes`)."""
    parts = [items[name] for name in group.members]
    unsafe = any(p.safety == "unsafe" for p in parts)
    return Verified(
        fix=group.fix_id, rules=list(group.members), file=parts[0].file, line=parts[0].line,
        title=f"{' and '.join(group.members)} together: one rewrite of their call",
        safety="unsafe" if unsafe else parts[0].safety,
        estimate_text=parts_estimate(parts),
    )  # fmt: skip


def parts_estimate(parts: Sequence[Verified]) -> str | None:
    """A copy of several fixes' estimate column: each part's own estimate, not combined (their
    effects can overlap: an input fix and a batch-size fix both shorten the wait, so their
    product would overstate the whole, issue 11's physical bounds): ``RD301 2.82x; RD203,
    RD202 none; not combined``. None where no part estimated a gain."""
    estimated = [f"{p.fix} {p.estimate:.2f}x" for p in parts if p.estimate]
    if not estimated:
        return None
    rest = [p.fix for p in parts if not p.estimate]
    return "; ".join([*estimated, *([f"{', '.join(rest)} none"] if rest else []), "not combined"])


def source_root(facts: Facts) -> Path:
    """The work tree holding the script, as the plain check recorded it
    (``facts.run.source_root``; else its cwd)."""
    return Path(facts.run.source_root or facts.run.cwd or os.getcwd())


def on_cpu(facts: Facts) -> bool:
    """Whether the check ran without a GPU."""
    return facts.environment is None or facts.environment.gpu_count == 0


def verify(
    findings: Sequence[Finding],
    facts: Facts,
    job: Job,
    clock: Callable[[], float] | None = None,
) -> Verification:
    """Verifies every fix of ``findings`` that is a source rewrite, and writes the patch.

    Args:
        findings: the plain check's findings (the report's order).
        facts: the plain check's facts (work tree root, devices).
        job: the script, folders, runner and budget.
        clock: ``time.monotonic`` unless given (tests).

    Returns:
        The verification; ``verify.json`` and the rest are written by
        :func:`rnndoctor.verify.output.write_outputs`.

    Raises:
        OSError: a copy, a run folder or the patch cannot be written.
    """
    root = source_root(facts)
    cpu = on_cpu(facts)
    notes: list[str] = []
    items, rewrites = _locate_all(findings, job.script.resolve().parent, cpu)
    candidates, groups = _candidates(job, root, items, rewrites, notes)
    schedule_args = dict(clock=clock) if clock is not None else {}
    schedule = Schedule(job.script, job.runner, job.out / VERIFY_DIR / "runs", job.budget_s,
                        job.run_timeout_s, **schedule_args)  # fmt: skip
    prepare = getattr(job.runner, "prepare", None)  # a warm runner starts its arms first
    if prepare is not None and candidates:
        prepare([job.script, *(c.script for c in candidates)], job.run_timeout_s)
    run_all(schedule, candidates, job.estimate_s)
    for candidate in candidates:
        measure(items[candidate.name], candidate, cpu, job.budget_option)
    for item in items.values():
        if item.status == Status.NOT_VERIFIABLE and item.reason is None:
            item.reason = "not run"
    patch = _patch(items, rewrites, groups, root, notes)
    result = Verification(
        items=sorted(items.values(), key=sort_key), root=str(root), patch=patch,
        budget_s=job.budget_s, spent_s=round(schedule.clock() - schedule.started_s, 3),
        on_cpu=cpu, notes=notes, interrupted=schedule.interrupted,
    )  # fmt: skip
    path = job.out / PATCH_NAME
    path.write_text(patch, encoding="utf-8")
    result.patch_path = str(path)
    return result


def _patch(
    items: dict[str, Verified],
    rewrites: list[px.Rewrite],
    groups: dict[str, px.Rewrite],
    root: Path,
    notes: list[str],
) -> str:
    """The patch of the confirmed fixes, each as its copy was measured: a fix confirmed alone,
    or fixes merged into one rewrite (:func:`_group_item`) whose copy was confirmed, whatever
    each part measured alone (RD101 and RD102 together can put a layer on the cuDNN kernel
    where either alone slows it); where a part alone measured slower (its whole interval below
    1) or within noise, a note says so beside the group's own measurement. Nothing is merged
    here that no copy measured merged: of two that touch a common line, the larger estimate
    wins (the earlier on a tie, a group in its first part's place;
    :func:`rnndoctor.verify.patch.compatible`)."""
    confirmed_groups = [g for name, g in groups.items() if items[name].status == Status.CONFIRMED]
    covered = {fix_id: g for g in confirmed_groups for fix_id in g.members}
    chosen: list[px.Rewrite] = []
    for rewrite in rewrites:
        group = covered.get(rewrite.fix_id)
        if group is not None:
            if group not in chosen:
                chosen.append(group)
        elif items[rewrite.fix_id].status == Status.CONFIRMED:
            chosen.append(rewrite)
    kept, dropped = px.compatible(chosen, apart=[r.fix_id for r in rewrites])
    for rewrite in chosen:
        if rewrite not in kept:
            by = dropped[rewrite.members[0]]
            notes.append(f"{rewrite.fix_id} is confirmed but not in the patch: it overlaps {by}")
    inside = []
    for rewrite in kept:
        try:
            build_patch([rewrite], root)
        except OutsideRoot as exc:
            notes.append(f"{rewrite.fix_id} is confirmed but not in the patch: {exc}")
            continue
        inside.append(rewrite)
        for fix_id in {rewrite.fix_id, *rewrite.members}:
            items[fix_id].in_patch = True
        notes.extend(_slower_part_notes(rewrite, items))
    return build_patch(inside, root)


def _slower_part_notes(group: px.Rewrite, items: dict[str, Verified]) -> list[str]:
    """For a merged group in the patch, a note per part that alone measured slower or within
    noise: the patch carries it because the group was confirmed together, and the user sees
    both figures (a new user's table showed "RD202 within noise 0.82x" beside "in patch: yes"
    with no word of the merged RD301+RD202 that carried it)."""
    if len(group.members) < 2:
        return []
    together = items[group.fix_id].measured_text
    alone = {Status.SLOWER: "measured slower", Status.WITHIN_NOISE: "measured within noise"}
    return [
        f"{name} alone {alone[items[name].status]}, {items[name].measured_text}; it is in the "
        f"patch as part of {group.fix_id}, confirmed together at {together}"
        for name in group.members
        if items[name].status in alone
    ]
