"""Option defaults from the user's ``pyproject.toml`` (``[tool.rnndoctor]``).

Precedence: a command-line option, then ``[tool.rnndoctor]`` in the nearest ``pyproject.toml`` at
or above the script's folder (for ``report``: the facts file's folder), then the built-in
default. Keys use the option names, with dashes or underscores::

    [tool.rnndoctor]
    steps = 30
    fail-on = "warning"
    format = ["html", "json", "sarif"]
    ignore = ["RD108", "custom-cell"]
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

DEFAULTS: dict[str, Any] = {
    "out": "rnndoctor-report",
    "steps": 20,
    "warmup": 3,
    "profile_steps": 3,
    "timeout": 600.0,
    "fail_on": "error",
    "format": ["html", "json"],
    "select": [],
    "ignore": [],
    "redact": False,
}
_TYPES: dict[str, tuple[type, ...]] = {
    "out": (str,),
    "steps": (int,),
    "warmup": (int,),
    "profile_steps": (int,),
    "timeout": (int, float),
    "fail_on": (str,),
    "format": (list, str),
    "select": (list, str),
    "ignore": (list, str),
    "redact": (bool,),
}


_TYPE_NAMES = {
    str: "a string",
    int: "an integer",
    float: "a number",
    bool: "true or false",
    list: "a list",
}


class ConfigError(ValueError):
    """The ``[tool.rnndoctor]`` table is malformed (unknown key or wrong type)."""


def find_pyproject(start: Path) -> Path | None:
    """The nearest ``pyproject.toml`` in ``start`` or a parent folder, or None."""
    start = start.resolve()
    for folder in [start, *start.parents]:
        candidate = folder / "pyproject.toml"
        if candidate.is_file():
            return candidate
    return None


def load(start: Path) -> tuple[dict[str, Any], Path | None]:
    """Reads ``[tool.rnndoctor]`` from the nearest pyproject.toml at or above ``start``.

    Returns:
        The table with keys normalised to underscores, and the file it came from (None: none).

    Raises:
        ConfigError: the file does not parse, or the table has an unknown key or a bad type.
    """
    path = find_pyproject(start)
    if path is None:
        return {}, None
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: {exc}") from None
    table = data.get("tool", {}).get("rnndoctor")
    if table is None:
        return {}, None
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: [tool.rnndoctor] must be a table")
    config = {}
    for key, value in table.items():
        name = key.replace("-", "_")
        if name not in DEFAULTS:
            raise ConfigError(f"{path}: unknown key {key!r} in [tool.rnndoctor]")
        if isinstance(value, bool) and bool not in _TYPES[name]:
            raise ConfigError(f"{path}: [tool.rnndoctor] {key} must not be a boolean")
        if not isinstance(value, _TYPES[name]):
            expected = " or ".join(_TYPE_NAMES[t] for t in _TYPES[name])
            raise ConfigError(
                f"{path}: [tool.rnndoctor] {key} must be {expected}, not {value!r}"[:300]
            )
        config[name] = value
    return config, path


def resolve(cli: dict[str, Any], config: dict[str, Any]) -> dict[str, Any]:
    """Merges command-line values (None: not given) over the config over the defaults.

    List options (``format``, ``select``, ``ignore``) accept lists or comma-separated strings.
    ``merged["from_config"]`` is the set of keys whose value came from the config.
    """
    merged: dict[str, Any] = {"from_config": set()}
    for key, default in DEFAULTS.items():
        value = cli.get(key)
        if value is None or value == []:
            if key in config:
                merged["from_config"].add(key)
            value = config.get(key, default)
        if key in ("format", "select", "ignore"):
            items = [value] if isinstance(value, str) else list(value)
            value = [p.strip() for item in items for p in str(item).split(",") if p.strip()]
        merged[key] = value
    return merged
