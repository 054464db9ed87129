"""RD205 no-cache: a small, finite dataset repeats its preprocessing every epoch.

What it detects:
    A finite ``tf.data`` pipeline (known cardinality) with per-element work (a ``map``, or a
    Python source) and no ``cache()``, trained for more than one epoch, whose whole content
    fits in half of the memory the probes may use (``batch_bytes`` x batches), when the measured
    input share of the step is significant (5% or more). Also a pipeline that does cache, but
    before deterministic preprocessing (``from_tensor_slices(x).cache().map(decode)``): the
    cache holds the map's input, so the map still runs every epoch.

Why it slows training:
    Every epoch re-reads and re-computes the same elements. ``cache()`` after the deterministic
    preprocessing keeps them in memory after the first epoch, so later epochs skip that work.

Evidence:
    ``data.cardinality``, ``data.has_cache``, ``data.batch_bytes``, the ``map`` / Python nodes
    of ``data.nodes`` (with their ``stateful_ops`` and line), the shuffle nodes; ``fit.epochs``;
    ``probes.memory_limit_mib``; ``probes.input_bound_share``. Located at the line of the node
    after which the cache goes.

Example:
    ``tf.data.Dataset.from_tensor_slices(paths).map(load_and_decode).batch(32)``, 10 epochs

Use instead:
    ``tf.data.Dataset.from_tensor_slices(paths).map(load_and_decode).cache().shuffle(1000)
    .batch(32).prefetch(tf.data.AUTOTUNE)``

Fix safety:
    safe: ``cache()`` goes after the last deterministic preprocessing step that comes before
    the first random map (one whose function holds a ``Random*`` stateful op) or shuffle, so
    every epoch still draws its own augmentation and order. The fix is spliced into the user's
    call (``ds.map(decode)`` -> ``ds.map(decode).cache()``), or, for a dataset a Keras util
    builds in one call (``timeseries_dataset_from_array``), a new line after it on the name the
    user assigned (``dataset_train = dataset_train.cache()``); unsafe when that util shuffles
    inside (its order would freeze). display-only when every preprocessing step comes after a
    random map or a shuffle: a cache there would replay the first epoch's draws, so the fix
    says it cannot be cached as built. A cache placed before the deterministic preprocessing is
    moved after it where both are in one method chain (``x.cache().map(f)`` ->
    ``x.map(f).cache()``, safe: the same elements, cached later); a display-only note naming
    the line of the ``cache()`` to drop where it cannot be moved within the call as recorded,
    or caches to files (files an earlier run left hold the elements from before the map).
    Random ops are tf.random's and tf.random.Generator's stateful ops (``Random*``,
    ``Stateful*``, ``Rng*``); a cached step with Python code or other stateful ops (a
    ``py_function`` drawing from numpy, a Keras random layer's seed variable) makes the fix
    unsafe, its title naming the step to check: a cache replays its first epoch's output.

Options:
    ``min_input_share`` = 0.05 (fraction of the step): the measured input share of the step
    from which the rule reports. Source: openxla/xprof
    xprof/convert/op_stats_to_input_pipeline_analysis.cc, kModeratelyInfeedBoundThresholdInPercent
    = 5.

    ``warning_input_share`` = 0.2 (fraction of the step): from this share the finding is a
    warning (below it: info); the whole 90% interval of the measured share must clear it
    (``rules/_measured.py``: ``share_interval``), so a median alone gives info. Source: the
    same file, kHighlyInfeedBoundThresholdInPercent = 20.

    ``max_cache_memory_share`` = 0.5 (fraction of the probes' memory limit): the largest
    dataset the rule suggests caching, as a share of the memory the probes may use (itself 80% of
    MemAvailable). Source: rnndoctor's choice: the rest is left to the model and the pipeline's
    own buffers.

References:
    TensorFlow guide "Better performance with the tf.data API", Caching
    (https://www.tensorflow.org/guide/data_performance#caching); ``Dataset.cache``.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from rnndoctor import rewrite as rw
from rnndoctor.facts import DataFacts, DataNode, Facts, SourceLocation
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


_UTILS = (
    "timeseries_dataset_from_array",
    "text_dataset_from_directory",
    "image_dataset_from_directory",
    "audio_dataset_from_directory",
)


@dataclass(frozen=True)
class _Plan:
    """Where ``cache()`` goes: after ``node`` (None: nowhere without freezing randomness, and
    ``why`` says so); ``random`` names the random or order-changing ops of the pipeline."""

    node: DataNode | None
    location: SourceLocation | None
    random: tuple[str, ...] = ()
    why: str = ""
    frozen: str = ""  # what a cache after `node` would freeze anyway (a Keras util's shuffle)
    unsure: tuple[str, ...] = ()  # cached steps whose ops may differ from epoch to epoch


# Stateful ops that draw random numbers: tf.random's (RandomUniform, RandomStandardNormal...),
# tf.random.Generator's (StatefulUniform, StatefulStandardNormalV2, RngReadAndSkip...).
_RANDOM_OPS = ("Random", "Stateful", "Rng")


def _is_random(op: str) -> bool:
    """Whether the stateful op ``op`` draws random numbers (:data:`_RANDOM_OPS`, as a prefix);
    not ``StatefulPartitionedCall``, a call of another function, whose own ops are listed."""
    return op.startswith(_RANDOM_OPS) and "PartitionedCall" not in op


def _randomness(node: DataNode) -> str | None:
    """What makes ``node`` differ from epoch to epoch: a map drawing random numbers, a shuffle."""
    stateful = node.attrs.get("stateful_ops") or []
    random_ops = [op for op in stateful if _is_random(op)]
    if node.kind == "map" and random_ops:
        return f"{node.op} ({', '.join(random_ops[:3])})"
    if node.kind == "shuffle":
        return node.op
    return None


def _unsure(node: DataNode) -> str | None:
    """A step whose output may still differ between epochs although it draws no random numbers
    rnndoctor can name: Python code (``py_function``, a generator: numpy's randomness is
    invisible to the graph), or other stateful ops (a variable read and updated: Keras 3's
    random layers keep their seed in one). A cache after it replays its first epoch's output,
    so the fix is unsafe and says which to check."""
    stateful = node.attrs.get("stateful_ops") or []
    if (node.python or (node.kind == "map" and stateful)) and _randomness(node) is None:
        return f"{node.op} ({', '.join(stateful[:3]) or 'Python'})"
    return None


def _cache_plan(data: DataFacts, work: list[DataNode]) -> _Plan:
    """The last deterministic preprocessing before the first random map or shuffle: caching
    after it keeps every epoch's random draws and order. A Keras util builds its whole pipeline
    in one call, so its cache can only go after that call."""
    random = tuple(r for r in (_randomness(n) for n in data.nodes) if r)
    first_random = next((i for i, n in enumerate(data.nodes) if _randomness(n)), len(data.nodes))
    before = [n for n in work if data.nodes.index(n) < first_random]
    node = _located(data, before[-1], first_random) if before else None
    cached = data.nodes[: data.nodes.index(node) + 1] if node is not None else []
    unsure = tuple(u for u in (_unsure(n) for n in cached) if u)
    if node is not None and node.attrs.get("built_by") in _UTILS:
        inside = [
            _randomness(n) for n in data.nodes if n.location == node.location and _randomness(n)
        ]
        frozen = f"the shuffle inside {node.attrs['built_by']}" if inside else ""
        return _Plan(node, node.location, random, frozen=frozen, unsure=unsure)
    if node is None:
        first = data.nodes[first_random] if first_random < len(data.nodes) else None
        why = (
            f"every preprocessing step runs after {_randomness(first)}, and a cache() after it "
            "would replay the first epoch's random draws (or order) in every epoch"
            if first is not None
            else "no deterministic preprocessing step was found"
        )
        return _Plan(None, first.location if first else None, random, why=why)
    return _Plan(node, node.location, random, unsure=unsure)


def _check_note(plan: _Plan) -> str:
    """The title's words where a cached step may differ between epochs (:func:`_unsure`)."""
    if not plan.unsure:
        return ""
    return (
        f"; unsafe: check that {', '.join(plan.unsure)} gives the same output every epoch (a "
        "cache replays the first epoch's)"
    )


