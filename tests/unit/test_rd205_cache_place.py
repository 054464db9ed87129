"""RD205 where the pipeline caches before its preprocessing (a new user's trial:
``from_tensor_slices(x).cache().map(expensive)`` passed RD205, while the map ran every epoch).
Pure: rules on facts."""

from __future__ import annotations

import ast

from test_rules_input_batch import check_finding, facts, node, pipeline, run

from rnndoctor import rewrite as rw
from rnndoctor.facts import DataFacts

CHAIN = "tf.data.Dataset.from_tensor_slices(x).cache().map(decode, num_parallel_calls=4)"


def _cached_pipeline(same_chain: bool = True) -> DataFacts:
    """slices -> cache -> map(decode) -> batch, the cache and the map on one chain (line 10)
    or two statements (lines 10 and 11)."""
    cache_call = "tf.data.Dataset.from_tensor_slices(x).cache()"
    map_call = CHAIN if same_chain else "ds.map(decode, num_parallel_calls=4)"
    nodes = [
        node("TensorSliceDataset/_1", "TensorSliceDataset", "source", 10,
             "tf.data.Dataset.from_tensor_slices(x)", source_kind="tensor_slices"),
        node("CacheDatasetV2/_2", "CacheDatasetV2", "cache", 10, cache_call),
        node("ParallelMapDatasetV2/_3", "ParallelMapDatasetV2", "map", 10 if same_chain else 11,
             map_call, attrs={"stateful_ops": []}),
    ]  # fmt: skip
    nodes.append(node("BatchDatasetV2/_5", "BatchDatasetV2", "batch", 12, "ds.batch(32)"))
    return pipeline(*nodes, source_kinds=["tensor_slices"], batch_kind="batch",
                    prefetch_last=False, cardinality=100, inject_prefetch=True,
                    map_parallelization=True, batch_bytes=4096, has_cache=True)  # fmt: skip


def test_a_cache_before_the_map_is_moved_after_it_in_the_same_chain():
    f = facts(step=10.0, compute=7.0, data=_cached_pipeline(), epochs=5)
    _, (finding,) = run(f, "RD205")
    check_finding(finding, "RD205")
    assert finding.fix.before == CHAIN and finding.fix.safety == "safe"
    assert finding.fix.code == (
        "tf.data.Dataset.from_tensor_slices(x).map(decode, num_parallel_calls=4).cache()"
    )
    assert ast.parse(finding.fix.code)
    assert "caches at line 10 before 1 preprocessing step(s) (ParallelMapDatasetV2)" in (
        finding.message
    )
    assert "still run every epoch" in finding.message and finding.location.line == 10


def test_a_cache_in_another_statement_gets_a_note_naming_its_line():
    f = facts(step=10.0, compute=7.0, data=_cached_pipeline(same_chain=False), epochs=5)
    _, (finding,) = run(f, "RD205")
    assert finding.fix.safety == "display-only" and finding.fix.before is None
    assert finding.fix.code == (
        "ds.map(decode, num_parallel_calls=4).cache()  # and drop the cache() at line 10"
    )
    assert finding.location.line == 11


def test_a_cache_after_the_deterministic_work_or_before_only_random_work_passes():
    cached_after = _cached_pipeline()
    cache, decode = cached_after.nodes[1], cached_after.nodes[2]
    cached_after.nodes[1:3] = [decode, cache]  # slices -> map(decode) -> cache -> batch
    assert run(facts(step=10.0, compute=7.0, data=cached_after, epochs=5), "RD205")[1] == []
    random_after = _cached_pipeline()
    random_after.nodes[2].attrs["stateful_ops"] = ["RandomUniform"]  # an augmentation: per epoch
    assert run(facts(step=10.0, compute=7.0, data=random_after, epochs=5), "RD205")[1] == []
    one_epoch = _cached_pipeline()
    assert run(facts(step=10.0, compute=7.0, data=one_epoch, epochs=1), "RD205")[1] == []


