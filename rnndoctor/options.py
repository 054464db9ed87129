"""Every option of a check, with its default written once; ``[tool.rnndoctor]``; the exit codes.

The CLI builds :class:`Options` with :func:`resolve` (command line over ``[tool.rnndoctor]`` in the
nearest ``pyproject.toml`` over these defaults) and checks them with :meth:`Options.validate`; the
capture child receives the window part as ``--key value`` arguments (:meth:`Options.child_argv`)
and reads them back with :func:`parse_child_args`. Pure: no TensorFlow, no typer.

Keys in the table use the option names, with dashes or underscores; a sub-table per rule (ID or
name) sets that rule's options::

    [tool.rnndoctor]
    steps = 30
    fail-on = "warning"
    format = ["html", "json", "sarif"]
    ignore = ["RD108", "custom-cell"]

    [tool.rnndoctor.rules.RD201]
    min_padded_fraction = 0.3
"""

from __future__ import annotations

import argparse
import enum
import math
import tomllib
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any


class ExitCode(enum.IntEnum):
    """Exit codes of ``rnndoctor`` (the README's table) and of the capture child."""

    OK = 0  # nothing at or above --fail-on
    FINDINGS = 1  # findings at or above --fail-on
    USAGE = 2  # a missing script, a directory instead of a script, a bad option, a foreign --out
    SCRIPT_FAILED = 3  # the script failed before the diagnosis finished, or cannot be checked
    TIMEOUT = 4  # --timeout: every process of the script was killed
    INTERNAL = 5  # an error in rnndoctor itself
    CHILD_INTERNAL = 70  # the capture child's own status for an error in rnndoctor (EX_SOFTWARE)
    INTERRUPTED = 130  # Ctrl-C (128 + SIGINT, as shells report it)


FORMATS = ("html", "json", "md", "sarif")
FAIL_ON = ("error", "warning", "info", "never")
_IN_FILE = {"in_file": True}  # field metadata: the option may be set in [tool.rnndoctor]
# the probes that run only when a rule that reads them runs (rnndoctor.engine.unread_probes)
SKIPPABLE_PROBES = ("batch-size", "steps-per-execution", "sequence-length")
_RULES_KEY = "rules"  # [tool.rnndoctor.rules.<RULE>]: Options.rule_options


class OptionsError(ValueError):
    """A bad option value, or a malformed ``[tool.rnndoctor]`` table (one line, for the user)."""


