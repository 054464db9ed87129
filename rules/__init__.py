"""The rule registry (importable as ``rnndoctor.rules``).

A rule is a pure function ``Facts -> list[Finding]`` in its own module, registered by ID with
:func:`rule`. The module's docstring is the rule's documentation (sections: *What it detects /
Why it slows training / Evidence / Example / Use instead / Fix safety / References*), printed by
``rnndoctor rules ID`` and embedded in the HTML report.

Third-party rules register the same way from a module named in the entry-point group
``rnndoctor.rules``; importing the module registers its rules.
"""

from __future__ import annotations

import importlib
import inspect
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib import metadata
from typing import Any

from rnndoctor.facts import Facts
from rnndoctor.findings import Finding

ENTRY_POINT_GROUP = "rnndoctor.rules"

_BUILTIN_MODULES = (
    "rd101_recurrent_dropout",
    "rd102_non_tanh_activation",
    "rd103_non_sigmoid_recurrent_activation",
    "rd104_unroll",
    "rd105_no_bias",
    "rd106_gru_reset_before",
    "rd107_generic_rnn_wrapper",
    "rd108_simple_rnn",
    "rd109_cudnn_disabled",
    "rd110_mask_not_right_padded",
    "rd111_fully_masked_sequence",
    "rd113_custom_cell",
    "rd114_ragged_input",
    "rd201_input_bound",
    "rd202_no_prefetch",
    "rd203_sequential_map",
    "rd204_python_generator_source",
    "rd205_no_cache",
    "rd206_pydataset_single_worker",
    "rd301_small_batch",
    "rd302_gpu_too_small_workload",
    "rd303_long_sequence",
    "rd401_run_eagerly",
    "rd402_eager_custom_loop",
    "rd403_tiny_steps",
    "rd404_slow_callbacks",
    "rd405_retracing",
    "rd501_padding_waste",
    "rd502_global_max_padding",
    "rd601_mixed_precision_off",
    "rd602_tensor_core_alignment",
    "rd603_gpu_not_used",
    "rd604_cudnn_mask_bug",
)


@dataclass(frozen=True)
class Rule:
    """A registered rule.

    Attributes:
        id: stable ID (``RD101``).
        name: kebab-case name (``recurrent-dropout``).
        summary: one line, as in ``RULES.md``.
        needs: the Facts sections the rule reads; if one is missing the rule is reported as
            "not evaluated", never as a pass.
        check: the pure function.
        doc: the rule's documentation (its module's docstring).
    """

    id: str
    name: str
    summary: str
    needs: tuple[str, ...]
    check: Callable[[Facts], list[Finding]]
    doc: str


class NotEvaluated(Exception):
    """Raised by a rule's check when a fact it needs could not be measured in this run (a GPU
    fact on a CPU-only run, say). The engine reports the rule as ``not_evaluated`` with the
    message as the reason, never as a pass."""


class NeedsGPU(NotEvaluated):
    """A :class:`NotEvaluated` whose missing fact can only be measured on a GPU (this run saw
    none). Reports list these rules apart: they say nothing about a CPU-only run."""


_REGISTRY: dict[str, Rule] = {}
_loaded = False


def rule(id: str, name: str, summary: str, needs: tuple[str, ...] = ("model",)):  # noqa: A002
    """Registers the decorated ``check(facts) -> list[Finding]`` function as a rule.

    Raises:
        ValueError: the ID or name is already registered by another function.
    """

    def decorate(check: Callable[[Facts], list[Finding]]):
        for existing in _REGISTRY.values():
            if (existing.id == id or existing.name == name) and existing.check is not check:
                raise ValueError(f"rule {id} ({name}) is already registered")
        doc = inspect.getdoc(sys.modules[check.__module__]) or ""
        _REGISTRY[id] = Rule(id=id, name=name, summary=summary, needs=needs, check=check, doc=doc)
        return check

    return decorate


def _load() -> None:
    global _loaded
    if _loaded:
        return
    _loaded = True
    for module in _BUILTIN_MODULES:
        importlib.import_module(f"{__name__}.{module}")
    for entry in metadata.entry_points(group=ENTRY_POINT_GROUP):
        try:
            entry.load()
        except Exception as exc:  # a broken plug-in must not take the built-in rules down
            print(f"rnndoctor: could not load rule plug-in {entry.name}: {exc}", file=sys.stderr)


def check_rule_options(table: Mapping[str, Mapping[str, Any]]) -> None:
    """Checks ``[tool.rnndoctor.rules.<ID>]`` tables: rule ID (or name) -> option -> value.

    Raises:
        ValueError: one line naming the first unknown rule, unknown option or ill-typed value.
    """
    for key in table:
        try:
            get_rule(key)
        except KeyError:
            raise ValueError(f"unknown rule {key!r} in [tool.rnndoctor.rules]") from None


def all_rules() -> list[Rule]:
    """Every registered rule, ordered by ID."""
    _load()
    return sorted(_REGISTRY.values(), key=lambda r: r.id)


def get_rule(key: str) -> Rule:
    """Looks a rule up by ID (``RD101``, any case) or name (``recurrent-dropout``).

    Raises:
        KeyError: no such rule.
    """
    _load()
    key_upper = key.upper()
    for r in _REGISTRY.values():
        if r.id == key_upper or r.name == key.lower():
            return r
    raise KeyError(key)
