"""RD406 predict-in-loop: ``model.predict`` called on single samples, many times, in a loop.

What it detects:
    After the diagnosis window the script runs on until its next ``fit`` call (a ``fit``
    inside a loop) or its end (a single ``fit``), bounded by a budget
    (``rnndoctor/capture/after_window.py``), and its model calls are counted and timed there.
    The rule reports a ``Model.predict`` call site that ran on a batch of one sample at least
    ``min_single_calls`` (10) times, as text-generation scripts do when they sample one token at
    a time. It gives the measured cost of one call and, timed by rnndoctor on the same sample
    against ``predict`` in interleaved bursts (paired, with a 90% interval), of
    ``model(x, training=False)`` and ``predict_on_batch(x)``; the calls per ``fit`` call
    (per iteration of the fit loop, or after a single ``fit``; from the loops around the line
    in the source, else the calls seen) and the share they take of an iteration (one ``fit``
    call plus what runs until the next; for a single ``fit``, the job: the fit plus what runs
    after it).

    Severity: ``error`` when the predict calls take at least half of an iteration
    (``error_share``: the job runs at least 2x slower than it needs to), ``warning`` below;
    ``info`` ("inconclusive") when the paired interval of the faster way does not clear 1 or
    rests on fewer than 3 pairs.
    The estimated gain divides the predict calls' measured time by the paired ratio.

    Not evaluated when nothing after the window was watched (``rnndoctor.diagnose`` and the
    Keras callback, or a check with no time left for the run-on), or when the script raised
    after the window before any model call (``outside_window.ended`` ``error``, no calls): a
    pass there would rest on nothing. Nor, with no finding, where the run-on stopped before the
    script's end or its next ``fit`` call (``ended`` ``a write``, ``budget``, ``error``) and
    the ``fit`` call's file holds ``.predict(`` calls after the ``fit`` line that it did not
    reach (``outside_window.unreached_predict_lines``; unknown counts as some): a new user's
    ``model.save(...)`` right after ``fit`` stopped the run-on, and the ``predict`` loop after
    it had "passed". A run-on that stopped at a write after its ``predict`` calls (fit, a loop
    of ``model(x)``, ``model.save``) still passes.

Why it slows training:
    ``Model.predict`` is built for many batches: each call wraps its input in a data adapter
    and an epoch iterator, runs the callbacks' predict hooks, and gathers the outputs into numpy
    arrays (``keras/src/backend/tensorflow/trainer.py``: ``predict``). On one sample that fixed
    cost is the whole call, often tens of milliseconds. ``model(x, training=False)`` runs the
    model directly, and ``predict_on_batch(x)`` runs the already compiled predict function on
    the one batch, with neither iterator nor callbacks. ``Trainer.predict``'s own docstring says
    so: predict is meant for large arrays, ``__call__`` for small inputs in a loop.

Evidence:
    ``outside_window.calls[]`` (``method``, ``calls``, ``median_ms``, ``single_sample_calls``,
    ``location``, ``loops``, ``calls_per_iteration``), ``outside_window.per_call_ms``,
    ``outside_window.per_call_paired``, ``outside_window.ended``; ``steps`` and ``fit`` (one
    fit call's training time), ``fit.fit_in_loop``.

Example:
    ``for i in range(400): preds = model.predict(x_pred, verbose=0)[0]`` after each
    ``model.fit(x, y, epochs=1)`` of a ``for epoch in range(40)`` loop.

Use instead:
    ``preds = model.predict_on_batch(x_pred)[0]`` (numpy out, as ``predict`` gives), or
    ``preds = model(x_pred, training=False).numpy()[0]``; the finding picks the faster of the
    two as measured.

Fix safety:
    safe: on one batch, ``predict_on_batch`` and ``model(x, training=False)`` compute what
    ``predict`` computes (inference mode, same weights), and ``.numpy()`` gives the same array
    type; only ``predict``'s own arguments (``verbose``, ``batch_size``) are dropped.

Options:
    ``min_single_calls`` = 10 (calls): the single-sample ``predict`` calls seen at one line
    from which the rule reports. Source: rnndoctor's choice.

    ``error_share`` = 0.5 (fraction of an iteration): from this share of an iteration the
    finding is an error. Source: rnndoctor's severity scale (rnndoctor/findings.py: Severity):
    a job that spends half its time on avoidable overhead runs 2x slower than it needs to.

References:
    keras/src/backend/tensorflow/trainer.py: TensorFlowTrainer.predict, predict_on_batch;
    keras/src/trainers/trainer.py: Trainer.predict (docstring: "not intended for use inside of
    loops that iterate over your data and process small numbers of inputs at a time ... directly
    use __call__() for faster execution"); the Keras FAQ entry it links, "What's the difference
    between Model methods predict() and __call__()?".
"""

from __future__ import annotations

import ast
from typing import Any

