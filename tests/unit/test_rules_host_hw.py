"""RD302, RD401, RD402, RD405 and RD601-RD604 on saved real facts (tests/data/host_hw/*.json,
from ``tests/data/make_host_hw_fixtures.py``): pure, no TensorFlow.

The GPU rules are exercised on those CPU facts with only the GPU fields a test names changed (a
GPU run's facts cannot be produced on this machine); on the facts as captured they must report
"not evaluated: needs a GPU", never a pass.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from rnndoctor.capture import env, traces
from rnndoctor.engine import evaluate
from rnndoctor.facts import Device, Facts, StepArgument, TraceCount
from rnndoctor.findings import Severity

DATA = Path(__file__).parents[1] / "data" / "host_hw"
GPU_RULES = ("RD302", "RD601", "RD602", "RD604")


def facts_of(name: str) -> Facts:
    return Facts.from_dict(json.loads((DATA / f"{name}.json").read_text()))


def outcome(facts: Facts, rule_id: str):
    (found,) = [o for o in evaluate(facts, select=[rule_id]).outcomes if o.rule.id == rule_id]
    return found


def findings(facts: Facts, rule_id: str):
    return [f for f in evaluate(facts, select=[rule_id]).findings if f.rule_id == rule_id]


def line_of(script: str, needle: str) -> int:
    text = (Path(__file__).parents[1] / "scripts" / script).read_text().splitlines()
    return next(i for i, t in enumerate(text, 1) if needle in t)


def on_gpu(facts: Facts, capability: str = "8.0", cudnn: str | None = "9.3.0") -> Facts:
    """The same facts as if TensorFlow had seen one GPU with these properties."""
    env_ = facts.environment
    env_.gpu_count = 1
    env_.devices.append(Device("/physical_device:GPU:0", "GPU", {"device_name": "A100"}))
    env_.gpu_names = ["A100"]
    env_.gpu_compute_capability = [capability]
    env_.gpu_compute_capability_not_measured = None
    env_.cudnn_runtime = cudnn
    env_.cudnn_runtime_not_measured = None if cudnn else "no libcudnn library is loaded"
    return facts


# -- RD402 eager-custom-loop -----------------------------------------------------------------
def test_rd402_fires_on_the_eager_loop_with_its_measured_twin():
    facts = facts_of("loop-eager")
    (finding,) = findings(facts, "RD402")
    loop_ = facts.loop
    assert loop_.eager and loop_.eager_call_ms > loop_.traced_call_ms > 0
    assert finding.location.line == line_of("custom_loop.py", "def train_step(")
    step, saved = facts.steps.median_step_time_ms, loop_.eager_call_ms - loop_.traced_call_ms
    # The model: the measured step minus what tracing saves; the step function's own ratio
    # when the (noisy) step measured shorter than the twin's eager call.
    expected = step / (step - saved) if step > saved else loop_.eager_call_ms / loop_.traced_call_ms
    assert finding.speedup == pytest.approx(expected, rel=0.01)
    facts.steps.median_step_time_ms = loop_.eager_call_ms + 10.0
    (consistent,) = findings(facts, "RD402")
    assert consistent.speedup == pytest.approx(
        (saved + 10 + loop_.traced_call_ms) / (loop_.traced_call_ms + 10), rel=0.01
    )
    assert "from the" in consistent.gain and "measured step" in consistent.gain
    assert finding.severity is (Severity.ERROR if expected >= 2 else Severity.WARNING)
    assert "tf.TensorSpec([None, 12, 4], tf.float32),  # x" in finding.fix.code
    assert finding.fix.code.endswith("def train_step(x, y):")
    labels = {e.label: e.value for e in finding.evidence}
    assert labels["step function, eager"] == loop_.eager_call_ms
    assert labels["step function, tf.function"] == loop_.traced_call_ms
    assert str(round(loop_.eager_call_ms, 2)) in finding.gain


def test_rd402_does_not_fire_on_the_traced_loop():
    facts = facts_of("loop-traced")
    assert facts.loop is not None and not facts.loop.eager
    assert outcome(facts, "RD402").status == "passed"


def test_rd402_without_a_twin_says_why_and_claims_no_speedup():
    facts = facts_of("loop-eager")
    facts.loop.eager_call_ms = facts.loop.traced_call_ms = None
    facts.loop.twin_not_measured = "the step function could not run as a tf.function: ..."
    (finding,) = findings(facts, "RD402")
    assert finding.speedup is None and finding.severity is Severity.WARNING
    assert finding.gain.startswith("not measured: no traced twin (the step function could not")


def test_rd402_loop_body_at_module_level_points_at_apply_gradients():
    facts = facts_of("loop-eager")
    facts.loop.step_function = None
    facts.loop.step_location = None
    (finding,) = findings(facts, "RD402")
    assert finding.location.line == line_of("custom_loop.py", "# apply-line")
    assert finding.fix.safety == "display-only" and "def train_step" in finding.fix.code


def test_rd402_passes_a_fit_script_and_is_not_evaluated_when_nothing_trained():
    facts = facts_of("fit-run-eagerly")
    assert facts.loop is None and facts.fit is not None
    assert outcome(facts, "RD402").status == "passed"  # fit's step is Keras' tf.function (RD401)
    facts.fit = None
    facts.run.outcome = "script_error"
    result = outcome(facts, "RD402")
    assert result.status == "not_evaluated" and "neither Model.fit" in result.reason


# -- RD405 retracing -------------------------------------------------------------------------
def test_rd405_fires_with_the_tracing_count_and_a_shape_generic_signature():
    facts = facts_of("loop-retrace")
    (trace,) = [t for t in facts.probes.traces if t.role == "custom_step"]
    (finding,) = findings(facts, "RD405")
    labels = {e.label: e.value for e in finding.evidence}
    assert labels["tracing count"] == trace.traces >= 5
    assert labels["calls that traced"] == f"{trace.traced_calls} of {trace.calls}"
    assert "x: float32[16, 13, 4]" in labels["shapes of the calls that traced"]
    assert "tf.TensorSpec([None, None, 4], tf.float32),  # x" in finding.fix.code
    assert finding.location.line == line_of("custom_loop.py", "def train_step(")
    share = trace.tracing_ms / trace.total_call_ms
    assert finding.severity is (Severity.ERROR if share >= 0.5 else Severity.WARNING)
    assert f"({share:.0%})" in finding.gain
    assert finding.speedup is None  # a window-only figure is not carried into the forecast


@pytest.mark.parametrize("traced_calls, fires", [(4, False), (5, True)])
def test_rd405_uses_tensorflows_retracing_warning_threshold(traced_calls, fires):
    facts = facts_of("loop-retrace")
    (trace,) = [t for t in facts.probes.traces if t.role == "custom_step"]
    trace.traced_calls = traced_calls
    assert bool(findings(facts, "RD405")) is fires


def test_rd405_does_not_fire_on_a_loop_with_an_input_signature():
    facts = facts_of("loop-traced")
    (trace,) = [t for t in facts.probes.traces if t.role == "custom_step"]
    assert trace.has_input_signature and trace.traced_calls < 5
    assert outcome(facts, "RD405").status == "passed"


def test_rd405_python_values_and_functions_built_in_the_loop_get_their_own_fixes():
    facts = facts_of("loop-retrace")
    facts.probes.traces = [
        TraceCount("step", traces=6, calls=6, role="custom_step", traced_calls=6,
                   arguments=[StepArgument("x", spec="tf.TensorSpec([None, 5], tf.float32)"),
                              StepArgument("epoch", kind="python", values_seen=6)]),
        TraceCount("other_step", traces=6, calls=6, role="custom_step", traced_calls=6,
                   instances=6),
        TraceCount("helper", traces=9, calls=9, role="other", traced_calls=9),
    ]  # fmt: skip
    first, second = findings(facts, "RD405")
    assert "epoch=tf.constant(epoch)" in first.fix.code
    assert "once, outside the training loop" in second.fix.code
    assert first.gain.startswith("not measured")


# -- RD401 run-eagerly -----------------------------------------------------------------------
def test_rd401_compile_run_eagerly_points_at_compile_and_drops_the_argument():
    facts = facts_of("fit-run-eagerly")
    (finding,) = findings(facts, "RD401")
    assert finding.location.line == line_of("run_eagerly_fit.py", "# compile-line")
    # run_eagerly=MODE == "compile" reads the script's own switch: removing the argument would
    # make that switch do nothing, so the fix says where to turn it off (display-only)
    assert finding.fix.safety == "display-only" and finding.fix.before is None
    assert finding.fix.code == (
        '# your compile call passes run_eagerly=MODE == "compile": make that False where its '
        "value is set (keep it on only while debugging)"
    )
    # a literal run_eagerly=True: the user's call as written (double quotes kept), without it
    before = 'model.compile(optimizer="adam", loss="mse", run_eagerly=True)'
    (facts.fit.compile_location or facts.environment.run_eagerly_location).call_source = before
    (finding,) = findings(facts, "RD401")
    assert finding.fix.code == 'model.compile(optimizer="adam", loss="mse")'
    assert finding.fix.before == before
    assert finding.gain.startswith("not measured")
    assert finding.severity is Severity.WARNING


def test_rd401_run_functions_eagerly_points_at_the_switch():
    facts = facts_of("fit-functions-run-eagerly")
    assert facts.environment.run_functions_eagerly is True
    (finding,) = findings(facts, "RD401")
    assert finding.location.line == line_of("run_eagerly_fit.py", "# eager-switch")
    assert finding.fix.code == "tf.config.run_functions_eagerly(False)"


def test_rd401_uses_a_measured_twin_of_a_loop_step_made_eager():
    facts = facts_of("loop-eager")
    facts.environment.run_functions_eagerly = True
    facts.loop.functions_run_eagerly = True
    (finding,) = findings(facts, "RD401")
    assert finding.speedup is not None and finding.speedup > 1
    assert outcome(facts, "RD402").status == "passed"  # RD401's case, not RD402's


def test_rd401_passes_when_nothing_runs_eagerly():
    assert outcome(facts_of("loop-traced"), "RD401").status == "passed"


# -- the GPU rules on CPU facts ----------------------------------------------------------------
@pytest.mark.parametrize("rule_id", GPU_RULES)
def test_gpu_rules_are_not_evaluated_on_a_cpu_run(rule_id):
    facts = facts_of("fit-run-eagerly")
    facts.probes = facts.probes or facts_of("loop-retrace").probes
    found = outcome(facts, rule_id)
    assert found.status == "not_evaluated" and found.reason.startswith("needs a GPU")


def test_rd603_passes_on_a_machine_without_an_nvidia_gpu_and_is_not_evaluated_unmeasured():
    facts = facts_of("loop-eager")
    assert facts.environment.nvidia_gpu_present is False
    assert outcome(facts, "RD603").status == "passed"
    facts.environment.nvidia_gpu_present = None
    facts.environment.nvidia_gpu_not_measured = "no nvidia-smi, no /proc and no /sys to read"
    found = outcome(facts, "RD603")
    assert found.status == "not_evaluated" and "no nvidia-smi" in found.reason


def test_rd603_fires_when_the_gpu_is_there_but_tensorflow_sees_none():
    facts = facts_of("loop-eager")
    facts.environment.nvidia_gpu_present = True
    facts.environment.nvidia_gpus = ["NVIDIA H200"]
    facts.environment.nvidia_gpu_source = "nvidia-smi"
    (finding,) = findings(facts, "RD603")
    assert "NVIDIA H200" in str(finding.evidence[0].value)
    assert "tensorflow[and-cuda]" in finding.fix.code


@pytest.mark.parametrize(
    "capability, policy, fires", [("8.0", "float32", True), ("6.1", "float32", False),
                                  ("8.0", "mixed_float16", False)],
)  # fmt: skip
def test_rd601_mixed_precision_off(capability, policy, fires):
    facts = on_gpu(facts_of("fit-run-eagerly"), capability)
    facts.environment.precision_policy = policy
    for layer in facts.model.rnn_layers:
        layer.dtype_policy = policy
    got = findings(facts, "RD601")
    assert bool(got) is fires
    if fires:
        assert 'set_global_policy("mixed_bfloat16")' in got[0].fix.code  # 8.0: bfloat16
        assert got[0].gain.startswith("not measured")


def test_rd601_without_a_compute_capability_is_not_evaluated():
    facts = on_gpu(facts_of("fit-run-eagerly"))
    facts.environment.gpu_compute_capability = []
    facts.environment.gpu_compute_capability_not_measured = "no compute_capability"
    assert outcome(facts, "RD601").status == "not_evaluated"


def test_rd602_flags_units_and_batch_that_are_not_multiples_of_8():
    facts = on_gpu(facts_of("fit-run-eagerly"))
    facts.environment.precision_policy = "mixed_float16"
    (layer,) = facts.model.rnn_layers
    layer.args["units"] = 100
    layer.location.call_source = "keras.layers.LSTM(100)"
    facts.steps.batch_size = 50
    units, batch = findings(facts, "RD602")
    assert units.fix.code == "keras.layers.LSTM(104)" and units.layer == layer.path
    assert batch.fix.code == "batch_size=56"
    facts.environment.precision_policy = "float32"
    assert findings(facts, "RD602") == []  # RD601's case


def test_rd602_keeps_units_read_from_an_option_and_the_rest_of_the_call():
    """The class of bug a fresh user's --verify patch showed for RD101: a literal written over
    ``LSTM(args.units)`` makes ``--units`` do nothing. A units read from a name gets a note;
    a literal is rewritten in the user's own text, its other arguments and spelling kept."""
    facts = on_gpu(facts_of("fit-run-eagerly"))
    facts.environment.precision_policy = "mixed_float16"
    (layer,) = facts.model.rnn_layers
    layer.args["units"] = 100
    facts.steps.batch_size = 64
    layer.location.call_source = "keras.layers.LSTM(args.units, return_sequences=True)"
    (units,) = findings(facts, "RD602")
    assert units.fix.safety == "display-only" and units.fix.before is None
    assert units.fix.code.startswith("# units is args.units (100 in this run): set it to 104")
    layer.location.call_source = 'keras.layers.LSTM(\n    units=100,  # width\n    name="enc",\n)'
    (units,) = findings(facts, "RD602")
    assert units.fix.code == 'keras.layers.LSTM(\n    units=104,  # width\n    name="enc",\n)'
    layer.location.call_source = "keras.layers.LSTM(*spec)"
    (units,) = findings(facts, "RD602")
    assert units.fix.safety == "display-only" and units.fix.before is None  # rebuilt: a sketch