@dataclass
class Options:
    """One check's options. Each default here is the only place it is written.

    Attributes:
        out: the report folder.
        steps: measured training steps, after the warm-up.
        warmup: warm-up steps, run first and not timed (tracing, allocation).
        profile_steps: steps captured by the TF profiler after the measured ones (0: none).
        timeout: seconds before the script's whole process tree is killed (None: no limit,
            the capture child run by hand).
        fail_on: exit 1 at or above this severity (``FAIL_ON``).
        format: report formats (``FORMATS``).
        select: rule IDs or names to run (empty: all).
        ignore: rule IDs or names to skip.
        redact: remove home paths, user and host names and secret values from every output.
        no_probes: skip the input / compute / batch-size / steps_per_execution probes and the
            sequence sampling.
        skip_probes: probes of ``SKIPPABLE_PROBES`` not to run because no rule that reads
            them runs (``rnndoctor.engine.unread_probes`` of ``select`` / ``ignore``; set by the
            CLI for its capture child, never read from a file).
        spe_share_cutoffs: RD403's cut-offs on the dispatch share (``min_dispatch_share``,
            ``error_dispatch_share``, with ``rule_options`` over the defaults;
            ``rnndoctor.engine.spe_share_cutoffs``): the steps_per_execution probe pairs on in a
            second stage when its first stage's interval straddles one. Set by the CLI for its
            capture child, never read from a file; empty: one stage.
        batch_min_speedup: RD301's cut-off on the samples/s ratio (``min_speedup``, with
            ``rule_options`` over the default; ``rnndoctor.engine.batch_min_speedup``): the
            batch-size probe stops at its one early look where RD301's decision is already
            made. Set by the CLI for its capture child, never read from a file; None: no look.
        probe_fast_path: run the cuDNN fast-path probe on each LSTM/GRU layer.
        debug: show tracebacks after a failure.
        verify: after the check, apply each fix that is a source rewrite to a copy of the
            script and measure it A/B against the original (``rnndoctor.verify``).
        verify_budget: seconds the verification's runs may take together (None: 3x the plain
            check's wall time).
        workers: local workers to launch on 127.0.0.1 under a generated ``TF_CONFIG`` (1: the
            script runs once, as it is; ``rnndoctor/cli/workers.py``).
        window_only: the capture child measures the step window and nothing else (no probes,
            profile, model or data inspection, tracing counts or run-on): a ``--verify`` arm.
        control: with ``window_only``, the file descriptors ``"R,W"`` of the pipes through which
            the parent asks for one window at a time (``go`` / ``stop`` lines read from R, one
            JSON line per window written to W; :mod:`rnndoctor.capture.control`). None: one
            window, then the script ends.
        rule_options: ``[tool.rnndoctor.rules.RD201]`` tables, by rule ID or name as the file
            writes it: option name -> value.
        config_file: the ``pyproject.toml`` whose ``[tool.rnndoctor]`` was read (None: none).
        from_config: the options whose value came from that table (for error messages).
    """

    out: str = field(default="rnndoctor-report", metadata=_IN_FILE)
    steps: int = field(default=20, metadata=_IN_FILE)
    warmup: int = field(default=3, metadata=_IN_FILE)
    profile_steps: int = field(default=3, metadata=_IN_FILE)
    timeout: float | None = field(default=600.0, metadata=_IN_FILE)
    fail_on: str = field(default="error", metadata=_IN_FILE)
    format: list[str] = field(default_factory=lambda: ["html", "json"], metadata=_IN_FILE)
    select: list[str] = field(default_factory=list, metadata=_IN_FILE)
    ignore: list[str] = field(default_factory=list, metadata=_IN_FILE)
    redact: bool = field(default=False, metadata=_IN_FILE)
    no_probes: bool = False
    skip_probes: tuple[str, ...] = ()
    spe_share_cutoffs: tuple[float, ...] = ()
    batch_min_speedup: float | None = None
    probe_fast_path: bool = True
    debug: bool = False
    verify: bool = False
    verify_budget: float | None = None
    workers: int = 1
    window_only: bool = False
    control: str | None = None
    rule_options: dict[str, dict[str, Any]] = field(default_factory=dict)
    config_file: Path | None = None
    from_config: frozenset[str] = frozenset()

    def child_argv(self) -> list[str]:
        """The capture child's arguments for the window options (before the script)."""
        return [
            "--out", self.out, "--steps", str(self.steps), "--warmup", str(self.warmup),
            "--profile-steps", str(self.profile_steps),
            *([] if self.timeout is None else ["--timeout", str(self.timeout)]),
            *(["--no-probes"] if self.no_probes else []),
            *[arg for name in self.skip_probes for arg in ("--skip-probe", name)],
            *[arg for c in self.spe_share_cutoffs for arg in ("--spe-share-cutoff", repr(c))],
            *([] if self.batch_min_speedup is None
              else ["--batch-min-speedup", repr(self.batch_min_speedup)]),
            *([] if self.probe_fast_path else ["--no-probe"]),
            *(["--window-only"] if self.window_only else []),
            *([] if self.control is None else ["--control", self.control]),
        ]  # fmt: skip

    def label(self, key: str) -> str:
        """How to name an option in an error: ``--fail-on`` or ``fail-on in /p/pyproject.toml``."""
        name = key.replace("_", "-")
        if key in self.from_config:
            return f"{name} in {self.config_file} [tool.rnndoctor]"
        return f"--{name}"

    def validate(self) -> None:
        """Checks the formats, ``fail_on``, the rules named and the rules' option tables.

        Raises:
            OptionsError: the first bad value, in one line naming where it was set.
        """
        unknown = sorted(set(self.format) - set(FORMATS))
        if unknown or not self.format:
            raise OptionsError(
                f"unknown {self.label('format')} {', '.join(unknown)}: "
                f"choose from {', '.join(FORMATS)}"
            )
        if self.fail_on not in FAIL_ON:
            raise OptionsError(
                f"unknown {self.label('fail_on')} {self.fail_on!r}: "
                f"choose from {', '.join(FAIL_ON)}"
            )
        from rnndoctor.rules import check_rule_options, get_rule

        for key in ("select", "ignore"):
            for name in getattr(self, key):
                try:
                    get_rule(name)
                except KeyError:
                    raise OptionsError(
                        f"unknown rule {name!r} in {self.label(key)} (see `rnndoctor rules`)"
                    ) from None
        try:
            check_rule_options(self.rule_options)
        except ValueError as exc:
            where = f"{self.config_file}: " if self.config_file else ""
            raise OptionsError(f"{where}{exc}") from None

    def validate_window(self) -> None:
        """Checks the diagnosis window's numbers (``check`` only).

        Raises:
            OptionsError: steps under 1, a negative warm-up or profile count, a timeout or a
                ``verify_budget`` of 0 s or less.
        """
        timeout = math.inf if self.timeout is None else self.timeout
        for bad, message in (
            (self.steps < 1, f"{self.label('steps')} must be at least 1 (got {self.steps})"),
            (self.warmup < 0, f"{self.label('warmup')} must be 0 or more (got {self.warmup})"),
            (self.profile_steps < 0, f"{self.label('profile_steps')} must be 0 or more "
                                     f"(got {self.profile_steps})"),
            (timeout <= 0, f"{self.label('timeout')} must be more than 0 seconds "
                           f"(got {timeout:g})"),
            (self.verify_budget is not None and not self.verify_budget > 0,
             f"{self.label('verify_budget')} must be more than 0 seconds "
             f"(got {self.verify_budget})"),
            (self.workers < 1, f"--workers must be at least 1 (got {self.workers})"),
            (self.workers > 1 and self.verify, "--verify runs a single process: drop --workers"),
        ):  # fmt: skip
            if bad:
                raise OptionsError(message)