from rnndoctor.facts import (
    SEEN_TO_THE_END,
    Facts,
    ModelCallStats,
    OutsideWindowFacts,
    PairedRatio,
)
from rnndoctor.findings import Evidence, Finding, Fix, FixSafety, Severity
from rnndoctor.rules import NotEvaluated, Option, OptionValues, finding, rule
from rnndoctor.rules import _fastpath as fp
from rnndoctor.rules import _outside as out

_MIN_SINGLE_CALLS = Option(
    name="min_single_calls",
    default=10,
    unit="calls",
    source="rnndoctor's choice",
    help="the single-sample predict calls seen at one line from which the rule reports",
)
_ERROR_SHARE = Option(
    name="error_share",
    default=0.5,
    unit="fraction of an iteration",
    source="rnndoctor's severity scale (rnndoctor/findings.py: Severity): a job that spends "
    "half its time on avoidable overhead runs 2x slower than it needs to",
    help="the share of an iteration from which the finding is an error",
)
# A paired ratio from fewer pairs decides nothing: with one or two pairs the bootstrap interval
# of the median is the ratios themselves (no spread to go by). Source: rnndoctor's choice, one
# more than --verify's floor of A B A B (rnndoctor/verify/run.py: MIN_PAIRS).
_MIN_PAIRS = 3
_CALL = "model(x, training=False)"
_ON_BATCH = "predict_on_batch"


def _rewrite(call_source: str | None, use_call: bool) -> str | None:
    """``recv.predict(x, ...)`` -> ``recv.predict_on_batch(x)`` or
    ``recv(x, training=False).numpy()``; None when the call is not of that form."""
    node = fp.parse_call(call_source)
    if node is None or not isinstance(node.func, ast.Attribute) or node.func.attr != "predict":
        return None
    args = node.args[:1] or [k.value for k in node.keywords if k.arg == "x"]
    if len(args) != 1 or any(isinstance(a, ast.Starred) for a in node.args):
        return None
    receiver, x = ast.unparse(node.func.value), ast.unparse(args[0])
    return (
        f"{receiver}({x}, training=False).numpy()" if use_call else f"{receiver}.{_ON_BATCH}({x})"
    )


def _fix(call: ModelCallStats, ow: OutsideWindowFacts) -> tuple[Fix, str | None]:
    """The fix, and the alternative it uses (None: not measured)."""
    timed = {k: v for k, v in ow.per_call_ms.items() if k in (_CALL, _ON_BATCH)}
    best = min(timed, key=lambda k: timed[k]) if timed else None
    loc = call.location
    code = _rewrite(loc.call_source if loc else None, use_call=best == _CALL)
    if code is not None and loc is not None:
        line = loc.code.replace(loc.call_source, code) if loc.code and loc.call_source else code
        return Fix(
            f"Call the model directly on the single sample: {best or _ON_BATCH}",
            line,
            FixSafety.SAFE,
            before=loc.code or loc.call_source,
        ), best
    snippet = "preds = model.predict_on_batch(x)  # or: model(x, training=False).numpy()"
    return Fix(
        "Call the model directly on the single sample", snippet, FixSafety.DISPLAY_ONLY
    ), best


def _paired(ow: OutsideWindowFacts, best: str | None) -> PairedRatio | None:
    """The paired ratio of ``predict`` over the chosen way, on the same sample."""
    return next((r for r in ow.per_call_paired if r.a == "predict" and r.b == best), None)


def _conclusive(paired: PairedRatio | None) -> bool:
    """The chosen way is faster: enough pairs, and the whole interval above 1."""
    return paired is not None and paired.pairs >= _MIN_PAIRS and paired.low > 1.0


def _shares(facts: Facts, call: ModelCallStats, paired: PairedRatio | None) -> dict[str, Any]:
    """Seconds per iteration of the predict calls, of the iteration, and the job speedup: the
    predict calls' measured time divided by the paired ratio (None: no paired ratio, or its
    interval does not clear 1)."""
    per_iteration = out.expected_calls(call) * (call.median_ms or 0.0) / 1000.0
    training = out.training_per_call_s(facts)
    outside = out.outside_per_call(facts)
    iteration = None
    if training is not None:
        iteration = training + max(outside.seconds if outside else 0.0, per_iteration)
    speedup = None
    if iteration and _conclusive(paired):
        saved = per_iteration * (1.0 - 1.0 / paired.ratio)
        speedup = iteration / max(iteration - saved, 1e-9)
    share = per_iteration / iteration if iteration else None
    return {"predict_s": per_iteration, "iteration_s": iteration, "share": share,
            "speedup": speedup}  # fmt: skip


