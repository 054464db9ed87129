"""The model tree and networkx graph facts on tiny real models."""

from __future__ import annotations

import pytest

keras = pytest.importorskip("keras")

from rnndoctor.capture.model import collect_model  # noqa: E402


def test_functional_graph_records_which_rnn_receives_the_embedding_mask():
    keras.utils.clear_session()
    layers = keras.layers
    inputs = keras.Input((7,), dtype="int32")
    x = layers.Embedding(20, 4, mask_zero=True)(inputs)
    x = layers.Bidirectional(layers.LSTM(3, return_sequences=True))(x)
    x = layers.TimeDistributed(layers.Dense(2))(x)
    x = layers.GRU(2)(x)
    model = keras.Model(inputs, x, name="m")
    facts = collect_model(model, probe=False)
    assert facts.graph_known and facts.model_type == "functional"
    rnn = {r.path: r for r in facts.rnn_layers}
    assert set(rnn) == {"m/bidirectional/forward_lstm", "m/bidirectional/backward_lstm", "m/gru"}
    forward = rnn["m/bidirectional/forward_lstm"]
    assert forward.wrappers == ["Bidirectional"] and forward.direction == "forward"
    assert forward.receives_mask is True and forward.fed_by == ["m/embedding"]
    assert rnn["m/gru"].fed_by == ["m/time_distributed"]
    assert "m/time_distributed/dense" in {layer.path for layer in facts.layers}
    kinds = {(e.src, e.dst): e.kind for e in facts.graph_edges}
    assert kinds[("m/bidirectional", "m/bidirectional/forward_lstm")] == "contains"
    assert kinds[("m/embedding", "m/bidirectional")] == "feeds"
    assert "mask" in {
        kinds[(src, "m/bidirectional")] for src, dst in kinds if dst == "m/bidirectional"
    }


def test_nested_and_subclassed_models_are_walked_but_their_data_flow_is_unknown():
    keras.utils.clear_session()
    inner = keras.Sequential([keras.Input((5, 3)), keras.layers.LSTM(2)], name="inner")

    class Outer(keras.Model):
        def __init__(self):
            super().__init__(name="outer")
            self.inner = inner
            self.head = keras.layers.Dense(1)

        def call(self, x):
            return self.head(self.inner(x))

    model = Outer()
    model(keras.ops.zeros((1, 5, 3)))
    facts = collect_model(model, probe=False)
    assert facts.model_type == "subclassed" and not facts.graph_known
    (rnn,) = facts.rnn_layers
    assert rnn.path == "outer/inner/lstm"
    assert rnn.receives_mask is None
