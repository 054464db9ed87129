"""Tiny sequence scenarios with known lengths, for the sequence rules (RD110, RD111, RD114, RD5xx).

Shared by the integration tests (real Keras models, real masks, measured by
``rnndoctor.capture.sequences.measure_batches``) and by ``data/make_sequence_fixtures.py``, which
saves their facts for the TensorFlow-free unit tests. Padding lines carry a ``# site:<name>``
marker so that tests can check the recorded file:line.

Every builder returns ``(model, x, y)``; pad ``keras.utils.pad_sequences`` after
``sequences.install`` (or ``_hook_pad_sequences``) to have the padding line recorded.
"""

from __future__ import annotations

T = 12  # padded length of the fixture scenarios
VOCAB = 20
ROWS = 64
BATCH = 16


def lengths(low: int = 8, high: int = T, rows: int = ROWS, seed: int = 0) -> list[int]:
    """Known lengths in [low, high], from a fixed seed."""
    import numpy as np

    return [int(n) for n in np.random.default_rng(seed).integers(low, high + 1, size=rows)]


def token_sequences(ns: list[int], seed: int = 1) -> list[list[int]]:
    """Sequences of ids in 1..VOCAB-1 (never 0, the padding id) with the given lengths."""
    import numpy as np

    rng = np.random.default_rng(seed)
    return [[int(v) for v in rng.integers(1, VOCAB, size=n)] for n in ns]


def masked_lstm(units: int = 4, **lstm_kwargs):
    import keras
    from keras import layers

    model = keras.Sequential(
        [
            keras.Input((T,), dtype="int32"),
            layers.Embedding(VOCAB, 3, mask_zero=True),
            layers.LSTM(units, **lstm_kwargs),  # site:masked-lstm
            layers.Dense(1),
        ],
        name="seq",
    )
    model.compile(optimizer="sgd", loss="mse")
    return model


def _targets(rows: int):
    import numpy as np

    return np.zeros((rows, 1), dtype="float32")


def left_padded(ns: list[int] | None = None):
    """pad_sequences' default padding='pre' and mask_zero=True: RD110."""
    import keras

    seqs = token_sequences(ns or lengths())
    x = keras.utils.pad_sequences(seqs, maxlen=T)  # site:pad-pre
    return masked_lstm(), x, _targets(len(x))


def left_padded_per_batch(ns: list[int] | None = None, maxlen: int | None = T):
    """pad_sequences' default padding='pre' in a PyDataset's __getitem__, one batch at a time
    (a new user's trial: RD110 said "no pad_sequences call was seen"): the model, the
    PyDataset and its batches as fit would get them. ``maxlen=None``: each batch padded to
    its own longest sequence (a width per batch; the model takes any length)."""
    import keras
    from keras import layers

    seqs = token_sequences(ns or lengths())

    class Batches(keras.utils.PyDataset):
        def __len__(self):
            return -(-len(seqs) // BATCH)

        def __getitem__(self, i):
            part = seqs[i * BATCH : (i + 1) * BATCH]
            x = keras.utils.pad_sequences(part, maxlen=maxlen)  # site:pad-batch
            return x, _targets(len(x))

    if maxlen is not None:
        return masked_lstm(), Batches()
    model = keras.Sequential(
        [keras.Input((None,), dtype="int32"), layers.Embedding(VOCAB, 3, mask_zero=True),
         layers.LSTM(4), layers.Dense(1)],
        name="seq",
    )  # fmt: skip
    return model, Batches()


def right_padded(ns: list[int] | None = None):
    """padding='post', no empty sequence: neither RD110 nor RD111."""
    import keras

    seqs = token_sequences(ns or lengths())
    x = keras.utils.pad_sequences(seqs, maxlen=T, padding="post")  # site:pad-post
    return masked_lstm(), x, _targets(len(x))


def fully_masked(empty_every: int = 8):
    """Right-padded, with every ``empty_every``-th sequence empty: RD111 only."""
    import keras

    ns = [0 if i % empty_every == 0 else n for i, n in enumerate(lengths())]
    seqs = token_sequences(ns)
    x = keras.utils.pad_sequences(seqs, maxlen=T, padding="post")  # site:pad-empty
    return masked_lstm(), x, _targets(len(x))


def with_holes():
    """Right-padded ids where id 0 also appears inside sequences: a mask with holes (RD110)."""
    import keras

    seqs = token_sequences(lengths())
    for i, seq in enumerate(seqs):
        if i % 4 == 0:
            seq[1] = 0
    x = keras.utils.pad_sequences(seqs, maxlen=T, padding="post")  # site:pad-holes
    return masked_lstm(), x, _targets(len(x))


def ragged():
    """A ragged tf.data pipeline into an LSTM: Keras 3 fails in RNN.call (RD114)."""
    import keras
    import numpy as np
    import tensorflow as tf

    seqs = [[[float(v)] for v in s] for s in token_sequences(lengths())]
    model = keras.Sequential(
        [
            keras.Input((None, 1)),
            keras.layers.LSTM(4),  # site:ragged-lstm
            keras.layers.Dense(1),
        ],
        name="seq",
    )
    model.compile(optimizer="sgd", loss="mse")
    data = tf.data.Dataset.from_tensor_slices(
        (tf.ragged.constant(seqs, ragged_rank=1), np.zeros((len(seqs), 1), "float32"))
    ).batch(BATCH)
    return model, data, None


def batches(x, y, batch: int = BATCH) -> list[tuple]:
    """Numpy batches as Keras' array adapter yields them (in order); ``x`` may be a list of
    arrays (a multi-input model)."""
    rows = len(x[0]) if isinstance(x, (list, tuple)) else len(x)

    def cut(a, i):
        return [v[i : i + batch] for v in a] if isinstance(a, (list, tuple)) else a[i : i + batch]

    return [(cut(x, i), cut(y, i)) for i in range(0, rows, batch)]


FIXTURES = {
    # fixture name: (builder, expected RD1xx findings as (rule_id, layer path))
    "RD110-offending": (left_padded, [("RD110", "seq/lstm")]),
    "RD110-compliant": (right_padded, []),
    "RD111-offending": (fully_masked, [("RD111", "seq/lstm")]),
    "RD111-compliant": (right_padded, []),
    "RD114-offending": (ragged, [("RD114", "seq/lstm")]),
    "RD114-compliant": (right_padded, []),
}
