"""RD205 no-cache: a small, finite dataset repeats its preprocessing every epoch.

What it detects:
    A finite ``tf.data`` pipeline (known cardinality) with per-element work (a ``map``, or a
    Python source) and no ``cache()``, trained for more than one epoch, whose whole content
    fits in half of the memory the probes may use (``batch_bytes`` x batches), when the measured
    input share of the step is significant (5% or more).

Why it slows training:
    Every epoch re-reads and re-computes the same elements. ``cache()`` after the deterministic
    preprocessing keeps them in memory after the first epoch, so later epochs skip that work.

Evidence:
    ``data.cardinality``, ``data.has_cache``, ``data.batch_bytes``, the ``map`` / Python nodes
    of ``data.nodes``; ``fit.epochs``; ``probes.memory_limit_mib``;
    ``probes.input_bound_share``.

Example:
    ``tf.data.Dataset.from_tensor_slices(paths).map(load_and_decode).batch(32)``, 10 epochs

Use instead:
    ``tf.data.Dataset.from_tensor_slices(paths).map(load_and_decode).cache().shuffle(1000)
    .batch(32).prefetch(tf.data.AUTOTUNE)``

Fix safety:
    safe when the cached maps are deterministic; unsafe when a map is random (augmentation):
    cached elements would repeat the first epoch's random draws, so cache before the random
    maps.

Options:
    ``min_input_share`` = 0.05 (fraction of the step): the measured input share of the step
    from which the rule reports. Source: openxla/xprof
    xprof/convert/op_stats_to_input_pipeline_analysis.cc, kModeratelyInfeedBoundThresholdInPercent
    = 5.

    ``warning_input_share`` = 0.2 (fraction of the step): from this share the finding is a
    warning (below it: info). Source: the same file, kHighlyInfeedBoundThresholdInPercent = 20.

    ``max_cache_memory_share`` = 0.5 (fraction of the probes' memory limit): the largest
    dataset the rule suggests caching, as a share of the memory the probes may use (itself 80% of
    MemAvailable). Source: rnndoctor's choice: the rest is left to the model and the pipeline's
    own buffers.

References:
    TensorFlow guide "Better performance with the tf.data API", Caching
    (https://www.tensorflow.org/guide/data_performance#caching); ``Dataset.cache``.
"""

from __future__ import annotations

from rnndoctor.facts import Facts
from rnndoctor.findings import Evidence, Finding, Fix, FixSafety, Severity
from rnndoctor.rules import Option, OptionValues, finding, rule
from rnndoctor.rules import _measured as m

# Cache only what fits in half of the memory the probes may use (itself 80% of MemAvailable):
# the rest is left to the model and the pipeline's own buffers.
_MAX_CACHE_MEMORY_SHARE = Option(
    name="max_cache_memory_share",
    default=0.5,
    unit="fraction of the probes' memory limit",
    source="rnndoctor's choice: the rest is left to the model and the pipeline's own buffers",
    help="the largest dataset the rule suggests caching, as a share of the probes' memory limit",
)


@rule(
    "RD205",
    "no-cache",
    "a small finite dataset whose per-epoch preprocessing is repeated; cache() removes it",
    needs=("data", "probes"),
    severity=Severity.INFO,
    options=(m.MIN_INPUT_SHARE, m.WARNING_INPUT_SHARE, _MAX_CACHE_MEMORY_SHARE),
)
def check(facts: Facts, options: OptionValues) -> list[Finding]:
    data = facts.data
    probes = facts.probes
    if data.kind != "tf.data" or data.has_cache:
        return []
    if not data.cardinality or data.cardinality <= 0 or not data.batch_bytes:
        return []  # infinite (-1) or unknown (-2) length: nothing finite to cache
    epochs = facts.fit.epochs if facts.fit else None
    if not epochs or epochs < 2:
        return []  # the cache pays off from the second epoch on
    work = [n for n in data.nodes if n.kind == "map" or n.python]
    if not work:
        return []
    share, basis = m.input_share(facts)
    if share is None or share < options.min_input_share:
        return []
    size_mib = data.batch_bytes * data.cardinality / 2**20
    limit = probes.memory_limit_mib
    if limit is None or size_mib > limit * options.max_cache_memory_share:
        return []
    random_maps = [
        n for n in work if any("Random" in op for op in n.attrs.get("stateful_ops") or [])
    ]
    last = work[-1]
    call = last.location.call_source if last.location else None
    return [
        finding(
            severity=Severity.WARNING if share >= options.warning_input_share else Severity.INFO,
            message=(
                f"The pipeline recomputes {len(work)} preprocessing step(s) every epoch for "
                f"{data.cardinality} batches (about {size_mib:.1f} MiB) over {epochs} epochs; "
                "cache() would keep them after the first epoch."
            ),
            location=m.to_location(last.location) or m.to_location(data.location),
            evidence=(
                Evidence("batches per epoch", data.cardinality, "", "tf.data cardinality"),
                Evidence("dataset size (batches x bytes)", round(size_mib, 2), "MiB", "sampled"),
                Evidence("memory the probes may use", limit, "MiB", probes.memory_limit_source),
                Evidence("epochs", epochs, "", "fit"),
                Evidence("input share of the step", round(share * 100, 1), "%", basis),
            ),
            fix=Fix(
                title="Cache after the deterministic preprocessing",
                code=(f"{call}.cache()" if call else "ds = ds.map(preprocess).cache()")
                + "  # then shuffle / batch / prefetch",
                safety=FixSafety.UNSAFE if random_maps else FixSafety.SAFE,
                before=call,
            ),
            gain=(
                f"epochs 2..{epochs} skip the cached work: up to the input share "
                f"{m.pct(share)} of each of their steps (at most about "
                f"{1 / max(1 - share, 1e-3):.1f}x faster steps after the first epoch)"
            ),
        )
    ]
