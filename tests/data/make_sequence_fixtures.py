"""Regenerates ``tests/data/rules/RD110-*.json``, ``RD111-*`` and ``RD114-*``: real facts of the
sequence scenarios in ``tests/seq_scenarios.py``.

Run from the repository root with TensorFlow installed::

    python tests/data/make_sequence_fixtures.py

Each scenario trains for a few steps through ``rnndoctor.diagnose``; its sequences are then
measured by the capture's own ``measure_batches`` on the scenario's numpy batches (as
``rnndoctor check`` does on the batches it samples), with ``pad_sequences`` hooked so that the
padding line is recorded. The ragged scenario runs the capture's window on a ragged
``tf.data`` pipeline, which Keras 3 rejects, and keeps the facts the hooks saved, as the capture
child does when the script fails. Files hold ``facts`` and ``expected`` (the RD1xx findings the
rules must give), in the format of ``make_rule_fixtures.py``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import keras  # noqa: E402
import seq_scenarios  # noqa: E402

import rnndoctor  # noqa: E402
from rnndoctor.capture import sequences, window  # noqa: E402
from rnndoctor.capture.env import collect_environment  # noqa: E402
from rnndoctor.capture.session import CaptureSession  # noqa: E402
from rnndoctor.capture.step_window import WindowOptions  # noqa: E402
from rnndoctor.facts import Facts, RunInfo  # noqa: E402

rnndoctor.record_construction_sites()


def _ragged_facts() -> Facts:
    facts = Facts(run=RunInfo(script=__file__, argv=[], cwd=str(Path.cwd())))
    facts.environment = collect_environment()
    options = WindowOptions(warmup_steps=1, measured_steps=2, profile_steps=0, run_probes=False)
    capture = CaptureSession(facts, options, None)
    sequences.install(capture)
    model, data, _ = seq_scenarios.ragged()
    try:
        fit = getattr(keras.Model.fit, "__wrapped__", keras.Model.fit)
        window.run_window(capture, fit, model, (data,), {"epochs": 1, "verbose": 0})
    except ValueError as exc:  # Keras 3: RNN.call cannot index a ragged dimension
        facts.run.outcome = "script_error"
        facts.run.error_type = type(exc).__name__
        facts.run.message = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0]}"[:500]
    else:
        raise SystemExit("the ragged scenario trained: Keras accepts ragged RNN input now")
    return facts


def _dense_facts(builder) -> Facts:
    sequences.install(None)
    model, x, y = builder()
    report = rnndoctor.diagnose(
        model, x, y=y, steps=2, warmup_steps=1, profile_steps=0, epochs=1,
        batch_size=seq_scenarios.BATCH, verbose=0,
    )  # fmt: skip
    facts = report.facts
    facts.probes = None  # timings: other rules' business, and noise in a fixture
    facts.sequences = sequences.measure_batches(
        model,
        seq_scenarios.batches(x, y),
        model_facts=facts.model,
        calls=sequences.pad_calls(),
    )
    facts.sequences.method = "numpy batches of the fixture (fit's order)"
    return facts


def main() -> None:
    out = HERE / "rules"
    out.mkdir(exist_ok=True)
    for name, (builder, expected) in seq_scenarios.FIXTURES.items():
        keras.utils.clear_session()
        facts = _ragged_facts() if builder is seq_scenarios.ragged else _dense_facts(builder)
        text = json.dumps(facts.to_dict(), indent=1, default=str)
        for root, alias in ((HERE.parent, "<tests>"), (HERE.parent.parent, "<repo>")):
            text = text.replace(str(root), alias)  # no machine paths
        doc = {
            "facts": json.loads(text),
            "expected": [{"rule_id": r, "layer": layer} for r, layer in expected],
        }
        (out / f"{name}.json").write_text(json.dumps(doc, indent=1) + "\n")
        print("wrote", out / f"{name}.json")


if __name__ == "__main__":
    main()
