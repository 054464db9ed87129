"""The user's batch size where neither the window, ``fit`` nor a pipeline constant records it (a
Python generator makes its batches): the sampled batches' size, not a made-up 32 (a fresh user's
generator yielding batches of 64 got RD201's sketch with ``.batch(32)``)."""

from __future__ import annotations

from test_rules_input_batch import facts, run

from rnndoctor.facts import DataFacts, SequenceFacts, SequenceInput
from rnndoctor.rules import _measured as m


def _generator_facts(batch_sizes: list[int]):
    f = facts(step=30.0, compute=10.0, data=DataFacts(kind="python_generator", reiterable=False))
    f.fit.batch_size = None
    f.steps.batch_size = None
    record = SequenceInput(input="tokens", length_source="mask_zero", batch_sizes=batch_sizes)
    f.sequences = SequenceFacts(batches_sampled=len(batch_sizes), inputs=[record])
    return f


def test_the_sampled_batches_give_the_batch_size_of_a_generator():
    assert m.batch_size(_generator_facts([64, 64, 64, 17])) == 64  # the last, partial batch
    assert m.batch_size(_generator_facts([32, 64])) == 32  # a tie: the smallest
    assert m.batch_size(_generator_facts([])) is None  # nothing sampled: not known


def test_rd201s_generator_sketch_batches_at_the_sampled_size():
    _, findings = run(_generator_facts([64, 64, 64]), "RD201")
    (finding,) = findings
    assert ".batch(64)" in finding.fix.code and ".batch(32)" not in finding.fix.code
