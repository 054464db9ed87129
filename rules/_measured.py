"""Shared logic of the measured input, batch and host-overhead rules (RD2xx, RD301, RD403,
RD404). Pure: no TensorFlow, no I/O.

Every number these rules quote comes from the capture's probes (``rnndoctor/capture/probes.py``):
the window's median step, the compute-only step on cached batches, the per-batch callback times
and the input-only time of a fresh iterator. The cut-offs on the input-bound share are xprof's.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

from rnndoctor import dispatch
from rnndoctor import rewrite as rw
from rnndoctor.decide import widen
from rnndoctor.facts import (
    PROBE_UNREAD,
    PROBES_NOT_RUN,
    DataNode,
    Facts,
    MachinePhase,
    PairedRatio,
    ProbeFacts,
)
from rnndoctor.findings import Evidence, Location, Severity
from rnndoctor.paired import INTERVAL_PAIRS
from rnndoctor.rules import NotEvaluated, Option
from rnndoctor.rules import _fastpath as fp
from rnndoctor.stats import Interval, bootstrap_median_interval, median, most_common_batch_size

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
        if capped_by_check(probes):
            return share, "input-bound share, counted up to the input-only cross-check"
        if probes.compute_paired is not None and probes.real_step_ms is not None:
            return share, "input-bound share (real step x (1 - 1 / paired ratio to compute-only))"
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


def capped_by_check(probes: ProbeFacts) -> bool:
    """Whether the input-only cross-check caps the measured input-bound share
    (:func:`corroborated_share` below ``probes.input_bound_share``)."""
    bound = probes.input_bound_share
    return bound is not None and corroborated_share(bound, probes.input_share_check) < bound


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
        if probes.real_step_ms is None:
            basis = "step - compute-only - callbacks"
        elif probes.compute_paired is not None:
            basis = "step on the user's data x (1 - 1 / the pairs' median ratio to compute-only)"
        else:  # facts from before 1.2: the two medians' difference
            basis = "step on the user's data - compute-only"
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
    """The gain text and speedup of removing ``share`` of the median step: 1 / (1 - share).

    Bound (issue 11): an input fix cannot make the step faster than the compute-only step, so
    the estimated step is ``max(step x (1 - share), compute-only)``, and the text says when the
    cap applied."""
    step = step_ms(facts)
    compute = facts.probes.compute_only_ms if facts.probes else None
    if not step:
        speedup = 1.0 / max(1.0 - share, 1e-3)
        return f"{what} {pct(share)} removed: about {speedup:.1f}x faster steps", round(speedup, 2)
    after = step * (1 - share)
    capped = compute is not None and after < compute
    if capped:
        after = compute
    speedup = step / max(after, 1e-3 * step)
    cap = " (capped at the compute-only step: no input fix beats it)" if capped else ""
    return (
        f"{what} {pct(share)} removed: about {speedup:.1f}x faster steps "
        f"(median step {step:.2f} ms -> {after:.2f} ms{cap})",
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
    """The user's batch size: the window's, else ``fit``'s, else the pipeline's last batch op's
    constant, else (a source that makes its own batches, such as a Python generator, whose size
    none of those record) the most common size of the batches the sequence sampling took from
    it (:func:`rnndoctor.stats.most_common_batch_size`). Not the batch-size probe's first point:
    that probe runs only for the rules that read it (``rnndoctor.engine.PROBE_READERS``), and a
    shared helper reading it would make other rules' output depend on ``--select``."""
    if facts.steps and facts.steps.batch_size:
        return facts.steps.batch_size
    if facts.fit and facts.fit.batch_size:
        return facts.fit.batch_size
    for kind in ("batch", "padded_batch"):
        for node in reversed(nodes_of(facts, kind)):
            if isinstance(node.attrs.get("batch_size"), int):
                return node.attrs["batch_size"]
    records = facts.sequences.inputs if facts.sequences else []
    sizes = [b for record in records for b in record.batch_sizes or []]
    return most_common_batch_size(sizes) if sizes else None


