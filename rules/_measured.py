"""Shared logic of the measured input, batch and host-overhead rules (RD2xx, RD301, RD403,
RD404). Pure: no TensorFlow, no I/O.

Every number these rules quote comes from the capture's probes (``rnndoctor/capture/probes.py``):
the window's median step, the compute-only step on cached batches, the per-batch callback times
and the input-only time of a fresh iterator. The cut-offs on the input-bound share are xprof's.
"""

from __future__ import annotations

from dataclasses import dataclass

from rnndoctor.facts import DataNode, Facts
from rnndoctor.findings import Evidence, Location, Severity
from rnndoctor.rules import Option
from rnndoctor.rules import _fastpath as fp
from rnndoctor.rules import _rewrite as rw

# The cut-offs on the input share of the step, as rule options (each input rule declares the
# ones it reads). xprof's input-pipeline analysis calls a step "moderately" input-bound from 5%
# of the step time waiting for input and "highly" input-bound from 20%.
_XPROF_INPUT_ANALYSIS = "openxla/xprof xprof/convert/op_stats_to_input_pipeline_analysis.cc"
MIN_INPUT_SHARE = Option(
    name="min_input_share",
    default=0.05,
    unit="fraction of the step",
    source=f"{_XPROF_INPUT_ANALYSIS}: kModeratelyInfeedBoundThresholdInPercent = 5",
    help="the measured input share of the step from which the rule reports",
)
WARNING_INPUT_SHARE = Option(
    name="warning_input_share",
    default=0.20,
    unit="fraction of the step",
    source=f"{_XPROF_INPUT_ANALYSIS}: kHighlyInfeedBoundThresholdInPercent = 20",
    help="the input share from which a finding is a warning (below it: info)",
)
# `error` means the job runs at least 2x slower than it needs to (rnndoctor.findings.Severity);
# removing a share s of the step gives 1 / (1 - s), which reaches 2x at s = 50%.
ERROR_INPUT_SHARE = Option(
    name="error_input_share",
    default=0.50,
    unit="fraction of the step",
    source="rnndoctor's severity scale (rnndoctor/findings.py: Severity): removing half of the "
    "step makes it 2x faster",
    help="the input share from which a finding is an error",
)


to_location = fp.to_location  # one SourceLocation -> Location converter


def input_share(facts: Facts) -> tuple[float | None, str]:
    """The measured input share of the step and how it was measured.

    The input-bound share (step - compute-only - callbacks) / step when the compute-only probe
    ran, counted only up to the input-only cross-check (:func:`corroborated_share`); else the
    cross-check input-only / step. ``(None, why)`` when neither was measured.
    """
    probes = facts.probes
    if probes is None:
        return None, "the probes did not run"
    if probes.input_bound_share is not None:
        share = corroborated_share(probes.input_bound_share, probes.input_share_check)
        if share < probes.input_bound_share:
            return share, "input-bound share, counted up to the input-only cross-check"
        return share, "input-bound share (step - compute-only - callbacks)"
    if probes.input_share_check is not None:
        return probes.input_share_check, "input-only time / step time (compute-only not measured)"
    return None, probes.compute_only_not_measured or probes.input_only_not_measured or "unknown"


def corroborated_share(measured: float, input_only_share: float | None) -> float:
    """The input-bound share the input rules use: the measured step difference
    (``probes.input_bound_share``), counted only as far as the input-only probe can explain it.

    DESIGN.md's measurement table cross-checks the share with the input-only time: a pipeline
    that produces a batch in 0.2 ms cannot make a 350 ms step wait 28 ms; such a difference is
    run-to-run noise or fit-loop overhead, and no input fix removes it. Where the input-only
    time was not measured, the step difference stands alone.
    """
    if input_only_share is None:
        return measured
    return min(measured, input_only_share)


def share_severity(share: float, warning_share: float, error_share: float) -> Severity:
    """``error`` from ``error_share`` of the step, ``warning`` from ``warning_share``, else
    ``info``."""
    if share >= error_share:
        return Severity.ERROR
    if share >= warning_share:
        return Severity.WARNING
    return Severity.INFO


def pct(share: float) -> str:
    return f"{share * 100:.0f}%"


def ms(value: float | None) -> str:
    return "not measured" if value is None else f"{value:.2f} ms"


def step_ms(facts: Facts) -> float | None:
    return facts.steps.median_step_time_ms if facts.steps else None


