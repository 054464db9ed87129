"""Regenerates ``tests/data/host_hw/<scenario>.json``: real facts of ``rnndoctor check`` runs on
the custom-loop and eager-fit scripts, for the TensorFlow-free unit tests of RD401, RD402,
RD405 and the GPU rules (which the tests derive from these CPU facts, changing only the GPU
fields they exercise).

Run from the repository root with TensorFlow installed::

    python tests/data/make_host_hw_fixtures.py
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
TESTS = HERE.parent
REPO = TESTS.parent
SCRIPTS = TESTS / "scripts"
SCENARIOS = {
    "loop-eager": ("custom_loop.py", "eager"),
    "loop-traced": ("custom_loop.py", "traced"),
    "loop-retrace": ("custom_loop.py", "retrace"),
    "fit-run-eagerly": ("run_eagerly_fit.py", "compile"),
    "fit-functions-run-eagerly": ("run_eagerly_fit.py", "config"),
}
WINDOW = ["--steps", "5", "--warmup", "1", "--profile-steps", "1", "--timeout", "240"]


def main() -> None:
    out_dir = HERE / "host_hw"
    out_dir.mkdir(exist_ok=True)
    for name, (script, mode) in SCENARIOS.items():
        with tempfile.TemporaryDirectory() as tmp:
            subprocess.run(
                [sys.executable, "-m", "rnndoctor", "check", str(SCRIPTS / script), "--out", tmp,
                 *WINDOW, "--", mode],
                check=False, cwd=tmp,
            )  # fmt: skip
            text = (Path(tmp) / "facts.json").read_text()
            text = text.replace(tmp, "<out>")
        for root, alias in ((TESTS, "<tests>"), (REPO, "<repo>")):
            text = text.replace(str(root), alias)  # no machine paths
        facts = json.loads(text)
        facts["run"]["cwd"] = "<out>"
        (out_dir / f"{name}.json").write_text(json.dumps(facts, indent=1) + "\n")
        print("wrote", out_dir / f"{name}.json")


if __name__ == "__main__":
    main()
