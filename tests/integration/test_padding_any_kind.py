"""Padding that is not zeros, without a mask (issue 12, defect 4): an encoder-decoder model on
one-hot characters padded with the one-hot vector of a space (the shape of keras-io's
lstm_seq2seq), and id inputs padded with -1. The padded fraction measured equals the one
computed here from the generated data."""

from __future__ import annotations

import pytest

keras = pytest.importorskip("keras")
pytest.importorskip("tensorflow")

import numpy as np  # noqa: E402
import seq_scenarios as ss  # noqa: E402

from rnndoctor.capture import sequences  # noqa: E402
from rnndoctor.capture.model import collect_model  # noqa: E402
from rnndoctor.engine import evaluate  # noqa: E402
from rnndoctor.facts import Facts, RunInfo  # noqa: E402
from rnndoctor.rules._sequences import mask_advice  # noqa: E402

LAYERS = keras.layers
CHARS = " .abcdefghij"  # index 0: the space that pads
ROWS, BATCH = 96, 32


def _texts(seed: int, low: int, high: int) -> list[str]:
    rng = np.random.default_rng(seed)
    words = list("abcdefghij") + [" "]
    return [
        "".join(rng.choice(words, size=n - 1)).strip().replace("  ", " ") + "."
        for n in rng.integers(low, high, size=ROWS)
    ]


def _one_hot(texts: list[str], steps: int) -> np.ndarray:
    x = np.zeros((len(texts), steps, len(CHARS)), "float32")
    for i, text in enumerate(texts):
        for t, char in enumerate(text):
            x[i, t, CHARS.index(char)] = 1.0
        x[i, len(text) :, CHARS.index(" ")] = 1.0  # padded with the one-hot space
    return x


def _seq2seq():
    keras.utils.clear_session()
    source, target = _texts(1, 4, 30), ["\t" + t + "\n" for t in _texts(2, 3, 60)]
    chars_out = CHARS + "\t\n"
    enc_steps, dec_steps = max(map(len, source)), max(map(len, target))
    enc = _one_hot(source, enc_steps)
    dec = np.zeros((ROWS, dec_steps, len(chars_out)), "float32")
    for i, text in enumerate(target):
        for t, char in enumerate(text):
            dec[i, t, chars_out.index(char)] = 1.0
        dec[i, len(text) :, chars_out.index(" ")] = 1.0
    enc_in = keras.Input((None, len(CHARS)), name="encoder_inputs")
    _, h, c = LAYERS.LSTM(8, return_state=True, name="encoder")(enc_in)
    dec_in = keras.Input((None, len(chars_out)), name="decoder_inputs")
    out = LAYERS.LSTM(8, return_sequences=True, name="decoder")(dec_in, initial_state=[h, c])
    model = keras.Model([enc_in, dec_in], LAYERS.Dense(len(chars_out))(out), name="s2s")
    model([enc[:2], dec[:2]])
    truth = {
        "encoder_inputs": 1 - sum(map(len, source)) / (ROWS * enc_steps),
        "decoder_inputs": 1 - sum(map(len, target)) / (ROWS * dec_steps),
    }
    return model, [enc, dec], dec, truth


def _measure(model, x, y) -> Facts:
    facts = Facts(run=RunInfo(script="test", argv=[], cwd="."))
    facts.model = collect_model(model, probe=False)
    facts.sequences = sequences.measure_batches(
        model, ss.batches(x, y, BATCH), model_facts=facts.model
    )
    return facts