DEFAULTS = Options()

_HINTS = typing.get_type_hints(Options)
_TYPE_NAMES = {
    str: "a string",
    int: "an integer",
    float: "a number",
    bool: "true or false",
    list: "a list",
}


def _accepted(hint: Any) -> tuple[type, ...]:
    """The TOML value types an option of type ``hint`` accepts."""
    if typing.get_origin(hint) is list:
        return (list, str)  # a list, or one comma-separated string
    if isinstance(hint, types.UnionType):
        hint = next(t for t in typing.get_args(hint) if t is not types.NoneType)
    return (int, float) if hint is float else (hint,)


FILE_KEYS: dict[str, tuple[type, ...]] = {
    f.name: _accepted(_HINTS[f.name]) for f in fields(Options) if f.metadata.get("in_file")
}
_LISTS = {f.name for f in fields(Options) if typing.get_origin(_HINTS[f.name]) is list}


@dataclass(frozen=True)
class ConfigFile:
    """``[tool.rnndoctor]`` as read from one ``pyproject.toml``.

    Attributes:
        path: the file (None: no file, or no table in it).
        values: option values by field name (dashes turned to underscores).
        rule_options: the ``[tool.rnndoctor.rules.<RULE>]`` tables, by the key the file uses.
    """

    path: Path | None = None
    values: dict[str, Any] = field(default_factory=dict)
    rule_options: dict[str, dict[str, Any]] = field(default_factory=dict)


def find_pyproject(start: Path) -> Path | None:
    """The nearest ``pyproject.toml`` in ``start`` or a parent folder, or None."""
    start = start.resolve()
    for folder in [start, *start.parents]:
        candidate = folder / "pyproject.toml"
        if candidate.is_file():
            return candidate
    return None


def load_config(start: Path) -> ConfigFile:
    """Reads ``[tool.rnndoctor]`` from the nearest ``pyproject.toml`` at or above ``start``.

    Raises:
        OptionsError: the file does not parse, or the table has an unknown key or a bad type.
    """
    path = find_pyproject(start)
    if path is None:
        return ConfigFile()
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, OSError, UnicodeDecodeError) as exc:
        raise OptionsError(f"{path}: {exc}") from None
    table = data.get("tool", {}).get("rnndoctor")
    if table is None:
        return ConfigFile()
    if not isinstance(table, dict):
        raise OptionsError(f"{path}: [tool.rnndoctor] must be a table")
    values = {}
    for key, value in table.items():
        if key == _RULES_KEY:
            continue
        name = key.replace("-", "_")
        _check_type(path, key, name, value)
        values[name] = value
    return ConfigFile(path, values, _rule_tables(path, table.get(_RULES_KEY, {})))


def _check_type(path: Path, key: str, name: str, value: Any) -> None:
    """Raises OptionsError when ``key`` is no option or ``value`` has the wrong type."""
    accepted = FILE_KEYS.get(name)
    if accepted is None:
        raise OptionsError(f"{path}: unknown key {key!r} in [tool.rnndoctor]")
    if isinstance(value, bool) and bool not in accepted:
        raise OptionsError(f"{path}: [tool.rnndoctor] {key} must not be a boolean")
    if not isinstance(value, accepted):
        expected = " or ".join(_TYPE_NAMES[t] for t in accepted)
        raise OptionsError(
            f"{path}: [tool.rnndoctor] {key} must be {expected}, not {value!r}"[:300]
        )


