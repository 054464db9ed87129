"""`rnndoctor check` on sequence scripts: the padding line, empty rows and ragged input, through
the real CLI and capture child (slow)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

SCRIPTS = Path(__file__).parents[1] / "scripts"
FAST = ["--steps", "3", "--warmup", "1", "--profile-steps", "0", "--timeout", "240"]
# the sequence rules read the sequence sampling, not the batch-size or steps_per_execution
# probes: leaving out the rules that read those (engine.PROBE_READERS) leaves the probes out
FOCUS = ["--ignore", "RD301,RD702,RD403"]


def _check(script: str, out: Path, *script_args: str) -> tuple[subprocess.CompletedProcess, dict]:
    result = subprocess.run(
        [sys.executable, "-m", "rnndoctor", "check", str(SCRIPTS / script), "--out", str(out),
         "--format", "json", *FAST, *FOCUS, "--", *script_args],
        cwd=out.parent, capture_output=True, text=True, timeout=300,
        env=dict(os.environ, COLUMNS="200"),
    )  # fmt: skip
    report = out / "report.json"
    return result, json.loads(report.read_text()) if report.is_file() else {}


def _line_of(path: Path, needle: str) -> int:
    return next(i for i, t in enumerate(path.read_text().splitlines(), 1) if needle in t)


def _found(doc: dict, rule_id: str) -> list[dict]:
    return [f for f in doc.get("findings", []) if f["rule_id"] == rule_id]


@pytest.fixture(scope="module")
def pre(tmp_path_factory):
    return _check("padded_lstm.py", tmp_path_factory.mktemp("pre") / "r")


@pytest.fixture(scope="module")
def post(tmp_path_factory):
    return _check("padded_lstm.py", tmp_path_factory.mktemp("post") / "r", "--post")


def test_left_padding_and_empty_rows_give_rd110_and_rd111_at_the_padding_line(pre):
    result, doc = pre
    assert doc, result.stderr
    script = SCRIPTS / "padded_lstm.py"
    line = _line_of(script, "# the padding line")
    (rd110,) = _found(doc, "RD110")
    (rd111,) = _found(doc, "RD111")
    for finding in (rd110, rd111):
        assert finding["severity"] == "error"
        assert finding["location"]["file"] == str(script) and finding["location"]["line"] == line
    # the script's line passes padding=padding (its --post option sets it): a literal pasted
    # there would make the option do nothing, so the fix says where to set it (display-only)
    assert rd110["fix"]["safety"] == "display-only" and rd110["fix"]["before"] is None
    assert rd110["fix"]["code"].startswith(
        "# your pad_sequences call passes padding=padding: set padding to 'post' where it is set"
    )
    (record,) = doc["facts"]["sequences"]["inputs"]
    assert record["padding_argument"] == "pre" and record["fully_masked_rows"] > 0
    assert f"{record['fully_masked_rows']} of {record['sequences']}" in rd111["message"]
    unread = "not run: every rule that reads it is left out (--select / --ignore)"
    probes = doc["facts"]["probes"]
    assert probes["batch_probe_not_measured"] == probes["spe_probe_not_measured"] == unread
    assert probes["input_only_ms"] is not None  # the other probes ran


def test_right_padding_without_empty_rows_gives_neither(post):
    result, doc = post
    assert doc, result.stderr
    assert _found(doc, "RD110") == [] and _found(doc, "RD111") == []
    (record,) = doc["facts"]["sequences"]["inputs"]
    assert record["pad_side"] == "right" and record["fully_masked_rows"] == 0
    assert record["padding_argument"] == "post"


def test_ragged_input_fails_fit_and_gives_rd114_at_the_lstm_line(tmp_path):
    result, doc = _check("ragged_lstm.py", tmp_path / "r")
    assert doc, result.stderr
    assert doc["facts"]["run"]["outcome"] == "script_error"
    (rd114,) = _found(doc, "RD114")
    script = SCRIPTS / "ragged_lstm.py"
    assert rd114["severity"] == "error"
    assert rd114["location"]["line"] == _line_of(script, "receives the RaggedTensor")


@pytest.fixture(scope="module")
def seq2seq(tmp_path_factory):
    return _check("seq2seq_onehot.py", tmp_path_factory.mktemp("s2s") / "r")


def test_one_hot_space_padding_of_a_seq2seq_script_is_found_at_its_true_fraction(seq2seq):
    """Every row fit trains on is sampled (4 batches of 64 but the last, 204 rows: fit's
    ``validation_split=0.2`` keeps floor(256 x 0.8), array_slicing.train_validation_split), so
    the measured fraction is the training data's own."""
    result, doc = seq2seq
    assert doc, result.stderr
    sys.path.insert(0, str(SCRIPTS))
    try:
        import _seq2seq_data as data
    finally:
        sys.path.remove(str(SCRIPTS))
    source, target, encoder_in, decoder_in, _ = data.data()
    rows = int(math.floor(data.ROWS * (1.0 - 0.2)))  # the script's validation_split
    truth = {
        "encoder_inputs": 1 - sum(map(len, source[:rows])) / encoder_in[:rows, :, 0].size,
        "decoder_inputs": 1 - sum(map(len, target[:rows])) / decoder_in[:rows, :, 0].size,
    }
    inputs = {i["input"]: i for i in doc["facts"]["sequences"]["inputs"]}
    assert set(inputs) == set(truth)
    for name, fraction in truth.items():
        record = inputs[name]
        assert record["sequences"] == rows == 204 and record["mask_used"] is False
        assert record["pad_value"] == "one-hot vector of index 0"
        assert record["pad_side"] == "right" and record["length_source"] == "pad_value"
        assert record["padded_fraction"] == round(fraction, 6)
    rd501 = {f["layer"]: f for f in _found(doc, "RD501")}
    assert set(rd501) == {"functional/encoder", "functional/decoder"} or len(rd501) == 2
    for found in rd501.values():
        assert (
            "No mask is used" in found["message"] and "Masking(mask_value=0.0)" in found["message"]
        )
