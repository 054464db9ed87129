"""RD202 no-prefetch: the tf.data pipeline does not end in ``prefetch``.

What it detects:
    A ``tf.data`` pipeline whose last transformation (ignoring the ops tf.data itself chains on,
    such as ``OptionsDataset``) is not a ``PrefetchDataset``.

Why it slows training:
    Without a prefetch, the pipeline produces the next batch only when the train step asks for
    it, so input and compute run one after the other instead of overlapping. tf.data's
    ``inject_prefetch`` rewrite (on by default with autotune) appends ``prefetch(AUTOTUNE)`` at
    iterator creation; then the missing prefetch costs nothing today, but the overlap silently
    goes away when autotune or the option is turned off, and the rule reports it as ``info``.
    Otherwise the severity follows the measured input-bound share (``warning`` from 5%,
    ``warning_input_share``).

Evidence:
    ``data.prefetch_last``, ``data.inject_prefetch``, ``data.nodes`` (the last op);
    ``probes.input_bound_share``, ``probes.input_only_ms`` and ``probes.compute_only_ms`` for
    the overlap estimate.

Example:
    ``ds = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(10_000).batch(64)``

Use instead:
    ``ds = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(10_000).batch(64).prefetch(
    tf.data.AUTOTUNE)``; the fix writes tensorflow by the file's own name for it, and ``-1``
    (``AUTOTUNE``'s value) where the file imports no tensorflow (``facts.run.tensorflow_names``:
    a ``keras.utils`` dataset in a script importing only keras), so it runs as pasted.

Fix safety:
    safe: the same elements in the same order; prefetch holds a few batches in memory.

Options:
    ``warning_input_share`` = 0.05 (fraction of the step): the measured input share from which
    the finding is a warning (below it: info). Source: openxla/xprof
    xprof/convert/op_stats_to_input_pipeline_analysis.cc, kModeratelyInfeedBoundThresholdInPercent
    = 5.

References:
    TensorFlow guide "Better performance with the tf.data API", Prefetching
    (https://www.tensorflow.org/guide/data_performance#prefetching);
    tensorflow/core/grappler/optimizers/data/inject_prefetch.cc; ``tf.data.Options``
    ``experimental_optimization.inject_prefetch`` ("If None, defaults to True").
"""

from __future__ import annotations

from rnndoctor.facts import Facts
from rnndoctor.findings import Evidence, Finding, Fix, FixSafety, Severity
from rnndoctor.rules import Option, OptionValues, finding, rule
from rnndoctor.rules import _measured as m

_WARNING_INPUT_SHARE = Option(
    name="warning_input_share",
    default=0.05,
    unit="fraction of the step",
    source=m.MIN_INPUT_SHARE.source,
    help="the measured input share from which the finding is a warning (below it: info)",
)


@rule(
    "RD202",
    "no-prefetch",
    "the tf.data graph does not end in prefetch",
    needs=("data",),
    severity=Severity.INFO,
    options=(_WARNING_INPUT_SHARE,),
)
def check(facts: Facts, options: OptionValues) -> list[Finding]:
    data = facts.data
    if data.kind != "tf.data" or data.prefetch_last is not False:
        return []
    last = data.nodes[-1] if data.nodes else None
    probes = facts.probes
    share, basis = m.input_share(facts)
    step = m.step_ms(facts)
    evidence = [
        Evidence("last pipeline op", last.op if last else None, "", "tf.data graph"),
        Evidence("tf.data injects prefetch(AUTOTUNE)", data.inject_prefetch, "", "dataset options"),
    ]
    if share is not None:
        evidence.append(Evidence("input share of the step", round(share * 100, 1), "%", basis))
    gain, speedup = None, None
    if data.inject_prefetch:
        severity = Severity.INFO
        gain = (
            "none expected in this run: tf.data's inject_prefetch rewrite already appends "
            "prefetch(AUTOTUNE); the explicit prefetch keeps the overlap when it is turned off"
        )
    else:
        severity = (
            Severity.WARNING
            if share is not None and share >= options.warning_input_share
            else Severity.INFO
        )
        if probes and step and probes.input_only_ms is not None and probes.compute_only_ms:
            host = probes.callback_ms or 0.0
            after = max(probes.input_only_ms, probes.compute_only_ms + host)
            if after < step:
                speedup = round(step / after, 2)
                gain = (
                    f"input overlapped with compute: a step takes about max(input-only "
                    f"{probes.input_only_ms:.2f} ms, compute {probes.compute_only_ms + host:.2f} "
                    f"ms) = {after:.2f} ms instead of {step:.2f} ms, about {speedup:.1f}x faster"
                )
        if gain is None:
            gain = "not measured: the overlap estimate needs the input-only and compute probes"
    location = (last.location if last and last.location else None) or data.location
    call = location.call_source if location else None
    autotune = m.autotune(facts, location.file if location else None)
    value = "" if autotune != m.AUTOTUNE_VALUE else m.AUTOTUNE_NOTE
    return [
        finding(
            severity=severity,
            message=(
                f"The tf.data pipeline ends in {last.op if last else 'an op'}, not in prefetch: "
                "input and compute do not overlap"
                + (
                    " unless tf.data's inject_prefetch rewrite adds one (it does in this run)."
                    if data.inject_prefetch
                    else "."
                )
            ),
            location=m.to_location(location) or m.fit_location(facts),
            evidence=tuple(evidence),
            fix=Fix(
                title="End the pipeline with prefetch(tf.data.AUTOTUNE)" + value,
                code=(
                    f"{call}.prefetch({autotune})" if call else "ds = ds.prefetch(tf.data.AUTOTUNE)"
                ),
                safety=FixSafety.SAFE,
                before=call,
            ),
            gain=gain,
            speedup=speedup,
        )
    ]