def _evidence(
    call: ModelCallStats, ow: OutsideWindowFacts, shares: dict, looped: bool
) -> list[Evidence]:
    per = "per iteration" if looped else "after fit"
    evidence = [
        Evidence("predict calls on one sample (seen)", call.single_sample_calls, "calls",
                 source="after the window, hooked Model.predict"),
        Evidence("predict, per call", call.median_ms, "ms", source="after the window (median)"),
        Evidence(f"predict calls {per}", out.expected_calls(call), "calls",
                 source="the loops around the line (source)" if call.calls_per_iteration
                 else "calls seen"),
        Evidence("the run-on ended at", ow.ended, source=ow.detail or "after the window"),
    ]  # fmt: skip
    for name, value in ow.per_call_ms.items():
        evidence.append(
            Evidence(f"{name}, per call (same sample)", value, "ms",
                     source="interleaved bursts (median)")
        )  # fmt: skip
    for paired in ow.per_call_paired:
        evidence.append(
            Evidence(f"{paired.a} / {paired.b}, paired", paired.ratio, "x",
                     source=f"90% interval {paired.low:g}-{paired.high:g}x over "
                     f"{paired.pairs} pairs" + (f"; {paired.cut_short}" if paired.cut_short
                                                 else ""))
        )  # fmt: skip
    if shares["iteration_s"] is not None:
        evidence.append(
            Evidence("iteration (one fit call + what runs until the next)" if looped
                     else "job (the fit call + what runs after it)",
                     round(shares["iteration_s"], 3), "s", source="forecast and run-on")
        )  # fmt: skip
    return evidence


def _message(call: ModelCallStats, shares: dict, paired: PairedRatio | None, looped: bool) -> str:
    per_iter = out.expected_calls(call)
    text = (
        f"model.predict runs on a single sample {per_iter} times "
        f"{'per iteration' if looped else 'after fit'} "
        f"({call.median_ms:.1f} ms a call, about {shares['predict_s']:.1f} s"
    )
    if shares["share"] is not None:
        whole = "an iteration" if looped else "the job"
        text += f", {shares['share']:.0%} of {whole} of {shares['iteration_s']:.1f} s"
    text += ")."
    if paired is not None:
        verdict = "" if _conclusive(paired) else "inconclusive: "
        text += (
            f" On the same sample, timed in interleaved bursts, {paired.b} takes "
            f"{paired.median_b_ms:.2f} ms a call against predict's {paired.median_a_ms:.2f} ms: "
            f"{verdict}{paired.ratio:.1f}x (90% interval {paired.low:.1f}-{paired.high:.1f}x, "
            f"{paired.pairs} pairs)."
        )
    return text


def _gain(call: ModelCallStats, shares: dict, paired: PairedRatio | None, looped: bool) -> str:
    if paired is None:
        return "not estimated: the ways to call the model were not timed"
    if shares["speedup"] is None:
        return (
            f"not estimated: {paired.b} vs predict is inconclusive ({paired.ratio:.1f}x, 90% "
            f"interval {paired.low:.1f}-{paired.high:.1f}x, {paired.pairs} pairs; "
            f"{_MIN_PAIRS} needed) or the iteration is unknown"
        )
    return (
        f"{shares['speedup']:.2f}x {'per iteration' if looped else 'of the job'}: "
        f"{out.expected_calls(call)} calls x {call.median_ms:.1f} ms, each {paired.ratio:.1f}x "
        f"faster as {paired.b} (paired on the same sample, 90% interval "
        f"{paired.low:.1f}-{paired.high:.1f}x)"
    )


@rule(
    "RD406",
    "predict-in-loop",
    "model.predict called on single samples many times in a Python loop",
    needs=("fit",),
    severity=Severity.WARNING,
    options=(_MIN_SINGLE_CALLS, _ERROR_SHARE),
)
def check(facts: Facts, options: OptionValues) -> list[Finding]:
    ow = facts.outside_window
    if ow is None:
        raise NotEvaluated(
            "the script did not run on after the window"
            + (" of its fit loop" if out.in_loop(facts) else " (nothing after fit was watched)")
        )
    if ow.ended == "error" and not ow.calls:
        raise NotEvaluated(
            f"the script raised {ow.detail or 'an error'} after the window, before any model "
            "call: nothing after fit was seen"
        )
    looped = out.in_loop(facts)
    findings = []
    for call in ow.calls:
        if call.method != "predict" or call.single_sample_calls < options.min_single_calls:
            continue
        fix, best = _fix(call, ow)
        paired = _paired(ow, best)
        shares = _shares(facts, call, paired)
        share = shares["share"]
        severity = (
            Severity.INFO if paired is not None and not _conclusive(paired)
            else Severity.ERROR if share is not None and share >= options.error_share
            else Severity.WARNING
        )  # fmt: skip
        speedup = shares["speedup"]
        gain = _gain(call, shares, paired, looped)
        findings.append(
            finding(
                severity=severity,
                message=_message(call, shares, paired, looped),
                location=fp.to_location(call.location),
                evidence=tuple(_evidence(call, ow, shares, looped)),
                fix=fix,
                gain=gain,
                speedup=round(speedup, 3) if speedup is not None else None,
            )
        )
    unreached = ow.unreached_predict_lines
    if not findings and ow.ended not in SEEN_TO_THE_END and unreached != []:
        lines = f" (predict at line {', '.join(map(str, unreached))})" if unreached else ""
        raise NotEvaluated(
            f"the script's run-on after the window stopped ({ow.detail or ow.ended}) before "
            f"its end or its next fit call: the predict calls after it were not seen{lines}"
        )
    return findings
