"""RD403 tiny-steps: per-step host dispatch is a large part of a short training step.

What it detects:
    The steps_per_execution probe (compute-only steps on cached batches) measures the step at
    ``steps_per_execution`` 1 and 16. When running 16 steps per call saves 20% or more of the
    job's median step (``warning``, ``min_dispatch_share``; 50% or more, ``error``,
    ``error_dispatch_share``) and the model compiles with
    ``steps_per_execution == 1``, the step is so short that Python dispatch dominates. The
    share is of the real step (input wait included), so an input-bound job shows its input
    problem (RD201) first.

    A model compiled with ``steps_per_execution = N > 1`` is probed at 1 and N (what the
    setting buys, shown in the report with its interval). The rule then asks whether a larger
    value would still gain: the per-call cost left at N (Bounds) as a share of the median step,
    against the same cut-offs; the fix is ``4 N``. Where that share does not reach the cut-off
    (a setting that already removed the dispatch, or a long step) there is no finding.

Why it slows training:
    With ``steps_per_execution=1`` Keras returns to Python after every step: it calls the
    ``tf.function``, runs the callbacks' batch hooks and reads the logs each time. For a small
    RNN that host work costs as much as the step. ``compile(steps_per_execution=N)`` runs N
    steps in one ``tf.while_loop`` inside one call (``TensorFlowTrainer._make_function``,
    keras/src/backend/tensorflow/trainer.py).

Evidence:
    ``probes.spe_probe`` (compute-only step time at 1 and 16, or at 1 and the user's N),
    ``fit.steps_per_execution``,
    ``steps.median_step_time_ms``; ``probes.compute_paired`` and ``probes.callback_ms`` (the
    compute-only step's share of the real step, Bounds); ``fit.compile_location`` (the user's
    ``compile`` call, where the finding points and which the fix rewrites, keeping every other
    argument as written).
    The two settings are timed in interleaved bursts
    (``spe_probe[1].paired``); the dispatch share's 90% interval comes from those pairs,
    widened on a noisy machine or a drifting window. Under load (the steps_per_execution probe's
    phase noisy) a median short of the cut-off is "inconclusive" rather than no finding where
    the pairs' upper bound, with the load's bias taken out (Bounds), reaches it (the row "under
    load, bias taken out"). The rule warns (or errors) only when the
    interval's lower bound reaches the cut-off; when only the median does, it is ``info``,
    "inconclusive: ...", with no speedup for the forecast. Where the probe did not time both
    settings, the rule is not evaluated, with the probe's reason: never a pass. The probe is
    not run, for its cost, at 1 step per call where the compute-only step is over 25 ms
    (``capture/probes.py: _SPE_PROBE_MAX_STEP_MS``) or the compute-only probe itself was not run
    (a train step over 50 ms with the input wait bounded under 1%: ``_compute_skip``), and at
    N > 1 where one call of N steps takes over 1 s (``_SPE_MAX_CALL_S``); it may also fail or
    run out of its budget.
    Where the first stage's interval straddles the ratio at which the share reaches a cut-off
    (this rule's options, handed to the probe: ``rnndoctor.engine.spe_share_cutoffs``; the
    mapping is
    ``rnndoctor.dispatch``), the probe pairs on, up to 24 pairs within its time allowance,
    and the rule decides on all of them (``paired.second_stage`` says why, in the evidence),
    not on the 5 pairs that had left tests/scripts/fit_loop_predict.py at no finding in one run
    (1.249x, 1.213–1.373x) and a warning in the next (1.315x, 1.281–1.391x; the cut-off at
    1.259x). A share within a few points of the cut-off can still land on either side of it in
    different runs, and more pairs would not stop that: the interval covers the noise of one
    check's pairs, while between checks the ratio moves further (the README's stability table
    at 4d799b4: tests/scripts/verify_fails.py at 1.258x, 1.212–1.303x, in one check and 1.487x,
    1.350–1.588x, in another, the window's median step 4.3 and 5.6 ms).

Bounds:
    What the rule rests on: a fixed host cost ``d`` per call of the train function (Keras'
    Python loop, the callbacks' hooks, the logs read back), paid once per
    ``steps_per_execution`` steps, so the compute-only step is ``c + d`` at 1 and ``c + d / N``
    at N, and the paired ratio ``r`` of the two is measured in interleaved bursts on the same
    cached batches. At 1, the saving of 16 steps per call is ``1 - 1 / r`` of the step at 1. At
    N > 1, the cost left per step is ``d / N = (step at 1 - step at N) / (N - 1)``, i.e.
    ``(r - 1) / (N - 1)`` of the step at N, and no larger value can save more than that; 4 N
    saves three quarters of it (the gain quoted). Both are increasing in ``r``, so the ratio's
    interval maps onto the share's.

    Under load the ratio reads low: a busy core slows the compute (spread over every core) far
    more than the host cost (one Python thread), so the host cost looks a smaller part of the
    step than it is (tests/scripts/fit_loop_predict.py: 1.29–1.40x idle, 1.13–1.15x under one
    busy core, a warning gone). Under load the rule also reads the pairs' upper bound with the
    load's slowdown taken out of the compute (``rnndoctor.dispatch.unloaded_ratio``, at most
    ``cpus / (cpus - foreign cores)``: ``compute_slowdown``); where its share reaches the
    cut-off, the finding is "inconclusive", not absent.

    The step after the fix is never below the compute-only step at N steps per call; where that
    step is not below the window's median step (a probe timed slower than the window), no gain
    is quoted and the finding is ``info``, whatever the share. The
    saving is a share of the compute-only step at 1 (``1 - 1 / r``, paired), and that step is
    part of the real step, so the share of the real step is at most ``1 - 1 / r``: a probe
    timed slower than the window (a tiny LSTM's probe at 3.3 ms against a 2.4 ms window step
    under load) does not inflate it. The compute-only step's share of the real step comes
    from the compute-only probe's own pairs (real step / compute-only step, timed side by
    side: ``probes.compute_paired``), not from the window's median: a window of 20 steps of
    2.5 ms (50 ms in all) moved from 2.31 to 3.96 ms across three runs of
    tests/scripts/tiny_lstm.py, and the share divided by it flipped the finding (issue 11).
    The real step is the window's: the callbacks' hooks are in it, and not in the probe's real
    arm, so the factor is ``compute-only / (real + callbacks)``. Where that probe has no
    real-data arm (a Python generator, a PyDataset), fewer than 3 pairs, or disagrees with the
    window (``probes.inconsistent``), the share is taken of the window's median step instead;
    the evidence row "compute-only step / real step" says which. The milliseconds saved are
    the share of the window's median step.

Example:
    ``model.compile(optimizer="adam", loss="mse")`` for a 16-unit LSTM

Use instead:
    ``model.compile(optimizer="adam", loss="mse", steps_per_execution=16)``

Fix safety:
    safe for the results: the same steps run. Batch-level callbacks then run once per 16 steps
    (``on_train_batch_*`` see every 16th batch) and the progress bar updates less often. The fix
    rewrites the user's ``compile`` call, every other argument as written; display-only (a
    sketch) where that call was not recorded.

Options:
    ``min_dispatch_share`` = 0.2 (fraction of the step): the share of the median step that
    running several steps per call must save for the rule to report (a warning). Source:
    openxla/xprof xprof/convert/op_stats_to_input_pipeline_analysis.cc,
    kHighlyInfeedBoundThresholdInPercent = 20, used here for a dispatch share worth changing the
    compile call for.

    ``error_dispatch_share`` = 0.5 (fraction of the step): from this share the finding is an
    error. Source: rnndoctor's severity scale (rnndoctor/findings.py: Severity): a step that
    loses half its time runs 2x slower than it needs to.

References:
    ``keras.Model.compile`` documentation (``steps_per_execution``);
    keras/src/backend/tensorflow/trainer.py (``multi_step_on_iterator``); xprof's input-pipeline
    analysis uses 20% for "highly" bound (kHighlyInfeedBoundThresholdInPercent), the cut-off
    used here for a dispatch share worth changing the compile call for.
"""

