"""The rules layer (importable as ``rnndoctor.rules``): the rule registry, rule options, and the
rules themselves.

What it owns: one module per rule (``rdNNN_<name>.py``), each a pure function
``check(facts[, options]) -> list[Finding]`` registered with :func:`rule`, which declares the
rule's identity (ID, name, summary, default severity) and its :class:`Option` s in one place;
the shared rule logic in the private ``_*.py`` modules; :func:`check_rule_options`, which checks
the ``[tool.rnndoctor.rules.<ID>]`` tables. The engine (``rnndoctor/engine.py``) runs each
rule through :meth:`Rule.run`, which stamps every finding's ``rule_id`` and ``name`` from the
registry, so a rule module never writes them.

What it may import: ``rnndoctor.facts``, ``rnndoctor.findings`` and ``rnndoctor.stats`` (pure,
no TensorFlow, no I/O), and the standard library. Never the capture layer, the CLI or reports.

A rule module's docstring is the rule's documentation (sections: *What it detects / Why it
slows training / Evidence / Example / Use instead / Fix safety / Options* (where it has options)
*/ References*), printed by ``rnndoctor rules ID`` and embedded in the HTML report.

The built-in rules are the ``rdNNN_*`` modules of this package, found by name
(:func:`pkgutil.iter_modules`, in sorted order). Third-party rules register the same way from a
module named in the entry-point group ``rnndoctor.rules``; importing the module registers its
rules.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import pkgutil
import re
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from importlib import metadata
from typing import Any

from rnndoctor.facts import Facts
from rnndoctor.findings import Finding, Severity

ENTRY_POINT_GROUP = "rnndoctor.rules"

_BUILTIN_MODULE = re.compile(r"rd\d{3}_\w+")
_OPTION_NAME = re.compile(r"[a-z][a-z0-9_]*")

OptionValue = bool | int | float | str
_TYPE_WORDS = {bool: "true or false", int: "an integer", float: "a number", str: "a string"}


@dataclass(frozen=True)
class Option:
    """A rule option: a threshold (or another number) the check reads, with its default.

    Declared with the rule (``@rule(..., options=(Option(...),))``), documented in the rule's
    *Options* section, overridable in ``[tool.rnndoctor.rules.<ID>]``.

    Attributes:
        name: snake_case name, as written in the TOML table (``min_input_share``).
        default: the value the rule uses unless overridden; its type is the option's type (an
            int is accepted for a float option, a bool is never taken for a number).
        unit: what the number counts (``fraction of the step``, ``timesteps``, ``x``).
        source: where the default comes from (xprof's or TensorFlow's source, a guide, a
            measurement, or rnndoctor's own choice).
        help: one line: what the option decides.
    """

    name: str
    default: OptionValue
    unit: str
    source: str
    help: str = ""

    def __post_init__(self) -> None:
        if not _OPTION_NAME.fullmatch(self.name):
            raise ValueError(f"option name {self.name!r} is not snake_case")
        if type(self.default) not in _TYPE_WORDS:
            raise ValueError(
                f"option {self.name!r}: the default must be a bool, int, float or str, not "
                f"{self.default!r}"
            )

    def coerce(self, value: Any, rule_id: str = "") -> OptionValue:
        """``value`` as this option's type.

        Raises:
            ValueError: one line, when ``value`` is not of the option's type.
        """
        kind = type(self.default)
        if kind is float and isinstance(value, int) and not isinstance(value, bool):
            return float(value)
        if type(value) is kind:
            return value
        where = f"{rule_id} option {self.name!r}" if rule_id else f"option {self.name!r}"
        raise ValueError(
            f"{where} takes {_TYPE_WORDS.get(kind, kind.__name__)} ({self.unit}; default "
            f"{self.default!r}), not {value!r}"
        )


class OptionValues(Mapping[str, OptionValue]):
    """One rule's option values for one evaluation (the defaults, with any overrides), read as
    attributes (``options.min_input_share``) or as a mapping. Read-only."""

    __slots__ = ("_values",)

    def __init__(self, values: Mapping[str, OptionValue]) -> None:
        object.__setattr__(self, "_values", dict(values))

    def __getattr__(self, name: str) -> OptionValue:
        try:
            return self._values[name]
        except KeyError:
            raise AttributeError(f"no rule option {name!r}") from None

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("rule option values are read-only")

    def __getitem__(self, name: str) -> OptionValue:
        return self._values[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        return f"OptionValues({self._values!r})"


@dataclass(frozen=True)
class Rule:
    """A registered rule: its identity, its options and its check.

    Attributes:
        id: stable ID (``RD101``).
        name: kebab-case name (``recurrent-dropout``).
        summary: one line, as ``rnndoctor rules`` lists it.
        needs: the Facts sections the rule reads; if one is missing the rule is reported as
            "not evaluated", never as a pass.
        check: the pure function, ``check(facts)`` or, for a rule with options,
            ``check(facts, options)``.
        doc: the rule's documentation (its module's docstring).
        severity: the rule's default severity: that of every finding whose check sets none
            (:func:`finding`); a check that grades a finding from what it measured sets its own
            (the doc says how).
        options: the options the check reads (:class:`Option`), in the doc's order.
    """

    id: str
    name: str
    summary: str
    needs: tuple[str, ...]
    check: Callable[..., list[Finding]]
    doc: str
    severity: Severity = Severity.WARNING
    options: tuple[Option, ...] = ()

    def option(self, name: str) -> Option:
        """The declared option ``name``.

        Raises:
            KeyError: the rule has no such option.
        """
        for option in self.options:
            if option.name == name:
                return option
        raise KeyError(name)

    def option_values(self, overrides: Mapping[str, Any] | None = None) -> OptionValues:
        """The defaults, with ``overrides`` (option name -> value) over them.

        Raises:
            ValueError: one line, for an unknown option or an ill-typed value.
        """
        values = {o.name: o.default for o in self.options}
        for name, value in (overrides or {}).items():
            try:
                option = self.option(name)
            except KeyError:
                known = ", ".join(o.name for o in self.options) or "none"
                raise ValueError(
                    f"unknown option {name!r} for rule {self.id} ({self.name}); its options: "
                    f"{known}"
                ) from None
            values[name] = option.coerce(value, self.id)
        return OptionValues(values)

    def run(
        self, facts: Facts, options: OptionValues | Mapping[str, Any] | None = None
    ) -> list[Finding]:
        """Runs the check and returns its findings stamped with this rule's ``rule_id``,
        ``name`` and, where the check set none, its default severity.

        Args:
            facts: the gathered facts.
            options: the option values (:meth:`option_values`), or a plain mapping of
                overrides over the defaults (``{"min_input_share": 0.1}``); None: the defaults.

        Raises:
            ValueError: ``options`` names an unknown option or holds an ill-typed value.
            NotEvaluated: as the check raises it.
        """
        if not isinstance(options, OptionValues):
            options = self.option_values(options)
        if not self.options and _arity(self.check) < 2:
            found = self.check(facts)
        else:
            found = self.check(facts, options)
        return [self._stamped(f) for f in found]

    def _stamped(self, found: Finding) -> Finding:
        severity = found.severity if found.severity is not None else self.severity
        return dataclasses.replace(found, rule_id=self.id, name=self.name, severity=severity)


def finding(message: str, severity: Severity | None = None, **fields: Any) -> Finding:
    """A finding of the rule being checked, as its check returns it to the engine.

    ``rule_id`` and ``name`` are left empty, and ``severity`` None means the rule's default
    severity (:attr:`Rule.severity`): :meth:`Rule.run`, through which the engine runs every
    rule, stamps all three from the registry. ``fields``
    are :class:`rnndoctor.findings.Finding`'s others (``layer``, ``location``, ``evidence``,
    ``fix``, ``gain``, ``speedup``, ...).
    """
    unstamped: Any = severity  # None until the engine stamps the rule's default
    return Finding(rule_id="", name="", severity=unstamped, message=message, **fields)


class NotEvaluated(Exception):
    """Raised by a rule's check when a fact it needs could not be measured in this run (a GPU
    fact on a CPU-only run, say). The engine reports the rule as ``not_evaluated`` with the
    message as the reason, never as a pass."""


class NeedsGPU(NotEvaluated):
    """A :class:`NotEvaluated` whose missing fact can only be measured on a GPU (this run saw
    none). Reports list these rules apart: they say nothing about a CPU-only run."""


_REGISTRY: dict[str, Rule] = {}
_loaded = False


def _arity(check: Callable[..., Any]) -> int:
    """How many positional parameters ``check`` takes."""
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    params = inspect.signature(check).parameters.values()
    return sum(1 for p in params if p.kind in kinds)


def rule(
    id: str,  # noqa: A002
    name: str,
    summary: str,
    needs: tuple[str, ...] = ("model",),
    *,
    severity: Severity = Severity.WARNING,
    options: tuple[Option, ...] = (),
) -> Callable[[Callable[..., list[Finding]]], Callable[..., list[Finding]]]:
    """Registers the decorated check as rule ``id`` / ``name``.

    The check is ``check(facts) -> list[Finding]``, or ``check(facts, options)`` when the rule
    declares ``options`` (it then reads ``options.<name>``, an :class:`OptionValues`). Its
    findings (built with :func:`finding`) leave ``rule_id`` and ``name`` empty, and
    ``severity`` too where it is the default: :meth:`Rule.run` stamps them from here.

    Args:
        id: stable ID (``RD201``).
        name: kebab-case name (``input-bound``).
        summary: one line, for ``rnndoctor rules``.
        needs: the Facts sections the check reads.
        severity: the default severity (see :attr:`Rule.severity`).
        options: the options the check reads, with their defaults, units and sources.

    Raises:
        ValueError: the ID or name is already registered by another function, two options
            share a name, or a check with options does not take them.
    """

    def decorate(check: Callable[..., list[Finding]]) -> Callable[..., list[Finding]]:
        for existing in _REGISTRY.values():
            if (existing.id == id or existing.name == name) and existing.check is not check:
                raise ValueError(f"rule {id} ({name}) is already registered")
        names = [o.name for o in options]
        if len(set(names)) != len(names):
            raise ValueError(f"rule {id} ({name}) declares an option twice: {names}")
        if options and _arity(check) < 2:
            raise ValueError(f"rule {id} ({name}) declares options; its check must take them")
        doc = inspect.getdoc(sys.modules[check.__module__]) or ""
        _REGISTRY[id] = Rule(
            id=id,
            name=name,
            summary=summary,
            needs=needs,
            check=check,
            doc=doc,
            severity=severity,
            options=tuple(options),
        )
        return check

    return decorate


def builtin_modules() -> list[str]:
    """The built-in rule modules: this package's ``rdNNN_*`` modules, in sorted order."""
    return sorted(
        info.name for info in pkgutil.iter_modules(__path__) if _BUILTIN_MODULE.fullmatch(info.name)
    )


