"""RD1xx wording under Keras 2 and Keras 3: a finding cites the fast-path criterion of the Keras
that ran (``environment.keras_flavour``). A tf_keras run names tf_keras' own
``_could_use_gpu_kernel`` (``tf_keras/src/layers/rnn/lstm.py`` / ``gru.py``), never Keras 3's
``keras/src`` code; a Keras 3 run keeps its wording; severity and decisions do not move."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import re
from pathlib import Path

import pytest

from rnndoctor.engine import evaluate
from rnndoctor.facts import Facts
from rnndoctor.rules import _fastpath as fp

RULES = Path(__file__).parents[1] / "data" / "rules"
TF_KERAS = "tf_keras 2.21.0"
KERAS3_CITES = ("inner_loop", "cudnn_ok", "_assert_valid_mask")


def _cites_keras3_source(text: str) -> bool:
    """Whether ``text`` names a Keras 3 source file (``keras/src/...``, not ``tf_keras/src``)."""
    return re.search(r"(?<!tf_)keras/src", text) is not None


def _facts(name: str, flavour: str | None) -> Facts:
    """A fixture's facts as the capture records them under ``flavour``: for tf_keras, the
    probe's source names tf_keras' flag (as in a real ``TF_USE_LEGACY_KERAS=1`` run)."""
    facts = Facts.from_dict(json.loads((RULES / f"{name}.json").read_text())["facts"])
    facts.environment.keras_flavour = flavour
    if flavour == TF_KERAS:
        for layer in facts.model.rnn_layers:
            if layer.fast_path is not None and layer.kind in fp.FUSED_KINDS:
                cls = layer.kind.upper()
                layer.fast_path.source = (
                    f"installed {TF_KERAS}: {cls}._could_use_gpu_kernel, set by {cls}.__init__ "
                    f"(tf_keras/src/layers/rnn/{layer.kind}.py; GPU availability assumed, masks "
                    "checked at run time by gru_lstm_utils.is_cudnn_supported_inputs)"
                )
    return facts


def _finding(facts: Facts, rule_id: str):
    (finding,) = evaluate(facts, select=[rule_id]).findings
    return finding


# Each rule's fixture layer class, and the Keras 3 citation its message keeps.
CASES = {
    "RD101": ("lstm", "(LSTM/GRU.inner_loop)"),
    "RD102": ("gru", "(cudnn_ok in keras/src/backend/tensorflow/rnn.py)"),
    "RD103": ("lstm", "(cudnn_ok in keras/src/backend/tensorflow/rnn.py)"),
    "RD104": ("lstm", "(cudnn_ok requires not unroll)"),
    "RD105": ("gru", "(cudnn_ok requires use_bias)"),
}


@pytest.mark.parametrize("rule_id", list(CASES))
def test_a_tf_keras_run_cites_tf_keras_could_use_gpu_kernel(rule_id):
    kind, _ = CASES[rule_id]
    message = _finding(_facts(f"{rule_id}-offending", TF_KERAS), rule_id).message
    cls = kind.upper()
    assert f"{cls}._could_use_gpu_kernel in tf_keras/src/layers/rnn/{kind}.py" in message
    assert not _cites_keras3_source(message), message
    for cite in KERAS3_CITES:
        assert cite not in message, (cite, message)


@pytest.mark.parametrize("flavour", ["keras 3.15.1", None])
@pytest.mark.parametrize("rule_id", list(CASES))
def test_a_keras_3_run_keeps_its_citation(rule_id, flavour):
    _, cite = CASES[rule_id]
    message = _finding(_facts(f"{rule_id}-offending", flavour), rule_id).message
    assert cite in message and "tf_keras" not in message and "_could_use_gpu_kernel" not in message


def test_the_rd101_and_rd102_messages_of_the_fresh_users_keras_2_run():
    """The defect as found: under tf_keras, RD101 cited LSTM/GRU.inner_loop and RD102 cited
    cudnn_ok in keras/src/backend/tensorflow/rnn.py, while their evidence named tf_keras."""
    rd101 = _finding(_facts("RD101-offending", TF_KERAS), "RD101").message
    assert rd101 == (
        "LSTM layer 'seq/lstm' sets recurrent_dropout=0.25: Keras only tries the cuDNN kernel "
        "when recurrent_dropout is 0 (LSTM._could_use_gpu_kernel in "
        "tf_keras/src/layers/rnn/lstm.py). Once fixed, the installed Keras takes the cuDNN "
        "kernel on a GPU."
    )
    rd102 = _finding(_facts("RD102-offending", TF_KERAS), "RD102").message
    assert rd102 == (
        "GRU layer 'seq/gru' sets activation='relu': cuDNN's fused kernel computes tanh only "
        "(GRU._could_use_gpu_kernel in tf_keras/src/layers/rnn/gru.py). Once fixed, the "
        "installed Keras takes the cuDNN kernel on a GPU."
    )


@pytest.mark.parametrize("flavour", ["keras 3.15.1", None])
def test_the_rd101_and_rd102_messages_of_a_keras_3_run_are_unchanged(flavour):
    rd101 = _finding(_facts("RD101-offending", flavour), "RD101").message
    assert rd101 == (
        "LSTM layer 'seq/lstm' sets recurrent_dropout=0.25: Keras only tries the cuDNN kernel "
        "when recurrent_dropout is 0 (LSTM/GRU.inner_loop). Once fixed, the installed Keras "
        "takes the cuDNN kernel on a GPU."
    )
    rd102 = _finding(_facts("RD102-offending", flavour), "RD102").message
    assert rd102 == (
        "GRU layer 'seq/gru' sets activation='relu': cuDNN's fused kernel computes tanh only "
        "(cudnn_ok in keras/src/backend/tensorflow/rnn.py). Once fixed, the installed Keras "
        "takes the cuDNN kernel on a GPU."
    )


@pytest.mark.parametrize("rule_id", [*CASES, "RD106", "RD107", "RD108", "RD109"])
def test_only_the_wording_follows_the_flavour_never_the_decision(rule_id):
    """Same facts, either Keras: the same severity, fix, verdict and evidence values."""

    def decision(flavour):
        f = _finding(_facts(f"{rule_id}-offending", flavour), rule_id)
        return (
            f.severity,
            f.fix,
            f.gain,
            f.layer,
            f.fast_path_after_fix,
            [(e.label, e.value) for e in f.evidence],
        )

    assert decision(TF_KERAS) == decision("keras 3.15.1")


def test_rd107_names_the_generic_loop_of_the_keras_that_ran():
    def verdict(flavour):
        f = _finding(_facts("RD107-offending", flavour), "RD107")
        (e,) = [e for e in f.evidence if e.label == "fast-path verdict"]
        return e.source

    assert verdict(TF_KERAS) == "tf_keras/src/layers/rnn/base_rnn.py: RNN.call runs backend.rnn"
    assert verdict("keras 3.15.1") == "keras/src/layers/rnn/rnn.py: RNN.inner_loop runs backend.rnn"


def test_the_mask_proviso_cites_the_mask_check_of_the_keras_that_ran():
    facts = _facts("RD110-offending", TF_KERAS)
    layer = facts.model.rnn_layers[0]
    sampled = fp.mask_caveat(layer, facts)
    assert "is_cudnn_supported_inputs" in sampled and not _cites_keras3_source(sampled)
    assert "not right-padded (RD110)" in sampled and "generic kernel" in sampled
    facts.environment.keras_flavour = "keras 3.15.1"
    sampled = fp.mask_caveat(layer, facts)
    assert "_assert_valid_mask" in sampled and "the step fails there" in sampled
    facts.sequences = None  # masks not sampled: the plain proviso
    unsampled = dataclasses.replace(layer, receives_mask=True)
    assert fp.mask_caveat(unsampled, facts) == fp.MASK_CAVEAT
    facts.environment.keras_flavour = TF_KERAS
    assert fp.mask_caveat(unsampled, facts) == fp.TF_KERAS_MASK_CAVEAT
    assert not _cites_keras3_source(fp.TF_KERAS_MASK_CAVEAT)


def test_the_cited_tf_keras_flag_exists_in_the_installed_tf_keras():
    """The criterion the messages name is where tf_keras decides (read, not recalled)."""
    spec = importlib.util.find_spec("tf_keras")
    if spec is None:
        pytest.skip("tf_keras is not installed")
    root = Path(next(iter(spec.submodule_search_locations))).parent
    for kind in fp.FUSED_KINDS:
        layer = _facts("RD101-offending", TF_KERAS).model.rnn_layers[0]
        layer = dataclasses.replace(layer, kind=kind)
        flag, path = fp.tf_keras_criterion(layer).split(" in ")
        source = (root / path).read_text()
        assert f"class {flag.split('.')[0]}(" in source
        assert f"self.{flag.split('.')[1]} = (" in source


def test_a_call_that_cannot_be_rewritten_in_place_gets_a_display_only_sketch():
    """A fresh user's ``layers.GRU(args.units, **rnn_kwargs)``, whose splat held
    ``recurrent_dropout``: the fix rebuilt the call from the run's values and the --verify
    patch replaced theirs with ``layers.GRU(32, activation='relu', dropout=0.1)``, so
    ``--units`` stopped setting the width and ``rnn_kwargs`` was dropped."""
    facts = _facts("RD101-offending", None)
    (layer,) = facts.model.rnn_layers
    layer.location.call_source = "layers.LSTM(args.units, **rnn_kwargs)"
    fix = _finding(facts, "RD101").fix
    assert fix.safety == "display-only" and fix.before is None  # nothing replaced
    first, second, call = fix.code.splitlines()
    assert first == (
        "# display-only: your call passes **rnn_kwargs (which holds recurrent_dropout): change "
        "it where rnn_kwargs is built. The call below is written from this run's values: a "
        "name of yours"
    )
    assert second.startswith("# appears as its value, so edit your own call to match")
    assert call == "layers.LSTM(4, dropout=0.25)"  # recorded units; input dropout kept (probed)
    assert "(your call passes **rnn_kwargs" in fix.title
    # a call with the argument written in it is still rewritten in place
    layer.location.call_source = "layers.LSTM(args.units, recurrent_dropout=0.25)"
    fix = _finding(facts, "RD101").fix
    assert fix.before == "layers.LSTM(args.units, recurrent_dropout=0.25)"
    assert fix.code == "layers.LSTM(args.units, dropout=0.25)" and fix.safety == "unsafe"


def test_a_keyword_written_beside_a_kwargs_splat_is_dropped_in_place():
    """A review: ``LSTM(args.units, recurrent_dropout=0.2, **common)`` got a rebuilt display-only
    sketch saying ``**common`` held recurrent_dropout, which the call itself wrote. Dropping a
    written keyword is exact beside a splat; setting one is not (the splat may hold it)."""
    facts = _facts("RD101-offending", None)
    (layer,) = facts.model.rnn_layers
    layer.fast_path.dropout_keeps_fast_path = False  # the fix drops, sets nothing
    layer.location.call_source = "layers.LSTM(args.units, recurrent_dropout=0.25, **common)"
    fix = _finding(facts, "RD101").fix
    assert fix.code == "layers.LSTM(args.units, **common)" and fix.safety == "unsafe"
    assert fp.rewrite_call(fix.before, set_args={"dropout": 0.25}) is None  # could clash
    layer.fast_path.dropout_keeps_fast_path = True  # the fix sets dropout=0.25 beside the splat
    fix = _finding(facts, "RD101").fix
    assert fix.safety == "display-only" and fix.before is None
    # a new user's trial: the sketch rebuilt from the run's values dropped **common; the user's
    # own call is kept, with the keyword beside the splat and what to check
    assert fix.code == (
        "# display-only: your call also passes **common: if it holds dropout, remove it there "
        "(two values for one keyword: TypeError)\nlayers.LSTM(args.units, **common, dropout=0.25)"
    )
    assert fix.title.endswith(
        "(your call also passes **common: if it holds dropout, remove it there)"
    )


def test_a_multi_line_call_beside_a_splat_keeps_its_comments_and_the_splat():
    """A new user's trial: RD101's display-only code for a call over several lines with comments
    and ``**common`` was ``layers.LSTM(24, activation='softsign', dropout=0.25)``."""
    facts = _facts("RD101-offending", None)
    (layer,) = facts.model.rnn_layers
    layer.fast_path.dropout_keeps_fast_path = True
    layer.location.call_source = (
        "layers.LSTM(\n    24,\n    # keep some recurrent regularisation\n"
        '    recurrent_dropout=0.25,\n    activation="softsign",  # tried relu\n    **common,\n)'
    )
    code = _finding(facts, "RD101").fix.code
    assert code.splitlines()[1:] == [
        "layers.LSTM(",
        "    24,",
        "    # keep some recurrent regularisation",
        '    activation="softsign",  # tried relu',
        "    **common,",
        "    dropout=0.25,",
        ")",
    ]
    # a splat that the call reads a blocking value through stays a rebuilt sketch
    layer.location.call_source = "layers.LSTM(24, recurrent_dropout=rd, **common)"
    assert "written from this run's values" in _finding(facts, "RD101").fix.code
    # review: a keyword the call writes beside the splat is not in it: replaced exactly, with
    # RD101's own safety, and the fix applies as it is
    call = "layers.LSTM(24, recurrent_dropout=0.25, dropout=0.0, **common)"
    layer.location.call_source = call
    fix = _finding(facts, "RD101").fix
    assert fix.code == "layers.LSTM(24, dropout=0.25, **common)"
    assert fix.safety == "unsafe" and fix.before == call
    # a *args splat is not rewritten beside: the rebuilt sketch, as the docstring says
    layer.location.call_source = "layers.LSTM(*a, recurrent_dropout=0.25, **common)"
    assert "written from this run's values" in _finding(facts, "RD101").fix.code
