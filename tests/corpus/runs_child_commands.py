"""Runs commands in child processes before fit (an archive unpacked with a shell command, say):
the check lets them run, and the report lists each command, its line and what it wrote."""

import os
import subprocess

from _tiny import data, lstm_model

os.system("echo hi > made_by_child.txt")
subprocess.run(["sh", "-c", "mkdir -p unpacked && echo 1,2 > unpacked/data.csv"], check=True)
x, y = data()
lstm_model().fit(x, y, batch_size=16, epochs=1)
