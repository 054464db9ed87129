"""RD201 input-bound: the training step waits for the input pipeline.

What it detects:
    The measured input-bound share of the median training step: ``(step - compute-only -
    per-batch callbacks) / step``, where the compute-only step runs the same model on batches
    cached in memory (so input costs nothing). ``info`` from 5% (``min_input_share``),
    ``warning`` from 20% (``warning_input_share``), ``error`` from 50% (``error_input_share``) of
    the step.

Why it slows training:
    While the step waits for the next batch, the accelerator (or the CPU's compute threads)
    idles. Python-side preprocessing (generators, ``py_function``), sequential ``map`` calls,
    no ``prefetch`` (input and compute never overlap) and re-reading or re-decoding data every
    epoch all show up here. xprof's input-pipeline analysis uses the same 5% / 20% cut-offs for
    "moderately" and "highly" input-bound, but it measures no step time on CPU-only runs;
    rnndoctor's own probes do, on CPU and GPU alike.

Evidence:
    ``steps.median_step_time_ms``; ``probes.compute_only_ms``, ``probes.callback_ms``,
    ``probes.input_bound_share``, ``probes.breakdown``; the cross-check
    ``probes.input_only_ms`` / ``probes.input_share_check`` (a fresh iterator over the same data
    with no model); xprof's ``profile.input_pipeline`` (input share on GPU, or its verbatim
    "not measured" statement); ``data`` (the pipeline graph) for the fix. The share reported
    (and its severity) is the step difference counted only up to the input-only cross-check
    (``rules/_measured.py: corroborated_share``): a step difference the input-only time cannot
    explain is noise or loop overhead that no input fix removes. When the pipeline caches after
    its expensive part (``from_generator(...).cache()``, ``map(...).cache()``), the window
    (epoch 1) pays the uncached cost and epochs 2..N read the cache: the share is then weighed
    by the job's steps that pay it (1 / epochs), and the severity follows that job-wide share
    (``rules/_measured.py: paid_epochs``).

    The share's 90% interval comes from the paired bursts of the real step and the compute-only
    step (``probes.compute_paired``), or from a bootstrap over the window's steps where the data
    cannot be iterated again; it widens on a noisy machine or a drifting window. Warning and
    error need the interval's lower bound at their cut-off; a median alone above the warning
    cut-off gives ``info``, "inconclusive: ...", and so does a median at the info cut-off whose
    interval reaches below it (``min_input_share``), with no speedup for the forecast. Where the
    input-only cross-check caps the share, the milliseconds quoted are capped with it, the step
    difference as measured beside them. A compute-only probe inconsistent with the
    window (``probes.inconsistent``) leaves the rule not evaluated.

Bounds:
    An input fix cannot make the step faster than the compute-only step: the estimated step
    after the fix is capped there (``rules/_measured.py: removal_gain``), and the gain says so.

Example:
    ``tf.data.Dataset.from_generator(slow_python_examples, ...).batch(32)``

Use instead:
    ``tf.data.Dataset.from_tensor_slices(arrays).map(tf_preprocess,
    num_parallel_calls=tf.data.AUTOTUNE).batch(32).prefetch(tf.data.AUTOTUNE)``

Fix safety:
    display-only: the fix lists the pipeline changes the data graph calls for (see RD202-RD206),
    on the name the user's dataset line assigns; adapt them to the pipeline. It suggests
    ``cache()`` only where no random map or shuffle would be frozen by it. A PyDataset or a
    tf_keras Sequence on one worker gets RD206's code, written where the user's code sets its
    workers (``rules/_pydataset.py``), at RD206's default worker count; one already on several
    workers a note on where more would go.

Options:
    ``min_input_share`` = 0.05 (fraction of the step): the input share from which the rule
    reports. Source: openxla/xprof xprof/convert/op_stats_to_input_pipeline_analysis.cc,
    kModeratelyInfeedBoundThresholdInPercent = 5.

    ``warning_input_share`` = 0.2 (fraction of the step): from this share the finding is a
    warning. Source: the same file, kHighlyInfeedBoundThresholdInPercent = 20.

    ``error_input_share`` = 0.5 (fraction of the step): from this share the finding is an
    error. Source: rnndoctor's severity scale (rnndoctor/findings.py: Severity): removing half
    of the step makes it 2x faster.

References:
    TensorFlow guide "Better performance with the tf.data API"
    (https://www.tensorflow.org/guide/data_performance); openxla/xprof
    xprof/convert/op_stats_to_input_pipeline_analysis.cc (kModeratelyInfeedBoundThresholdInPercent
    = 5, kHighlyInfeedBoundThresholdInPercent = 20).
"""

