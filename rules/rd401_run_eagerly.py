"""RD401 run-eagerly: the training step runs eagerly, op by op from Python, not as a graph.

What it detects:
    ``model.compile(..., run_eagerly=True)`` (``fit`` then calls ``train_step`` without
    ``tf.function``), or ``tf.config.run_functions_eagerly(True)``, which makes every
    ``tf.function`` (Keras' own train function and a custom loop's step) run its Python body
    eagerly.

Why it slows training:
    Eagerly, each op of the forward pass, the gradient tape and the optimizer update is
    dispatched from Python one at a time: the host overhead of every op (microseconds each,
    thousands per LSTM step) is paid on every step, and TensorFlow's graph optimisations (Grappler
    op fusion, constant folding) never run. ``run_eagerly`` is a debugging switch (Keras:
    "This is useful for debugging, but it makes training slower").

Evidence:
    ``fit.run_eagerly`` (the model's compile setting at its ``fit`` call);
    ``environment.run_functions_eagerly`` (read when the diagnosis ended);
    ``environment.run_eagerly_location`` (the user's line that turned it on);
    ``fit.compile_location`` (the ``compile`` call the fix rewrites); the measured step
    time; for a custom loop under ``run_functions_eagerly``, the traced twin
    (``loop.eager_call_ms`` / ``loop.traced_call_ms``: the step function called on the same batch
    eagerly, then as a ``tf.function``).

Example:
    ``model.compile(optimizer="adam", loss="mse", run_eagerly=True)``;
    ``tf.config.run_functions_eagerly(True)`` left in after debugging.

Use instead:
    ``model.compile(optimizer="adam", loss="mse")`` (``run_eagerly`` defaults to False), and
    no ``run_functions_eagerly(True)`` outside a debugging session.

Fix safety:
    safe: the same computation, traced into a graph. Python side effects inside the step
    (``print``, ``.numpy()``) then run once per tracing instead of once per step; a step that
    needs them fails loudly at tracing, not silently.

Options:
    ``error_speedup`` = 2.0 (x (step-time speedup)): the measured speedup from which the
    finding is an error. Source: rnndoctor's severity scale (rnndoctor/findings.py: Severity):
    error means at least 2x slower than it needs to be.

    ``warning_speedup`` = 1.1 (x (step-time speedup)): the measured speedup from which the
    finding is a warning (below it: info; unmeasured: warning). Source: rnndoctor's choice: a
    smaller measured gain is within run-to-run noise.

References:
    keras/src/trainers/trainer.py: Trainer.compile (``run_eagerly``);
    keras/src/backend/tensorflow/trainer.py: TensorFlowTrainer._make_function (no tf.function
    when ``run_eagerly``); tensorflow/python/eager/polymorphic_function/eager_function_run.py:
    run_functions_eagerly; https://www.tensorflow.org/guide/function.
"""

from __future__ import annotations

from rnndoctor import rewrite as rw
from rnndoctor.facts import Facts
from rnndoctor.findings import Evidence, Finding, Fix, FixSafety, Severity
from rnndoctor.rules import NotEvaluated, OptionValues, finding, rule
from rnndoctor.rules import _host_hw as hh


def _gain(facts: Facts) -> tuple[str, float | None]:
    loop, steps = facts.loop, facts.steps
    if (
        loop is not None
        and loop.functions_run_eagerly
        and loop.eager_call_ms
        and loop.traced_call_ms
    ):
        saved = loop.eager_call_ms - loop.traced_call_ms
        step = steps.median_step_time_ms if steps and steps.median_step_time_ms else None
        # A step measured shorter than the twin's eager call ran at another time (a busy
        # machine): the step function's own eager/traced ratio is then the estimate.
        step = step if step and step > saved else loop.eager_call_ms
        speedup = step / (step - saved) if saved > 0 else None
        text = (
            f"measured on the same batch: the step function took {loop.eager_call_ms:.2f} ms "
            f"eagerly and {loop.traced_call_ms:.2f} ms as a tf.function (median of "
            f"{loop.twin_calls} calls each)"
        )
        if speedup is not None:
            text += (
                f"; removing the {saved:.2f} ms difference from the {step:.2f} ms step: about "
                f"{speedup:.1f}x faster steps"
            )
        else:
            text += "; the traced step was not faster here"
        return text, (round(speedup, 2) if speedup else None)
    return (
        "not measured: this run executed the train step eagerly only, so its graph step time "
        "is unknown; check again with eager execution off to measure it",
        None,
    )


