"""Every RD1xx rule on tiny real models through rnndoctor.diagnose (real TF/Keras, in process)."""

from __future__ import annotations

import pytest

keras = pytest.importorskip("keras")

import rnndoctor  # noqa: E402
import scenarios  # noqa: E402
from scenarios import SCENARIOS, Scenario, line_of  # noqa: E402

rnndoctor.record_construction_sites()

FAST = dict(
    steps=2, warmup_steps=1, profile_steps=0, epochs=1, batch_size=16, verbose=0, run_probes=False
)  # the RD1xx verdicts need no probe; tests/integration/test_probes.py runs them


def _diagnose(build):
    keras.utils.clear_session()  # stable auto-generated layer names
    model = build()
    x, y = scenarios.data()
    return rnndoctor.diagnose(model, x, y=y, **FAST)


def _rd1(report, rule_id):
    return [f for f in report.findings if f.rule_id == rule_id]


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: f"{s.rule_id}-{s.variant}")
def test_rule_fires_on_offending_and_not_on_compliant_twin(scenario: Scenario):
    report = _diagnose(scenario.build)
    found = _rd1(report, scenario.rule_id)
    if scenario.variant == "compliant":
        assert found == [], [f.message for f in found]
        assert not [f for f in report.findings if f.rule_id.startswith("RD1")]
        return
    assert len(found) == 1, [f.message for f in report.findings]
    finding = found[0]
    assert finding.layer == scenario.layer
    assert finding.location is not None
    assert finding.location.file == scenarios.__file__
    assert finding.location.line == line_of(scenario.marker)
    assert finding.fix is not None and finding.fix.code
    assert finding.evidence


def test_rd101_fix_is_corrected_constructor_call_and_fast_path_after_fix():
    report = _diagnose(scenarios.rd101_bad)
    (finding,) = _rd1(report, "RD101")
    assert finding.fix.before == "layers.LSTM(4, recurrent_dropout=0.25)"
    assert finding.fix.code == "layers.LSTM(4, dropout=0.25)"
    assert finding.fast_path_after_fix is True
    assert "recurrent_dropout=0.25" in finding.message


def test_bidirectional_lstm_in_functional_model_gives_one_finding_at_its_line():
    report = _diagnose(scenarios.bidirectional_bad)
    (finding,) = _rd1(report, "RD101")
    assert finding.layer == "bidi/bidirectional/forward_lstm"
    assert "both directions" in finding.message
    assert finding.location.line == line_of("site:RD101-bidi")
    assert finding.fix.code == "layers.LSTM(4, dropout=0.2)"
    clean = _diagnose(scenarios.bidirectional_good)
    assert not [f for f in clean.findings if f.rule_id.startswith("RD1")]


def test_lstm_inside_subclassed_model():
    report = _diagnose(lambda: scenarios.subclassed("hard_sigmoid"))
    (finding,) = _rd1(report, "RD103")
    assert finding.layer == "tagger/lstm"
    assert finding.location.line == line_of("site:RD103-subclassed")
    # the call passes recurrent_activation=act (a parameter): removing it in place would make
    # act do nothing, so the rebuilt call is a display-only sketch that says so
    assert finding.fix.safety == "display-only"
    assert finding.fix.code.splitlines()[0].startswith(
        "# display-only: your call passes recurrent_activation=act: remove it, or set that to "
        "'sigmoid' (the default) where it is set."
    )
    assert finding.fix.code.splitlines()[-1] == "keras.layers.LSTM(4)"
    clean = _diagnose(lambda: scenarios.subclassed("sigmoid"))
    assert not [f for f in clean.findings if f.rule_id.startswith("RD1")]


def test_several_blocking_arguments_say_the_fix_alone_is_not_enough():
    def build():
        from keras import layers

        return scenarios._seq(layers.LSTM(4, unroll=True, use_bias=False))

    report = _diagnose(build)
    by_rule = {f.rule_id: f for f in report.findings}
    assert {"RD104", "RD105"} <= set(by_rule)
    assert by_rule["RD104"].fast_path_after_fix is False
    assert "use_bias=False (RD105)" in by_rule["RD104"].message
    together = "With RD104, RD105 fixed together, the call reads: layers.LSTM(4)"
    assert together in by_rule["RD104"].message and together in by_rule["RD105"].message


def test_fixes_of_several_blocking_arguments_make_one_rewrite_of_the_call():
    """--verify's all-fixes copy and patch hold every fix of one call (RD104 and RD105 here),
    merged into one rewrite: either alone leaves the layer off the cuDNN kernel."""
    from pathlib import Path

    from rnndoctor.verify import patch as px

    def build():
        from keras import layers

        return scenarios._seq(layers.GRU(4, unroll=True, use_bias=False))

    report = _diagnose(build)
    found = [f for f in report.findings if f.rule_id in ("RD104", "RD105")]
    assert [f.rule_id for f in found] == ["RD104", "RD105"]
    here = Path(__file__).parent
    rewrites = [px.locate(f, f.rule_id, here) for f in found]
    kept, dropped = px.compatible(rewrites)
    assert dropped == {} and [r.members for r in kept] == [("RD104", "RD105")]
    new = px.apply_rewrites(px.read_source(Path(__file__)), kept)
    compile(new, __file__, "exec")
    assert "scenarios._seq(layers.GRU(4))\n" in new


def test_step_times_are_measured_in_ms():
    report = _diagnose(scenarios.rd101_good)
    steps = report.facts.steps
    assert steps.measured_steps == 2
    assert len(steps.step_time_ms) == 2 and all(t > 0 for t in steps.step_time_ms)
    assert steps.median_step_time_ms > 0
    assert steps.batch_size == 16 and steps.samples_per_s > 0


def test_lstm_on_the_line_after_its_bidirectional_is_located_at_its_own_line():
    report = _diagnose(scenarios.bidirectional_multiline)
    (finding,) = _rd1(report, "RD101")
    assert finding.location.line == line_of("site:RD101-bidi-multiline")
    assert finding.fix.before == "layers.LSTM(4, recurrent_dropout=0.2)"
    assert finding.fix.code == "layers.LSTM(4, dropout=0.2)"


def test_positional_activation_is_rewritten_in_the_users_own_call():
    report = _diagnose(scenarios.positional_activation)
    (finding,) = _rd1(report, "RD102")
    assert finding.location.line == line_of("site:RD102-positional")
    assert finding.fix.before == 'layers.GRU(units, "relu", use_bias=True)'
    assert finding.fix.code == "layers.GRU(units, use_bias=True)"


def test_a_layer_that_receives_a_mask_gets_the_mask_caveat():
    def build():
        import keras
        from keras import layers

        model = keras.Sequential(
            [
                keras.Input((scenarios.T,), dtype="int32"),
                layers.Embedding(10, 3, mask_zero=True),
                layers.LSTM(4, recurrent_dropout=0.1),
                layers.Dense(1),
            ]
        )
        model.compile(optimizer="sgd", loss="mse")
        return model

    keras.utils.clear_session()
    model = build()
    import numpy as np

    x = np.random.default_rng(0).integers(0, 10, size=(64, scenarios.T))
    y = np.zeros((64, 1), dtype="float32")
    report = rnndoctor.diagnose(model, x, y=y, **FAST)
    (finding,) = _rd1(report, "RD101")
    assert report.facts.model.rnn_layers[0].receives_mask is True
    assert finding.fast_path_after_fix is True
    assert "right-padded" in finding.fast_path_caveat and "right-padded" in finding.message
