"""`rnndoctor check` on tf.keras scripts under TF_USE_LEGACY_KERAS=1 (tf.keras is then tf_keras,
Keras 2), through the real CLI and capture child (slow). Their Keras 3 twins are the scripts
without the ``keras2_`` prefix, checked by the other e2e tests; without the variable, tf.keras is
Keras 3 and these scripts check as those."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("tf_keras")

pytestmark = [pytest.mark.slow, pytest.mark.keras2]

SCRIPTS = Path(__file__).parents[1] / "scripts"
FAST = ["--steps", "3", "--warmup", "1", "--profile-steps", "0", "--timeout", "240"]
# Leaves out the rules that read the batch-size and steps_per_execution probes, and so the
# probes (rnndoctor.engine.PROBE_READERS), where a test reads neither: 10-20 s a check.
FOCUS = ("--ignore", "RD301,RD702,RD403")


def _check(
    script: str, out: Path, *script_args: str, options: tuple[str, ...] = ()
) -> tuple[subprocess.CompletedProcess, dict]:
    env = dict(os.environ, COLUMNS="200", TF_USE_LEGACY_KERAS="1")
    result = subprocess.run(
        [sys.executable, "-m", "rnndoctor", "check", str(SCRIPTS / script), "--out", str(out),
         "--format", "json", *FAST, *options, "--", *script_args],
        cwd=out.parent, capture_output=True, text=True, timeout=300, env=env,
    )  # fmt: skip
    report = out / "report.json"
    return result, json.loads(report.read_text()) if report.is_file() else {}


def _line_of(path: Path, needle: str) -> int:
    return next(i for i, t in enumerate(path.read_text().splitlines(), 1) if needle in t)


def _found(doc: dict, rule_id: str) -> list[dict]:
    return [f for f in doc.get("findings", []) if f["rule_id"] == rule_id]


def test_rd101_at_its_line_and_a_keras2_model_checkpoint_neutralised(tmp_path):
    checkpoint = tmp_path / "keras2-checkpoint.h5"
    # RD101, the fast-path probe and the neutralised saves need no probes (the probes' fits run
    # without the user's callbacks)
    result, doc = _check("keras2_recurrent_dropout.py", tmp_path / "r", str(checkpoint),
                         options=("--no-probes",))  # fmt: skip
    assert doc, result.stderr
    assert doc["facts"]["environment"]["keras_flavour"].startswith("tf_keras 2.")
    script = SCRIPTS / "keras2_recurrent_dropout.py"
    (rd101,) = _found(doc, "RD101")
    assert rd101["location"]["file"] == str(script)
    assert rd101["location"]["line"] == _line_of(script, "# the RD101 line")
    assert rd101["fix"]["code"] == "layers.LSTM(8, dropout=0.25)"
    (probe,) = [layer["fast_path"] for layer in doc["facts"]["model"]["rnn_layers"]]
    assert probe["blocking_args"] == ["recurrent_dropout"] and "tf_keras" in probe["source"]
    saved, entry = doc["facts"]["run"]["neutralised"]
    assert saved["what"] == "model.save_weights"
    assert saved["detail"] == f"{checkpoint}.weights.h5"
    assert saved["location"]["line"] == _line_of(script, "# the save line")
    assert entry["what"] == "ModelCheckpoint callback" and entry["detail"] == str(checkpoint)
    assert entry["location"]["line"] == _line_of(script, "# the checkpoint line")
    assert not checkpoint.exists() and not Path(f"{checkpoint}.weights.h5").exists()


def test_the_keras2_clean_control_is_clean(tmp_path):
    result, doc = _check("keras2_clean_control.py", tmp_path / "r")
    assert doc, result.stderr
    assert doc["facts"]["environment"]["keras_flavour"].startswith("tf_keras 2.")
    assert doc["facts"]["run"]["outcome"] == "completed"
    loud = [f for f in doc["findings"] if f["severity"] in ("warning", "error")]
    assert loud == [], [(f["rule_id"], f["message"]) for f in loud]
    (layer,) = doc["facts"]["model"]["rnn_layers"]
    assert layer["fast_path"]["takes_fast_path"] is True


def test_rd110_and_rd111_are_warnings_on_a_left_padded_masked_tf_keras_lstm(tmp_path):
    """Keras 3's case (errors: the step fails) is tests/e2e/test_sequences_e2e.py's."""
    result, doc = _check("keras2_padded_lstm.py", tmp_path / "r", options=FOCUS)
    assert doc, result.stderr
    assert doc["facts"]["environment"]["keras_flavour"].startswith("tf_keras 2.")
    assert doc["facts"]["run"]["outcome"] == "completed"  # tf_keras runs the empty rows
    script = SCRIPTS / "keras2_padded_lstm.py"  # tf_keras' own pad_sequences, at its line
    line = _line_of(script, "# the padding line")
    (rd110,) = _found(doc, "RD110")
    (rd111,) = _found(doc, "RD111")
    for finding in (rd110, rd111):
        assert finding["severity"] == "warning"
        check = {e["label"]: e["value"] for e in finding["evidence"]}[
            "mask check on the cuDNN path"
        ]
        assert check == "falls back to the generic kernel"
        assert finding["location"]["file"] == str(script) and finding["location"]["line"] == line
    assert "silently" in rd110["message"]
    # the script's line passes padding=padding (its --post option sets it): a literal pasted
    # there would make the option do nothing, so the fix says where to set it (display-only)
    assert rd110["fix"]["safety"] == "display-only" and rd110["fix"]["before"] is None
    assert rd110["fix"]["code"].startswith(
        "# your pad_sequences call passes padding=padding: set padding to 'post' where it is set"
    )
    (record,) = doc["facts"]["sequences"]["inputs"]
    assert record["padding_argument"] == "pre" and record["fully_masked_rows"] > 0
    # lengths 0-30 padded to 40: RD501's bucketing, from the same sampled tf_keras masks
    assert record["padded_fraction"] >= 0.3
    (rd501,) = _found(doc, "RD501")
    assert ".bucket_by_sequence_length(" in rd501["fix"]["code"]


# The measured cases take the window's and probes' usual step counts (the rules read medians).
MEASURED = ["--steps", "10", "--warmup", "1", "--profile-steps", "0"]


@pytest.fixture(scope="module")
def small_batch(tmp_path_factory) -> dict:
    """One check of keras2_small_batch.py (batch 4, a sleeping tf_keras callback), shared."""
    out = tmp_path_factory.mktemp("keras2-small") / "r"
    return _check_measured("keras2_small_batch.py", out, "--ignore", "RD403")[1]  # RD301, RD404


def test_rd301_on_a_small_tf_keras_batch_from_the_probes_samples_per_second(small_batch):
    doc = small_batch
    assert doc["facts"]["environment"]["keras_flavour"].startswith("tf_keras 2.")
    (rd301,) = _found(doc, "RD301")
    points = doc["facts"]["probes"]["batch_probe"]
    assert [p["value"] for p in points] == [4, 8, 16]
    evidence = {e["label"]: e for e in rd301["evidence"]}
    for p in points:
        assert evidence[f"batch {p['value']}"]["value"] == p["samples_per_s"]
    assert "samples/s" in rd301["message"] and "interval" in rd301["message"]


def test_rd404_names_a_sleeping_tf_keras_callback_at_its_line(small_batch):
    """Keras 3's twin: tests/e2e/test_bottlenecks.py (test_sleeping_callback_gives_rd404...)."""
    (cb,) = small_batch["facts"]["probes"]["callbacks"]
    assert cb["name"] == "SleepyLogger" and cb["per_step_ms"] >= 3.5  # time.sleep(0.004)
    line = _line_of(SCRIPTS / "keras2_small_batch.py", "logger = SleepyLogger()")
    assert cb["location"]["line"] == line
    (rd404,) = _found(small_batch, "RD404")
    assert "SleepyLogger" in rd404["message"]
    assert rd404["location"]["line"] == line


