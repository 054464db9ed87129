"""The engine: runs the registered rules over Facts and assembles a :class:`Report`.

Pure: no TensorFlow, no I/O. A rule whose required Facts sections are missing is reported as
``not_evaluated`` with the reason, never as a silent pass; a rule that raises is reported as
``failed`` with the error, and the other rules still run.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from rnndoctor.facts import Facts
from rnndoctor.findings import Finding, Severity
from rnndoctor.rules import Rule, all_rules


@dataclass
class RuleOutcome:
    """What one rule did: ``status`` is ``fired``, ``passed``, ``not_evaluated`` or ``failed``."""

    rule: Rule
    status: str
    reason: str | None = None
    findings: list[Finding] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "rule_id": self.rule.id,
            "name": self.rule.name,
            "status": self.status,
            "reason": self.reason,
            "findings": len(self.findings),
        }


@dataclass
class Report:
    """Facts plus the rules' outcomes; what every renderer renders.

    ``findings`` are ordered worst first (severity, then rule ID, then location).
    """

    facts: Facts
    outcomes: list[RuleOutcome]

    @property
    def findings(self) -> list[Finding]:
        found = [f for o in self.outcomes for f in o.findings]
        return sorted(
            found,
            key=lambda f: (
                -int(f.severity),
                f.rule_id,
                f.location.file if f.location else "",
                f.location.line if f.location else 0,
            ),
        )

    @property
    def worst(self) -> Severity | None:
        return max((f.severity for f in self.findings), default=None)

    def fails(self, fail_on: Severity | None) -> bool:
        """True when a finding is at or above ``fail_on`` (None: never fails)."""
        return fail_on is not None and any(f.severity >= fail_on for f in self.findings)

    def to_dict(self) -> dict[str, Any]:
        """The ``report.json`` document: facts, findings and rule outcomes."""
        return {
            "schema_version": self.facts.schema_version,
            "tool_version": self.facts.tool_version,
            "facts": self.facts.to_dict(),
            "findings": [f.to_dict() for f in self.findings],
            "rules": [o.to_dict() for o in self.outcomes],
        }


def _missing(facts: Facts, needs: Iterable[str]) -> str | None:
    for section in needs:
        if getattr(facts, section, None) is None:
            return (
                f"facts section '{section}' was not gathered (the run ended with outcome "
                f"'{facts.run.outcome}' during phase '{facts.run.phase}')"
            )
    return None


def _matches(rule: Rule, keys: Iterable[str]) -> bool:
    keys = {k.strip().lower() for k in keys}
    return rule.id.lower() in keys or rule.name in keys


def evaluate(
    facts: Facts,
    select: Iterable[str] | None = None,
    ignore: Iterable[str] | None = None,
) -> Report:
    """Runs every registered rule (or the ``select``ed ones, minus ``ignore``d) over ``facts``.

    Args:
        facts: the gathered facts.
        select: rule IDs or names to run; None runs all.
        ignore: rule IDs or names to skip.
    """
    outcomes = []
    for rule in all_rules():
        if select and not _matches(rule, select):
            continue
        if ignore and _matches(rule, ignore):
            continue
        missing = _missing(facts, rule.needs)
        if missing:
            outcomes.append(RuleOutcome(rule, "not_evaluated", missing))
            continue
        try:
            findings = list(rule.check(facts))
        except Exception as exc:  # a broken rule must not hide the others' findings
            outcomes.append(RuleOutcome(rule, "failed", f"{type(exc).__name__}: {exc}"))
            continue
        outcomes.append(RuleOutcome(rule, "fired" if findings else "passed", None, findings))
    return Report(facts=facts, outcomes=outcomes)