def with_keyword(call_source: str | None, name: str, value: str) -> str | None:
    """``call_source`` (one call, as recorded) with keyword ``name=value`` set, every other
    argument as the user wrote it (:func:`rnndoctor.rewrite.set_keyword`); None when the
    source is not a single call, or passes ``name`` a value that is not a literal (a name or an
    option the fix must not override)."""
    return rw.set_keyword(call_source, name, value)


# tf.data.AUTOTUNE's value (tensorflow/python/data/ops/dataset_ops.py: AUTOTUNE = -1), written
# where the file binds no name to tensorflow (a keras.utils dataset in a script that imports
# only keras), so that the fix runs as pasted instead of raising NameError on "tf".
AUTOTUNE_VALUE = "-1"
AUTOTUNE_NOTE = " (written -1, AUTOTUNE's value: this file does not import tensorflow)"


def tensorflow_name(facts: Facts, file: str | None) -> str | None:
    """The name a fix in ``file`` writes for the ``tensorflow`` module: ``tf`` where the file
    binds it (or where that is not known: ``facts.run.tensorflow_names`` lacks the file), else
    the file's own name for it (``tensorflow``); None where the file binds none."""
    names = facts.run.tensorflow_names.get(file) if file else None
    if names is None:
        return "tf"
    return "tf" if "tf" in names else (names[0] if names else None)


def autotune(facts: Facts, file: str | None) -> str:
    """``tf.data.AUTOTUNE`` as the fix in ``file`` can write it (:func:`tensorflow_name`), or
    its value :data:`AUTOTUNE_VALUE` where the file binds no name to tensorflow."""
    name = tensorflow_name(facts, file)
    return f"{name}.data.AUTOTUNE" if name else AUTOTUNE_VALUE


def fit_location(facts: Facts) -> Location | None:
    return to_location(facts.fit.location) if facts.fit else None


# -- intervals, consistency and the machine's load (issue 11) --------------------------------

# A window whose steps drifted (rnndoctor.machine.drift) widens the intervals of the figures
# that rest on the window's step by this factor: the same as one foreign core on a 2-core
# machine (rnndoctor.machine.MachineLoad.widen_factor = 1 + foreign cores), a heuristic.
DRIFT_WIDEN = 2.0
# Fewer pairs than this give no interval (the bootstrap of a median over 1 or 2 pairs gives
# bounds equal to the values themselves): the figure is then quoted from value / FEW_PAIRS_SPAN
# to value x FEW_PAIRS_SPAN, so that no decision "clears" on it. 3: the fewest pairs whose
# bootstrap median can differ from its extremes (rnndoctor.paired.INTERVAL_PAIRS, the number
# the probes pair up to past their allowance).
MIN_PAIRS = INTERVAL_PAIRS
FEW_PAIRS_SPAN = 10.0
_WINDOW_PHASES = ("warm-up steps", "measured steps", "custom loop: measured steps")


def phase_widen(facts: Facts, phase: str | None) -> float:
    """The widening factor of the intervals measured in ``phase``: its recorded machine load's
    ``widen_factor`` (1.0 when the phase was quiet or not sampled)."""
    load = phase_load(facts, phase)
    return load.widen_factor if load is not None else 1.0


def phase_load(facts: Facts, phase: str | None) -> MachinePhase | None:
    """The machine load recorded over ``phase`` (None when it was not sampled, or no phase)."""
    return facts.run.machine_of(phase) if phase else None


def window_widen(facts: Facts) -> float:
    """The widening factor of figures that rest on the window's step: the largest of the
    window's phases' machine load factors, and :data:`DRIFT_WIDEN` when its steps drifted."""
    factor = max((phase_widen(facts, p) for p in _WINDOW_PHASES), default=1.0)
    if facts.steps is not None and facts.steps.drifted:
        factor = max(factor, DRIFT_WIDEN)
    return factor


