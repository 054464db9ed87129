"""Regenerates ``tests/data/rules/<scenario>.json``: real facts of the tiny scenario models.

Run from the repository root with TensorFlow installed::

    python tests/data/make_rule_fixtures.py

Each file holds ``facts`` (the output of ``rnndoctor.diagnose`` on the scenario, through
``Facts.to_dict``) and ``expected`` (rule ID and layer of each RD1xx finding the rules must give).
The unit tests run the rules on these facts without TensorFlow.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import keras  # noqa: E402

import rnndoctor  # noqa: E402
import scenarios  # noqa: E402

rnndoctor.record_construction_sites()


def main() -> None:
    out = HERE / "rules"
    out.mkdir(exist_ok=True)
    for scenario in scenarios.SCENARIOS:
        keras.utils.clear_session()
        model = scenario.build()
        x, y = scenarios.data()
        report = rnndoctor.diagnose(
            model, x, y=y, steps=2, warmup_steps=1, profile_steps=0, epochs=1, batch_size=16,
            verbose=0,
        )  # fmt: skip
        facts = report.facts.to_dict()
        text = json.dumps(facts, indent=1)
        for root, alias in ((HERE.parent, "<tests>"), (HERE.parent.parent, "<repo>")):
            text = text.replace(str(root), alias)  # no machine paths
        expected = (
            [{"rule_id": scenario.rule_id, "layer": scenario.layer}]
            if scenario.variant == "offending"
            else []
        )
        name = f"{scenario.rule_id}-{scenario.variant}.json"
        (out / name).write_text(
            json.dumps({"facts": json.loads(text), "expected": expected}, indent=1) + "\n"
        )
        print("wrote", out / name)


if __name__ == "__main__":
    main()