@pytest.mark.parametrize(
    "cudnn, mask, fires",
    [("8.6.0", True, True), ("8.9.1", True, True), ("8.9.2", True, False),
     ("9.3.0", True, False), ("8.6.0", False, False)],
)  # fmt: skip
def test_rd604_masked_rnn_on_the_buggy_cudnn_range(cudnn, mask, fires):
    facts = on_gpu(facts_of("fit-run-eagerly"), cudnn=cudnn)
    for layer in facts.model.rnn_layers:
        layer.receives_mask = mask
    got = findings(facts, "RD604")
    assert bool(got) is fires
    if fires:
        assert got[0].severity is Severity.ERROR
        assert ">=8.9.2" in got[0].fix.code


def test_rd604_without_a_cudnn_version_is_not_evaluated():
    facts = on_gpu(facts_of("fit-run-eagerly"), cudnn=None)
    facts.environment.cudnn_build = "9"  # the build names no minor version
    found = outcome(facts, "RD604")
    assert found.status == "not_evaluated" and "cuDNN version was not measured" in found.reason


@pytest.mark.parametrize("busy_ms, input_share, fires", [(2.0, None, True), (9.0, None, False),
                                                         (2.0, 0.6, False)])  # fmt: skip
def test_rd302_device_idle_for_most_of_the_step(busy_ms, input_share, fires):
    facts = on_gpu(facts_of("fit-run-eagerly"))
    facts.steps.median_step_time_ms = 10.0
    facts.profile.profiled_steps = 2
    facts.profile.device_self_time_us = busy_ms * 1000 * 2
    facts.probes.input_bound_share = input_share
    got = findings(facts, "RD302")
    assert bool(got) is fires
    if fires:
        shares = {e.label: e.value for e in got[0].evidence}
        assert shares["device busy share of the step"] == pytest.approx(busy_ms / 10.0)
        assert got[0].speedup is None  # an upper bound only