def ratio_interval(facts: Facts, paired: PairedRatio, extra: float = 1.0) -> Interval:
    """A recorded paired ratio as an :class:`Interval`, widened by its phase's machine load
    and by ``extra`` (e.g. :func:`window_widen`): :func:`widen_ratio`."""
    interval = Interval(paired.ratio, min(paired.low, paired.ratio), max(paired.high, paired.ratio),
                        paired.level, paired.widen_factor)  # fmt: skip
    if paired.pairs < MIN_PAIRS:  # a bootstrap over 1 or 2 pairs is degenerate: no interval
        interval = Interval(paired.ratio, paired.ratio / FEW_PAIRS_SPAN,
                            paired.ratio * FEW_PAIRS_SPAN, paired.level,
                            no_interval=few_pairs_text(paired.pairs))  # fmt: skip
    return widen_ratio(interval, phase_widen(facts, paired.phase) * extra)


def few_pairs_text(pairs: int) -> str:
    """How a figure of too few pairs for an interval (under :data:`MIN_PAIRS`) is quoted in
    place of its bounds: ``no interval: 2 pairs``."""
    return f"no interval: {pairs} pair{'' if pairs == 1 else 's'}"


def widen_ratio(interval: Interval, factor: float) -> Interval:
    """``interval`` (a positive ratio) widened for a noisy phase: ``rnndoctor.decide.widen`` by
    ``factor`` on the log scale, and at least ``value / factor`` to ``value x factor``.

    Why the floor: foreign load does not only scatter the steps, it shifts them (on a 2-core
    machine a busy neighbour slows kernels spread over both cores far more than the one Python
    thread that dispatches them: ``rnndoctor.dispatch.unloaded_ratio``), so a
    tight interval measured under load can be tight around a biased value, and widening its
    width alone keeps it tight. With the floor, a figure measured under load is inconclusive
    unless it clears its cut-off by more than the load factor (issue 11: under load a finding
    becomes inconclusive rather than flipping)."""
    if factor <= 1.0 or interval.low <= 0.0:
        return interval
    i = widen(interval, factor)
    return dataclasses.replace(
        i, low=min(i.low, i.value / factor), high=max(i.high, i.value * factor)
    )


def point_interval(value: float) -> Interval:
    """A figure with no measured interval (facts from before schema 1.2): its median only."""
    return Interval(value, value, value)


def require_probes(facts: Facts, probe: str | None = None, why: str | None = None) -> None:
    """Raises :class:`NotEvaluated` when the check ran no probes at all (``--no-probes``, a
    worker of a multi-worker job: ``rnndoctor.facts.PROBES_NOT_RUN``), or when the rule's own
    ``probe`` (its name in the text; ``why``: its ``*_not_measured``) was left out by
    ``--select`` / ``--ignore`` (``rnndoctor.facts.PROBE_UNREAD``): empty probes are not a
    measurement of nothing."""
    probes = facts.probes
    off = probes.compute_only_not_measured if probes is not None else None
    if off and off.startswith(PROBES_NOT_RUN):
        raise NotEvaluated(f"the probes did not run: {off.removeprefix('not run: ')}")
    if probe is not None and why == PROBE_UNREAD:
        raise NotEvaluated(
            f"the {probe} probe did not run in this check: --select / --ignore left out every "
            "rule that reads it"
        )


def require_consistent(facts: Facts) -> None:
    """Raises :class:`NotEvaluated` when the compute-only probe disagreed with the window after
    its re-measurement (``probes.inconsistent``): no finding, forecast or verdict rests on it."""
    probes = facts.probes
    if probes is not None and probes.inconsistent:
        raise NotEvaluated(f"probe inconsistent with the window ({probes.inconsistent})")