def _located(data: DataFacts, node: DataNode, stop: int) -> DataNode:
    """``node`` if its line was recorded, else the next node before index ``stop`` whose line
    was (a Keras util's internal map takes the line of the util's call)."""
    if node.location is not None:
        return node
    later = data.nodes[data.nodes.index(node) + 1 : stop]
    return next((n for n in later if n.location is not None), node)


def _fix(plan: _Plan) -> Fix:
    """``cache()`` spliced after the cached call, in the user's own pipeline: the call itself
    (``ds.map(decode)`` -> ``ds.map(decode).cache()``), or, for a dataset a Keras util built, a
    new line after its assignment (``dataset_train = dataset_train.cache()``)."""
    node, loc = plan.node, plan.location
    if node is None:
        return Fix(
            title="Not cacheable as built: cache the deterministic work before the random map",
            code=(
                "ds = ds.map(deterministic_part).cache()  # then the random map, shuffle, batch\n"
                f"# as built, {plan.why}"
            ),
            safety=FixSafety.DISPLAY_ONLY,
        )
    call = loc.call_source if loc is not None else None
    if node.attrs.get("built_by") in _UTILS:
        name = _assigned(loc.code if loc else None)
        code = f"{name} = {name}.cache()" if name else "ds = ds.cache()"
        note = (
            f"  # but this freezes {plan.frozen}: pass shuffle=False and shuffle after the cache"
            if plan.frozen
            else ""
        )
        return Fix(
            title=f"Cache the dataset {node.attrs['built_by']} builds: add after line "
            f"{(loc.end_line or loc.line) if loc else '?'}{_check_note(plan)}",
            code=code + note,
            safety=FixSafety.UNSAFE if plan.frozen or plan.unsure else FixSafety.SAFE,
        )
    if call:
        return Fix(
            title="Cache after the deterministic preprocessing (then shuffle / batch / prefetch)"
            + _check_note(plan),
            code=f"{call}.cache()",
            safety=FixSafety.UNSAFE if plan.unsure else FixSafety.SAFE,
            before=call,
        )
    return Fix(
        title="Cache after the deterministic preprocessing",
        code=f"ds = ds.cache()  # after the {node.op} (its line was not recorded)",
        safety=FixSafety.DISPLAY_ONLY,
    )


