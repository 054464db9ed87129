import os
import sys
from pathlib import Path

# Tests import the shared scenario and helper modules from this folder.
sys.path.insert(0, str(Path(__file__).parent))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
