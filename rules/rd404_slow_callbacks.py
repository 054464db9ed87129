"""RD404 slow-callbacks: per-batch callback hooks take 10% or more of the training step.

What it detects:
    The user's callbacks' ``on_train_batch_begin`` / ``on_train_batch_end`` (and the legacy
    ``on_batch_*``), timed during the diagnosis window: when together they take 10% or more of
    the median step (``error`` from 50%). Each callback that takes a part of it gets a
    finding, at the line where it was built.

Why it slows training:
    Batch hooks run in Python on the training loop's thread, between steps: the next step
    cannot start until they return. Logging, metric syncs (``float(logs["loss"])`` forces the
    device to finish), file writes or sleeps there add straight to every step. A callback with
    custom batch hooks also turns off Keras' asynchronous callback dispatch
    (``CallbackList._configure_async_dispatch``, keras/src/callbacks/callback_list.py).

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

References:
    RULES.md (RD404 cut-off); keras/src/callbacks/callback.py; Keras guide "Writing your own
    callbacks".
"""

from __future__ import annotations

from rnndoctor.facts import Facts
from rnndoctor.findings import Evidence, Finding, Fix, FixSafety, Severity
from rnndoctor.rules import _measured as m
from rnndoctor.rules import rule

_MIN_SHARE = 0.10  # RULES.md: per-batch callbacks take >= 10% of the step time
_PART_SHARE = 0.02  # a callback below 2% of the step is not worth its own finding


@rule(
    "RD404",
    "slow-callbacks",
    "per-batch callbacks take >= 10% of the step time",
    needs=("probes", "steps", "fit"),
)
def check(facts: Facts) -> list[Finding]:
    step = m.step_ms(facts)
    callbacks = facts.probes.callbacks
    if not step or not callbacks:
        return []
    total = sum(c.per_step_ms for c in callbacks)
    if total / step < _MIN_SHARE:
        return []
    parts = [c for c in callbacks if c.per_step_ms / step >= _PART_SHARE] or [
        max(callbacks, key=lambda c: c.per_step_ms)
    ]
    severity = Severity.ERROR if total / step >= m.ERROR_SHARE else Severity.WARNING
    findings = []
    for cb in parts:
        share = cb.per_step_ms / step
        speedup = step / max(step - cb.per_step_ms, 1e-6)
        findings.append(
            Finding(
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