from __future__ import annotations

import ast
from collections.abc import Callable

from rnndoctor import dispatch
from rnndoctor import rewrite as rw
from rnndoctor.decide import Decision, decide, describe
from rnndoctor.facts import Facts, ProbePoint
from rnndoctor.findings import Evidence, Finding, Fix, FixSafety, Severity
from rnndoctor.rules import NotEvaluated, Option, OptionValues, finding, rule
from rnndoctor.rules import _measured as m
from rnndoctor.stats import Interval

_MIN_DISPATCH_SHARE = Option(
    name="min_dispatch_share",
    default=0.20,
    unit="fraction of the step",
    source=m.WARNING_INPUT_SHARE.source,
    help="the share of the step that several steps per call must save for the rule to report",
)
_ERROR_DISPATCH_SHARE = Option(
    name="error_dispatch_share",
    default=0.50,
    unit="fraction of the step",
    source=m.ERROR_INPUT_SHARE.source,
    help="the dispatch share from which the finding is an error",
)


def _fix(facts: Facts, value: int) -> Fix:
    """The user's ``compile`` call with ``steps_per_execution`` set and every other argument as
    written; a display-only sketch where that call was not recorded."""
    title = f"Run {value} steps per call: compile with steps_per_execution"
    site = facts.fit.compile_location
    call = site.call_source if site is not None else None
    why = _not_rewritable(call)
    if why is not None:
        return Fix(
            title=f"{title} (display-only: {why})",
            code=f"# {why}: set steps_per_execution to {value} where its value is set",
            safety=FixSafety.DISPLAY_ONLY,
        )
    code = rw.set_keyword(call, "steps_per_execution", str(value))
    if code is not None:
        return Fix(title=title, code=code, safety=FixSafety.SAFE, before=call)
    return Fix(
        title=title + " (keep your other compile arguments)",
        code=f"model.compile(..., steps_per_execution={value})  # your arguments, plus this one",
        safety=FixSafety.DISPLAY_ONLY,
    )