def input_evidence(facts: Facts) -> tuple[Evidence, ...]:
    """The measured step-time split, as evidence rows (step, compute, callbacks, input)."""
    probes = facts.probes
    rows = [Evidence("median step time", step_ms(facts), "ms", "fit (diagnosis window)")]
    if probes is None:
        return tuple(rows)
    rows.append(
        Evidence(
            "compute-only step time",
            probes.compute_only_ms,
            "ms",
            f"train steps on {probes.compute_only_batches} batches cached in memory",
        )
    )
    rows.append(Evidence("per-batch callbacks", probes.callback_ms, "ms", "callback hooks timed"))
    if probes.real_step_ms is not None:
        rows.append(
            Evidence(
                "step on the user's data",
                probes.real_step_ms,
                "ms",
                "timed in bursts alternating with the compute-only ones, no callbacks",
            )
        )
    if probes.breakdown is not None:
        basis = (
            "step on the user's data - compute-only"
            if probes.real_step_ms is not None
            else "step - compute-only - callbacks"
        )
        rows.append(Evidence("waiting for input", probes.breakdown.input_ms, "ms", basis))
    share, basis = input_share(facts)
    if share is not None:
        rows.append(Evidence("input-bound share", round(share * 100, 1), "%", basis))
    if probes.input_bound_share is not None and share is not None:
        if share < probes.input_bound_share:
            rows.append(
                Evidence(
                    "step difference (step - compute-only), as measured",
                    round(probes.input_bound_share * 100, 1),
                    "%",
                    "more than the input-only time explains: noise or loop overhead",
                )
            )
    rows.append(
        Evidence(
            "input-only time per batch",
            probes.input_only_ms,
            "ms",
            probes.input_only_method or (probes.input_only_not_measured or ""),
        )
    )
    return tuple(rows)


def removal_gain(facts: Facts, share: float, what: str = "input-bound share") -> tuple[str, float]:
    """The gain text and speedup of removing ``share`` of the median step: 1 / (1 - share)."""
    step = step_ms(facts)
    speedup = 1.0 / max(1.0 - share, 1e-3)
    after = f" (median step {step:.2f} ms -> {step * (1 - share):.2f} ms)" if step else ""
    return (
        f"{what} {pct(share)} removed: about {speedup:.1f}x faster steps{after}",
        round(speedup, 2),
    )


@dataclass(frozen=True)
class PaidEpochs:
    """An input cost that only some epochs pay: the pipeline caches after its expensive part,
    so epoch 1 (the window) pays it and epochs 2..N read the cache. ``fraction``: the job's
    steps that pay it (epoch 1 of ``epochs`` equal epochs); ``cache``: the cache node."""

    epochs: int
    fraction: float
    cache: DataNode


def paid_epochs(facts: Facts) -> PaidEpochs | None:
    """The epochs that pay the input cost when a ``cache()`` follows every expensive node (a
    Python source or call, a map, a file source); None when some work runs after the cache (it
    is paid every epoch), when nothing is cached, or for a single epoch."""
    data, fit = facts.data, facts.fit
    epochs = fit.epochs if fit else None
    if data is None or not data.has_cache or not epochs or epochs < 2:
        return None
    caches = [i for i, n in enumerate(data.nodes) if n.kind == "cache"]
    work = [
        i
        for i, n in enumerate(data.nodes)
        if n.python or n.kind == "map" or n.source_kind in ("generator", "files")
    ]
    if not work or max(work) > caches[-1]:
        return None
    return PaidEpochs(epochs=epochs, fraction=1.0 / epochs, cache=data.nodes[caches[-1]])


def nodes_of(facts: Facts, kind: str) -> list[DataNode]:
    return [n for n in (facts.data.nodes if facts.data else []) if n.kind == kind]


def batch_size(facts: Facts) -> int | None:
    """The user's batch size: the window's, else the pipeline's last batch op's constant."""
    if facts.steps and facts.steps.batch_size:
        return facts.steps.batch_size
    if facts.fit and facts.fit.batch_size:
        return facts.fit.batch_size
    for kind in ("batch", "padded_batch"):
        for node in reversed(nodes_of(facts, kind)):
            if isinstance(node.attrs.get("batch_size"), int):
                return node.attrs["batch_size"]
    return None


def with_keyword(call_source: str | None, name: str, value: str) -> str | None:
    """``call_source`` (one call, as recorded) with keyword ``name=value`` set, every other
    argument as the user wrote it (:func:`rnndoctor.rules._rewrite.set_keyword`); None when the
    source is not a single call."""
    return rw.set_keyword(call_source, name, value)


def fit_location(facts: Facts) -> Location | None:
    return to_location(facts.fit.location) if facts.fit else None
