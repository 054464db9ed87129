"""Probes that isolate the input pipeline and the compute (issue 3). PLACEHOLDER: being built.

Contract used by ``window.Capture``:

- ``prepare_fit_data(capture, arguments)``: before the user's ``fit`` runs; may replace
  ``arguments["x"]`` (a Python generator, say) by a wrapper that times and keeps batches as they
  flow.
- ``time_callbacks(capture, callbacks) -> callbacks``: wraps the user's callbacks to time their
  batch hooks.
- ``collect_data(capture, arguments)``: fills ``capture.facts.data``.
- ``sample_batches(capture, arguments) -> Batches``: up to K batches of the user's data, as numpy
  structures ``(x, y, sample_weight)``, without disturbing training.
- ``run_probes(capture, model, arguments, batches)``: fills ``capture.facts.probes``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Batches:
    """Batches sampled from the user's data. ``items``: each batch as Keras' data adapters yield
    it, converted to numpy (``x``, or ``(x, y)``, or ``(x, y, sample_weight)``); ``method``:
    ``fresh iterator`` or ``as they flowed through fit``; ``not_measured``: why there are none."""

    items: list[Any] = field(default_factory=list)
    method: str | None = None
    not_measured: str | None = None


def prepare_fit_data(capture: Any, arguments: dict[str, Any]) -> None:
    return None


def time_callbacks(capture: Any, callbacks: list[Any]) -> list[Any]:
    return callbacks


def collect_data(capture: Any, arguments: dict[str, Any]) -> None:
    return None


def sample_batches(capture: Any, arguments: dict[str, Any]) -> Batches:
    return Batches(not_measured="batch sampling is not built yet")


def run_probes(capture: Any, model: Any, arguments: dict[str, Any], batches: Batches) -> None:
    return None
