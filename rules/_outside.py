"""The time outside the window, shared by RD406 and the job forecast (``rnndoctor/engine.py``).
Pure: no TensorFlow, no I/O.

It reads ``FitConfig.fit_in_loop`` (the loops around the ``fit`` call, from the source) and
``Facts.outside_window`` (what the script did after the window until its next ``fit`` call or
its end, ``rnndoctor/capture/after_window.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

from rnndoctor.facts import Facts, ModelCallStats
from rnndoctor.findings import Finding

# Rules whose ``speedup`` is of the whole job (a fit call plus what runs around it), not of the
# training step: the forecast divides the job by it instead of the training part.
JOB_LEVEL_RULES = frozenset({"RD406"})
# Rules whose ``speedup`` is a samples/s ratio, not a step-time one: a larger batch makes each
# step longer and trains more samples a second (RD301); bucketing makes an epoch's steps more and
# smaller, each bucket ending in a partial batch, and its estimate is the epoch's (RD501:
# rules/_sequences.py, StepEstimate.epoch_steps). The forecast divides the training part by it
# all the same (the samples to train stay the same); the words say samples/s, never "faster
# step" (issue 11: "faster step" is wrong wording when the step gets longer).
THROUGHPUT_RULES = frozenset({"RD301", "RD501"})


def gain_words(rule_id: str, speedup: float) -> str:
    """A finding's estimated ``speedup`` in words of what it is of: a step-time speedup "2.20x
    faster step", a job-level one (``JOB_LEVEL_RULES``) "faster iteration of the fit loop", a
    samples/s ratio (``THROUGHPUT_RULES``: a larger batch, whose step gets longer; buckets,
    whose partial batches add steps) "2.05x the samples/s". Two decimals, as ``report.json``
    and ``--verify``'s table give it (a new user read 2.65 as "2.6x" in the verdict and "2.7x"
    in the finding)."""
    figure = f"{speedup:.2f}x"
    if rule_id in THROUGHPUT_RULES:
        return f"{figure} the samples/s"
    unit = "iteration of the fit loop" if rule_id in JOB_LEVEL_RULES else "step"
    return f"{figure} faster {unit}"


def estimate_words(finding: Finding) -> str:
    """A finding's estimated speedup as the verdict and the forecast quote it: its
    :func:`gain_words`, then its interval and basis as the finding gives them beside it
    (``Finding.speedup_interval``): "2.21x the samples/s (90% interval 2.19–2.25x; an upper
    bound)". The finding must carry a speedup."""
    assert finding.speedup is not None
    words = gain_words(finding.rule_id, finding.speedup)
    return f"{words} ({finding.speedup_interval})" if finding.speedup_interval else words


def training_per_call_s(facts: Facts) -> float | None:
    """One ``fit`` call's training steps: median step x steps per epoch x epochs."""
    steps, fit = facts.steps, facts.fit
    if not steps or steps.median_step_time_ms is None or fit is None:
        return None
    per_epoch = fit.steps_per_epoch or fit.batches_per_epoch
    if not per_epoch or not fit.epochs:
        return None
    return steps.median_step_time_ms / 1000.0 * per_epoch * fit.epochs


def fit_calls(facts: Facts) -> int | None:
    """The ``fit`` calls the loops around it make (1 outside a loop; None: not known)."""
    loop = facts.fit.fit_in_loop if facts.fit is not None else None
    return 1 if loop is None else loop.calls


def in_loop(facts: Facts) -> bool:
    """True when the ``fit`` call sits inside a loop of the user's file (a run-on after it is
    one iteration of that loop); False for a single ``fit``, whose run-on runs once."""
    return facts.fit is not None and facts.fit.fit_in_loop is not None


def per_call_words(facts: Facts) -> str:
    """How a figure per ``fit`` call reads: ``per iteration`` of the fit loop, or ``after
    fit`` for a single ``fit``."""
    return "per iteration" if in_loop(facts) else "after fit"


def expected_calls(call: ModelCallStats) -> int:
    """A model call's calls per iteration of the fit loop: from the source where known, else
    the calls seen (a lower bound when the run-on stopped early)."""
    return max(call.calls, call.calls_per_iteration or 0)


@dataclass(frozen=True)
class Outside:
    """The time per ``fit`` call spent outside ``fit``: ``seconds``, and ``how`` it was found
    (measured over the run-on, or extrapolated from the calls it saw to the loops' counts)."""

    seconds: float
    how: str
    complete: bool  # the run-on reached the next fit call (or the script's end)


def duration(seconds: float) -> str:
    """``seconds`` in words a forecast's ``+ 15 ms after fit`` agrees with: ``15 ms`` below a
    second (a new user's forecast read "+ 15 ms after fit" beside "measured: 0.0 s"), else
    ``2.3 s``."""
    return f"{seconds * 1000.0:.0f} ms" if seconds < 1.0 else f"{seconds:.1f} s"


def outside_per_call(facts: Facts) -> Outside | None:
    """What runs between one ``fit`` call and the next, per call, or None when not measured."""
    ow = facts.outside_window
    if ow is None:
        return None
    if ow.ended in ("next fit call", "script end"):
        later_fit = ow.ended == "next fit call" and not in_loop(facts)
        return Outside(
            ow.seconds,
            f"measured: {duration(ow.seconds)} from the end of fit to the {ow.ended}"
            + (" (a later fit call: its training is not in the forecast)" if later_fit else ""),
            True,
        )
    seen = sum(c.calls for c in ow.calls)
    expected = sum(expected_calls(c) for c in ow.calls)
    calls_s = sum(
        expected_calls(c) * (c.median_ms or 0.0) / 1000.0 if c.calls_per_iteration else c.total_s
        for c in ow.calls
    )
    python_s = (ow.python_s or 0.0) * (expected / seen if seen else 1.0)
    if expected > seen:
        parts = ", ".join(
            f"{c.method} {c.calls} of {expected_calls(c)} calls" for c in ow.calls if c.calls
        )
        how = (
            f"extrapolated: the run-on stopped at '{ow.ended}' after {duration(ow.seconds)} "
            f"({parts}; the {'per-iteration ' if in_loop(facts) else ''}counts from the source)"
        )
    else:
        how = f"a lower bound: the run-on stopped at '{ow.ended}' after {duration(ow.seconds)}"
    return Outside(calls_s + python_s, how, False)
