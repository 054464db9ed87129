"""Sequence sampling: lengths, padding and masks per RNN input (issue 4). PLACEHOLDER.

Contract used by ``window.Capture``: ``sample_sequences(capture, model, batches)`` fills
``capture.facts.sequences`` from ``batches`` (a ``probes.Batches``), within
``capture.budget("sequence sampling")``.
"""

from __future__ import annotations

from typing import Any


def sample_sequences(capture: Any, model: Any, batches: Any) -> None:
    return None
