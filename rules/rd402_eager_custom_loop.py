"""RD402 eager-custom-loop: a custom training loop applies its gradients eagerly.

What it detects:
    A custom training loop (``tf.GradientTape`` and ``optimizer.apply_gradients``, no ``fit``)
    whose step runs outside any ``tf.function``: the capture saw the gradient application with
    ``tf.executing_eagerly()`` true and no ``tf.function`` running. (A ``tf.function`` step made
    eager by ``tf.config.run_functions_eagerly(True)`` is RD401's.)

Why it slows training:
    Eagerly, each op of the forward pass, the tape's backward pass and the optimizer update is
    dispatched from Python one at a time, every step. An LSTM step is hundreds to thousands of
    small ops, so the host's dispatch overhead, not the math, sets the step time; the GPU idles
    between kernels. ``tf.function`` traces the step once into a graph that runs in C++, with
    Grappler's optimisations.

Evidence:
    ``loop.eager``, ``loop.location`` (the ``apply_gradients`` line), ``loop.step_function`` /
    ``step_location``; the measured step time (``steps``, source ``custom loop``); the traced
    twin: ``loop.eager_call_ms`` and ``loop.traced_call_ms``, the step function called on one
    of the loop's own batches eagerly and then wrapped in ``tf.function``, and
    ``loop.twin_tracing_ms``, its one-off tracing cost; ``loop.step_arguments`` for the
    ``input_signature``.

Example:
    ``def train_step(x, y):`` with a ``GradientTape`` and ``optimizer.apply_gradients(...)``,
    called from ``for x, y in dataset:``.

Use instead:
    ``@tf.function(input_signature=[tf.TensorSpec([None, None, 4], tf.float32), ...])`` on
    ``train_step``: ``None`` for the batch dimension and for every dimension that varies (the
    sequence length), so one graph serves every batch and the step is traced once.

Fix safety:
    unsafe: Python side effects in the step (``print``, appending to a list, ``.numpy()``) run
    only while tracing, and Python control flow on tensor values becomes graph control flow.
    The traced twin ran the user's step function under ``tf.function`` on a real batch; where it
    could not, ``loop.twin_not_measured`` says why.

Decision (issue 11):
    The eager and traced calls are timed in interleaved bursts (``loop.twin_paired``, the
    paired timer); the step's speedup is quoted with its 90% interval, widened on a noisy
    machine. The eager loop is a warning on its structure alone; the measurement raises it to
    an error only when the interval's lower bound reaches ``error_speedup`` (a median alone
    there is quoted "inconclusive: ..." and carries no speedup for the forecast), and lowers it
    to info only when the upper bound stays under ``warning_speedup``.

Bounds:
    The saving is never more than the eager call itself: the step after the fix is the
    measured step minus ``eager x (1 - 1 / ratio)``, and where the step measured shorter than
    that saving the step function's own ratio is the estimate.

Options:
    ``error_speedup`` = 2.0 (x (step-time speedup)): the measured speedup from which the
    finding is an error. Source: rnndoctor's severity scale (rnndoctor/findings.py: Severity):
    error means at least 2x slower than it needs to be.

    ``warning_speedup`` = 1.1 (x (step-time speedup)): the measured speedup from which the
    finding is a warning (below it: info; unmeasured: warning). Source: rnndoctor's choice: a
    smaller measured gain is within run-to-run noise.

References:
    https://www.tensorflow.org/guide/function; https://www.tensorflow.org/guide/
    keras/writing_a_training_loop_from_scratch ("Speeding-up your training step with
    tf.function"); keras/src/optimizers/base_optimizer.py: BaseOptimizer.apply.
"""

from __future__ import annotations

from rnndoctor.decide import format_ratio
from rnndoctor.facts import CustomLoopFacts, Facts
from rnndoctor.findings import Evidence, Finding, Fix, FixSafety, Severity
from rnndoctor.rules import NotEvaluated, OptionValues, finding, rule
from rnndoctor.rules import _host_hw as hh
from rnndoctor.rules import _measured as m
from rnndoctor.stats import Interval