def share_interval(facts: Facts) -> Interval | None:
    """The input-bound share with its interval, or None when not measured.

    Paired (``probes.compute_paired``, A = real step, B = compute-only, ratio ``r``): the share
    ``(1 - 1 / r) x real / (real + callbacks)`` (``capture/probes.py: _breakdown``, the point)
    is increasing in ``r``, so the ratio's bounds (widened for the probe's machine load) map to the
    share's. Unpaired (the window's step ``s``): ``(s - compute - callbacks) / s``, increasing
    in ``s``, from the bootstrap interval of the window's median step (widened by
    :func:`window_widen`). Facts from before 1.2 give the point value only. Every bound is
    counted up to the input-only cross-check (:func:`corroborated_share`).
    """
    probes = facts.probes
    share, _ = input_share(facts)
    if probes is None or share is None:
        return None
    host = probes.callback_ms or 0.0
    check = probes.input_share_check
    paired = probes.compute_paired
    if paired is not None and paired.median_a_ms > 0.0:
        i = ratio_interval(facts, paired)
        scale = paired.median_a_ms / (paired.median_a_ms + host)

        def of(r: float) -> float:
            return max(0.0, (1.0 - 1.0 / r) * scale) if r > 0 else 0.0

        low, high = of(i.low), of(i.high)
    elif facts.steps is not None and len(facts.steps.step_time_ms) >= 2 and probes.compute_only_ms:
        step = median(facts.steps.step_time_ms)
        lo_s, hi_s = bootstrap_median_interval(facts.steps.step_time_ms)
        i = widen_ratio(Interval(step, min(lo_s, step), max(hi_s, step)), window_widen(facts))
        compute = probes.compute_only_ms + host
        low, high = (max(0.0, (s - compute) / s) for s in (i.low, i.high))
    else:
        return point_interval(share)
    low, high = corroborated_share(low, check), corroborated_share(high, check)
    return Interval(share, min(low, share), max(high, share), no_interval=i.no_interval)


def noisy_note(facts: Facts) -> str | None:
    """``noisy machine: ...`` for the findings' evidence when a phase was noisy or the window
    drifted, else None."""
    parts = [m.description for m in facts.run.machine if m.noisy][:1]
    if facts.steps is not None and facts.steps.drifted and facts.steps.drift:
        parts.append(f"the window drifted: {facts.steps.drift}")
    if not parts:
        return None
    text = "; ".join(parts)
    return text if text.startswith("noisy machine") else "noisy machine: " + text


def unloaded_evidence(
    facts: Facts,
    paired: PairedRatio | None,
    per: float,
    scale: float = 1.0,
    share: Callable[[float], float] | None = None,
) -> tuple[Evidence, ...]:
    """Under load (the pairs' phase noisy), the row that says how far the load can have biased
    a fixed-cost ratio (``rnndoctor.dispatch.unloaded_ratio``; the figure is the paired ratio
    times ``scale``, e.g. RD301's batch ratio): the pairs' upper bound as measured and with the
    load's slowdown taken out of the compute, and the share the rule decides on at each
    (``share``: figure -> share, e.g. RD403's); () on a quiet phase."""
    if paired is None or per <= 1.0:
        return ()
    slowdown = dispatch.compute_slowdown(phase_load(facts, paired.phase))
    if slowdown <= 1.0:
        return ()
    high = max(paired.high, paired.ratio) * scale
    unloaded = dispatch.unloaded_ratio(high, per, slowdown)

    def shown(r: float) -> str:
        return f"{r:.2f}x" + (f" (share {share(r):.0%})" if share is not None else "")

    return (
        Evidence(
            "under load, bias taken out",
            f"the pairs' upper bound {shown(high)} reads {shown(unloaded)} with the compute "
            f"{slowdown:.2f}x faster (the slowdown if the compute got only the CPUs the other "
            "processes left)",
            "",
            "rnndoctor.dispatch.unloaded_ratio",
        ),
    )


def noisy_evidence(facts: Facts) -> tuple[Evidence, ...]:
    """The ``noisy machine: ...`` row, when there is one (:func:`noisy_note`)."""
    note = noisy_note(facts)
    return (Evidence("noisy machine", note, "", "rnndoctor.machine"),) if note else ()


def later_epochs(epochs: int) -> str:
    """The epochs after the first (which a cache serves), in words: "epoch 2", "epochs 2 to 5"
    (a new user's ``epochs=2`` read "epochs 2..2")."""
    return "epoch 2" if epochs <= 2 else f"epochs 2 to {epochs}"