from __future__ import annotations

import re

from rnndoctor.decide import Decision, decide, describe, format_share
from rnndoctor.facts import DataFacts, Facts, ProbeFacts
from rnndoctor.findings import Evidence, Finding, Fix, FixSafety, Severity
from rnndoctor.rules import OptionValues, finding, rule
from rnndoctor.rules import _measured as m
from rnndoctor.rules import _pydataset as pd
from rnndoctor.stats import Interval


def _fix(facts: Facts) -> tuple[str, str]:
    """The pipeline changes the data facts call for, as one code sketch, and its title."""
    data = facts.data
    kind = data.kind if data else "unknown"
    size = m.batch_size(facts) or 32
    autotune = "tf.data.AUTOTUNE"  # a sketch of a new tf.data pipeline imports tensorflow
    if kind in (pd.PY_DATASET, pd.TF_KERAS_SEQUENCE):
        return _loader_fix(facts)
    if kind == "python_generator" or (data is not None and "generator" in data.source_kinds):
        lines = [
            "ds = (tf.data.Dataset.from_tensor_slices((features, labels))  # no Python generator",
            "      .map(preprocess, num_parallel_calls=tf.data.AUTOTUNE)  # preprocess in tf ops",
            f"      .batch({size})",
        ]
    elif kind.startswith("numpy") or kind == "tensor":
        lines = [
            "ds = (tf.data.Dataset.from_tensor_slices((x, y))",
            "      .shuffle(len(x))",
            f"      .batch({size})",
        ]
    else:  # the user's own pipeline: AUTOTUNE as its file can write it (RD202's way)
        where = data.location.file if data is not None and data.location else None
        autotune = m.autotune(facts, where or facts.run.script)
        lines = _dataset_lines(data, autotune)
    if data is None or not data.prefetch_last:
        lines.append(f"      .prefetch({autotune}))  # overlap input with the train step")
    else:
        lines[-1] += ")"
    return "Move the input work off the step's critical path", "\n".join(lines)


def _loader_fix(facts: Facts) -> tuple[str, str]:
    """A PyDataset's or tf_keras Sequence's fix: on one worker, RD206's (the same rewrite, at
    its default workers: ``rules/_pydataset.py``); already on several, where more would go."""
    if pd.single_worker(facts):
        fix, _, _ = pd.parallel_fix(facts, pd.suggested_workers(facts, pd.MAX_SUGGESTED_WORKERS))
        return f"{fix.title} (RD206)", fix.code
    data = facts.data
    how = "processes" if data.use_multiprocessing else "threads"
    return (
        "Load more batches at once, or make each cheaper",
        f"# your {data.kind} already loads on {data.workers} worker {how}: more workers (up to "
        "the CPU cores), or its __getitem__ work\n# moved into tf ops (a tf.data pipeline "
        "with map(..., num_parallel_calls=tf.data.AUTOTUNE)), shortens the wait",
    )


