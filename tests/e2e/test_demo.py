"""The README's main job: `rnndoctor demo` on the bundled stdlib char-LSTM (slow)."""

from __future__ import annotations

import json

import pytest

from rnndoctor.cli import example_path

pytestmark = pytest.mark.slow


def test_demo_reports_rd101_at_the_examples_lstm_line_within_two_minutes(demo_run):
    result, seconds, out = demo_run.result, demo_run.seconds, demo_run.out
    assert result.returncode == 0, result.stderr  # demo: --fail-on never
    assert seconds < 120
    assert "RD101" in result.stdout
    assert (out / "report.html").is_file()
    doc = json.loads((out / "report.json").read_text())
    (rd101,) = [f for f in doc["findings"] if f["rule_id"] == "RD101"]
    example = example_path()
    lines = example.read_text().splitlines()
    assert rd101["location"]["file"] == str(example)
    assert "layers.LSTM(" in lines[rd101["location"]["line"] - 1]
    assert doc["facts"]["steps"]["measured_steps"] == 20
    assert not (demo_run.work / "charlm_stdlib.keras").exists()
    # Issue 4: pad_sequences' default padding="pre" under mask_zero=True gives RD110 (error) at
    # the line that pads the inputs, and RD501 quotes the padded fraction the run measured.
    (rd110,) = [f for f in doc["findings"] if f["rule_id"] == "RD110"]
    assert rd110["severity"] == "error" and rd110["location"]["file"] == str(example)
    padding_line = lines[rd110["location"]["line"] - 1]
    assert padding_line.startswith("x = keras.utils.pad_sequences(")
    assert "padding" not in padding_line  # the default: "pre"
    (rd501,) = [f for f in doc["findings"] if f["rule_id"] == "RD501"]
    (record,) = doc["facts"]["sequences"]["inputs"]
    evidence = {e["label"]: e["value"] for e in rd501["evidence"]}
    assert evidence["padded fraction now"] == round(record["padded_fraction"], 4) >= 0.30
    assert f"{record['padded_fraction']:.1%}" in rd501["message"]


def test_fixed_demo_has_no_rd1_finding(fixed_run):
    result = fixed_run.result
    assert result.returncode == 0, result.stderr
    doc = json.loads((fixed_run.out / "report.json").read_text())
    assert [f["rule_id"] for f in doc["findings"] if f["rule_id"].startswith("RD1")] == []
    assert [f for f in doc["findings"] if f["rule_id"] in ("RD501", "RD502")] == []
    (record,) = doc["facts"]["sequences"]["inputs"]  # right-padded, bucketed by length
    assert record["pad_side"] == "right" and record["padded_fraction"] < 0.30
    (rnn,) = doc["facts"]["model"]["rnn_layers"]
    assert rnn["fast_path"]["takes_fast_path"] is True


def test_the_demos_batch_size_is_traced_to_its_argparse_default(demo_run):
    # fit(..., batch_size=args.batch_size), run with the option's default: the capture records
    # the add_argument call, and RD301 (when the probe clears its cut-off) rewrites the default,
    # so that --batch-size still sets the batch
    doc = json.loads((demo_run.out / "report.json").read_text())
    lines = example_path().read_text().splitlines()
    site = doc["facts"]["fit"]["batch_size_location"]
    assert lines[site["line"] - 1] == 'parser.add_argument("--batch-size", type=int, default=64)'
    assert site["call_source"] == lines[site["line"] - 1]
    assert doc["facts"]["fit"]["batch_size_options"] == ["--batch-size"]  # its strings, for argv
    for rd301 in (f for f in doc["findings"] if f["rule_id"] == "RD301"):
        assert rd301["location"]["line"] == site["line"]
        assert rd301["fix"]["before"] == site["call_source"]
        assert rd301["fix"]["code"].startswith(
            'parser.add_argument("--batch-size", type=int, default='
        )