def _compile_fix(facts: Facts) -> Fix:
    """The user's ``compile`` call without ``run_eagerly`` (every other argument as written),
    from the recorded compile call, else the line that turned eager execution on. A
    ``run_eagerly`` the call reads (``run_eagerly=args.debug``) gets a display-only note
    instead: removing it would make that option do nothing."""
    switch = facts.environment.run_eagerly_location
    site = facts.fit.compile_location if facts.fit else None
    call = next((s.call_source for s in (site, switch) if s is not None and s.call_source), None)
    read = rw.read_values(call, ("run_eagerly",))
    if read:  # compile(run_eagerly=args.debug): removing it would make the option do nothing
        return Fix(
            title=f"Make run_eagerly={read['run_eagerly']} False where it is set",
            code=f"# your compile call passes run_eagerly={read['run_eagerly']}: make that "
            "False where its value is set (keep it on only while debugging)",
            safety=FixSafety.DISPLAY_ONLY,
        )
    rewritten = rw.remove_keyword(call, "run_eagerly")
    return Fix(
        title="Compile without run_eagerly (it defaults to False)",
        code=rewritten or "model.compile(...)  # your arguments, without run_eagerly=True",
        safety=FixSafety.SAFE if rewritten else FixSafety.DISPLAY_ONLY,
        before=call if rewritten else None,
    )


@rule(
    "RD401",
    "run-eagerly",
    "compile(run_eagerly=True) or tf.config.run_functions_eagerly(True)",
    needs=("environment",),
    severity=Severity.WARNING,
    options=(hh.ERROR_SPEEDUP, hh.WARNING_SPEEDUP),
)
def check(facts: Facts, options: OptionValues) -> list[Finding]:
    env = facts.environment
    fit_eager = bool(facts.fit is not None and facts.fit.run_eagerly)
    tf_eager = bool(env.run_functions_eagerly)
    if not (fit_eager or tf_eager):
        if facts.fit is None and facts.loop is None:
            raise NotEvaluated(
                "the run reached neither Model.fit nor a custom training loop, so how the "
                "model was compiled (run_eagerly) is unknown"
            )
        return []
    switch = env.run_eagerly_location
    via_config = bool(switch and switch.code and "run_functions_eagerly" in switch.code)
    evidence = [
        Evidence("compile(run_eagerly=...)", fit_eager if facts.fit else None, "",
                 "fit.run_eagerly"),
        Evidence("tf.config.functions_run_eagerly()", tf_eager, "",
                 "environment.run_functions_eagerly"),
    ]  # fmt: skip
    steps = facts.steps
    if steps is not None and steps.median_step_time_ms is not None:
        evidence.append(
            Evidence(f"median step time ({steps.source})", steps.median_step_time_ms, "ms",
                     f"steps: {steps.measured_steps} measured steps")
        )  # fmt: skip
    loop = facts.loop
    if loop is not None and loop.functions_run_eagerly:
        if loop.eager_call_ms is not None:
            evidence.append(Evidence("step function, eager", loop.eager_call_ms, "ms/call",
                                     "loop.eager_call_ms"))  # fmt: skip
        if loop.traced_call_ms is not None:
            evidence.append(Evidence("step function, tf.function", loop.traced_call_ms,
                                     "ms/call", "loop.traced_call_ms"))  # fmt: skip
        if loop.twin_not_measured:
            evidence.append(Evidence("traced twin", loop.twin_not_measured, "",
                                     "loop.twin_not_measured"))  # fmt: skip
    gain, speedup = _gain(facts)
    if via_config or (tf_eager and not fit_eager):
        what = "tf.config.run_functions_eagerly(True) makes every tf.function run eagerly"
        fix = Fix(
            title="Turn eager execution of tf.functions off (or delete the call)",
            code="tf.config.run_functions_eagerly(False)",
            safety=FixSafety.SAFE,
            before=switch.code if via_config and switch else None,
        )
    else:
        what = "The model is compiled with run_eagerly=True, so fit runs train_step eagerly"
        fix = _compile_fix(facts)
    compiled = facts.fit.compile_location if facts.fit and fit_eager else None
    location = hh.first_location(
        compiled,
        switch,
        facts.fit.location if facts.fit else None,
        loop.location if loop else None,
    )
    return [
        finding(
            severity=hh.severity_of_speedup(speedup, options),
            message=f"{what}: every op is dispatched from Python, one at a time, on every step.",
            location=location,
            evidence=tuple(evidence),
            fix=fix,
            gain=gain,
            speedup=speedup,
        )
    ]
