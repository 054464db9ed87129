"""``rnndoctor.diagnose(..., verify=True)``: the object-level fixes measured A/B in process, on a
small left-padded, masked LSTM with recurrent_dropout (real TensorFlow; about 30 s)."""

from __future__ import annotations

import numpy as np
import pytest

import rnndoctor

pytestmark = pytest.mark.slow
STATUSES = {"confirmed", "within noise", "slower", "failed", "not verifiable",
            "unsafe: loss diverged"}  # fmt: skip


def _data(rows: int = 512, length: int = 40, vocab: int = 30):
    rng = np.random.default_rng(0)
    lengths = rng.integers(3, length, size=rows)
    x = np.zeros((rows, length), dtype="int32")
    for i, n in enumerate(lengths):
        x[i, length - n :] = rng.integers(1, vocab, size=n)  # left-padded: pad_sequences' "pre"
    return x, np.where(x > 0, (x + 1) % vocab, 0).astype("int32")


def _model(vocab: int = 30):
    import keras

    model = keras.Sequential([
        keras.Input(shape=(None,), dtype="int32"),
        keras.layers.Embedding(vocab, 8, mask_zero=True),
        keras.layers.LSTM(16, return_sequences=True, recurrent_dropout=0.2),
        keras.layers.Dense(vocab),
    ])  # fmt: skip
    model.compile(optimizer="adam",
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))  # fmt: skip
    return model


def test_diagnose_verify_measures_the_model_and_data_fixes_in_process(tmp_path):
    import json

    x, y = _data()
    model = _model()
    before = [w.copy() for w in model.get_weights()]
    x_before = x.copy()
    report = rnndoctor.diagnose(model, x, y=y, batch_size=16, epochs=3, steps=4, warmup_steps=1,
                                profile_steps=0, out=tmp_path, display=False, verify=True,
                                select=["RD101", "RD110", "RD501"])  # fmt: skip
    fired = {f.rule_id for f in report.findings}
    assert {"RD101", "RD110"} <= fired, fired
    verified = {v.fix: v for v in report.verification.items}
    assert set(verified) == {f.rule_id for f in report.findings if f.fix}
    for item in verified.values():
        assert str(item.status) in STATUSES
        assert item.status != "failed", item.error
    rd101 = verified["RD101"]
    assert rd101.pairs == 5 and rd101.low <= rd101.measured <= rd101.high
    assert rd101.cpu_label == "measured on CPU: the cuDNN gain needs a GPU"
    assert np.array_equal(x, x_before)  # the user's arrays are not changed
    assert len(model.get_weights()) == len(before)
    for item in report.verification.items:  # the figures, with pytest -s
        print(item.fix, item.status, item.pairs, item.measured_text, item.reason)
    doc = json.loads((tmp_path / "report.json").read_text())
    assert [v["fix"] for v in doc["verified"]] == [v.fix for v in report.verification.items]