def _not_rewritable(call: str | None) -> str | None:
    """Why the ``compile`` call's ``steps_per_execution`` cannot be set in place, or None: the
    call passes it a value it reads (``steps_per_execution=args.spe``: a literal would override
    the option), or passes ``**kwargs`` without it (a keyword added beside the splat would
    clash with one the splat holds: ``TypeError`` at run time)."""
    node = rw.parse_call(call)
    if node is None:
        return None
    given = rw.argument(call, None, "steps_per_execution")
    if given is not None:
        if rw.is_int_literal(given):
            return None
        return f"your compile call sets steps_per_execution={ast.unparse(given)}"
    splat = rw.splats(call)
    if splat:
        return f"your compile call passes **{splat[0]}, which may hold it"
    return None


def _real_scale(facts: Facts, compute_ms: float, step: float) -> tuple[float, float]:
    """The compute-only step as a share of the real step (the window's step: input wait and
    the callbacks' hooks included), at most 1 (Bounds: :func:`rnndoctor.dispatch.real_scale`),
    and the widening factor of the figures it rests on: the compute-only probe's phase where
    its pairs give the share (:func:`rnndoctor.dispatch.uses_pairs`), else the window's load and
    drift (:func:`~rules._measured.window_widen`: ``compute_ms``, the steps_per_execution
    probe's step, over the window's median ``step``)."""
    scale = dispatch.real_scale(facts.probes, compute_ms, step)
    if dispatch.uses_pairs(facts.probes):
        return scale, m.phase_widen(facts, facts.probes.compute_paired.phase)
    return scale, m.window_widen(facts)


def _scale_text(facts: Facts, compute_ms: float, step: float) -> str:
    """The compute-only step's share of the real step, and where it comes from (evidence)."""
    scale, _ = _real_scale(facts, compute_ms, step)
    if dispatch.uses_pairs(facts.probes):
        pairs = facts.probes.compute_paired.pairs
        return f"{scale:.0%} (compute-only probe: {pairs} pairs with the real step, plus callbacks)"
    return f"{scale:.0%} (the steps_per_execution probe's step over the window's median step)"


def _dispatch_share(facts: Facts, one: ProbePoint, many: ProbePoint, step: float) -> Interval:
    """The share of the real step that ``many`` steps per call save, with its interval: from
    the paired ratio ``r`` = step at 1 / step at N (A = 1, B = N), ``1 - 1 / r`` of the
    compute-only step at 1 (increasing in ``r``), times that step's share of the real step
    (:func:`_real_scale`), widened for the probes' machine load.
    Facts without a pairing (before schema 1.2) give the medians' share only."""
    paired = many.paired
    if paired is None:
        return m.point_interval((one.step_time_ms - many.step_time_ms) / step)
    # The compute-only step is part of the real step (Bounds): a probe that ran slower than the
    # window does not inflate the share past the paired saving 1 - 1 / r.
    scale, widen = _real_scale(facts, paired.median_a_ms, step)
    i = m.ratio_interval(facts, paired, extra=widen)

    def of(r: float) -> float:
        return dispatch.share_at_ratio(r, scale, many.value, 1)

    return Interval(of(i.value), of(i.low), of(i.high), i.level, i.widen_factor, i.no_interval)