def test_rd201_on_a_slow_tf_keras_generator_with_rd204_at_its_line(tmp_path):
    result, doc = _check_measured("keras2_slow_generator.py", tmp_path / "r", *FOCUS)
    assert doc["facts"]["probes"]["input_bound_share"] >= 0.5
    (rd201,) = _found(doc, "RD201")
    assert rd201["severity"] in ("warning", "error")  # error once the interval clears 50%
    (rd204,) = _found(doc, "RD204")
    script = SCRIPTS / "keras2_slow_generator.py"
    assert rd204["location"]["line"] == _line_of(script, "# the generator line")


def _check_measured(
    script: str, out: Path, *options: str
) -> tuple[subprocess.CompletedProcess, dict]:
    env = dict(os.environ, COLUMNS="200", TF_USE_LEGACY_KERAS="1")
    result = subprocess.run(
        [sys.executable, "-m", "rnndoctor", "check", str(SCRIPTS / script), "--out", str(out),
         "--format", "json", "--fail-on", "never", *MEASURED, "--timeout", "240", *options],
        cwd=out.parent, capture_output=True, text=True, timeout=300, env=env,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    doc = json.loads((out / "report.json").read_text())
    assert doc["facts"]["run"]["outcome"] == "completed", doc["facts"]["run"]
    return result, doc
