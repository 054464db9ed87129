"""Shared logic of the host-overhead (RD401, RD402, RD405) and hardware (RD302, RD6xx) rules.

Pure: no TensorFlow, no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from rnndoctor.facts import Facts, SourceLocation
from rnndoctor.findings import Location, Severity
from rnndoctor.rules import NeedsGPU, Option
from rnndoctor.rules import _fastpath as fp

# The severity of a measured speedup, as rule options (RD401, RD402): `error` means at least
# 2x slower than it needs to be, `warning` a measurable slowdown (rnndoctor.findings.Severity).
ERROR_SPEEDUP = Option(
    name="error_speedup",
    default=2.0,
    unit="x (step-time speedup)",
    source="rnndoctor's severity scale (rnndoctor/findings.py: Severity): error means at least "
    "2x slower than it needs to be",
    help="the measured speedup from which a finding is an error",
)
WARNING_SPEEDUP = Option(
    name="warning_speedup",
    default=1.1,
    unit="x (step-time speedup)",
    source="rnndoctor's choice: a smaller measured gain is within run-to-run noise",
    help="the measured speedup from which a finding is a warning (below it: info)",
)


location = fp.to_location  # one SourceLocation -> Location converter


def first_location(*locations: SourceLocation | None) -> Location | None:
    """The first recorded location among ``locations``."""
    for loc in locations:
        if loc is not None:
            return location(loc)
    return None


def severity_of_speedup(speedup: float | None, options: Mapping[str, Any]) -> Severity:
    """``error`` at a measured ``options["error_speedup"]`` or more, ``info`` under
    ``options["warning_speedup"]``, else (or unmeasured) ``warning``."""
    if speedup is None:
        return Severity.WARNING
    if speedup >= options[ERROR_SPEEDUP.name]:
        return Severity.ERROR
    if speedup < options[WARNING_SPEEDUP.name]:
        return Severity.INFO
    return Severity.WARNING


def require_gpu(facts: Facts) -> None:
    """Raises :class:`NeedsGPU` unless TensorFlow saw a GPU in this run.

    Raises:
        NeedsGPU: no GPU was visible, so the GPU facts the rule needs were not measured.
    """
    env = facts.environment
    if env is None or not env.gpu_count:
        raise NeedsGPU(
            "needs a GPU: TensorFlow saw no GPU in this run, so the GPU facts this rule reads "
            "were not measured"
        )


def version_tuple(text: str | None) -> tuple[int, ...] | None:
    """``"8.9.1"`` -> ``(8, 9, 1)``; None when ``text`` holds no version number."""
    numbers = re.findall(r"\d+", text or "")
    return tuple(int(n) for n in numbers[:3]) if numbers else None


def ms(value: float | None) -> float | None:
    return round(value, 3) if value is not None else None