def _left_share(facts: Facts, one: ProbePoint, user: ProbePoint, step: float) -> Interval:
    """The share of the real step still spent on per-call dispatch at the user's
    ``N = user.value > 1`` (Bounds): ``(r - 1) / (N - 1)`` of the compute-only step at N, from
    the paired ratio ``r`` = step at 1 / step at N, times that step's share of the real step
    (:func:`_real_scale`: a probe timed slower than the window does not inflate it), clamped at
    0 below (``r < 1``: one step per call was not slower). Widened as :func:`_dispatch_share`.
    Without a pairing, the medians' share."""
    n = user.value
    paired = user.paired
    if paired is None:
        return m.point_interval(max(0.0, one.step_time_ms - user.step_time_ms) / (n - 1) / step)
    scale, widen = _real_scale(facts, paired.median_b_ms, step)
    i = m.ratio_interval(facts, paired, extra=widen)

    def of(r: float) -> float:
        return dispatch.share_at_ratio(r, scale, n, n)

    return Interval(of(i.value), of(i.low), of(i.high), i.level, i.widen_factor, i.no_interval)


def _share_of(
    facts: Facts, point: ProbePoint, step: float, compiled: int
) -> Callable[[float], float] | None:
    """The share of the real step at a paired ratio of ``point`` (what :func:`_dispatch_share`
    or :func:`_left_share` maps a ratio to), for the evidence row under load; None without a
    pairing."""
    paired = point.paired
    if paired is None:
        return None
    at_ms = paired.median_b_ms if compiled > 1 else paired.median_a_ms
    scale, _ = _real_scale(facts, at_ms, step)
    return lambda r: dispatch.share_at_ratio(r, scale, point.value, compiled)


def _measured_share(facts: Facts, point: ProbePoint, step: float, compiled: int) -> Interval | None:
    """The share :func:`_dispatch_share` (``compiled == 1``) or :func:`_left_share` gives, as
    the pairs measured it, before any widening (their bootstrap interval, or extremes), with
    its upper bound at the ratio the pairs' upper bound reaches once the load's slowdown is
    taken out of the compute (``rnndoctor.dispatch.unloaded_ratio``, Bounds): what
    :func:`rnndoctor.decide.decide` reads under load. None without a pairing, and on a quiet
    steps_per_execution phase (a drifting window widens the share, and the pairs' own bounds
    do not decide it)."""
    paired = point.paired
    slowdown = dispatch.compute_slowdown(m.phase_load(facts, paired.phase)) if paired else 1.0
    if paired is None or slowdown <= 1.0:
        return None
    of = _share_of(facts, point, step, compiled)
    high = dispatch.unloaded_ratio(max(paired.high, paired.ratio), point.value, slowdown)
    return Interval(of(paired.ratio), of(min(paired.low, paired.ratio)), of(high), paired.level)


def _basis(point: ProbePoint) -> str:
    """Where the dispatch share comes from: the pairs, and their step-time ratio as measured
    (a reader's check on a share interval shown clipped to 0–100%)."""
    paired = point.paired
    if paired is None:
        return "compute-only medians, not paired (facts before schema 1.2)"
    return (
        f"{paired.pairs} interleaved pairs at steps_per_execution 1 and {point.value}, step-time "
        f"ratio 1 / {point.value} = {paired.ratio:.2f}x (as measured, "
        f"{paired.low:.2f}–{paired.high:.2f}x)"
        + (f"; cut short: {paired.cut_short}" if paired.cut_short else "")
        + (f"; second stage: {paired.second_stage}" if paired.second_stage else "")
    )


def _severity(
    decision: Decision, share: Interval, options: OptionValues, gainless: bool
) -> Severity:
    """``warning`` (``error`` from ``error_dispatch_share``) where the share's interval clears
    the cut-off and the step after the fix is below the window's step; else ``info``."""
    if decision is not Decision.CLEARS or gainless:
        return Severity.INFO
    if share.low >= options.error_dispatch_share:
        return Severity.ERROR
    return Severity.WARNING


def _gain_text(
    spe: int, value: int, quoted: str, step: float, after: float, saved_ms: float
) -> str:
    """The gain: the milliseconds the step loses, ``step - after``; where the step after the
    fix is held at the compute-only step at ``value`` (Bounds), the dispatch share's larger
    ``saved_ms`` is quoted as what that bound cut, so the sentence adds up."""
    source = "measured" if spe == 1 else f"from the paired 1 vs {spe} (Bounds),"
    bounded = after > step - saved_ms + 0.005
    held = (
        f"; the dispatch share's {saved_ms:.2f} ms, held at the compute-only step at "
        f"steps_per_execution={value}"
        if bounded
        else ""
    )
    return (
        f"{source} {step - after:.2f} ms less per step at steps_per_execution={value} "
        f"(compute-only probe, dispatch share {quoted}{held}): step {step:.2f} ms -> "
        f"{after:.2f} ms, about {step / after:.1f}x faster"
    )