def _cached_early(data: DataFacts, plan: _Plan) -> DataNode | None:
    """The pipeline's last ``cache()`` where deterministic preprocessing runs after it, before
    the place :func:`_cache_plan` picks (a new user's ``from_tensor_slices(x).cache()
    .map(expensive)``: the cache held the map's input, so the map ran every epoch and RD205
    passed); None where there is no cache, or none before that place."""
    caches = [n for n in data.nodes if n.kind == "cache"]
    if not caches or plan.node is None:
        return None
    cache = caches[-1]
    return cache if data.nodes.index(plan.node) > data.nodes.index(cache) else None


def _message(
    data: DataFacts,
    work: list[DataNode],
    plan: _Plan,
    cached: DataNode | None,
    size_mib: float,
    epochs: int,
) -> str:
    """The finding's message: the work recomputed every epoch, and what a cache does to it."""
    where = f"{data.cardinality} batches (about {size_mib:.1f} MiB) over {epochs} epochs"
    if cached is not None:
        index = data.nodes.index(cached)
        late = [n for n in work if data.nodes.index(n) > index]
        line = f" at line {cached.location.line}" if cached.location else ""
        ops = ", ".join(n.op for n in late[:3])
        return (
            f"The pipeline caches{line} before {len(late)} preprocessing step(s) ({ops}), which "
            f"still run every epoch for {where}; the cache holds their input, not their output. "
            "cache() after them would keep their output after the first epoch."
        )
    return (
        f"The pipeline recomputes {len(work)} preprocessing step(s) every epoch for {where}; "
        + (
            "cache() would keep them after the first epoch."
            if plan.node is not None
            else f"it cannot be cached as built: {plan.why}."
        )
    )


