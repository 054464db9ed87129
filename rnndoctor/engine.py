"""The engine: runs the registered rules over Facts and assembles a :class:`Report`.

Each rule's check gets its option values (the defaults its ``@rule`` declares, with any
``rule_options`` override over them, :func:`rnndoctor.rules.resolve_rule_options`), and every
finding it returns is stamped with the rule's ``rule_id`` and ``name`` from the registry (and
its default severity where the check set none), so a rule module never writes its identity.
Pure: no TensorFlow, no I/O.

A rule whose required Facts sections are missing, or that raises
:class:`rnndoctor.rules.NotEvaluated` (a fact it needs was not measured, such as a GPU fact on a
CPU-only run), is reported as ``not_evaluated`` with the reason, never as a silent pass; a rule
that raises anything else is reported as ``failed`` with the error, and the other rules still
run. Ill-formed ``rule_options`` raise ``ValueError`` before any rule runs.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from rnndoctor.facts import Facts
from rnndoctor.findings import Finding, Severity
from rnndoctor.rules import (
    NeedsGPU,
    NotEvaluated,
    OptionValues,
    Rule,
    all_rules,
    resolve_rule_options,
)
from rnndoctor.rules import _outside as outside_facts
from rnndoctor.verify.patch import fix_ids
from rnndoctor.verify.result import Status as VerifyStatus
from rnndoctor.verify.summary import VerifySummary


class Status(enum.StrEnum):
    """What one rule did (``RuleOutcome.status``; the values are what ``report.json`` holds)."""

    FIRED = "fired"
    PASSED = "passed"
    NOT_EVALUATED = "not_evaluated"  # its facts are missing, or were not measured in this run
    FAILED = "failed"  # the rule raised
    SKIPPED = "skipped"  # --select / --ignore


@dataclass
class RuleOutcome:
    """What one rule did: its :class:`Status`, the reason (not evaluated, failed, skipped) and
    its findings. ``needs_gpu``: not evaluated because the facts it reads need a GPU
    (:class:`rnndoctor.rules.NeedsGPU`)."""

    rule: Rule
    status: Status
    reason: str | None = None
    findings: list[Finding] = field(default_factory=list)
    needs_gpu: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "rule_id": self.rule.id,
            "name": self.rule.name,
            "status": self.status,
            "reason": self.reason,
            "findings": len(self.findings),
        }


@dataclass
class Forecast:
    """The full job's training time, from the measured median step time.

    ``now_s`` = median step time x steps per epoch x epochs. It counts training steps only:
    validation, epoch-end callbacks and start-up are not measured and not included.

    A ``fit`` inside a loop (``FitConfig.fit_in_loop``) and what the script runs after it
    (``Facts.outside_window``) extend it to the whole loop: ``training_s`` (one call's training
    steps) and ``outside_s`` (what runs per call until the next one, measured or extrapolated),
    times ``fit_calls`` (the loop's calls; one where the count is not in the source); after a
    single ``fit``, ``outside_s`` is what runs after it until the script's end, once
    (``fit_calls`` 1); ``covers`` says which parts were measured.
    ``after_s`` divides it by the largest single estimated speedup among the findings (gains of
    different findings are not assumed to compound); None with ``after_not_estimated`` saying
    why when no finding carries an estimate.

    Bounds (issue 11): the forecast never multiplies effects that overlap (input wait and
    compute: an input fix and a batch-size or steps_per_execution change act on the same step),
    so it takes one finding's gain, never a product; only gains whose interval cleared their
    rule's cut-off carry a ``speedup`` (an inconclusive finding carries none), and a rule whose
    probe was inconsistent with the window gives no finding, so no forecast rests on it.
    """

    step_time_ms: float
    steps_per_epoch: int
    epochs: int
    now_s: float
    after_s: float | None = None
    after_model: str | None = None
    after_not_estimated: str | None = None
    # the fit loop (issue 12): see _cover_loop
    fit_calls: int | None = None
    training_s: float | None = None
    outside_s: float | None = None
    covers: str | None = None
    # --verify (issue 13): the measured "after"
    after_basis: str = "estimated"
    after_low_s: float | None = None
    after_high_s: float | None = None
    after_note: str | None = None
    after_not_measured: str | None = None

    @property
    def after_label(self) -> str:
        """The "after" row's name: ``after the fixes`` where ``--verify`` measured a copy with
        the patch's fixes, ``after the largest fix`` where it rests on one finding's estimate
        (Bounds: never a product of the findings' gains), ``after a fix`` where nothing was
        estimated (the row then says why, with no basis)."""
        if self.after_basis == "measured":
            return "after the fixes"
        return "after a fix" if self.after_s is None else "after the largest fix"


@dataclass
class Report:
    """Facts plus the rules' outcomes; what every renderer renders.

    ``findings`` are ordered by estimated speedup (largest first; none last), then severity
    (worst first), then rule ID and location.
    """

    facts: Facts
    outcomes: list[RuleOutcome]
    verification: VerifySummary | None = None  # after --verify, or diagnose(verify=True)
    # the owner of a temporary profile folder (rnndoctor.api.TemporaryFolder, for a diagnosis
    # without out): held so that the folder the report's facts point at lives as long as it
    temporary_profile: object | None = field(default=None, repr=False, compare=False)

    @property
    def findings(self) -> list[Finding]:
        found = [f for o in self.outcomes for f in o.findings]
        return sorted(
            found,
            key=lambda f: (
                -(f.speedup or 0.0),
                -int(f.severity),
                f.rule_id,
                f.location.file if f.location else "",
                f.location.line if f.location else 0,
            ),
        )

    @property
    def forecast(self) -> Forecast | None:
        """The job forecast, or None when the step time, steps per epoch or epochs are unknown."""
        steps, fit = self.facts.steps, self.facts.fit
        if not steps or steps.median_step_time_ms is None or fit is None:
            return None
        per_epoch = fit.steps_per_epoch or fit.batches_per_epoch
        if not per_epoch or not fit.epochs:
            return None
        now_s = steps.median_step_time_ms / 1000.0 * per_epoch * fit.epochs
        forecast = Forecast(steps.median_step_time_ms, int(per_epoch), int(fit.epochs), now_s)
        _cover_loop(forecast, self.facts)
        refuted = _refuted(self.findings, self.verification)
        gains = [f for f in self.findings if f.speedup and f.speedup > 1 and id(f) not in refuted]
        if gains:
            best = min(gains, key=lambda f: _after(forecast, f.speedup or 1.0, f.rule_id))
            forecast.after_s = _after(forecast, best.speedup or 1.0, best.rule_id)
            forecast.after_model = (
                f"{best.rule_id}'s estimate, {outside_facts.estimate_words(best)}, the largest "
                "single gain: the findings' gains are not compounded, as their effects can overlap"
            )
        elif refuted and any(f.speedup and f.speedup > 1 for f in self.findings):
            forecast.after_not_estimated = (
                "--verify did not confirm the fixes whose findings estimated a gain"
            )
        else:
            forecast.after_not_estimated = "no finding in this run carries a measured gain" + (
                " (the cuDNN fast-path gains can only be measured on a GPU)"
                if any(f.rule_id.startswith("RD1") for f in self.findings)
                else ""
            )
        if self.verification is not None:
            _measured_after(forecast, self.verification)
        return forecast

    def fails(self, fail_on: Severity | None) -> bool:
        """True when a finding is at or above ``fail_on`` (None: never fails)."""
        return fail_on is not None and any(f.severity >= fail_on for f in self.findings)

    # The notebook renderer, registered by rnndoctor.reports.notebook when it is imported (the
    # reports package imports this module, so this module cannot import it, not even lazily).
    notebook_renderer: ClassVar[Callable[[Report], str] | None] = None

    def _repr_html_(self) -> str | None:
        """The report inline in Jupyter / IPython: report.html's content in a frame, with no
        script and nothing loaded from the network (:mod:`rnndoctor.reports.notebook`, which
        :mod:`rnndoctor.api` and :mod:`rnndoctor.keras` import). None, so that IPython shows the
        plain repr, while no renderer is registered."""
        render = type(self).notebook_renderer
        return render(self) if render is not None else None

    def to_dict(self) -> dict[str, Any]:
        """The ``report.json`` document: facts, findings and rule outcomes."""
        return {
            "schema_version": self.facts.schema_version,
            "tool_version": self.facts.tool_version,
            "facts": self.facts.to_dict(),
            "findings": [f.to_dict() for f in self.findings],
            "rules": [o.to_dict() for o in self.outcomes],
            **(_verified_dict(self.verification) if self.verification is not None else {}),
        }


def _verified_dict(summary: VerifySummary) -> dict[str, Any]:
    """``report.json``'s ``verified`` list and, beside it, the rest of ``verify.json``."""
    document = summary.to_dict()
    return {"verified": document.pop("verified"), "verification": document}


def _refuted(findings: Sequence[Finding], summary: VerifySummary | None) -> set[int]:
    """The findings (their ``id``) whose fix ``--verify`` measured and did not confirm (slower,
    within noise, failed, diverged): an estimated forecast must not rest on them. A fix is
    matched to its finding by name (``RD301``, ``RD301-2``: the order of the rule's findings,
    as :func:`rnndoctor.verify.patch.fix_ids` names them)."""
    if summary is None:
        return set()
    decided = (VerifyStatus.SLOWER, VerifyStatus.WITHIN_NOISE, VerifyStatus.FAILED,
               VerifyStatus.UNSAFE)  # fmt: skip
    names = {i.fix for i in summary.items if i.status in decided}
    # a fix of one call measured with that call's other fixes (RD101+RD102) and confirmed there:
    # alone it may leave the layer off the cuDNN kernel, so its own measurement refutes nothing
    together = {
        rule
        for i in summary.items
        if i.fix != "all" and len(i.rules) > 1 and i.status == VerifyStatus.CONFIRMED
        for rule in i.rules
    }
    names -= together
    return {id(f) for f, name in zip(findings, fix_ids(findings), strict=True) if name in names}


def _measured_after(forecast: Forecast, summary: VerifySummary) -> None:
    """The forecast's "after" at the all-fixes copy's measured speedup (see :class:`Forecast`),
    where that copy holds the fixes of ``fixes.patch`` (or no fix was confirmed); else at the
    measurement of a copy that holds exactly the patch's fixes (one fix, or one call's fixes
    merged into one rewrite, ``RD101+RD102``); else not measured, with the two lists. A fresh
    user's forecast read "after the fixes (measured) ... all fixes together (RD301, RD403,
    RD104), confirmed: 3.32x" while RD104 measured slower and fixes.patch left it out."""
    item = summary.all_fixes()
    if item is None:
        return
    patch = [i for i in summary.items if i.in_patch]
    if not patch:  # nothing to apply: no copy measured is "after the fixes"
        what = "all fixes together" if item.fix == "all" else item.fix
        forecast.after_not_measured = (
            f"fixes.patch is empty: no fix was confirmed on its own ({what}: {item.status}"
            + (f", {item.measured:.2f}x" if item.measured is not None else "")
            + ")"
        )
        return
    fixes = sorted({rule for i in patch for rule in i.rules})  # a merged group: its parts
    if sorted(item.rules) != fixes:
        # the copy measured is not what `git apply fixes.patch` gives (a fix in it measured
        # slower and was left out of the patch): a copy of just the patch's fixes (one fix, or
        # one call's fixes merged) has its own measurement
        ran = (i for i in summary.items if i.copy is not None and sorted(i.rules) == fixes)
        match = next(ran, None)
        if match is None:
            forecast.after_not_measured = (
                f"the all-fixes copy held {', '.join(item.rules)}; fixes.patch holds "
                f"{', '.join(fixes)}, whose combination was not measured"
            )
            return
        item = match
    # decided statuses only: a failed or diverged copy, or one with too few pairs for a 90%
    # interval (not verifiable), leaves the estimate
    usable = item.status in (VerifyStatus.CONFIRMED, VerifyStatus.WITHIN_NOISE, VerifyStatus.SLOWER)
    if item.measured is None or item.low is None or item.high is None or not usable:
        detail = item.error if item.status == VerifyStatus.FAILED else item.reason
        copy = "the all-fixes copy" if item.fix == "all" else f"the copy of {item.fix}"
        forecast.after_not_measured = f"{copy}: {item.status}" + (f": {detail}" if detail else "")
        return
    forecast.after_basis = "measured"
    forecast.after_s = _after(forecast, item.measured, item.fix)
    forecast.after_low_s = _after(forecast, item.high, item.fix)  # faster: shorter
    forecast.after_high_s = _after(forecast, item.low, item.fix)
    forecast.after_not_estimated = None
    forecast.after_note = item.cpu_label
    if item.fix == "all":
        what = f"all fixes together ({', '.join(item.rules)})"
    elif len(item.rules) > 1:
        what = f"{' and '.join(item.rules)} together, the fixes of fixes.patch"
    elif len(fixes) == 1:
        what = f"{item.fix}, the one fix in fixes.patch"
    else:
        what = f"{item.fix}, the one fix measured"
    forecast.after_model = (
        f"{what}, {item.status}: {item.measured:.2f}x samples/s "
        f"(90% interval {item.low:.2f}–{item.high:.2f}x, {item.pairs} A/B pairs)"
    )


def _cover_loop(forecast: Forecast, facts: Facts) -> None:
    """Extends the forecast of one ``fit`` call to the loop around it and what runs between
    the calls (``rules/_outside.py``); nothing when the fit is in no loop and nothing was
    measured after it."""
    calls = outside_facts.fit_calls(facts)
    outside = outside_facts.outside_per_call(facts)
    if calls == 1 and outside is None:
        return
    training = forecast.now_s
    forecast.training_s = training
    forecast.outside_s = outside.seconds if outside is not None else None
    forecast.fit_calls = calls
    per_call = training + (forecast.outside_s or 0.0)
    forecast.now_s = per_call * (calls or 1)
    loop = facts.fit.fit_in_loop if facts.fit else None
    parts = [f"training: measured steps x {forecast.steps_per_epoch} x {forecast.epochs} epochs"]
    if loop is not None:
        line = loop.loops[-1].line if loop.loops else "?"
        parts.append(
            f"x {calls} fit calls (the loop at line {line})"
            if calls
            else f"the loop at line {line} has no count in the source: one fit call shown"
        )
    where = "outside fit" if loop is not None else "after fit"
    parts.append(f"{where}: {outside.how}" if outside is not None else f"{where}: not measured")
    parts.append("inside fit, validation and epoch-end callbacks: not measured")
    forecast.covers = "; ".join(parts)


def _after(forecast: Forecast, speedup: float, rule_id: str) -> float:
    """The job time with a fix of ``rule_id`` that speeds its steps up by ``speedup``: a step
    speedup shortens the training part only; a job-level one (``_outside.JOB_LEVEL_RULES``) the
    whole."""
    if forecast.training_s is None or rule_id in outside_facts.JOB_LEVEL_RULES:
        return forecast.now_s / speedup
    calls = forecast.fit_calls or 1
    return forecast.now_s - forecast.training_s * calls * (1.0 - 1.0 / speedup)


# The facts sections that come from ``Model.fit``'s call and its input: a custom training loop
# (``facts.loop``), which passes Keras no data, has none of them.
_FIT_SECTIONS = ("fit", "data", "sequences", "probes")


def _missing(facts: Facts, needs: Iterable[str]) -> str | None:
    """Why a rule needing the facts sections ``needs`` cannot run on ``facts``, or None."""
    for section in needs:
        if getattr(facts, section, None) is None:
            if section in _FIT_SECTIONS and facts.loop is not None and facts.fit is None:
                where = facts.loop.location
                at = f" at {Path(where.file).name}:{where.line}" if where else ""
                return (
                    f"a custom training loop{at}: facts section '{section}' comes from "
                    "Model.fit's call and input, and the loop calls no fit"
                )
            return (
                f"facts section '{section}' was not gathered (the run ended with outcome "
                f"'{facts.run.outcome}' during phase '{facts.run.phase}')"
            )
    return None


def _matches(rule: Rule, keys: Iterable[str]) -> bool:
    keys = {k.strip().lower() for k in keys}
    return rule.id.lower() in keys or rule.name in keys


def _left_out(rule: Rule, select: Iterable[str] | None, ignore: Iterable[str] | None) -> str | None:
    """Why ``select`` / ``ignore`` leave ``rule`` out of :func:`evaluate`, or None if it runs."""
    if select and not _matches(rule, select):
        return "not selected (--select)"
    if ignore and _matches(rule, ignore):
        return "ignored (--ignore)"
    return None


# The rules that read each probe that runs only for them (``rnndoctor.options
# .SKIPPABLE_PROBES``): ``facts.probes.batch_probe`` and ``facts.probes.spe_probe``, as the rule
# modules read them (tests/unit/test_unread_probes.py checks this against their source).
PROBE_READERS: Mapping[str, tuple[str, ...]] = {
    "batch-size": ("RD301", "RD702"),
    "steps-per-execution": ("RD403",),
    "sequence-length": ("RD501", "RD502"),
}


def unread_probes(
    select: Iterable[str] | None = None, ignore: Iterable[str] | None = None
) -> tuple[str, ...]:
    """The probes of :data:`PROBE_READERS` that no rule ``evaluate`` would run reads: with
    ``--select RD101`` neither the batch-size probe nor the steps_per_execution probe runs (they
    take most of a check's probes' time), and with ``--ignore RD403`` the second does not.

    Args:
        select: rule IDs or names to run, as :func:`evaluate` takes them; None or empty: all.
        ignore: rule IDs or names to skip.

    Returns:
        the probes' names, in :data:`PROBE_READERS`' order (empty when every probe is read).
    """
    select, ignore = list(select or []), list(ignore or [])
    runs = {rule.id for rule in all_rules() if _left_out(rule, select, ignore) is None}
    return tuple(probe for probe, readers in PROBE_READERS.items() if runs.isdisjoint(readers))


def spe_share_cutoffs(
    rule_options: Mapping[str, Mapping[str, Any]] | None = None,
) -> tuple[float, ...]:
    """RD403's cut-offs on the dispatch share, ``min_dispatch_share`` and
    ``error_dispatch_share`` (fractions of the step), with ``rule_options`` over the rule's
    defaults: the capture's steps_per_execution probe pairs on in a second stage when its
    first stage's interval straddles one of them (``WindowOptions.spe_share_cutoffs``), so that the
    evidence is stronger where RD403 decides; the rule still decides.

    Raises:
        ValueError: ``rule_options`` is malformed (:func:`rnndoctor.rules.resolve_rule_options`).
    """
    values = resolve_rule_options(rule_options)["RD403"]
    return (float(values.min_dispatch_share), float(values.error_dispatch_share))


def batch_min_speedup(rule_options: Mapping[str, Mapping[str, Any]] | None = None) -> float:
    """RD301's cut-off on the samples/s ratio of a larger batch, ``min_speedup``, with
    ``rule_options`` over the rule's default: the capture's batch-size probe takes one early
    look at its pairs and stops there when RD301's decision is already made on either side of
    it (``WindowOptions.batch_min_speedup``, ``capture/pairs.py: ThroughputDecided``); the rule
    still decides.

    Raises:
        ValueError: ``rule_options`` is malformed (:func:`rnndoctor.rules.resolve_rule_options`).
    """
    return float(resolve_rule_options(rule_options)["RD301"].min_speedup)


def evaluate(
    facts: Facts,
    select: Iterable[str] | None = None,
    ignore: Iterable[str] | None = None,
    rule_options: Mapping[str, Mapping[str, Any]] | None = None,
) -> Report:
    """Runs every registered rule (or the ``select``ed ones, minus ``ignore``d) over ``facts``.

    Rules left out by ``select`` / ``ignore`` are still listed, as ``skipped``, so that a report
    never looks clean only because a rule was turned off.

    Args:
        facts: the gathered facts.
        select: rule IDs or names to run; None runs all.
        ignore: rule IDs or names to skip.
        rule_options: per rule ID (or name), option values over the rule's defaults
            (``[tool.rnndoctor.rules.RD201]``); see :func:`rnndoctor.rules.check_rule_options`.

    Raises:
        ValueError: ``rule_options`` names an unknown rule or option, or an ill-typed value.
    """
    options = resolve_rule_options(rule_options)
    outcomes = []
    for rule in all_rules():
        why = _left_out(rule, select, ignore)
        outcomes.append(
            RuleOutcome(rule, Status.SKIPPED, why) if why else _run(rule, facts, options[rule.id])
        )
    return Report(facts=facts, outcomes=outcomes)


def _run(rule: Rule, facts: Facts, options: OptionValues) -> RuleOutcome:
    """Runs one rule; its findings carry the rule's ID and name, whatever the check wrote, and
    the rule's default severity where the check set none."""
    missing = _missing(facts, rule.needs)
    if missing:
        return RuleOutcome(rule, Status.NOT_EVALUATED, missing)
    try:
        findings = rule.run(facts, options)  # stamped with the rule's ID, name and severity
    except NotEvaluated as exc:  # a fact the rule needs was not measured in this run
        gpu = isinstance(exc, NeedsGPU)
        return RuleOutcome(rule, Status.NOT_EVALUATED, str(exc), needs_gpu=gpu)
    except Exception as exc:  # a broken rule must not hide the others' findings
        return RuleOutcome(rule, Status.FAILED, f"{type(exc).__name__}: {exc}")
    return RuleOutcome(rule, Status.FIRED if findings else Status.PASSED, None, findings)
