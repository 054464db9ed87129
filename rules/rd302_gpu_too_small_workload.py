"""RD302 gpu-too-small-workload: the GPU idles for most of each step.

What it detects:
    On a GPU run, the device's busy time per profiled step (the self-time of every device op in
    xprof's ``framework_op_stats``, divided by the profiled steps) is under
    ``min_busy_share`` of the measured median step time, while the step is not input-bound
    (RD201's case, ``input_bound_share``), where rnndoctor's probes measured that.

Why it slows training:
    A small LSTM on a small batch launches many tiny kernels: each takes microseconds on the
    device, but the host needs about as long to launch it, and the Python and framework
    overhead between steps adds idle time. The GPU then waits for the host for most of the
    step, so a bigger batch costs almost nothing extra per step, and for the smallest models
    the CPU may even be faster (no launches, no host-device copies).

Evidence:
    ``profile.device_self_time_us``, ``profile.profiled_steps``, ``steps.median_step_time_ms``,
    ``steps.batch_size``, ``probes.input_bound_share`` (where measured; else the input-only
    bound, ``rules/_measured.py: input_share``), ``environment.gpu_count``.

Example:
    ``LSTM(16)`` trained with ``batch_size=8`` on a GPU.

Use instead:
    A larger batch (RD301's probe measures the gain), ``steps_per_execution=32`` in ``compile``
    (fewer host round trips), ``jit_compile=True`` (XLA fuses the small kernels); for a model
    this small, compare a CPU run (``CUDA_VISIBLE_DEVICES=""``).

Fix safety:
    display-only: a larger batch changes the optimisation (learning rate); compare both runs.

Options:
    ``min_busy_share`` = 0.5 (fraction of the step): the device busy share under which the rule
    reports. Source: openxla/xprof xprof/cli/tools/check_host_boundness_tool.py,
    _DUTY_CYCLE_HIGH_THRESHOLD_PERCENT = 50 (2.24): under it, the device idles for most of the
    step.

    ``input_bound_share`` = 0.2 (fraction of the step): from this measured input-bound share
    the idle time is the input pipeline's, which RD201 reports, and this rule stays silent.
    Source: RD201's warning cut-off, openxla/xprof
    xprof/convert/op_stats_to_input_pipeline_analysis.cc, kHighlyInfeedBoundThresholdInPercent
    = 20.

References:
    keras/src/backend/tensorflow/trainer.py: TensorFlowTrainer._make_function (runs
    ``steps_per_execution`` steps per call in a ``tf.while_loop``);
    xprof/cli/tools/check_host_boundness_tool.py: _DUTY_CYCLE_HIGH_THRESHOLD_PERCENT (50: a
    device busy less than half the time has no high duty cycle);
    https://www.tensorflow.org/guide/gpu_performance_analysis ("GPU is idle"...).
"""

from __future__ import annotations

from rnndoctor.facts import Facts
from rnndoctor.findings import Evidence, Finding, Fix, FixSafety, Severity
from rnndoctor.rules import NotEvaluated, Option, OptionValues, finding, rule
from rnndoctor.rules import _host_hw as hh
from rnndoctor.rules import _measured as m

# xprof's check_host_boundness_tool calls a device duty cycle above 50% high: under it, the
# device idles for most of the step.
_MIN_BUSY_SHARE = Option(
    name="min_busy_share",
    default=0.5,
    unit="fraction of the step",
    source="openxla/xprof xprof/cli/tools/check_host_boundness_tool.py: "
    "_DUTY_CYCLE_HIGH_THRESHOLD_PERCENT = 50 (2.24)",
    help="the device busy share of the step under which the rule reports",
)
# RD201's warning cut-off: above it the idle time is the input pipeline's, which RD201 reports.
_INPUT_BOUND_SHARE = Option(
    name="input_bound_share",
    default=m.WARNING_INPUT_SHARE.default,
    unit="fraction of the step",
    source=f"RD201's warning_input_share default ({m.WARNING_INPUT_SHARE.source})",
    help="from this measured input-bound share the rule leaves the step to RD201",
)


@rule(
    "RD302",
    "gpu-too-small-workload",
    "GPU: the step is dominated by launch overhead or idle time",
    needs=("environment", "profile", "steps"),
    severity=Severity.WARNING,
    options=(_MIN_BUSY_SHARE, _INPUT_BOUND_SHARE),
)
def check(facts: Facts, options: OptionValues) -> list[Finding]:
    hh.require_gpu(facts)
    profile, steps = facts.profile, facts.steps
    if profile.device_self_time_us is None or not profile.profiled_steps:
        raise NotEvaluated(
            "the GPU profile holds no device time: " + (profile.error or "no profiled steps")
        )
    if not steps.median_step_time_ms:
        raise NotEvaluated("no step time was measured")
    busy_ms = profile.device_self_time_us / 1000.0 / profile.profiled_steps
    share = min(1.0, busy_ms / steps.median_step_time_ms)
    if share >= options.min_busy_share:
        return []
    # the measured share, or the input-only bound where the compute-only probe did not run
    probes = facts.probes
    input_share, input_source = (
        (probes.input_bound_share, "probes.input_bound_share")
        if probes is not None and probes.input_bound_share is not None
        else m.input_share(facts)
    )
    if input_share is not None and input_share >= options.input_bound_share:
        return []  # the device waits for the input pipeline: RD201's finding
    evidence = [
        Evidence("median step time", steps.median_step_time_ms, "ms", "steps"),
        Evidence("device busy time per step", round(busy_ms, 3), "ms",
                 "profile.device_self_time_us / profile.profiled_steps"),
        Evidence("device busy share of the step", round(share, 3), "",
                 f"threshold {options.min_busy_share} (xprof duty-cycle cut-off)"),
        Evidence("input-bound share", input_share if input_share is not None else
                 "not measured", "", input_source),
    ]  # fmt: skip
    if steps.batch_size:
        evidence.append(Evidence("batch size", steps.batch_size, "samples", "steps.batch_size"))
    location = hh.first_location(
        facts.fit.location if facts.fit else None,
        facts.loop.location if facts.loop else None,
    )
    return [
        finding(
            message=(
                f"The GPU is busy {busy_ms:.2f} ms of each {steps.median_step_time_ms:.2f} ms "
                f"step ({share:.0%}): the workload is too small to keep it fed, and host "
                "overhead sets the step time."
            ),
            location=location,
            evidence=tuple(evidence),
            fix=Fix(
                title="Give the GPU more work per launch: a larger batch, several steps per "
                "execution, XLA; or compare a CPU run",
                code=(
                    "model.compile(..., steps_per_execution=32, jit_compile=True)\n"
                    "model.fit(..., batch_size=4 * BATCH)  # and scale the learning rate\n"
                    '# compare: CUDA_VISIBLE_DEVICES="" python train.py'
                ),
                safety=FixSafety.DISPLAY_ONLY,
            ),
            gain=(
                f"not estimated: a device busy for the whole step would make it at most "
                f"{steps.median_step_time_ms / busy_ms:.1f}x faster, an upper bound that no fix "
                "reaches; RD301's batch-size probe measures what a larger batch gives"
                if busy_ms > 0
                else "not estimated"
            ),
        )
    ]