def decorator(loop: CustomLoopFacts) -> str:
    """``@tf.function(input_signature=[...])`` from the observed step arguments, or
    ``@tf.function(reduce_retracing=True)`` when an argument is not a tensor."""
    args = loop.step_arguments
    if args and all(a.kind == "tensor" and a.spec for a in args):
        specs = "".join(f"    {a.spec},  # {a.name}\n" for a in args)
        return f"@tf.function(input_signature=[\n{specs}])"
    return "@tf.function(reduce_retracing=True)"


def _gain(facts: Facts, loop: CustomLoopFacts) -> tuple[str, float | None]:
    if loop.eager_call_ms is None or loop.traced_call_ms is None:
        return (
            f"not measured: no traced twin ({loop.twin_not_measured or 'not run'}); the "
            "graph step time is unknown",
            None,
        )
    saved = loop.eager_call_ms - loop.traced_call_ms
    steps = facts.steps
    step = steps.median_step_time_ms if steps and steps.median_step_time_ms else None
    text = (
        f"measured traced twin on one of the loop's batches: {loop.eager_call_ms:.2f} ms per "
        f"call eagerly, {loop.traced_call_ms:.2f} ms as a tf.function (median of "
        f"{loop.twin_calls} calls each"
        + (f"; tracing once took {loop.twin_tracing_ms:.0f} ms" if loop.twin_tracing_ms else "")
        + ")"
    )
    if saved <= 0:
        return text + ": the traced step was not faster here", None
    if step is not None and step > saved:
        speedup = step / (step - saved)
        return (
            text + f"; removing the {saved:.2f} ms difference from the {step:.2f} ms measured "
            f"step: about {speedup:.1f}x faster steps",
            round(speedup, 2),
        )
    # The loop's step measured shorter than the twin's eager call: the two ran at different
    # times (a busy machine); only the step function's own ratio is consistent.
    speedup = loop.eager_call_ms / loop.traced_call_ms
    return (
        text + f": about {speedup:.1f}x faster step function. (The loop's measured step, "
        f"{step or 0:.2f} ms, was shorter than the twin's eager call: they ran at different "
        "times, so the step function's own ratio is the estimate.)",
        round(speedup, 2),
    )


def _evidence(facts: Facts, loop: CustomLoopFacts) -> list[Evidence]:
    """The loop's facts and the twin's measurements, as evidence rows."""
    evidence = [
        Evidence("gradients applied eagerly", loop.location.code if loop.location else True, "",
                 "loop.eager, loop.location"),
    ]  # fmt: skip
    if loop.step_function:
        evidence.append(Evidence("step function", loop.step_function, "", "loop.step_function"))
    steps = facts.steps
    if steps is not None and steps.median_step_time_ms is not None:
        evidence.append(
            Evidence("median step time (custom loop)", steps.median_step_time_ms, "ms",
                     f"steps: {steps.measured_steps} measured steps")
        )  # fmt: skip
    for label, value, unit, source in (
        ("step function, eager", loop.eager_call_ms, "ms/call", "loop.eager_call_ms"),
        ("step function, tf.function", loop.traced_call_ms, "ms/call", "loop.traced_call_ms"),
        ("tracing once", loop.twin_tracing_ms, "ms", "loop.twin_tracing_ms"),
        ("traced twin", loop.twin_not_measured, "", "loop.twin_not_measured"),
    ):
        if value is not None:
            evidence.append(Evidence(label, value, unit, source))
    return evidence


def _step_speedup(facts: Facts, loop: CustomLoopFacts) -> Interval | None:
    """The step's speedup with its interval, from the paired twin (A = eager, B = traced,
    ratio ``r``): removing ``eager x (1 - 1 / r)`` from the measured step (increasing in
    ``r``); the step function's own ratio where the step measured shorter than that. None
    without a pairing (facts before schema 1.2, or no twin)."""
    paired = loop.twin_paired
    if paired is None:
        return None
    i = m.ratio_interval(facts, paired)
    steps = facts.steps
    step = steps.median_step_time_ms if steps and steps.median_step_time_ms else None
    eager = paired.median_a_ms
    if step is None or step <= eager * (1.0 - 1.0 / max(i.high, 1e-9)):
        return i

    def of(r: float) -> float:
        return step / (step - eager * (1.0 - 1.0 / r)) if r > 0 else 1.0

    return Interval(of(i.value), of(i.low), of(i.high), i.level, i.widen_factor, i.no_interval)