def _unmeasured(facts: Facts) -> str:
    """Why the steps_per_execution probe timed fewer than its two settings: the probe's own
    reason (not run for a long compute-only step, Keras' multi-step function failing under a
    strategy, ...), else the first point's. A probe that did not measure is no pass: a
    tf_keras LSTM whose compute-only step took 25.8 ms was skipped in one check and timed in
    the next, at 24.1 ms (28%, later traced to the probes' batch shape: 1.09x, about 8%, once
    the probes' batches had the window's shape, ``capture/sampling.py: array_batches``)."""
    probes = facts.probes
    stopped = next((p.stopped for p in probes.spe_probe if p.stopped), None)
    why = probes.spe_probe_not_measured or stopped or "it timed fewer than two settings"
    return f"steps_per_execution probe: {why}"


@rule(
    "RD403",
    "tiny-steps",
    "host dispatch dominates a short step, with steps_per_execution == 1",
    needs=("probes", "fit", "steps"),
    severity=Severity.WARNING,
    options=(_MIN_DISPATCH_SHARE, _ERROR_DISPATCH_SHARE),
)
def check(facts: Facts, options: OptionValues) -> list[Finding]:
    m.require_probes(facts, "steps_per_execution", facts.probes.spe_probe_not_measured)
    spe = facts.fit.steps_per_execution or 1
    points = {p.value: p for p in facts.probes.spe_probe if p.step_time_ms}
    if 1 not in points or len(points) < 2:
        raise NotEvaluated(_unmeasured(facts))
    one = points[1]
    step = m.step_ms(facts) or one.step_time_ms
    if spe == 1:
        many = min((p for v, p in points.items() if v > 1), key=lambda p: p.step_time_ms)
        share, value = _dispatch_share(facts, one, many, step), many.value
        kept = 1.0  # the whole saving, down to the step at many.value
    elif spe in points:
        many, value = points[spe], 4 * spe
        share = _left_share(facts, one, many, step)
        kept = 0.75  # 4 N saves 3/4 of the cost left at N (Bounds)
    else:
        return []
    # the compute-only step the share scales (at 1, or at the user's N)
    at_ms = many.step_time_ms if spe > 1 else one.step_time_ms
    if many.paired is not None:
        at_ms = many.paired.median_b_ms if spe > 1 else many.paired.median_a_ms
    measured = _measured_share(facts, many, step, 1 if spe == 1 else spe)
    decision = decide(share, options.min_dispatch_share, higher_is_worse=True, measured=measured)
    if decision is Decision.BELOW:
        return []
    saved_ms = share.value * step * kept
    # never below the compute-only step at the new value: at N, that of N less what 4 N saves
    after = max(step - saved_ms, many.step_time_ms - (saved_ms if spe > 1 else 0.0))
    speedup = step / after
    gainless = after >= step  # that bound leaves nothing to gain (Bounds): never a warning
    quoted = describe(decision, share, kind="share")
    severity = _severity(decision, share, options, gainless)
    left = "" if spe == 1 else f" still left at steps_per_execution={spe}"
    return [
        finding(
            severity=severity,
            message=(
                f"Per-step host dispatch{left} costs {share.value * step:.2f} ms, {quoted} of "
                f"the {step:.2f} ms median step: the compute-only step takes "
                f"{one.step_time_ms:.2f} ms at steps_per_execution=1 and "
                f"{many.step_time_ms:.2f} ms at {many.value}."
                + (
                    f" No gain can be quoted: the compute-only step at {value} is not below "
                    "the window's median step (the probe ran slower than the window)."
                    if gainless
                    else ""
                )
            ),
            location=m.to_location(facts.fit.compile_location) or m.fit_location(facts),
            evidence=(
                Evidence("steps_per_execution", spe, "", "compile"),
                Evidence("compute-only step, steps_per_execution=1", one.step_time_ms, "ms"),
                Evidence(
                    f"compute-only step, steps_per_execution={many.value}",
                    many.step_time_ms,
                    "ms",
                ),
                Evidence("median step time", step, "ms", "fit (diagnosis window)"),
                Evidence("compute-only step / real step", _scale_text(facts, at_ms, step)),
                Evidence("dispatch share of the step", quoted, "", _basis(many)),
                *m.unloaded_evidence(
                    facts,
                    many.paired,
                    many.value,
                    share=_share_of(facts, many, step, 1 if spe == 1 else spe),
                ),
                *m.noisy_evidence(facts),
            ),
            fix=_fix(facts, value),
            gain=None if gainless else _gain_text(spe, value, quoted, step, after, saved_ms),
            speedup=round(speedup, 2) if decision is Decision.CLEARS and not gainless else None,
        )
    ]
