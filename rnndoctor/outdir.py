"""The report folder (``--out`` of ``check``, ``report`` and ``merge``; ``diagnose(out=)``,
``DoctorCallback(out=)``): rnndoctor replaces its own files there and never the user's.
(``compare --html`` guards its one page the same way: ``rnndoctor.reports.compare``.)

A diagnosis marks its folder with :data:`MARKER`. A folder without it that holds a file with a
name a diagnosis writes (``facts.json``, ``report.html``, ...) holds the user's file (a fresh
user ran ``rnndoctor check train.py --out .`` beside their own ``report.md``, which a check then
deleted): :func:`claim` refuses it. Pure: no TensorFlow.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

MARKER = ".rnndoctor"
_MARKER_TEXT = (
    "This folder holds rnndoctor's output. A later diagnosis with the same folder replaces its\n"
    "facts.json, script.log and report.* files.\n"
)
_FACTS = "facts.json"
_REPORT = "report.json"


class ForeignFiles(ValueError):
    """The report folder holds files of the user's with names a diagnosis writes (one line)."""


def foreign_files(out: Path, names: Iterable[str]) -> list[str]:
    """The ``names`` (the files a diagnosis writes or replaces) that exist in ``out`` where the
    folder is not a diagnosis's: it has no :data:`MARKER`, and neither a ``facts.json`` nor a
    ``report.json`` of rnndoctor's (written by a version without the marker, or copied with
    its report). Empty where the folder is a diagnosis's, is missing, or holds none of them."""
    if (out / MARKER).is_file() or _own_json(out / _FACTS, ("schema_version", "run")):
        return []
    if _own_json(out / _REPORT, ("schema_version", "facts", "findings")):
        return []
    return [name for name in names if (out / name).exists()]


def _own_json(path: Path, keys: tuple[str, ...]) -> bool:
    """Whether ``path`` is a JSON object with every one of ``keys`` (rnndoctor's shape)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return False
    return isinstance(data, dict) and all(key in data for key in keys)


def refuse_foreign(out: Path, names: Iterable[str], option: str = "--out") -> None:
    """Checks ``out`` before a diagnosis writes there; writes nothing.

    Raises:
        ForeignFiles: ``out`` holds some of ``names`` that rnndoctor did not write
            (:func:`foreign_files`); the message names them and ``option``.
    """
    foreign = foreign_files(out, names)
    if foreign:
        raise ForeignFiles(
            f"{option} {out} holds {', '.join(foreign)}, not marked as rnndoctor's output (no "
            f"{MARKER} file there; an earlier version's check that stopped before saving its "
            "facts leaves its script.log so), and a diagnosis would replace them: move or "
            "delete them, or choose another folder"
        )


def claim(out: Path, names: Iterable[str], option: str = "--out") -> None:
    """Creates ``out`` if needed and marks it as a diagnosis's folder.

    Args:
        out: the report folder.
        names: the files the diagnosis writes or replaces there.
        option: how the message names the folder's setting (``--out``, ``out=``).

    Raises:
        ForeignFiles: ``out`` holds some of ``names`` that rnndoctor did not write
            (:func:`foreign_files`); nothing is written.
        OSError: ``out`` cannot be created or written.
    """
    refuse_foreign(out, names, option)
    out.mkdir(parents=True, exist_ok=True)
    (out / MARKER).write_text(_MARKER_TEXT, encoding="utf-8")
