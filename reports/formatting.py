"""How the reports write values: numbers, durations, shares, and Markdown-safe text.

Plain functions, registered once as the template filters of
:func:`rnndoctor.reports.templating.environment` (``fmt``, ``duration``, ``pct``, ``ms``,
``us_as_ms``, ``md_text``, ``md_code``, ``md_block``, ``md_numbered``) and called directly by the
terminal summary and the comparison table, so that every output writes a value the same way.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rnndoctor.reports.view import ContextLine

NOT_MEASURED = "not measured"


def format_value(value: Any) -> str:
    """How the report shows a value: floats below 1 with 4 significant digits (``0.0975``),
    below 1000 with up to 3 decimals, above with 1; None as a dash; anything else as ``str``."""
    if isinstance(value, float):
        if abs(value) < 1:
            return f"{value:.4g}"
        text = f"{value:,.3f}" if abs(value) < 1e3 else f"{value:,.1f}"
        return text.rstrip("0").rstrip(".")
    return "—" if value is None else str(value)


def duration(seconds: float) -> str:
    """``5400.0`` -> ``1 h 30 min``; ``95.0`` -> ``1 min 35 s``; ``3.2`` -> ``3.2 s``;
    ``0.032`` -> ``32 ms``."""
    if seconds >= 3600:
        return f"{int(seconds // 3600)} h {int(seconds % 3600 // 60)} min"
    if seconds >= 60:
        return f"{int(seconds // 60)} min {int(seconds % 60)} s"
    if seconds >= 1:
        return f"{seconds:.1f} s"
    return f"{seconds * 1000:.0f} ms"


def pct(fraction: float | None, missing: str = NOT_MEASURED) -> str:
    """A fraction as a percentage with one decimal: ``0.123`` -> ``12.3 %``; None as ``missing``."""
    return missing if fraction is None else f"{fraction * 100:.1f} %"


def ms(value: float | None, missing: str = NOT_MEASURED) -> str:
    """Milliseconds with one decimal: ``250.04`` -> ``250.0 ms``; None as ``missing``."""
    return missing if value is None else f"{value:.1f} ms"


def us_as_ms(microseconds: float) -> str:
    """Microseconds written as milliseconds, as :func:`format_value` writes numbers:
    ``1234.5`` -> ``1.234 ms``."""
    return f"{format_value(microseconds / 1000)} ms"


def md_text(value: object) -> str:
    """Escapes text for Markdown prose: HTML is escaped, Markdown punctuation backslashed."""
    escaped = html.escape(str(value), quote=False)
    for ch in "\\`*_[]|#":  # the backslash first, so that added backslashes stay single
        escaped = escaped.replace(ch, "\\" + ch)
    return escaped.replace("\n", " ")


def md_code(value: object) -> str:
    """A Markdown code span, which shows HTML as text: newlines become spaces, backticks quotes."""
    text = str(value).replace("\n", " ").replace("`", "'")
    return f"`{text}`"


def md_command(value: object) -> str:
    """A shell command for Markdown: a code span (:func:`md_code`), so that the raw file's text
    pastes into a shell as it is (``&&`` stays ``&&``), unless it holds a character a Markdown
    renderer outside CommonMark could take for HTML or a span's end (``<``, ``>``, a
    backtick): then escaped prose (:func:`md_text`), as any hostile text is."""
    text = str(value)
    return md_text(text) if any(ch in text for ch in "<>`") else md_code(text)


def md_block(text: str, lang: str = "") -> str:
    """A fenced Markdown block, its fence longer than any backtick run in ``text``."""
    fence = "```"
    while fence in text:
        fence += "`"
    return f"{fence}{lang}\n{text}\n{fence}"


def md_numbered(lines: Sequence[ContextLine]) -> str:
    """Source lines for a fenced block: each numbered, the finding's line marked with ``>``."""
    width = len(str(lines[0].number + len(lines)))
    return "\n".join(f"{'>' if c.hit else ' '} {c.number:>{width}} {c.text}" for c in lines)
