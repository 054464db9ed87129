"""Real text that ships with every Python: the source lines of the standard library's modules."""

from __future__ import annotations

import random
import sysconfig
from pathlib import Path

PRINTABLE = [chr(c) for c in range(32, 127)]  # the characters the model sees
CHAR_TO_ID = {ch: i + 1 for i, ch in enumerate(PRINTABLE)}  # 0 is left for padding
VOCAB_SIZE = len(PRINTABLE) + 1


def stdlib_lines(max_lines: int, max_chars: int, seed: int = 0) -> list[str]:
    """Non-trivial, printable-ASCII source lines of the top-level stdlib ``.py`` files.

    Lines are stripped of indentation, cut to ``max_chars`` and shuffled with ``seed``.
    """
    root = Path(sysconfig.get_paths()["stdlib"])
    lines = []
    for path in sorted(root.glob("*.py")):
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            line = line.strip()
            if len(line) >= 4 and all(ch in CHAR_TO_ID for ch in line):
                lines.append(line[:max_chars])
    random.Random(seed).shuffle(lines)
    return lines[:max_lines]


def encode(lines: list[str]) -> list[list[int]]:
    return [[CHAR_TO_ID[ch] for ch in line] for line in lines]
