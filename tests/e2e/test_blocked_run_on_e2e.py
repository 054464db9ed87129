"""A script that blocks after its ``fit`` (a new user's: ``time.sleep(3600)``, a ``join`` on a
loader thread that never ends) held the check until ``--timeout`` once the run-on's budget had
run out, then ended it as a timeout (exit 4, "--timeout reached during phase 'done'"): the
asynchronous exception that stops the script waits for the blocking call to return. The budget's
end now stops the main thread through a signal handler (``rnndoctor/capture/after_window.py``:
``_STOP_SIGNAL``), and where even that cannot reach it (the signal blocked), the check ends 2 s
later from the timer's thread. Slow: the real CLI and capture child."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time

import pytest

pytestmark = pytest.mark.slow

FIT = textwrap.dedent(
    """
    import numpy as np
    import keras

    x = np.random.default_rng(0).normal(size=(64, 8, 4)).astype("float32")
    y = np.zeros((64, 1), "float32")
    model = keras.Sequential([keras.Input((8, 4)), keras.layers.LSTM(8), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    model.fit(x, y, batch_size=16, epochs=1)
    """
)
AFTER = {
    "sleep": "import time\ntime.sleep(3600)\n",
    "join": (
        "import threading\nstop = threading.Event()\n"
        "loader = threading.Thread(target=stop.wait)\nloader.start()\nloader.join()\n"
    ),
    # the stop signal blocked: only the backstop can end the check
    "blocked": (
        "import signal, time\n"
        "signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGRTMIN + 4})\ntime.sleep(3600)\n"
    ),
}
TIMEOUT_S = 40  # the run-on after a single fit gets 5% of it: 2 s


@pytest.mark.parametrize("after", sorted(AFTER))
def test_a_script_blocked_after_fit_ends_at_its_run_ons_budget_not_at_timeout(tmp_path, after):
    script = tmp_path / "train.py"
    script.write_text(FIT + AFTER[after])
    before = sorted(p.name for p in tmp_path.iterdir())
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "rnndoctor", "check", str(script), "--out", str(tmp_path / "r"),
         "--format", "json", "--steps", "3", "--warmup", "1", "--profile-steps", "0",
         "--no-probes", "--timeout", str(TIMEOUT_S), "--fail-on", "never"],
        cwd=tmp_path, capture_output=True, text=True, timeout=TIMEOUT_S + 60,
    )  # fmt: skip
    took = time.monotonic() - started
    assert done.returncode == 0, done.stderr
    assert "--timeout" not in done.stderr
    assert took < TIMEOUT_S - 5, took  # the run-on's 2 s budget; before: all of --timeout
    facts = json.loads((tmp_path / "r" / "report.json").read_text())["facts"]
    assert facts["run"]["outcome"] == "completed"
    assert facts["outside_window"]["ended"] == "budget"
    notes = [n for n in facts["run"]["notes"] if "did not stop within 2 s" in n]
    assert len(notes) == (1 if after == "blocked" else 0), facts["run"]["notes"]
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "r") == before