def _epoch_weighting(facts: Facts, share: float) -> tuple[float, str]:
    """The input share of the whole job, and a sentence saying which epochs pay it (empty when
    every epoch does). The window measures epoch 1; when the pipeline caches after its
    expensive part, epochs 2..N read the cache and do not pay it, so the job's share is the
    first epoch's share weighted by its steps (the severity follows that share)."""
    paid = m.paid_epochs(facts)
    if paid is None:
        return share, ""
    job_share = share * paid.fraction
    line = f" (line {paid.cache.location.line})" if paid.cache.location else ""
    return job_share, (
        f"epoch 1 only: {m.pct(share)} of its steps; about {m.pct(job_share)} of a "
        f"{paid.epochs}-epoch job, since the pipeline caches after its expensive part{line} "
        f"and {m.later_epochs(paid.epochs)} {'reads' if paid.epochs <= 2 else 'read'} the "
        "cache"
    )


def _dataset_lines(data: DataFacts | None, autotune: str = "tf.data.AUTOTUNE") -> list[str]:
    """The tf.data sketch, on the name the user's dataset line assigns (``dataset_train``), with
    ``autotune`` as the user's file can write it. A ``cache()`` is suggested only where no
    random map or shuffle would be frozen by it."""
    code = data.location.code if data is not None and data.location else None
    match = re.match(r"\s*([A-Za-z_]\w*)\s*=(?!=)", code or "")
    name = match.group(1) if match else "ds"
    lines = [f"{name} = ({name}  # the pipeline as built, then:"]
    if data is None:
        return lines
    if data.sequential_maps or data.python_ops:
        lines.append(f"      .map(preprocess, num_parallel_calls={autotune})  # tf ops")
    random = any(
        n.kind == "shuffle" or any("Random" in op for op in n.attrs.get("stateful_ops") or [])
        for n in data.nodes
    )
    if not data.has_cache and not random:
        lines.append("      .cache()  # if it fits in memory")
    elif not data.has_cache:
        lines.append("      # cache() only before the random map / shuffle (see RD205)")
    return lines


@rule(
    "RD201",
    "input-bound",
    "measured input-bound share of the step: >= 5% info, >= 20% warning, >= 50% error",
    needs=("probes", "steps", "fit"),
    severity=Severity.INFO,
    options=(m.MIN_INPUT_SHARE, m.WARNING_INPUT_SHARE, m.ERROR_INPUT_SHARE),
)
def check(facts: Facts, options: OptionValues) -> list[Finding]:
    m.require_probes(facts)
    probes = facts.probes
    if probes.input_bound_share is None:
        return []  # not measured (probes.*_not_measured says why)
    m.require_consistent(facts)  # no finding on a probe that disagrees with the window
    interval = m.share_interval(facts)  # counted up to the input-only cross-check
    if interval is None or interval.value < options.min_input_share:
        return []  # below xprof's cut-off
    share = interval.value
    severity, quoted = _severity(interval, options)
    step = m.step_ms(facts)
    evidence = list(m.input_evidence(facts))
    if probes.input_share_check is not None:
        evidence.append(
            Evidence(
                "cross-check: input-only / step",
                round(probes.input_share_check * 100, 1),
                "%",
                probes.input_only_method or "",
            )
        )
    pipeline = facts.profile.input_pipeline if facts.profile else None
    if pipeline is not None:
        if pipeline.input_share is not None:
            evidence.append(
                Evidence("xprof input share", round(pipeline.input_share * 100, 1), "%", "xprof")
            )
        elif pipeline.not_measured:
            evidence.append(
                Evidence("xprof input-pipeline analysis", pipeline.not_measured, "", "xprof")
            )
        if pipeline.slowest_ops:
            top = pipeline.slowest_ops[0]
            evidence.append(
                Evidence("slowest tf.data op (xprof)", top.name, "", f"{pct_of(top.share)} self")
            )
    evidence.append(Evidence("input-bound share, with its interval", quoted, "", _basis(facts)))
    evidence.extend(m.noisy_evidence(facts))
    job_share, paid = _epoch_weighting(facts, share)
    if paid:  # only epoch 1 pays: the severity follows the job's share, interval and all
        evidence.append(Evidence("job-wide input share", round(job_share * 100, 1), "%", paid))
        f = job_share / share
        job = Interval(interval.value * f, interval.low * f, interval.high * f, interval.level,
                       interval.widen_factor, interval.no_interval)  # fmt: skip
        severity, _ = _severity(job, options)
    what = "input share of the job (epoch 1 only)" if paid else "input-bound share"
    gain, speedup = m.removal_gain(facts, job_share, what)
    if severity is Severity.INFO and quoted.startswith("inconclusive"):
        gain, speedup = f"{quoted}; {gain}", None
    title, code = _fix(facts)
    data = facts.data
    location = m.to_location(data.location) if data else None
    paired = probes.real_step_ms is not None
    whole = probes.real_step_ms + (probes.callback_ms or 0.0) if paired else step
    return [
        finding(
            severity=severity,
            message=(
                f"The training step waits for its input: {quoted} of the step "
                f"({_wait_text(probes, share, whole)}"
                + (", timed side by side with the same step on cached batches" if paired else "")
                + (
                    f": {probes.compute_paired.ratio:.2f}x its time, the median of the pairs"
                    if paired and probes.compute_paired is not None
                    else ""
                )
                + f") is spent waiting for the next batch ({data.kind if data else 'unknown'} "
                f"input); on batches cached in memory the step takes "
                f"{m.ms(probes.compute_only_ms)}."
                + (f" {paid[0].upper()}{paid[1:]}." if paid else "")
            ),
            location=location or m.fit_location(facts),
            evidence=tuple(evidence),
            fix=Fix(title=title, code=code, safety=FixSafety.DISPLAY_ONLY),
            gain=gain,
            speedup=speedup,
        )
    ]


