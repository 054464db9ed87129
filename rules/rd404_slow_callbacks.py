"""RD404 slow-callbacks: per-batch callback hooks take 10% or more of the training step.

What it detects:
    The user's callbacks' ``on_train_batch_begin`` / ``on_train_batch_end`` (and the legacy
    ``on_batch_*``), timed during the diagnosis window: when together they take 10% or more of
    the median step (``min_callback_share``; ``error`` from 50%, ``error_callback_share``).
    Each callback that takes a part of it (2% of the step or more, ``min_part_share``) gets a
    finding, at the line where it was built.

Why it slows training:
    Batch hooks run in Python on the training loop's thread, between steps: the next step
    cannot start until they return. Logging, metric syncs (``float(logs["loss"])`` forces the
    device to finish), file writes or sleeps there add straight to every step. A callback with
    custom batch hooks also turns off Keras' asynchronous callback dispatch
    (``CallbackList._configure_async_dispatch``, keras/src/callbacks/callback_list.py).
    Keras 2 (tf_keras) runs them the same way, and only those a callback overrides
    (``CallbackList._call_batch_hook_helper`` and ``Callback._implements_train_batch_hooks``
    in tf_keras/src/callbacks.py); the hooks of a tf_keras callback are timed alike.

Evidence:
    ``probes.callbacks`` (per callback: median ms per step, construction site),
    ``probes.callback_ms``, ``steps.median_step_time_ms``.

Example:
    ``class Log(keras.callbacks.Callback): def on_train_batch_end(self, batch, logs=None):
    write_row(logs)``

Use instead:
    Do the work every N batches (``if batch % 100 == 0:``) or in ``on_epoch_end``.

Fix safety:
    display-only: what the callback must still do per batch is the user's call.

Options:
    ``min_callback_share`` = 0.1 (fraction of the step): the share of the median step the
    batch hooks must take together for the rule to report. Source: rnndoctor's choice.

    ``min_part_share`` = 0.02 (fraction of the step): a callback below this share gets no
    finding of its own (unless it is the slowest). Source: rnndoctor's choice.

    ``error_callback_share`` = 0.5 (fraction of the step): from this share the findings are
    errors. Source: rnndoctor's severity scale (rnndoctor/findings.py: Severity): a step that
    loses half its time runs 2x slower than it needs to.

References:
    keras/src/callbacks/callback.py; tf_keras/src/callbacks.py (Keras 2); Keras guide
    "Writing your own callbacks".
"""

from __future__ import annotations

from rnndoctor.facts import Facts
from rnndoctor.findings import Evidence, Finding, Fix, FixSafety, Severity
from rnndoctor.rules import Option, OptionValues, finding, rule
from rnndoctor.rules import _measured as m

_MIN_CALLBACK_SHARE = Option(
    name="min_callback_share",
    default=0.10,
    unit="fraction of the step",
    source="rnndoctor's choice",
    help="the share of the step the batch hooks must take together for the rule to report",
)
_MIN_PART_SHARE = Option(
    name="min_part_share",
    default=0.02,
    unit="fraction of the step",
    source="rnndoctor's choice",
    help="a callback below this share gets no finding of its own (unless it is the slowest)",
)
_ERROR_CALLBACK_SHARE = Option(
    name="error_callback_share",
    default=0.50,
    unit="fraction of the step",
    source=m.ERROR_INPUT_SHARE.source,
    help="the callback share from which the findings are errors",
)


@rule(
    "RD404",
    "slow-callbacks",
    "per-batch callbacks take >= 10% of the step time",
    needs=("probes", "steps", "fit"),
    severity=Severity.WARNING,
    options=(_MIN_CALLBACK_SHARE, _MIN_PART_SHARE, _ERROR_CALLBACK_SHARE),
)
def check(facts: Facts, options: OptionValues) -> list[Finding]:
    m.require_probes(facts)  # the callbacks are timed by the probes
    step = m.step_ms(facts)
    callbacks = facts.probes.callbacks
    if not step or not callbacks:
        return []
    total = sum(c.per_step_ms for c in callbacks)
    if total / step < options.min_callback_share:
        return []
    parts = [c for c in callbacks if c.per_step_ms / step >= options.min_part_share] or [
        max(callbacks, key=lambda c: c.per_step_ms)
    ]
    severity = Severity.ERROR if total / step >= options.error_callback_share else Severity.WARNING
    findings = []
    for cb in parts:
        share = cb.per_step_ms / step
        speedup = step / max(step - cb.per_step_ms, 1e-6)
        findings.append(
            finding(
                severity=severity,
                message=(
                    f"Callback {cb.name} takes {cb.per_step_ms:.2f} ms per step in its batch "
                    f"hooks, {m.pct(share)} of the {step:.2f} ms median step (all per-batch "
                    f"callbacks: {m.pct(total / step)})."
                ),
                location=m.to_location(cb.location) or m.fit_location(facts),
                evidence=(
                    Evidence(f"{cb.name} batch hooks", cb.per_step_ms, "ms per step", "timed"),
                    Evidence("all per-batch callbacks", round(total, 4), "ms per step", "timed"),
                    Evidence("median step time", step, "ms", "fit (diagnosis window)"),
                ),
                fix=Fix(
                    title=f"Run {cb.name}'s per-batch work every N batches, or per epoch",
                    code=(
                        f"class {cb.name}(keras.callbacks.Callback):\n"
                        "    def on_train_batch_end(self, batch, logs=None):\n"
                        "        if batch % 100:  # every 100th batch only\n"
                        "            return\n"
                        "        ...  # the per-batch work"
                    ),
                    safety=FixSafety.DISPLAY_ONLY,
                ),
                gain=(
                    f"{cb.name}'s {cb.per_step_ms:.2f} ms removed from each step: about "
                    f"{speedup:.1f}x faster steps ({step:.2f} ms -> "
                    f"{step - cb.per_step_ms:.2f} ms)"
                ),
                speedup=round(speedup, 2),
            )
        )
    return findings
