"""What a verification writes and prints: ``verify.json``, ``verify.md``, the ``verified`` list
of ``report.json``, and the terminal's per-fix table.

Every string goes through ``scrub`` first (``--redact`` passes the reports' scrubber; the default
keeps text as it is). The Markdown escapes what it shows, so a path or a title cannot inject
markup. ``fixes.patch`` is not scrubbed: it must apply.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rnndoctor.verify.result import Status, Verified
from rnndoctor.verify.session import Verification

VERIFY_JSON = "verify.json"
VERIFY_MD = "verify.md"
Scrub = Callable[[str], str]
_MD_SPECIAL = str.maketrans(
    {"&": "&amp;", "<": "&lt;", ">": "&gt;", **{c: f"\\{c}" for c in "\\`*_[]|"}}
)


def _scrubbed(value: Any, scrub: Scrub) -> Any:
    """``value`` with ``scrub`` applied to every string in it (dicts and lists walked)."""
    if isinstance(value, str):
        return scrub(value)
    if isinstance(value, dict):
        return {k: _scrubbed(v, scrub) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_scrubbed(v, scrub) for v in value]
    return value


def to_dict(verification: Verification) -> dict[str, Any]:
    """``verify.json``'s document (``verified``: one entry per fix, failed and slower first)."""
    return {
        "verified": [item.to_dict() for item in verification.items],
        "root": verification.root,
        "patch": verification.patch_path,
        "budget_s": None if verification.budget_s == float("inf") else verification.budget_s,
        "spent_s": verification.spent_s,
        "measured_on": "cpu" if verification.on_cpu else "gpu",
        "notes": list(verification.notes),
    }


def measured_cell(item: Verified) -> str:
    """The measurement as the table shows it (``not measured`` when there is none)."""
    return item.measured_text or "not measured"


def estimate_cell(item: Verified) -> str:
    """The finding's estimate as the table shows it."""
    return f"{item.estimate:.2f}x" if item.estimate else "no estimate"


def status_cell(item: Verified) -> str:
    """The status with its reason or error: ``failed: ValueError ... at train.py:12``."""
    detail = item.error if item.status == Status.FAILED else item.reason
    return f"{item.status}: {detail}" if detail else str(item.status)


def _md(text: str) -> str:
    """``text`` for a Markdown table cell: Markdown and HTML characters escaped, one line."""
    return " ".join(text.split()).translate(_MD_SPECIAL)


def render_markdown(verification: Verification, scrub: Scrub = str) -> str:
    """``verify.md``: a table of the fixes (status, estimate, measurement, runs, loss)."""
    lines = [
        "# rnndoctor --verify",
        "",
        _md(scrub(f"Each fix applied to a copy of the script and timed A/B against the original "
                  f"(runs took {verification.spent_s:.0f} s)."))
        + ("  " + _md("Measured on CPU.") if verification.on_cpu else ""),
        "",
        "| fix | status | estimate | measured | pairs | loss | in patch |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]  # fmt: skip
    for item in verification.items:
        cells = [
            f"{item.fix} ({', '.join(item.rules)})" if item.fix == "all" else item.fix,
            status_cell(item), estimate_cell(item), measured_cell(item), str(item.pairs),
            item.loss, "yes" if item.in_patch else "no",
        ]  # fmt: skip
        lines.append("| " + " | ".join(_md(scrub(c)) for c in cells) + " |")
    lines += ["", *(f"- {_md(scrub(n))}" for n in verification.notes)]
    if verification.patch:
        lines += ["", _md(scrub(f"Patch: {verification.patch_path}"))]
    return "\n".join(lines).rstrip() + "\n"


def terminal_lines(verification: Verification) -> list[tuple[str, bool]]:
    """The terminal's table, one ``(line, bad)`` per fix (bad: failed, slower or unsafe, to show
    in red), then the notes and the ``git apply`` line."""
    rows: list[tuple[str, bool]] = [("verify: fix, status, estimate, measured", False)]
    for item in verification.items:
        name = f"all ({', '.join(item.rules)})" if item.fix == "all" else item.fix
        rows.append(
            (
                f"  {name:<10} {status_cell(item)}; estimate {estimate_cell(item)}; "
                f"measured {measured_cell(item)}",
                item.status.bad,
            )
        )
    rows += [(f"  note: {n}", False) for n in verification.notes]
    if verification.patch:
        rows.append((f"apply the confirmed fixes: cd {verification.root} && "
                     f"git apply {verification.patch_path}", False))  # fmt: skip
    else:
        rows.append(("no fix confirmed: fixes.patch is empty", False))
    return rows


def write_outputs(verification: Verification, out: Path, scrub: Scrub = str) -> dict[str, Path]:
    """Writes ``verify.json`` and ``verify.md`` into ``out``; returns their paths by format.

    Raises:
        OSError: ``out`` cannot be written.
    """
    paths = {"json": out / VERIFY_JSON, "md": out / VERIFY_MD}
    document = _scrubbed(to_dict(verification), scrub)
    paths["json"].write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    paths["md"].write_text(render_markdown(verification, scrub), encoding="utf-8")
    return paths


def add_to_report_json(report_json: Path, verification: Verification, scrub: Scrub = str) -> bool:
    """Adds the top-level ``verified`` list to ``report.json`` (when it was written).

    Returns:
        False when there is no ``report.json`` to extend.

    Raises:
        OSError: it cannot be rewritten.
        ValueError: it is not JSON.
    """
    if not report_json.is_file():
        return False
    data = json.loads(report_json.read_text(encoding="utf-8"))
    data["verified"] = _scrubbed([item.to_dict() for item in verification.items], scrub)
    report_json.write_text(json.dumps(data, indent=2, default=repr), encoding="utf-8")
    return True
