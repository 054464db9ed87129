"""RD110 / RD111 under Keras 2 and Keras 3: the same facts, the severity and consequence read
from ``environment.keras_flavour`` (tf_keras falls back to the generic kernel: warning; Keras 3
fails the step: error)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from rnndoctor.engine import evaluate
from rnndoctor.facts import Facts
from rnndoctor.findings import Severity
from rnndoctor.rules import _fastpath as fp

RULES = Path(__file__).parents[1] / "data" / "rules"


def _facts(name: str, flavour: str | None) -> Facts:
    facts = Facts.from_dict(json.loads((RULES / f"{name}.json").read_text())["facts"])
    facts.environment.keras_flavour = flavour
    return facts


def _finding(facts: Facts, rule_id: str):
    (finding,) = [f for f in evaluate(facts, select=[rule_id]).findings]
    return finding


@pytest.mark.parametrize(
    ("flavour", "severity", "evidence"),
    [
        ("keras 3.15.1", Severity.ERROR, "fails"),
        (None, Severity.ERROR, "fails"),  # facts from before keras_flavour: Keras 3
        ("tf_keras 2.21.0", Severity.WARNING, "falls back to the generic kernel"),
    ],
)
def test_rd110_severity_follows_the_keras_that_ran(flavour, severity, evidence):
    finding = _finding(_facts("RD110-offending", flavour), "RD110")
    assert finding.severity is severity
    (check,) = [e for e in finding.evidence if e.label == "mask check on the cuDNN path"]
    assert check.value == evidence
    if flavour and flavour.startswith("tf_keras"):
        assert "tf_keras 2.21.0 (Keras 2)" in finding.message
        assert "is_cudnn_supported_inputs" in check.source
        assert "generic kernel" in finding.gain
    else:
        assert "Keras 2" not in finding.message and "_assert_valid_mask" in check.source


def test_rd111_is_a_warning_under_keras_2_and_info_off_the_cudnn_path_in_both():
    facts = _facts("RD111-offending", "tf_keras 2.21.0")
    finding = _finding(facts, "RD111")
    assert finding.severity is Severity.WARNING and "silently" in finding.message
    assert _finding(_facts("RD111-offending", "keras 3.15.1"), "RD111").severity is Severity.ERROR
    probe = facts.model.rnn_layers[0].fast_path
    probe.takes_fast_path = probe.fixed_takes_fast_path = False
    assert _finding(facts, "RD111").severity is Severity.INFO


def test_is_keras2_reads_the_package_name_of_the_flavour():
    facts = _facts("RD110-offending", "tf_keras 2.21.0")
    assert fp.is_keras2(facts) and fp.mask_check_severity(facts) is Severity.WARNING
    facts.environment.keras_flavour = "keras 3.15.1"
    assert not fp.is_keras2(facts) and fp.mask_check_severity(facts) is Severity.ERROR


# The rules whose subject exists in Keras 2 cite the tf_keras source they rest on (the issue's
# "rule docs citing the tf_keras source"); RD109 (use_cudnn), RD113 (a keras.ops cell) and
# RD114 (Keras 3 rejects ragged input) are Keras 3's alone; RD114's doc cites the tf_keras code
# that makes it give no finding there.
KERAS2_CITED = ["RD101", "RD102", "RD103", "RD104", "RD105", "RD106", "RD107", "RD108",
                "RD110", "RD111", "RD114", "RD206", "RD404"]  # fmt: skip


def _tf_keras_root() -> Path | None:
    """The installed tf_keras package folder, found without importing it (no TensorFlow)."""
    import importlib.util

    spec = importlib.util.find_spec("tf_keras")
    return Path(next(iter(spec.submodule_search_locations))) if spec else None


@pytest.mark.parametrize("rule_id", KERAS2_CITED)
def test_the_rule_doc_cites_tf_keras_source_that_exists(rule_id):
    from rnndoctor.rules import all_rules

    (rule,) = [r for r in all_rules() if r.id == rule_id]
    cited = sorted(set(re.findall(r"tf_keras/src/[\w/]+\.py", " ".join(rule.doc.split()))))
    assert cited, f"{rule_id}'s doc cites no tf_keras source"
    root = _tf_keras_root()
    if root is None:
        pytest.skip("tf_keras is not installed: the cited files cannot be checked")
    for path in cited:
        source = root.parent / path
        assert source.is_file(), path
        if "_could_use_gpu_kernel" in rule.doc and path.endswith(("/lstm.py", "/gru.py")):
            assert "self._could_use_gpu_kernel = (" in source.read_text(), path


def test_tf_keras_hands_a_ragged_batchs_row_lengths_to_the_cudnn_path():
    """RD114 gives no finding under Keras 2 because tf_keras' LSTM.call and GRU.call pad a
    ragged batch and pass its row lengths on, to the fused path too (``sequence_lengths``)."""
    root = _tf_keras_root()
    if root is None:
        pytest.skip("tf_keras is not installed: its source cannot be read")
    lstm = (root / "src" / "layers" / "rnn" / "lstm.py").read_text()
    gru = (root / "src" / "layers" / "rnn" / "gru.py").read_text()
    for source in (lstm, gru):
        assert "inputs, row_lengths = backend.convert_inputs_if_ragged(inputs)" in source
    assert '"sequence_lengths": row_lengths,' in lstm
    assert "inputs, initial_state, training, mask, row_lengths" in gru  # _defun_gru_call


def test_tf_keras_is_the_keras2_extra_and_no_hard_dependency():
    """``pip install 'rnndoctor[keras2]'`` brings tf-keras; a plain install does not."""
    import tomllib

    project = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())["project"]
    assert project["optional-dependencies"]["keras2"] == ["tf-keras>=2.16"]
    hard = [d.lower() for d in project["dependencies"]]
    assert not [d for d in hard if d.startswith(("tf-keras", "tf_keras"))]