# -- environment and argument helpers (no TensorFlow) -----------------------------------------
def test_cudnn_versions_decode_both_encodings():
    assert env.decode_cudnn_version(8901) == "8.9.1"
    assert env.decode_cudnn_version(90300) == "9.3.0"


def test_nvidia_gpu_found_on_the_pci_bus_without_a_driver(tmp_path, monkeypatch):
    monkeypatch.setattr(env, "_run_nvidia_smi", lambda *a: None)
    for name, vendor, cls in (("0000:00:01.0", "0x1af4", "0x020000"),
                              ("0000:3b:00.0", "0x10de", "0x030200")):  # fmt: skip
        device = tmp_path / name
        device.mkdir()
        (device / "vendor").write_text(vendor + "\n")
        (device / "class").write_text(cls + "\n")
        (device / "device").write_text("0x2335\n")
    present, names, source, why = env.nvidia_gpus(str(tmp_path), str(tmp_path / "no-proc"))
    assert (present, names, source, why) == (
        True, ["NVIDIA PCI device 0x2335 at 0000:3b:00.0"], str(tmp_path), None
    )  # fmt: skip
    (tmp_path / "0000:3b:00.0" / "vendor").write_text("0x1002\n")  # not NVIDIA
    assert env.nvidia_gpus(str(tmp_path), str(tmp_path / "no-proc"))[0] is False
    assert env.nvidia_gpus(str(tmp_path / "none"), str(tmp_path / "no-proc"))[0] is None


def test_argument_signature_relaxes_the_batch_and_the_dims_that_varied():
    argument = traces.Argument("batch")
    for length in (7, 9):
        argument.observe((np.zeros((16, length, 3), "float32"), np.zeros((16,), "int64")))
    facts = argument.facts()
    assert facts.kind == "tensor"
    assert facts.spec == (
        "(tf.TensorSpec([None, None, 3], tf.float32), tf.TensorSpec([None], tf.int64))"
    )
    assert facts.shapes == ["(float32[16, 7, 3], int64[16])", "(float32[16, 9, 3], int64[16])"]
    python = traces.Argument("step")
    for value in (1, 2, 2):
        python.observe(value)
    assert (python.facts().kind, python.facts().values_seen, python.facts().spec) == (
        "python", 2, None
    )  # fmt: skip
