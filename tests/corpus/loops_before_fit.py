"""Starts two helper processes (one in its own session, out of the check's process group), then
loops forever before fit: the timeout must end all three."""

import subprocess
import sys
import time

sleeper = [sys.executable, "-c", "import time; time.sleep(600)"]
subprocess.Popen(sleeper)
subprocess.Popen(sleeper, start_new_session=True)  # escapes the process group
while True:
    time.sleep(0.2)
