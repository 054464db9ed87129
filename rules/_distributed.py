"""Shared logic of the ``tf.distribute`` rules (RD701-RD706): the per-worker rows and the
trace figures they compare (``StrategyFacts.per_worker``, ``rnndoctor/capture/distribute.py``).
"""

from __future__ import annotations

import statistics

from rnndoctor.facts import Facts, WorkerFacts
from rnndoctor.findings import Evidence
from rnndoctor.rules import NotEvaluated

NO_TRACE = (
    "needs every worker's time outside the collectives, from the chief's trace of all workers "
    "(rnndoctor check train.py --workers N on a multi-worker strategy)"
)


def trained_without_strategy(facts: Facts) -> bool:
    """True when the job trained without a ``tf.distribute`` strategy: its window measured steps
    (``facts.steps``) and no strategy was seen (``facts.strategy`` is None). The RD7xx rules then
    have nothing to check and pass. False when a strategy ran.

    Raises:
        NotEvaluated: no strategy was seen and the run ended before its window, so a job without
            a strategy cannot be told from one whose strategy was never reached.
    """
    if facts.strategy is not None:
        return False
    if facts.steps is None:
        raise NotEvaluated(
            f"facts section 'strategy' was not gathered (the run ended with outcome "
            f"'{facts.run.outcome}' during phase '{facts.run.phase}')"
        )
    return True


def traced_workers(facts: Facts) -> list[WorkerFacts]:
    """The workers with trace figures, at least two.

    Raises:
        NotEvaluated: fewer than two workers have them.
    """
    rows = [w for w in facts.strategy.per_worker if w.outside_collectives_ms is not None]
    if len(rows) < 2:
        raise NotEvaluated(NO_TRACE)
    return rows


def others_median(rows: list[WorkerFacts], worker: WorkerFacts, field: str) -> float:
    """The median of ``field`` over the workers other than ``worker``."""
    return statistics.median(getattr(w, field) or 0.0 for w in rows if w is not worker)


def worker_name(worker: WorkerFacts) -> str:
    return f"worker {worker.index} ({worker.task})"


def worker_evidence(rows: list[WorkerFacts]) -> tuple[Evidence, ...]:
    """Per worker: its time outside the collectives, its collective (waiting) time and its
    input share, over the chief's trace."""
    source = "the chief's trace of all workers (op self time over the same window)"
    return tuple(
        Evidence(
            f"{worker_name(w)} outside the collectives",
            w.outside_collectives_ms,
            "ms",
            f"input {w.input_ms} ms + compute {w.compute_ms} ms; in collectives "
            f"{w.collective_ms} ms; {source}",
        )
        for w in rows
    )