def test_moving_a_chain_call():
    assert rw.move_chain_call("ds.cache().map(f)", "cache") == "ds.map(f).cache()"
    assert rw.move_chain_call('ds.cache("c").map(f)', "cache") == 'ds.map(f).cache("c")'
    assert rw.move_chain_call("ds.map(f).cache()", "cache") is None  # already last
    assert rw.move_chain_call("ds.cache().map(f).cache()", "cache") is None  # it ends cached
    assert rw.move_chain_call("ds.cache().map(f).cache().map(g)", "cache") is None  # which?
    assert rw.move_chain_call("ds.map(f)", "cache") is None


def test_a_cached_step_that_may_differ_between_epochs_makes_the_move_unsafe():
    """A review: ``x.cache().map(augment)`` with a tf.random.Generator's ops or a py_function
    drawing from numpy was moved as safe, freezing the augmentation."""
    generator = _cached_pipeline()
    generator.nodes[2].attrs["stateful_ops"] = ["StatefulUniform", "RngReadAndSkip"]  # random
    assert run(facts(step=10.0, compute=7.0, data=generator, epochs=5), "RD205")[1] == []
    python = _cached_pipeline()
    python.nodes[2].attrs["stateful_ops"] = ["EagerPyFunc"]
    _, (finding,) = run(facts(step=10.0, compute=7.0, data=python, epochs=5), "RD205")
    assert finding.fix.safety == "unsafe" and finding.fix.before == CHAIN
    assert "check that ParallelMapDatasetV2 (EagerPyFunc) gives the same output" in (
        finding.fix.title
    )


def test_a_cache_to_files_is_not_moved_in_place():
    data = _cached_pipeline()
    file_cache = 'tf.data.Dataset.from_tensor_slices(x).cache("/tmp/c")'
    data.nodes[1].location.call_source = file_cache
    data.nodes[2].location.call_source = CHAIN.replace(".cache()", '.cache("/tmp/c")')
    _, (finding,) = run(facts(step=10.0, compute=7.0, data=data, epochs=5), "RD205")
    assert finding.fix.safety == "display-only" and "caches to files" in finding.fix.title


def test_moving_a_chain_call_keeps_parentheses_and_comments():
    assert rw.move_chain_call("(a or b).cache().map(f)", "cache") == "(a or b).map(f).cache()"
    moved = rw.move_chain_call("(x  # e.g. raw\n .cache()\n .map(f))", "cache")
    assert moved is None or ast.parse(moved) and "# e.g. raw" in moved


def test_a_call_of_a_stateful_function_is_not_random_and_an_empty_cache_name_is_memory():
    """A review: StatefulPartitionedCall (a map calling a tf.function with a lookup table)
    matched "Stateful" and made the map the first random step; cache("") caches in memory."""
    from rnndoctor.rules.rd205_no_cache import _is_random

    assert not _is_random("StatefulPartitionedCall") and _is_random("StatefulUniform")
    assert _is_random("RandomStandardNormal") and _is_random("RngReadAndSkip")
    data = _cached_pipeline()
    data.nodes[2].attrs["stateful_ops"] = ["StatefulPartitionedCall"]
    _, (finding,) = run(facts(step=10.0, compute=7.0, data=data, epochs=5), "RD205")
    assert finding.fix.before == CHAIN and finding.fix.safety == "unsafe"  # moved, to check
    memory = _cached_pipeline()
    memory.nodes[2].location.call_source = CHAIN.replace(".cache()", '.cache("")')
    _, (moved,) = run(facts(step=10.0, compute=7.0, data=memory, epochs=5), "RD205")
    assert moved.fix.safety == "safe" and moved.fix.code.endswith('.cache("")')


def test_a_python_source_before_the_cache_makes_the_cache_unsafe():
    data = _cached_pipeline()
    data.nodes[0].python = True  # from_generator: numpy draws are invisible to the graph
    _, (finding,) = run(facts(step=10.0, compute=7.0, data=data, epochs=5), "RD205")
    assert finding.fix.safety == "unsafe" and "TensorSliceDataset (Python)" in finding.fix.title
