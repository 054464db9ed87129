"""Prints a secret from its environment and its own path, then fails (for --redact of
script.log)."""

import os

print("token:", os.environ["RNNDOCTOR_CORPUS_TOKEN"])
print("running", os.path.abspath(__file__))
raise FileNotFoundError("no training data next to " + os.path.abspath(__file__))
