"""What a verification writes itself: ``verify.json`` (the :class:`~.summary.VerifySummary`'s
document), after every string in it went through ``scrub``.

``--redact`` passes the reports' scrubber; the default keeps text as it is. ``fixes.patch`` is
not scrubbed: it must apply. ``verify.md``, the HTML and Markdown reports' section and the
terminal's table are rendered by the reports (:mod:`rnndoctor.reports.verified`), which the CLI
calls: this package never imports the reports.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from rnndoctor.redact import scrub_strings
from rnndoctor.verify.session import Verification
from rnndoctor.verify.summary import VerifySummary

VERIFY_JSON = "verify.json"
VERIFY_MD = "verify.md"
Scrub = Callable[[str], str]


def summarise(verification: Verification, scrub: Scrub = str) -> VerifySummary:
    """The verification as the reports read it, every string but the statuses scrubbed."""
    return VerifySummary.of(verification).scrubbed(lambda doc: scrub_strings(doc, scrub))


def read_own_json(path: Path) -> dict | None:
    """The document of the ``verify.json`` at ``path`` where it is rnndoctor's (a JSON object
    with a ``verified`` list, as :func:`write_json` writes it); None where the file is missing,
    unreadable, not JSON or another shape (a file of the user's with that name)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("verified"), list):
        return None
    return data


def write_json(summary: VerifySummary, out: Path) -> Path:
    """Writes ``verify.json`` into ``out`` and returns its path.

    Raises:
        OSError: ``out`` cannot be written.
    """
    path = out / VERIFY_JSON
    path.write_text(json.dumps(summary.to_dict(), indent=2) + "\n", encoding="utf-8")
    return path
