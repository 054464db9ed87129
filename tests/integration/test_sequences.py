"""Sequence sampling on tiny real models: masks measured at each RNN, the padding line, and the
sequence rules on the facts (real TF/Keras, in process)."""

from __future__ import annotations

import itertools
import time
from pathlib import Path

import pytest

keras = pytest.importorskip("keras")
tf = pytest.importorskip("tensorflow")

import numpy as np  # noqa: E402
import seq_scenarios as ss  # noqa: E402

import rnndoctor  # noqa: E402
from rnndoctor.capture import sequences, window  # noqa: E402
from rnndoctor.capture.model import collect_model  # noqa: E402
from rnndoctor.capture.session import CaptureSession  # noqa: E402
from rnndoctor.capture.step_window import WindowOptions  # noqa: E402
from rnndoctor.engine import evaluate  # noqa: E402
from rnndoctor.facts import Facts, RunInfo  # noqa: E402
from rnndoctor.findings import Severity  # noqa: E402
from scenarios import line_of  # noqa: E402

rnndoctor.record_construction_sites()
sequences.install(None)  # pad_sequences call sites (no capture: nothing is saved)
SCENARIOS_FILE = Path(ss.__file__)
LAYERS = keras.layers


def _measure(model, x, y, probe: bool = True):
    """Facts with the model (probed) and the sequences measured on fit-ordered batches."""
    facts = Facts(run=RunInfo(script="test", argv=[], cwd="."))
    facts.model = collect_model(model, probe=probe)
    facts.sequences = sequences.measure_batches(
        model, ss.batches(x, y), model_facts=facts.model, calls=sequences.pad_calls()
    )
    return facts


def _by_rule(facts, rule_id):
    return [f for f in evaluate(facts).findings if f.rule_id == rule_id]


def _build(builder):
    keras.utils.clear_session()
    model, x, y = builder()
    model(x[:2])  # build
    return model, x, y


def test_left_padded_masks_are_measured_exactly_and_give_rd110_at_the_padding_line():
    ns = ss.lengths()
    model, x, y = _build(ss.left_padded)
    facts = _measure(model, x, y)
    (record,) = facts.sequences.inputs
    assert record.rnn_layers == ["seq/lstm"] and record.length_source == "mask_zero"
    assert record.lengths == ns  # fit order, exact
    assert record.padded_lengths == [ss.T] * 4 and record.batch_sizes == [ss.BATCH] * 4
    assert record.padded_fraction == pytest.approx(1 - sum(ns) / (ss.T * len(ns)), abs=1e-6)
    assert record.left_padded_rows == sum(n < ss.T for n in ns) and record.holed_rows == 0
    assert record.pad_side == "left" and record.fully_masked_rows == 0
    assert record.padding_function == "pad_sequences" and record.padding_argument == "pre"
    assert record.padding_location.file == str(SCENARIOS_FILE)
    assert record.padding_location.line == line_of("site:pad-pre", SCENARIOS_FILE)
    (rd110,) = _by_rule(facts, "RD110")
    assert rd110.severity is Severity.ERROR and rd110.layer == "seq/lstm"
    assert rd110.location.line == line_of("site:pad-pre", SCENARIOS_FILE)
    assert "padding='post'" in rd110.fix.code and "pad_sequences(seqs, maxlen=T" in rd110.fix.code
    assert _by_rule(facts, "RD111") == []


