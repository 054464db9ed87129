"""No harm to the user's files: turn off what writes user state during the check (issue 6).
PLACEHOLDER.

Contract: ``install(capture)`` before the script runs; ``filter_callbacks(capture, callbacks)``
returns the callbacks ``fit`` should run, recording what was neutralised in
``capture.facts.run.neutralised``.
"""

from __future__ import annotations

from typing import Any


def install(capture: Any) -> None:
    return None


def filter_callbacks(capture: Any, callbacks: list[Any]) -> list[Any]:
    return callbacks
