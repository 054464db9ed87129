"""RD701 straggler-worker: one worker is slower than the others, who wait for it.

What it detects:
    In synchronous multi-worker training, one worker's time outside the collectives (its input
    wait and its compute, ``outside_collectives_ms``) is 1.2x (``min_ratio``) or more the
    median of the other workers', over the chief's trace of all workers. The finding names the
    worker and its largest extra phase: input or compute. One trace gives one figure per worker
    and no interval: the ratio is quoted from ratio / 10 to ratio x 10 (``rules/_measured.py``:
    ``FEW_PAIRS_SPAN``, the span of a figure with too few samples), widened on a noisy machine
    (``window_widen``). It is a ``warning`` when that whole span clears ``min_ratio`` and the
    other workers spend more time in the collectives than the straggler (they wait for it in
    the all-reduce), else ``info``, "inconclusive".

Why it slows training:
    Every step ends in an all-reduce of the gradients that no worker leaves before the slowest
    one joins it. The whole job runs at the pace of its slowest worker; the step time is the
    same on every worker (the others wait), so a straggler does not show as a slower step on
    any worker. Only the time outside the collectives tells it apart.

Evidence:
    ``strategy.per_worker``: per worker ``outside_collectives_ms``, ``input_ms``,
    ``compute_ms`` and ``collective_ms`` (op self time over the same trace window on every
    worker, ``rnndoctor/capture/distribute.py``: ``traced_rows``). Not evaluated without the
    trace (``rnndoctor check train.py --workers N``).

Example:
    One worker decodes its input on a slower disk, or runs a heavier ``map``: its input wait is
    several times the others'.

Use instead:
    Give that worker's input pipeline what the others have (``num_parallel_calls``,
    ``prefetch``, a faster source, the same hardware), or move the work out of its step.

Fix safety:
    display-only: the cause lives on that worker (its data, its machine); the fix is a sketch.

Options:
    ``min_ratio`` = 1.2 (x): the straggler's time outside the collectives over the others'
    median from which the rule reports. Source: issue 15's cut-off, after Holistic Trace
    Analysis's straggler analysis (rnndoctor's choice of number).

References:
    TensorFlow guide "Distributed training with TensorFlow" (synchronous all-reduce
    training); Holistic Trace Analysis (facebookresearch), straggler analysis.
"""

from __future__ import annotations

from rnndoctor.decide import Decision, decide
from rnndoctor.facts import Facts
from rnndoctor.findings import Evidence, Finding, Fix, FixSafety, Severity
from rnndoctor.rules import Option, OptionValues, finding, rule
from rnndoctor.rules import _distributed as dist
from rnndoctor.rules import _fastpath as fp
from rnndoctor.rules import _measured as m
from rnndoctor.stats import Interval

_MIN_RATIO = Option(
    name="min_ratio",
    default=1.2,
    unit="x",
    source="issue 15's cut-off, after Holistic Trace Analysis's straggler analysis",
    help="how much longer one worker's time outside the collectives must be than the others'",
)


@rule(
    "RD701",
    "straggler-worker",
    "one worker's time outside the collectives >= 1.2x the others' (they wait for it)",
    needs=(),
    severity=Severity.WARNING,
    options=(_MIN_RATIO,),
)
def check(facts: Facts, options: OptionValues) -> list[Finding]:
    if dist.trained_without_strategy(facts):
        return []
    rows = dist.traced_workers(facts)
    slow = max(rows, key=lambda w: w.outside_collectives_ms)
    others = dist.others_median(rows, slow, "outside_collectives_ms")
    if others <= 0 or slow.outside_collectives_ms / others < options.min_ratio:
        return []
    ratio = slow.outside_collectives_ms / others
    extra_input = (slow.input_ms or 0.0) - dist.others_median(rows, slow, "input_ms")
    extra_compute = (slow.compute_ms or 0.0) - dist.others_median(rows, slow, "compute_ms")
    phase = "input" if extra_input >= extra_compute else "compute"
    waited = dist.others_median(rows, slow, "collective_ms") > (slow.collective_ms or 0.0)
    span = Interval(ratio, ratio / m.FEW_PAIRS_SPAN, ratio * m.FEW_PAIRS_SPAN)
    decision = decide(m.widen_ratio(span, m.window_widen(facts)), options.min_ratio,
                      higher_is_worse=True)  # fmt: skip
    clear = decision is Decision.CLEARS and waited
    name = dist.worker_name(slow)
    verdict = "" if clear else (
        "inconclusive (one trace, no interval" + ("" if waited else
        "; the others do not wait longer in the collectives") + "): "
    )  # fmt: skip
    location = facts.strategy.dataset_location if phase == "input" else None
    return [
        finding(
            severity=Severity.WARNING if clear else Severity.INFO,
            message=(
                f"{verdict}{name} is a straggler: {slow.outside_collectives_ms:.1f} ms outside "
                f"the collectives against {others:.1f} ms on the other workers ({ratio:.1f}x), "
                f"most of it extra {phase} ({max(extra_input, extra_compute):.1f} ms more); "
                "the others wait for it in the all-reduce."
            ),
            location=fp.to_location(location),
            evidence=(
                *dist.worker_evidence(rows),
                Evidence("ratio", round(ratio, 2), "x", "straggler / the others' median"),
                Evidence("largest extra phase", phase, "", "input or compute, vs the others"),
            ),
            fix=Fix(
                title=f"Make {name}'s {phase} as fast as the other workers'",
                code=(
                    f"# {name}: its {phase} is the slowest; every step waits for it.\n"
                    + (
                        "ds = ds.map(fn, num_parallel_calls=tf.data.AUTOTUNE)"
                        ".prefetch(tf.data.AUTOTUNE)"
                        if phase == "input"
                        else "# give it the others' hardware, or less work per step"
                    )
                ),
                safety=FixSafety.DISPLAY_ONLY,
            ),
            gain=(
                f"not measured: at best the step loses the straggler's extra "
                f"{slow.outside_collectives_ms - others:.1f} ms over the trace"
            ),
        )
    ]