def _decide(
    facts: Facts, loop: CustomLoopFacts, options: OptionValues
) -> tuple[Severity, str | None]:
    """The severity and the speedup as quoted. The eager loop is a warning on its structure;
    the measurement makes it an error only when the interval's lower bound reaches
    ``error_speedup``, and info only when its upper bound stays under ``warning_speedup``;
    a median alone beyond a cut-off is quoted "inconclusive: ..."."""
    interval = _step_speedup(facts, loop)
    if interval is None:
        return hh.severity_of_speedup(_gain(facts, loop)[1], options), None
    error, warning = options[hh.ERROR_SPEEDUP.name], options[hh.WARNING_SPEEDUP.name]
    if interval.low >= error:
        return Severity.ERROR, format_ratio(interval)
    if interval.high < warning:
        return Severity.INFO, format_ratio(interval)
    if interval.low >= warning and interval.value < error:
        return Severity.WARNING, format_ratio(interval)
    return Severity.WARNING, "inconclusive: " + format_ratio(interval)


@rule(
    "RD402",
    "eager-custom-loop",
    "a custom loop applies gradients eagerly (no tf.function)",
    needs=(),
    severity=Severity.WARNING,
    options=(hh.ERROR_SPEEDUP, hh.WARNING_SPEEDUP),
)
def check(facts: Facts, options: OptionValues) -> list[Finding]:
    loop = facts.loop
    if loop is None:
        if facts.fit is not None:
            return []  # the script trains with Model.fit: no custom loop to check
        raise NotEvaluated(
            "the run reached neither Model.fit nor a gradient update of a custom loop "
            f"(it ended with outcome '{facts.run.outcome}' during '{facts.run.phase}')"
        )
    if not loop.eager or loop.functions_run_eagerly:
        return []
    evidence = _evidence(facts, loop)
    gain, speedup = _gain(facts, loop)
    severity, quoted = _decide(facts, loop, options)
    if quoted:
        evidence.append(Evidence("speedup of the step, with its interval", quoted, "",
                                 "traced twin, interleaved with the eager step"))  # fmt: skip
        gain = f"{gain} [{quoted}]"
        if quoted.startswith("inconclusive"):
            speedup = None
    evidence.extend(m.noisy_evidence(facts))
    if loop.step_function and loop.step_location is not None:
        code = loop.step_location.code or f"def {loop.step_function}(...):"
        fix = Fix(
            title=f"Trace {loop.step_function} once into a graph: @tf.function with an "
            "input_signature (None for the batch and any varying dimension)",
            code=f"{decorator(loop)}\n{code}",
            safety=FixSafety.UNSAFE,
            before=code,
        )
        location = hh.location(loop.step_location)
        where = f"in {loop.step_function}"
    else:
        apply_line = loop.location.code if loop.location else "optimizer.apply_gradients(...)"
        fix = Fix(
            title="Move the loop body into a step function and trace it with @tf.function",
            code=(
                f"{decorator(loop)}\n"
                "def train_step(x, y):\n"
                "    with tf.GradientTape() as tape:\n"
                "        loss = loss_fn(y, model(x, training=True))\n"
                "    grads = tape.gradient(loss, model.trainable_variables)\n"
                f"    {apply_line}\n"
                "    return loss\n"
            ),
            safety=FixSafety.DISPLAY_ONLY,
        )
        location = hh.location(loop.location)
        where = "in the loop body"
    return [
        finding(
            severity=severity,
            message=(
                f"The custom training loop applies its gradients eagerly {where}: every op of "
                "every step is dispatched from Python, one at a time."
            ),
            location=location,
            evidence=tuple(evidence),
            fix=fix,
            gain=gain,
            speedup=speedup,
        )
    ]