def _rule_tables(path: Path, tables: Any) -> dict[str, dict[str, Any]]:
    """``[tool.rnndoctor.rules]``: each key a rule ID or name, each value a table of options."""
    if not isinstance(tables, dict):
        raise OptionsError(f"{path}: [tool.rnndoctor] {_RULES_KEY} must be a table of tables")
    for rule, table in tables.items():
        if not isinstance(table, dict):
            raise OptionsError(
                f"{path}: [tool.rnndoctor.rules] {rule} must be a table, not {table!r}"[:300]
            )
    return {rule: dict(table) for rule, table in tables.items()}


def resolve(cli: Mapping[str, Any], config: ConfigFile | None = None) -> Options:
    """Merges command-line values (None or ``[]``: not given) over the config over the defaults.

    List options (``format``, ``select``, ``ignore``) accept lists or comma-separated strings. An
    ``out`` from the config is relative to the folder of its ``pyproject.toml``.

    Args:
        cli: values by field name; fields not in ``[tool.rnndoctor]`` (``no_probes``,
            ``debug``) are taken as given.
        config: the table read by :func:`load_config` (None: none).
    """
    config = config or ConfigFile()
    values: dict[str, Any] = {}
    from_config = set()
    for f in fields(Options):
        value = cli.get(f.name)
        if f.name in FILE_KEYS and (value is None or value == []):
            if f.name in config.values:
                from_config.add(f.name)
            value = config.values.get(f.name, getattr(DEFAULTS, f.name))
        if value is None:
            continue
        if f.name in _LISTS:
            items = [value] if isinstance(value, str) else list(value)
            value = [p.strip() for item in items for p in str(item).split(",") if p.strip()]
        values[f.name] = value
    if config.path is not None and "out" in from_config:
        values["out"] = str(config.path.parent / values["out"])
    if values.get("timeout") is not None:
        values["timeout"] = float(values["timeout"])
    values.update(
        rule_options=config.rule_options,
        config_file=config.path,
        from_config=frozenset(from_config),
    )
    return Options(**values)


def parse_child_args(argv: list[str]) -> tuple[Options, str, list[str]]:
    """Reads the capture child's command line (``Options.child_argv() + [script, *args]``).

    Returns:
        ``(options, script, script_args)``; options not passed keep their defaults.

    Raises:
        SystemExit: argparse's exit on a malformed command line (status 2).
    """
    parser = argparse.ArgumentParser(prog="python -m rnndoctor.capture")
    parser.add_argument("--out", required=True)
    parser.add_argument("--steps", type=int, default=DEFAULTS.steps)
    parser.add_argument("--warmup", type=int, default=DEFAULTS.warmup)
    parser.add_argument("--profile-steps", type=int, default=DEFAULTS.profile_steps)
    parser.add_argument("--no-probe", action="store_true", help="skip the cuDNN fast-path probe")
    parser.add_argument("--timeout", type=float, default=None)
    parser.add_argument("--no-probes", action="store_true", help="skip the input/compute probes")
    parser.add_argument("--skip-probe", action="append", default=[], choices=SKIPPABLE_PROBES)
    parser.add_argument("--spe-share-cutoff", action="append", default=[], type=float)
    parser.add_argument("--batch-min-speedup", type=float, default=None)
    parser.add_argument("--window-only", action="store_true", help="measure the window only")
    parser.add_argument("--control", default=None, help="R,W: the parent's pipes (--verify)")
    parser.add_argument("script")
    parser.add_argument("script_args", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    options = Options(
        out=args.out,
        steps=args.steps,
        warmup=args.warmup,
        profile_steps=args.profile_steps,
        timeout=args.timeout,  # None: no overall limit (the child run by hand)
        no_probes=args.no_probes,
        skip_probes=tuple(args.skip_probe),
        spe_share_cutoffs=tuple(args.spe_share_cutoff),
        batch_min_speedup=args.batch_min_speedup,
        probe_fast_path=not args.no_probe,
        window_only=args.window_only,
        control=args.control,
    )
    if options.control is not None and not options.window_only:
        parser.error("--control needs --window-only")
    return options, args.script, list(args.script_args)