@pytest.mark.parametrize("maxlen", [ss.T, None], ids=["maxlen", "own-longest"])
def test_padding_in_a_pydatasets_getitem_is_located_at_its_pad_sequences_line(maxlen):
    keras.utils.clear_session()
    # each batch's longest sequence its own (6, 8, 10, ...): without maxlen a width per batch
    ns = [n for i in range(ss.ROWS // ss.BATCH) for n in [6 + 2 * i] + [3] * (ss.BATCH - 1)]
    model, batches = ss.left_padded_per_batch(ns, maxlen=maxlen)
    fed = [batches[i] for i in range(len(batches))]  # each pads its own batch, then is dropped
    model(fed[0][0][:2])
    facts = Facts(run=RunInfo(script="test", argv=[], cwd="."))
    facts.model = collect_model(model, probe=False)
    facts.sequences = sequences.measure_batches(
        model, fed, model_facts=facts.model, calls=sequences.pad_calls()
    )
    (record,) = facts.sequences.inputs
    assert record.pad_side == "left" and record.padding_function == "pad_sequences"
    assert record.padding_location.line == line_of("site:pad-batch", SCENARIOS_FILE)
    (rd110,) = _by_rule(facts, "RD110")
    assert rd110.location.line == line_of("site:pad-batch", SCENARIOS_FILE)
    assert "padding='post'" in rd110.fix.code and "no pad_sequences call" not in rd110.fix.code


def test_right_padded_input_without_empty_rows_gives_neither_rd110_nor_rd111():
    model, x, y = _build(ss.right_padded)
    facts = _measure(model, x, y)
    (record,) = facts.sequences.inputs
    assert record.pad_side == "right" and record.left_padded_rows == record.holed_rows == 0
    assert record.padding_argument == "post"
    assert record.padding_location.line == line_of("site:pad-post", SCENARIOS_FILE)
    assert _by_rule(facts, "RD110") == [] and _by_rule(facts, "RD111") == []


def test_fully_masked_rows_give_rd111_with_the_exact_count():
    model, x, y = _build(ss.fully_masked)
    facts = _measure(model, x, y)
    (record,) = facts.sequences.inputs
    assert record.fully_masked_rows == ss.ROWS // 8 and record.pad_side == "right"
    (rd111,) = _by_rule(facts, "RD111")
    assert rd111.severity is Severity.ERROR
    assert rd111.location.line == line_of("site:pad-empty", SCENARIOS_FILE)
    assert "np.count_nonzero(x != 0, axis=1) > 0" in rd111.fix.code
    assert _by_rule(facts, "RD110") == []
    keep = np.count_nonzero(x != 0, axis=1) > 0  # the fix's own filter keeps the others
    assert int((~keep).sum()) == record.fully_masked_rows


def test_holes_inside_sequences_give_rd110():
    model, x, y = _build(ss.with_holes)
    facts = _measure(model, x, y)
    (record,) = facts.sequences.inputs
    assert record.holed_rows == ss.ROWS // 4 and record.pad_side in ("holes", "mixed")
    (rd110,) = _by_rule(facts, "RD110")
    assert "have masked steps between valid ones" in rd110.message


@pytest.mark.parametrize("builder", [ss.left_padded, ss.right_padded, ss.fully_masked])
def test_mask_classification_agrees_with_keras_own_cudnn_mask_checks(builder):
    """The rows rnndoctor calls valid for cuDNN are exactly those Keras' check accepts."""
    import importlib

    tfrnn = importlib.import_module("keras.src.backend.tensorflow.rnn")
    model, x, y = _build(builder)
    layers = sequences._rnn_layers_by_path(model)
    with sequences._recording(layers) as seen:
        try:
            model(x[:16])
        except sequences._AllSeen:  # the recorders end the pass once every RNN recorded
            pass
    mask = seen["seq/lstm"].mask
    facts = _measure(model, x[:16], y[:16])
    (record,) = facts.sequences.inputs
    bad = record.left_padded_rows + record.holed_rows
    assert bool(tfrnn._is_sequence_right_padded(mask)) == (bad == 0)
    assert bool(tfrnn._has_fully_masked_sequence(mask)) == (record.fully_masked_rows > 0)

    @tf.function
    def assert_valid(m):
        tfrnn._assert_valid_mask(m)  # what _cudnn_lstm runs before the fused kernel
        return tf.constant(True)

    if bad or record.fully_masked_rows:
        with pytest.raises(tf.errors.InvalidArgumentError, match="right-padded"):
            assert_valid(mask)
    else:
        assert bool(assert_valid(mask))


def test_rd1xx_mask_proviso_says_when_the_sampled_masks_were_checked():
    keras.utils.clear_session()
    seqs = ss.token_sequences(ss.lengths())
    x = keras.utils.pad_sequences(seqs, maxlen=ss.T, padding="post")
    model = ss.masked_lstm(recurrent_dropout=0.1)
    model(x[:2])
    facts = _measure(model, x, np.zeros((len(x), 1), "float32"))
    (rd101,) = _by_rule(facts, "RD101")
    assert rd101.fast_path_after_fix is True and rd101.fast_path_caveat is None
    assert "sampled masks are right-padded with no empty sequence (checked on 64" in rd101.message

    left = keras.utils.pad_sequences(seqs, maxlen=ss.T)
    facts = _measure(model, left, np.zeros((len(x), 1), "float32"))
    (rd101,) = _by_rule(facts, "RD101")
    assert "not right-padded (RD110)" in rd101.fast_path_caveat
    (rd110,) = _by_rule(facts, "RD110")
    assert "recurrent_dropout (RD101)" in rd110.message  # cuDNN once RD101 is fixed


def test_bidirectional_and_stacked_rnns_share_one_input_and_masking_layers_are_named():
    keras.utils.clear_session()
    rng = np.random.default_rng(0)
    x = np.zeros((32, 10, 3), "float32")
    ns = rng.integers(2, 11, size=32)
    for i, n in enumerate(ns):
        x[i, :n] = rng.normal(size=(n, 3)) + 5.0  # never equal to the mask value
    inputs = keras.Input((10, 3), name="frames")
    h = LAYERS.Masking(mask_value=0.0)(inputs)
    h = LAYERS.Bidirectional(LAYERS.GRU(4, return_sequences=True))(h)
    h = LAYERS.LSTM(4)(h)
    model = keras.Model(inputs, LAYERS.Dense(1)(h), name="m")
    facts = _measure(model, x, np.zeros((32, 1), "float32"), probe=False)
    (record,) = facts.sequences.inputs
    assert record.input == "frames" and record.input_rank == 3
    assert record.rnn_layers == ["m/bidirectional/backward_gru", "m/bidirectional/forward_gru",
                                 "m/lstm"]  # fmt: skip
    assert (record.length_source, record.mask_value) == ("masking", 0.0)
    assert record.length_values == sorted(set(ns.tolist())) and record.pad_side == "right"
    assert sum(record.length_counts) == 32


def test_without_a_mask_zero_runs_at_one_end_are_measured_as_padding():
    keras.utils.clear_session()
    ns = ss.lengths(low=3)
    x = keras.utils.pad_sequences(ss.token_sequences(ns), maxlen=ss.T)  # pre, no mask
    model = keras.Sequential(
        [keras.Input((ss.T,), dtype="int32"), LAYERS.Embedding(ss.VOCAB, 3), LAYERS.LSTM(4),
         LAYERS.Dense(1)], name="seq",
    )  # fmt: skip
    facts = _measure(model, x, np.zeros((len(x), 1), "float32"), probe=False)
    (record,) = facts.sequences.inputs
    assert record.length_source == "pad_value" and record.mask_used is False
    assert record.pad_side == "left" and record.lengths == ns
    assert _by_rule(facts, "RD110") == []  # no mask reaches cuDNN


def test_ragged_input_is_recorded_while_fit_fails_and_gives_rd114():
    keras.utils.clear_session()
    facts = Facts(run=RunInfo(script="test", argv=[], cwd="."))
    options = WindowOptions(warmup_steps=1, measured_steps=2, profile_steps=0, run_probes=False)
    capture = CaptureSession(facts, options, None)
    sequences.install(capture)
    try:
        model, data, _ = ss.ragged()
        fit = getattr(keras.Model.fit, "__wrapped__", keras.Model.fit)
        with pytest.raises(ValueError, match="ragged"):  # Keras 3 cannot run it
            window.run_window(capture, fit, model, (data,), {"epochs": 1, "verbose": 0})
    finally:
        sequences.install(None)
    (record,) = facts.sequences.inputs
    assert record.ragged and record.rnn_layers == ["lstm"]
    (rd114,) = _by_rule(facts, "RD114")
    assert rd114.severity is Severity.ERROR and rd114.layer == "seq/lstm"
    assert rd114.location.line == line_of("site:ragged-lstm", SCENARIOS_FILE)


def test_gru_rejects_ragged_input_too():
    layer = LAYERS.GRU(2)
    with pytest.raises(ValueError, match="ragged"):
        layer(tf.ragged.constant([[[1.0], [2.0]], [[3.0]]], ragged_rank=1))


def _interleaved_pass(model, plain, bucketed) -> tuple[list[float], list[float]]:
    """Seconds of each ``train_on_batch`` (compute only: the batches are in memory), plain and
    bucketed batches taken in turn, so that load from other processes hits both alike."""
    times: tuple[list[float], list[float]] = ([], [])
    for pair in itertools.zip_longest(plain, bucketed):
        for kind, item in enumerate(pair):
            if item is not None:
                start = time.perf_counter()
                model.train_on_batch(*item)
                times[kind].append(time.perf_counter() - start)
    return times


def test_rd501_speedup_estimate_is_within_35_percent_of_real_bucketed_steps():
    """Compute-only train steps on the same data, bucketed with the finding's own code vs
    padded to the global maximum; the estimate must lie within 35% of the measured ratio."""
    keras.utils.clear_session()
    rng = np.random.default_rng(0)
    # Enough rows that each bucket's last, partial batch is a small share of the steps, as in a
    # real epoch (the estimate counts rows x padded length, and the partial batches' steps only
    # where fit's batches an epoch are known, rules/_sequences.py: bucketed_steps; these facts
    # hold no fit).
    steps, batch, rows = 120, 64, 8192
    ns = np.clip(rng.gamma(2.0, 18.0, size=rows).astype(int) + 4, 4, steps)
    x = keras.utils.pad_sequences(
        [rng.integers(1, 50, size=n) for n in ns], maxlen=steps, padding="post"
    )
    y = np.zeros((rows, 1), "float32")
    keras.utils.set_random_seed(0)
    model = keras.Sequential(
        [keras.Input((None,), dtype="int32"), LAYERS.Embedding(50, 16, mask_zero=True),
         LAYERS.LSTM(64), LAYERS.Dense(1)], name="seq",
    )  # fmt: skip
    model.compile(optimizer="sgd", loss="mse")
    plain = ss.batches(x, y, batch)
    facts = Facts(run=RunInfo(script="test", argv=[], cwd="."))
    facts.model = collect_model(model, probe=False)
    facts.sequences = sequences.measure_batches(model, plain[:16], model_facts=facts.model)
    (rd501,) = _by_rule(facts, "RD501")
    namespace = {"x": x, "y": y}
    exec(rd501.fix.code, namespace)  # the ready-to-paste code, as the user would run it
    bucketed = [(a.numpy(), b.numpy()) for a, b in namespace["dataset"]]
    assert sum(len(a) for a, _ in bucketed) == rows
    _interleaved_pass(model, plain, bucketed)  # tracing (bucketed shapes generalise), warm-up
    runs = [_interleaved_pass(model, plain, bucketed) for _ in range(3)]
    # each batch's fastest of the three passes (other processes only ever add time), summed
    totals = {
        kind: sum(map(min, zip(*(run[k] for run in runs), strict=True)))
        for k, kind in enumerate(("plain", "bucketed"))
    }
    measured = totals["plain"] / totals["bucketed"]
    print(f"RD501 estimated {rd501.speedup:.2f}x, measured {measured:.2f}x ({totals})")
    assert rd501.speedup == pytest.approx(measured, rel=0.35), (rd501.speedup, measured, totals)


def test_each_model_input_is_followed_to_the_rnn_it_feeds():
    keras.utils.clear_session()
    ns = ss.lengths(rows=32)
    tokens = keras.utils.pad_sequences(ss.token_sequences(ns), maxlen=ss.T, padding="post")
    frames = np.zeros((32, 9, 2), "float32")
    for i, n in enumerate(ss.lengths(low=2, high=9, rows=32, seed=3)):
        frames[i, :n] = 1.0
    a = keras.Input((ss.T,), dtype="int32", name="tokens")
    b = keras.Input((9, 2), name="frames")
    ha = LAYERS.LSTM(4)(LAYERS.Embedding(ss.VOCAB, 3, mask_zero=True)(a))
    hb = LAYERS.GRU(4)(b)  # no mask: zero frames at the end are padding it computes on
    model = keras.Model([a, b], LAYERS.Dense(1)(LAYERS.Concatenate()([ha, hb])), name="m")
    facts = _measure(model, [tokens, frames], np.zeros((32, 1), "float32"), probe=False)
    records = {r.input: r for r in facts.sequences.inputs}
    assert set(records) == {"tokens", "frames"}
    assert records["tokens"].rnn_layers == ["m/lstm"] and records["tokens"].lengths == ns
    assert records["frames"].rnn_layers == ["m/gru"]
    assert records["frames"].length_source == "pad_value" and not records["frames"].mask_used
    assert records["frames"].pad_side == "right"


def _padded_arrays(rows: int, padded: bool):
    """``rows`` token sequences of length 12 (valid lengths 2 to 12), left-padded with 0 where
    ``padded``, else every row full; and an Embedding(mask_zero) -> LSTM -> Dense model."""
    rng = np.random.default_rng(0)
    x = rng.integers(1, 30, size=(rows, 12)).astype("int32")
    if padded:
        for row, length in enumerate(rng.integers(2, 13, size=rows)):
            x[row, : 12 - length] = 0
    keras.utils.clear_session()
    model = keras.Sequential(
        [keras.Input((12,), dtype="int32"), LAYERS.Embedding(30, 4, mask_zero=True),
         LAYERS.LSTM(4), LAYERS.Dense(1)]
    )  # fmt: skip
    model.compile(optimizer="sgd", loss="mse")
    return model, x, rng.normal(size=(rows, 1)).astype("float32")


@pytest.mark.parametrize("padded", [True, False])
def test_padded_arrays_are_measured_on_a_larger_fresh_sample(padded):
    """Where the sampled batches show padding and fit got arrays, the sequence facts rest on a
    larger fresh sample (``SEQUENCE_ROWS`` sequences) drawn through Keras' array adapter; an
    input with no padding keeps the probes' batches (no reason to draw more)."""
    from rnndoctor.capture import probes

    model, x, y = _padded_arrays(6000, padded)
    report = rnndoctor.diagnose(
        model, x, y=y, steps=2, warmup_steps=1, profile_steps=0, epochs=1, batch_size=32,
        verbose=0, run_probes=False,
    )  # fmt: skip
    capture = CaptureSession(report.facts, WindowOptions(), None)
    arguments = {"x": x, "y": y, "batch_size": 32, "shuffle": True}
    batches = probes.sample_batches(capture, arguments)
    more = probes.more_batches(capture, arguments)
    assert more is not None  # arrays can be drawn again
    sequences.sample_sequences(capture, model, batches, more)
    (record,) = capture.facts.sequences.inputs
    if padded:
        wanted = min(sequences.MORE_BATCHES_MAX * 32, sequences.SEQUENCE_ROWS)
        assert record.sequences == wanted > len(batches.items) * 32
        assert record.pad_side == "left" and 0.3 < record.padded_fraction < 0.6
    else:
        assert record.sequences == len(batches.items) * 32 and record.padded_fraction == 0.0
    assert probes.more_batches(capture, {"x": iter([x])}) is None  # a generator: never again
