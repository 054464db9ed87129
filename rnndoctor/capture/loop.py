"""Custom training loops and tf.function tracing counts (issue 3). PLACEHOLDER.

Contract: ``install(capture)`` before the script runs: hooks the optimizer's gradient
application and ``tf.function`` calls.
"""

from __future__ import annotations

from typing import Any


def install(capture: Any) -> None:
    return None