def _move_fix(plan: _Plan, cached: DataNode) -> Fix:
    """The pipeline's ``cache()`` moved after the deterministic preprocessing: within the one
    chain that holds both (``x.cache().map(f)`` -> ``x.map(f).cache()``,
    :func:`rnndoctor.rewrite.move_chain_call`), unsafe where a step it now caches may differ
    between epochs (:func:`_check_note`); else a display-only note naming the line of the
    ``cache()`` to drop. A cache to files (``cache("/tmp/c")``) is display-only too: files an
    earlier run left there hold the elements from before the map, and tf.data would read
    them back."""
    loc = plan.location
    call = loc.call_source if loc is not None else None
    title = "Move cache() after the deterministic preprocessing (then shuffle / batch / prefetch)"
    name = rw.argument(cached.location.call_source if cached.location else None, 0, "filename")
    on_file = not (name is None or (rw.is_literal(name) and ast.literal_eval(name) == ""))
    moved = None if on_file else rw.move_chain_call(call, "cache")
    if moved is not None:
        safety = FixSafety.UNSAFE if plan.unsure else FixSafety.SAFE
        return Fix(title=title + _check_note(plan), code=moved, safety=safety, before=call)
    line = cached.location.line if cached.location else None
    drop = f"drop the cache() at line {line}" if line else "drop the earlier cache()"
    why = (
        "it caches to files, which hold the elements from before the map: delete them first"
        if on_file
        else "the cache() could not be moved within the call as recorded"
    )
    code = f"{call}.cache()  # and {drop}" if call else f"ds = ds.cache()  # and {drop}"
    return Fix(title=f"{title}; display-only: {why}", code=code, safety=FixSafety.DISPLAY_ONLY)


def _assigned(code: str | None) -> str | None:
    """The name a line assigns (``dataset_train = keras.utils...(`` -> ``dataset_train``)."""
    match = re.match(r"\s*([A-Za-z_]\w*)\s*=(?!=)", code or "")
    return match.group(1) if match else None


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
    if data.kind != "tf.data":
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
    plan = _cache_plan(data, work)
    cached = _cached_early(data, plan)
    if data.has_cache and cached is None:
        return []  # cached after its deterministic work (or where nothing better exists)
    interval = m.share_interval(facts)  # a warning needs the whole interval past its cut-off
    low = interval.low if interval is not None else share
    few = interval.no_interval if interval is not None else None  # too few pairs: no bound
    return [
        finding(
            severity=Severity.WARNING if low >= options.warning_input_share else Severity.INFO,
            message=_message(data, work, plan, cached, size_mib, epochs),
            location=m.to_location(plan.location) or m.to_location(data.location),
            evidence=(
                Evidence("batches per epoch", data.cardinality, "", "tf.data cardinality"),
                Evidence("dataset size (batches x bytes)", round(size_mib, 2), "MiB", "sampled"),
                Evidence("memory the probes may use", limit, "MiB", probes.memory_limit_source),
                Evidence("epochs", epochs, "", "fit"),
                Evidence("input share of the step", round(share * 100, 1), "%", basis),
                Evidence(
                    "input share, 90% interval low",
                    round(low * 100, 1) if few is None else few,
                    "%" if few is None else "",
                    "paired real vs compute-only step (rules/_measured.py)",
                ),
                Evidence(
                    "random or order-changing ops",
                    ", ".join(plan.random) or "none",
                    "",
                    "tf.data graph (stateful ops of each map; shuffle)",
                ),
            ),
            fix=_fix(plan) if cached is None else _move_fix(plan, cached),
            gain=(
                f"{m.later_epochs(epochs)} {'skips' if epochs <= 2 else 'skip'} the cached work: "
                "up to the input share "
                f"{m.pct(share)} of each of their steps (at most about "
                f"{1 / max(1 - share, 1e-3):.1f}x faster steps after the first epoch)"
            ),
        )
    ]