def _severity(interval: Interval, options: OptionValues) -> tuple[Severity, str]:
    """The severity whose cut-off the share's whole interval clears (its lower bound), and the
    share as quoted: ``inconclusive: ...`` when the median alone reaches the warning cut-off, or
    the info one (``min_input_share``: a new user's "7% (90% interval 0–7%)" read as a plain
    claim that the step waits for its input)."""
    warning, error = options.warning_input_share, options.error_input_share
    severity = m.share_severity(interval.low, warning, error)
    if severity is Severity.INFO:
        decision = decide(interval, warning, higher_is_worse=True)
        if decision is Decision.BELOW and interval.low < options.min_input_share:
            decision = Decision.INCONCLUSIVE  # only the median reaches the info cut-off
        return severity, describe(decision, interval, kind="share").replace(
            "below the cut-off: ", ""
        )
    return severity, format_share(interval)


def _wait_text(probes: ProbeFacts, share: float, whole: float | None) -> str:
    """``2.54 ms of 31.14 ms``: the wait the quoted ``share`` stands for, of the step it is a
    share of (``whole``). Where the input-only cross-check capped the share
    (:func:`rules._measured.corroborated_share`), the wait is capped with it and the step
    difference as measured follows, so the milliseconds and the share agree."""
    measured = probes.breakdown.input_ms if probes.breakdown else None
    if whole is None:
        return f"{m.ms(measured)} of {m.ms(whole)}"
    if measured is None or not m.capped_by_check(probes):
        return f"{m.ms(measured if measured is not None else share * whole)} of {m.ms(whole)}"
    wait = share * whole
    return (
        f"{m.ms(wait)} of {m.ms(whole)}, counted up to what the input-only probe explains; "
        f"{m.ms(measured)} as measured"
    )


def _basis(facts: Facts) -> str:
    paired = facts.probes.compute_paired
    if paired is not None:
        return f"{paired.pairs} interleaved pairs of the real step and the compute-only step"
    if facts.steps is not None and len(facts.steps.step_time_ms) >= 2:
        return "bootstrap over the window's steps, compute-only median"
    return "medians only (facts before schema 1.2)"


def pct_of(share: float) -> str:
    return f"{share * 100:.0f}%"
