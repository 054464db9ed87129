"""A verification as the reports read it: the ``verify.json`` document, typed.

:class:`VerifySummary` is what a :class:`rnndoctor.engine.Report` carries after ``--verify`` (and
what ``rnndoctor report`` / ``compare`` read back from a ``report.json``), so that the renderers
need neither the A/B runs nor :mod:`rnndoctor.verify.session`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from rnndoctor.verify.result import Verified, sort_key
from rnndoctor.verify.session import ALL  # the all-fixes copy's name

__all__ = ["ALL", "MEASURED_ON", "VerifySummary"]

MEASURED_ON = ("cpu", "gpu")


class _VerificationLike(Protocol):
    """The fields :meth:`VerifySummary.of` reads (a :class:`rnndoctor.verify.Verification`)."""

    items: list[Verified]
    root: str
    patch_path: str | None
    budget_s: float
    spent_s: float
    on_cpu: bool
    notes: list[str]


@dataclass
class VerifySummary:
    """A verification's outcome, as written to ``verify.json``.

    Attributes:
        items: one entry per fix (and ``all``), failed, slower and unsafe first.
        root: the folder ``fixes.patch`` applies from (``git apply`` there).
        patch_path: ``<out>/fixes.patch`` (empty when no fix was confirmed: see :attr:`patched`).
        budget_s: the runs' budget in seconds (None: unlimited).
        spent_s: what the runs took (seconds).
        measured_on: ``cpu`` or ``gpu``.
        notes: what the reader should know (fixes left out of the all-fixes copy or the patch).
    """

    items: list[Verified]
    root: str
    patch_path: str | None = None
    budget_s: float | None = None
    spent_s: float = 0.0
    measured_on: str = "cpu"
    notes: list[str] = field(default_factory=list)

    @classmethod
    def of(cls, verification: _VerificationLike) -> VerifySummary:
        """The summary of a finished verification (its items in the report's order)."""
        budget = verification.budget_s
        return cls(
            items=sorted(verification.items, key=sort_key),
            root=verification.root,
            patch_path=verification.patch_path,
            budget_s=None if math.isinf(budget) else budget,
            spent_s=verification.spent_s,
            measured_on="cpu" if verification.on_cpu else "gpu",
            notes=list(verification.notes),
        )

    @property
    def patched(self) -> bool:
        """Whether ``fixes.patch`` holds a fix (one confirmed fix at least)."""
        return any(item.in_patch for item in self.items)

    def all_fixes(self) -> Verified | None:
        """The copy with every compatible fix: ``all``; where there was no ``all`` copy, the one
        copy that ran (a single rewrite) or the one whose fixes hold every other copy's (one
        call's fixes merged, ``RD101+RD102``, beside each of them alone); None when no copy
        ran."""
        ran = [item for item in self.items if item.copy is not None]
        whole = [item for item in ran if item.fix == ALL]
        if whole:
            return whole[0]
        covering = [i for i in ran if all(set(o.rules) <= set(i.rules) for o in ran)]
        return covering[0] if len(covering) == 1 else None

    def to_dict(self) -> dict[str, Any]:
        """``verify.json``'s document (``verified``: the entries; ``patch``: the patch's path)."""
        return {
            "verified": [item.to_dict() for item in self.items],
            "root": self.root,
            "patch": self.patch_path,
            "budget_s": self.budget_s,
            "spent_s": self.spent_s,
            "measured_on": self.measured_on,
            "notes": list(self.notes),
        }

    def scrubbed(self, walk: Callable[[Any], Any]) -> VerifySummary:
        """A copy whose text went through ``walk`` (a function that maps every string of a JSON
        document: ``--redact``'s scrubber); the statuses and ``measured_on`` are kept as they
        are."""
        document = self.to_dict()
        walked = walk(document)
        for new, old in zip(walked["verified"], document["verified"], strict=True):
            new["status"] = old["status"]
        walked["measured_on"] = document["measured_on"]
        return VerifySummary.from_dict(walked)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> VerifySummary:
        """The summary :meth:`to_dict` wrote.

        Raises:
            ValueError: an unknown status or ``measured_on``.
            KeyError: an entry without ``fix``, ``rules`` or ``title``.
        """
        measured_on = data.get("measured_on", "cpu")
        if measured_on not in MEASURED_ON:
            raise ValueError(f"measured_on must be one of {MEASURED_ON}, not {measured_on!r}")
        return cls(
            items=sorted((Verified.from_dict(v) for v in data.get("verified", [])), key=sort_key),
            root=str(data.get("root") or ""),
            patch_path=data.get("patch"),
            budget_s=data.get("budget_s"),
            spent_s=float(data.get("spent_s") or 0.0),
            measured_on=measured_on,
            notes=[str(n) for n in data.get("notes", [])],
        )
