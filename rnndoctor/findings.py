"""Findings: what a rule concluded from the Facts, with its evidence, location and fix."""

from __future__ import annotations

import enum
from dataclasses import asdict, dataclass, field
from typing import Any


class Severity(enum.IntEnum):
    """How bad a finding is.

    ``ERROR``: the job will crash, or runs at least 2x slower than it needs to.
    ``WARNING``: a measurable slowdown. ``INFO``: worth knowing.
    """

    INFO = 1
    WARNING = 2
    ERROR = 3

    @property
    def label(self) -> str:
        return self.name.lower()

    @classmethod
    def parse(cls, text: str) -> Severity:
        """``"error"`` -> ``Severity.ERROR``. Raises ``ValueError`` on an unknown name."""
        try:
            return cls[text.upper()]
        except KeyError:
            raise ValueError(f"unknown severity {text!r}") from None


@dataclass(frozen=True)
class Evidence:
    """One measured or read value behind a finding. ``unit`` is empty for unitless values."""

    label: str
    value: Any
    unit: str = ""
    source: str = ""


class FixSafety(enum.StrEnum):
    """How safe a fix is to apply, as ruff's fix applicability says it (``Applicability``:
    safe / unsafe / display-only). The values are what ``report.json`` holds."""

    SAFE = "safe"  # same results, faster: can be applied as it is
    UNSAFE = "unsafe"  # changes the model's behaviour or results (what it learns): review it
    DISPLAY_ONLY = "display-only"  # a sketch to adapt by hand, not a rewrite of the user's code


@dataclass(frozen=True)
class Fix:
    """A concrete change: ``code`` to paste, replacing ``before`` where that is given.

    ``safety`` is a :class:`FixSafety` (a plain string of one of its values is converted).
    ``location``: where ``before`` is when that is not the finding's own location (RD501 finds
    the padding at the ``pad_sequences`` line and rewrites the ``fit`` call); None: there.

    Raises:
        ValueError: ``safety`` is not one of FixSafety's values.
    """

    title: str
    code: str
    safety: FixSafety = FixSafety.UNSAFE
    before: str | None = None
    location: Location | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.safety, FixSafety):
            object.__setattr__(self, "safety", FixSafety(self.safety))


@dataclass(frozen=True)
class BucketPlan:
    """Bucket boundaries a finding suggests, typed for the renderers (RD501): ``boundaries`` in
    timesteps (``bucket_by_sequence_length``'s ``bucket_boundaries``) and ``batch_sizes`` (its
    ``bucket_batch_sizes``, one more than the boundaries; empty when not suggested)."""

    boundaries: tuple[int, ...]
    batch_sizes: tuple[int, ...] = ()


@dataclass(frozen=True)
class Location:
    """A place in the user's code: ``file`` (absolute path), 1-based ``line``, the stripped
    source ``code`` of that line, and ``context`` lines starting at line ``context_start``."""

    file: str
    line: int
    code: str | None = None
    context_start: int | None = None
    context: tuple[str, ...] = ()


@dataclass(frozen=True)
class Finding:
    """One rule's conclusion about one place (a layer, the fit call, the dataset).

    Attributes:
        rule_id: stable ID (``RD101``), as the rule registry (``rnndoctor.rules``) declares it.
            A rule's check leaves it empty (:func:`rnndoctor.rules.finding`); the engine stamps
            it from the registry.
        name: the rule's kebab-case name (``recurrent-dropout``), stamped the same way.
        severity: see :class:`Severity`; a check that sets none gets its rule's default
            severity, stamped by the engine.
        message: one sentence, naming the layer and the offending argument and value.
        layer: the layer's path in the model tree, or None for model-wide findings.
        location: the user's file:line, or None when it could not be recorded.
        evidence: the facts the rule used, with units.
        fix: the concrete change, as code.
        gain: the estimated gain and the model behind it, or why it was not measured.
        speedup: the estimated speedup factor of the training once fixed, from the model in
            ``gain``: of the step (2.6 = 2.6x faster steps), except a samples/s ratio for the
            rules whose fix changes the step's size (``rules/_outside.py: THROUGHPUT_RULES``,
            RD301's larger batch, RD501's buckets with their partial batches) and of the whole
            job for ``JOB_LEVEL_RULES``; None when not estimated.
        speedup_interval: the speedup's interval and basis in words, as the finding quotes them
            beside it ("90% interval 2.16–2.22x; an upper bound"), for the verdict and the
            forecast, which quote the speedup alone otherwise; None where the rule gives them in
            ``gain`` only.
        fast_path_after_fix: for RD1xx, whether the installed Keras would take the cuDNN kernel
            on a GPU once this fix (and only the fixes listed with it) is applied; None elsewhere.
        fast_path_caveat: a condition that verdict depends on and this run did not check (the
            layout of the masks the layer receives), or None.
        bucket_plan: the bucket boundaries the fix suggests, for the renderers (RD501); None
            elsewhere, and then left out of :meth:`to_dict`.
    """

    rule_id: str
    name: str
    severity: Severity
    message: str
    layer: str | None = None
    location: Location | None = None
    evidence: tuple[Evidence, ...] = field(default_factory=tuple)
    fix: Fix | None = None
    gain: str | None = None
    speedup: float | None = None
    speedup_interval: str | None = None
    fast_path_after_fix: bool | None = None
    fast_path_caveat: str | None = None
    bucket_plan: BucketPlan | None = None

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["severity"] = self.severity.label
        data["evidence"] = [asdict(e) for e in self.evidence]
        if self.bucket_plan is None:
            del data["bucket_plan"]
        return data
