"""``<out>/fixes.patch``: the confirmed fixes as a unified diff that ``git apply`` takes from the
work tree's root.

Each fix is its own file section (``diff --git a/... b/...``, ``---``, ``+++``) with one hunk,
preceded by a ``# RD101 (name): title`` line; fixes of one call merged into one rewrite
(:func:`rnndoctor.verify.patch.merge_same_call`) share a section, with a line each. ``git apply``
and ``patch`` skip text before a section's header, so the rule ID rides in the patch without
becoming code. Two fixes in the same file are two sections, the second against the file as the
first leaves it (``git apply`` applies sections in order). Paths are relative to ``root`` with
``a/`` and ``b/`` prefixes.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from rnndoctor.verify.patch import Rewrite, apply_rewrites, read_source

CONTEXT = 3  # context lines around each hunk, as ``diff -u``
_NO_NEWLINE = "\\ No newline at end of file\n"


class OutsideRoot(ValueError):
    """A file to patch is not inside the work tree root."""


def relative_to_root(file: Path, root: Path) -> str:
    """``file``'s path relative to ``root``, with forward slashes.

    Raises:
        OutsideRoot: ``file`` is not inside ``root``.
    """
    try:
        return file.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        raise OutsideRoot(f"{file} is outside the work tree {root}") from None


def build_patch(rewrites: Sequence[Rewrite], root: Path) -> str:
    """The patch of ``rewrites`` (compatible with each other), one section and hunk per fix, in
    file order then line order; an empty string when there is none.

    Raises:
        OutsideRoot: a rewritten file is outside ``root``.
        OSError: a file cannot be read.
    """
    ordered = sorted(rewrites, key=lambda r: (str(r.file), r.start))
    texts: dict[Path, str] = {}
    shift: dict[Path, int] = {}  # characters the earlier sections added to the file
    sections = []
    for rewrite in ordered:
        path = relative_to_root(rewrite.file, root)
        before = texts.setdefault(rewrite.file, read_source(rewrite.file))
        delta = shift.get(rewrite.file, 0)
        moved = _moved(rewrite, delta)
        after = apply_rewrites(before, [moved])
        texts[rewrite.file] = after
        shift[rewrite.file] = delta + len(rewrite.replacement) - (rewrite.end - rewrite.start)
        first = before.count("\n", 0, moved.start) + 1
        last = first + before.count("\n", moved.start, moved.end)
        sections.append(_section(rewrite, path, before, after, first, last))
    return "".join(sections)


def _moved(rewrite: Rewrite, delta: int) -> Rewrite:
    """The rewrite with its offsets moved by ``delta`` characters."""
    return replace(rewrite, start=rewrite.start + delta, end=rewrite.end + delta)


def _section(rewrite: Rewrite, path: str, before: str, after: str, first: int, last: int) -> str:
    """One fix's file section: its comment line, the headers and its single hunk (old lines
    ``first``..``last``, 1-based, replaced)."""
    old = before.splitlines(keepends=True)
    new = after.splitlines(keepends=True)
    added = len(new) - len(old)
    lo = max(1, first - CONTEXT)
    hi_old = min(len(old), last + CONTEXT)
    hi_new = hi_old + added
    old_block, new_block = old[lo - 1 : hi_old], new[lo - 1 : hi_new]
    comment = "\n".join(_comment(part) for part in rewrite.parts or (rewrite,))
    body = "".join(_lines(old_block, new_block))
    return (
        f"{comment}\n"
        f"diff --git a/{path} b/{path}\n--- a/{path}\n+++ b/{path}\n"
        f"@@ -{_range(lo, len(old_block))} +{_range(lo, len(new_block))} @@\n{body}"
    )


def _comment(rewrite: Rewrite) -> str:
    """A fix's line above its section: ``# RD101 (recurrent-dropout): title``."""
    finding = rewrite.finding
    title = finding.fix.title if finding.fix else ""
    return " ".join(f"# {rewrite.fix_id} ({finding.name}): {title}".split())


def _range(start: int, count: int) -> str:
    """A hunk range: ``start,count`` (``start`` alone for one line; the line before for none)."""
    if count == 0:
        return f"{start - 1},0"
    return f"{start},{count}" if count != 1 else f"{start}"


def _lines(old: list[str], new: list[str]) -> list[str]:
    """The hunk's body (difflib's line opcodes; its lines in order, one hunk)."""
    out = []
    matcher = difflib.SequenceMatcher(a=old, b=new, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            out.extend(_mark(" ", line) for line in old[i1:i2])
            continue
        out.extend(_mark("-", line) for line in old[i1:i2])
        out.extend(_mark("+", line) for line in new[j1:j2])
    return out


def _mark(sign: str, line: str) -> str:
    """A hunk line; a last line without a newline gets git's marker."""
    if line.endswith("\n"):
        return sign + line
    return sign + line + "\n" + _NO_NEWLINE