def test_one_hot_space_padding_is_found_at_its_true_fraction_in_encoder_and_decoder():
    model, x, y, truth = _seq2seq()
    facts = _measure(model, x, y)
    records = {r.input: r for r in facts.sequences.inputs}
    assert set(records) == set(truth)
    for name, fraction in truth.items():
        record = records[name]
        assert record.length_source == "pad_value" and record.mask_used is False
        assert record.pad_value == "one-hot vector of index 0" and record.pad_side == "right"
        assert (record.pad_index, record.input_rank) == (0, 3)
        assert record.padded_fraction == round(fraction, 6)  # exact, over every row
    rd501 = [f for f in evaluate(facts).findings if f.rule_id == "RD501"]
    assert {f.layer for f in rd501} == {"s2s/encoder", "s2s/decoder"}
    for found in rd501:
        assert "No mask is used" in found.message and "Masking(mask_value=0.0)" in found.message
        assert "np.eye(" in found.fix.code and "Masking(mask_value=0.0)" in found.fix.code
        evidence = {e.label: e.value for e in found.evidence}
        assert evidence["pad step (no mask)"] == "one-hot vector of index 0, at the end"


def test_interior_spaces_are_data_the_bucketing_unpad_keeps_them():
    model, x, y, truth = _seq2seq()
    findings = evaluate(_measure(model, x, y)).findings
    (found,) = [f for f in findings if f.rule_id == "RD501" and f.layer == "s2s/encoder"]
    assert "tf.cumsum(" in found.fix.code and "reverse=True" in found.fix.code
    ns = {}
    exec(found.fix.code.split("def length")[0].replace("import tensorflow as tf", ""),
         {"tf": __import__("tensorflow")}, ns)  # fmt: skip
    seq = x[0][0]
    kept, _ = ns["unpad"](seq, y[0])
    real = (seq.argmax(-1) != 0).nonzero()[0]
    assert kept.shape[0] == real.max() + 1  # spaces between words kept, the trailing run dropped


def test_minus_one_ids_left_padded_are_found_and_advice_remaps_the_pad_id():
    keras.utils.clear_session()
    ns = ss.lengths(low=3)
    x = keras.utils.pad_sequences(ss.token_sequences(ns), maxlen=ss.T, value=-1)  # pre
    model = keras.Sequential(
        [keras.Input((ss.T,), dtype="int32"), LAYERS.Lambda(lambda t: t + 1),
         LAYERS.Embedding(ss.VOCAB + 1, 3), LAYERS.LSTM(4), LAYERS.Dense(1)], name="seq",
    )  # fmt: skip
    facts = _measure(model, x, np.zeros((len(x), 1), "float32"))
    (record,) = facts.sequences.inputs
    assert (record.pad_value, record.mask_value, record.pad_side) == ("-1", -1, "left")
    assert record.lengths == ns
    assert record.padded_fraction == round(1 - sum(ns) / (ss.T * len(ns)), 6)
    advice, code = mask_advice(record)
    assert "Remap the pad id -1 to 0" in advice and "pad at the end" in advice
    assert "np.where(x == -1, 0, x + 1)" in code[0]


def test_unpadded_float_features_and_end_tokens_are_not_padding():
    rng = np.random.default_rng(0)
    assert sequences.detect_padding([rng.normal(size=(32, 10, 3)).astype("float32")]) is None
    ids = rng.integers(1, 9, size=(32, 12))
    ids[:, -1] = 99  # an end-of-text id ends every row: a run of one length, not padding
    assert sequences.detect_padding([ids]) is None


def test_short_space_pads_that_occur_only_at_the_start_are_found():
    """Fixed-width queries ("12+345 " reversed: "  543+21"): one to four one-hot spaces at the
    start of three rows in four, 1.4 steps on average, and a space nowhere else."""
    rng = np.random.default_rng(3)
    pads = rng.choice([0, 1, 1, 1, 2, 2, 3, 4], size=64)
    x = np.zeros((64, 7, 12), dtype=bool)
    for i, n in enumerate(pads):
        x[i, :n, 11] = True  # the space
        x[i, np.arange(n, 7), rng.integers(0, 11, size=7 - n)] = True  # digits and '+'
    masks, side, step = sequences.detect_padding([x])
    assert side == "left" and int(np.flatnonzero(step)[0]) == 11
    assert [int((~m).sum()) for m in masks[0]] == [int(n) for n in pads]
    x[1, 5, :] = False
    x[1, 5, 11] = True  # a space inside one row: real data uses the step, so short runs of it
    assert sequences.detect_padding([x]) is None  # are no evidence of padding