def _load() -> None:
    global _loaded
    if _loaded:
        return
    _loaded = True
    for module in builtin_modules():
        importlib.import_module(f"{__name__}.{module}")
    for entry in metadata.entry_points(group=ENTRY_POINT_GROUP):
        try:
            entry.load()
        except Exception as exc:  # a broken plug-in must not take the built-in rules down
            print(f"rnndoctor: could not load rule plug-in {entry.name}: {exc}", file=sys.stderr)


def resolve_rule_options(
    table: Mapping[str, Mapping[str, Any]] | None,
) -> dict[str, OptionValues]:
    """Every rule's option values, by rule ID: the defaults, with ``table`` over them.

    Args:
        table: rule ID (any case) or name -> option name -> value, as in
            ``[tool.rnndoctor.rules.<ID>]``.

    Raises:
        ValueError: one line naming the first unknown rule, rule given twice (by ID and by
            name), unknown option or ill-typed value.
    """
    overrides: dict[str, Mapping[str, Any]] = {}
    for key, values in (table or {}).items():
        try:
            found = get_rule(str(key))
        except KeyError:
            raise ValueError(
                f"unknown rule {key!r} in [tool.rnndoctor.rules] (see `rnndoctor rules`)"
            ) from None
        if found.id in overrides:
            raise ValueError(
                f"rule {found.id} ({found.name}) is given twice in [tool.rnndoctor.rules]"
            )
        if not isinstance(values, Mapping):
            raise ValueError(
                f"[tool.rnndoctor.rules.{key}] must be a table of option = value, not {values!r}"
            )
        overrides[found.id] = values
    return {r.id: r.option_values(overrides.get(r.id)) for r in all_rules()}


def check_rule_options(table: Mapping[str, Mapping[str, Any]]) -> None:
    """Checks ``[tool.rnndoctor.rules.<ID>]`` tables: rule ID (or name) -> option -> value.

    Raises:
        ValueError: one line naming the first unknown rule, unknown option or ill-typed value.
    """
    resolve_rule_options(table)


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
