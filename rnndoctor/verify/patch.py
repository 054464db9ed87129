"""A finding's source rewrite, located in the user's file and applied to a copy of it.

A fix is a source rewrite when its safety is ``safe`` or ``unsafe`` and it has a ``before`` text:
``Fix.before`` found in the file at ``Fix.location`` (else ``finding.location``) is replaced by
``Fix.code``. Nothing
here writes into the user's tree: :func:`build_copy` mirrors the script's folder under the report
folder (the files a rewrite touches are patched copies, every other entry a symbolic link to the
original, so the user's modules import and ``__file__``-relative reads work as in the original).
"""

from __future__ import annotations

import ast
import difflib
import io
import os
import re
import shutil
import tokenize
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from rnndoctor import rewrite as rw
from rnndoctor.findings import Finding, FixSafety

AROUND_LINES = 2  # a 'before' text starting this many lines from the location still matches


class NotVerifiable(ValueError):
    """The fix cannot be verified; the message is the reason (one line, for the report)."""


@dataclass(frozen=True)
class Rewrite:
    """One fix located in one file.

    Attributes:
        fix_id: the fix's name in the verification (``RD101``; ``RD101-2`` for the rule's second
            finding).
        finding: the finding the fix belongs to.
        file: the user's file (absolute).
        start: offset of the replaced text in the file's text (characters).
        end: offset just past it.
        replacement: the text that replaces it (indented like the first line).
        first_line: the first replaced line (1-based).
        last_line: the last replaced line (1-based, inclusive).
        parts: for fixes of one call merged into one rewrite (:func:`merge_same_call`), the
            rewrites it holds; empty for one fix.
        code: the fix's code as the finding wrote it (before indentation), or the merged call.
    """

    fix_id: str
    finding: Finding
    file: Path
    start: int
    end: int
    replacement: str
    first_line: int
    last_line: int
    parts: tuple[Rewrite, ...] = ()
    code: str = ""

    @property
    def members(self) -> tuple[str, ...]:
        """The names of the fixes this rewrite applies (its parts', or its own)."""
        return tuple(p.fix_id for p in self.parts) or (self.fix_id,)

    @property
    def speedup(self) -> float:
        """The finding's estimated speedup (1.0 when it gave none), for the ordering."""
        return self.finding.speedup or 1.0

    def overlaps(self, other: Rewrite) -> bool:
        """Whether the two rewrites touch a common line of the same file."""
        return self.file == other.file and not (
            self.last_line < other.first_line or other.last_line < self.first_line
        )


def fix_ids(findings: Sequence[Finding]) -> list[str]:
    """A name per finding: its rule ID, with ``-2``, ``-3`` ... for a rule's later findings."""
    seen: dict[str, int] = {}
    names = []
    for finding in findings:
        seen[finding.rule_id] = seen.get(finding.rule_id, 0) + 1
        count = seen[finding.rule_id]
        names.append(finding.rule_id if count == 1 else f"{finding.rule_id}-{count}")
    return names


def locate(finding: Finding, fix_id: str, script_dir: Path) -> Rewrite:
    """Locates the finding's rewrite in its file.

    Args:
        finding: a finding with a fix.
        fix_id: the fix's name (:func:`fix_ids`).
        script_dir: the user's script folder: only files inside it are copied.

    Raises:
        NotVerifiable: no fix, a display-only fix, no ``before`` text or no location, a file
            outside the script's folder or unreadable, or ``before`` not at the location.
    """
    fix = finding.fix
    if fix is None:
        raise NotVerifiable("no fix")
    if fix.safety == FixSafety.DISPLAY_ONLY:
        raise NotVerifiable("display-only fix")
    if not fix.before:
        raise NotVerifiable("the fix is not a source rewrite (it has no 'before' text)")
    where = fix.location or finding.location
    if where is None:
        raise NotVerifiable("the finding has no location in the user's code")
    file, line = Path(where.file), where.line
    if not _inside(file, script_dir):
        raise NotVerifiable(
            f"the rewrite is in {file}, outside the script's folder {script_dir} (only files "
            "there are copied)"
        )
    try:
        text = read_source(file)
    except (OSError, UnicodeDecodeError) as exc:
        raise NotVerifiable(f"cannot read {file}: {exc}") from None
    start = _find_at(text, fix.before, line)
    if start is None:
        raise NotVerifiable(f"the rewrite's 'before' text is not at {file}:{line}")
    end = start + len(fix.before)
    first = text.count("\n", 0, start) + 1
    last = first + fix.before.count("\n")
    return Rewrite(fix_id, finding, file, start, end, _replacement(text, start, end, fix.code),
                   first, last, code=fix.code)  # fmt: skip


def read_source(path: Path) -> str:
    """A source file's text, line endings kept as they are (``newline=""``).

    Raises:
        OSError: it cannot be read.
        UnicodeDecodeError: it is not UTF-8.
    """
    with open(path, encoding="utf-8", newline="") as f:
        return f.read()


def _inside(file: Path, folder: Path) -> bool:
    try:
        file.resolve().relative_to(folder.resolve())
    except ValueError:
        return False
    return True


def _find_at(text: str, before: str, line: int) -> int | None:
    """Offset of the occurrence of ``before`` whose lines hold ``line`` (or, failing that, the
    one starting nearest to it, within ``AROUND_LINES``); None when there is none."""
    best: tuple[int, int] | None = None
    for match in re.finditer(re.escape(before), text):
        first = text.count("\n", 0, match.start()) + 1
        last = first + before.count("\n")
        distance = 0 if first <= line <= last else min(abs(first - line), abs(last - line))
        if distance <= AROUND_LINES and (best is None or distance < best[0]):
            best = (distance, match.start())
    return None if best is None else best[1]


def _replacement(text: str, start: int, end: int, code: str) -> str:
    """``code`` as it replaces ``text[start:end]``: its later lines indented like the line it
    starts on, and a trailing comment dropped when code follows on the same line (it would
    comment that code out).

    Except the lines the fix carries over from the user's multi-line code as the file has them:
    a change spliced into the call keeps its continuation lines (indented in the file already),
    and a fix of new statements followed by the user's call (RD501) keeps what follows that
    call's first line (where at least one of the call's continuation lines follows it as
    written); any other line that is one of the original's continuation lines as written is
    kept too. Before, a kept continuation line inside a list at indent 4 moved from
    16 to 20 spaces; deciding for the whole fix at once left RD501's new statements at column
    0 inside a function (review: ``SyntaxError: unexpected indent``)."""
    line_start = text.rfind("\n", 0, start) + 1
    prefix = text[line_start:start]
    indent = prefix[: len(prefix) - len(prefix.lstrip())]
    line_end = text.find("\n", end)
    rest = text[end : len(text) if line_end < 0 else line_end]
    if rest.strip():
        code = _strip_trailing_comment(code)
    lines = code.split("\n")
    before = text[start:end].split("\n")
    if not indent or len(before) < 2:  # at column 0, or a one-line original: all written afresh
        return "\n".join([lines[0], *[indent + s if s.strip() else s for s in lines[1:]]])
    if _edited_in_place(before, lines):  # train(x,\n      8) -> train(x,\n      32)
        return "\n".join(lines)
    # the user's call spliced in: its first line as written, then its own continuation lines
    first = max((i for i, line in enumerate(lines) if line == before[0]), default=None)
    kept = {line for line in before[1:] if line.strip()}
    if first is not None and not any(line in kept for line in lines[first + 1 :]):
        first = None  # the call rewritten afresh below its first line, relative to it
    out = [lines[0]]
    for i, line in enumerate(lines[1:], start=1):
        carried = (first is not None and i > first) or line in kept
        out.append(line if carried or not line.strip() else indent + line)
    return "\n".join(out)


def _edited_in_place(before: list[str], lines: list[str]) -> bool:
    """Whether the fix's ``lines`` are the original's ``before`` lines with literals changed in
    place: as many lines, each with the same leading whitespace, and the same tokens but for
    numbers and strings (``train(x,\n      8)`` -> ``train(x,\n      32)``), so that the
    fix's continuation lines are at the file's indentation already, the changed ones too (a
    two-line call whose second line held the changed literal matched no kept line, and was
    indented once more). New statements at their own indentation never pass: their tokens
    differ."""
    if len(before) != len(lines):
        return False
    if any(
        a[: len(a) - len(a.lstrip())] != b[: len(b) - len(b.lstrip())]
        for a, b in zip(before[1:], lines[1:], strict=True)
    ):
        return False
    return _shape("\n".join(before)) == _shape("\n".join(lines)) is not None


def _shape(code: str) -> list[tuple[int, str]] | None:
    """``code``'s tokens, numbers and strings as their type only; None where it does not
    tokenize."""
    literal = (tokenize.NUMBER, tokenize.STRING)
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(code).readline))
    except (tokenize.TokenError, SyntaxError):
        return None
    return [(t.type, "" if t.type in literal else t.string) for t in tokens]


def _strip_trailing_comment(code: str) -> str:
    """``code`` without a comment on its last line (``tokenize``; unchanged if it does not
    tokenize)."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(code).readline))
    except (tokenize.TokenError, SyntaxError):
        return code
    last_line = code.count("\n") + 1
    comments = [t for t in tokens if t.type == tokenize.COMMENT and t.start[0] == last_line]
    if not comments:
        return code
    lines = code.split("\n")
    lines[-1] = lines[-1][: comments[-1].start[1]].rstrip()
    return "\n".join(lines)


def apply_rewrites(text: str, rewrites: Sequence[Rewrite]) -> str:
    """``text`` with the rewrites applied (all of one file, no two overlapping).

    Raises:
        ValueError: two rewrites overlap.
    """
    ordered = sorted(rewrites, key=lambda r: r.start, reverse=True)
    for later, earlier in zip(ordered, ordered[1:], strict=False):
        if earlier.end > later.start:
            raise ValueError(f"{earlier.fix_id} and {later.fix_id} overlap")
    for rewrite in ordered:
        text = text[: rewrite.start] + rewrite.replacement + text[rewrite.end :]
    return text


def compatible(
    rewrites: Sequence[Rewrite], apart: Collection[str] = ()
) -> tuple[list[Rewrite], dict[str, str]]:
    """The rewrites that can be applied together. Fixes that change different keywords of one
    call are first merged into one rewrite (:func:`merge_same_call`: RD101's
    ``recurrent_dropout`` and RD102's ``activation`` on one ``LSTM(...)``, which each leave the
    layer off the cuDNN kernel alone), as is a fix that appends a method call to an expression
    another changes (:func:`merge_independent`), except those named in ``apart``; of two that
    still touch a common line, the one with the larger estimated speedup is kept (the earlier
    on a tie; a merged rewrite counts its largest part's).

    Returns:
        ``(kept, dropped)``: kept in the order given (a merged rewrite where its first part was,
        named ``RD101+RD102``); dropped maps a fix's name to the name of the kept rewrite it
        overlaps.

    Raises:
        OSError: a file with fixes to merge cannot be read.
    """
    merged = _merged(rewrites, set(apart))
    ranked = sorted(enumerate(merged), key=lambda item: (-item[1].speedup, item[0]))
    kept: list[tuple[int, Rewrite]] = []
    dropped: dict[str, str] = {}
    for index, rewrite in ranked:
        clash = next((k for _, k in kept if k.overlaps(rewrite)), None)
        if clash is None:
            kept.append((index, rewrite))
        else:
            dropped.update(dict.fromkeys(rewrite.members, clash.fix_id))
    return [r for _, r in sorted(kept, key=lambda item: item[0])], dropped


def merge_groups(rewrites: Sequence[Rewrite]) -> list[Rewrite]:
    """The merged rewrites :func:`compatible` makes of ``rewrites`` (before any overlap is
    ranked): each call's fixes that merge, as one rewrite with its :attr:`Rewrite.parts`.

    Raises:
        OSError: a file with fixes to merge cannot be read.
    """
    return [r for r in _merged(rewrites, set()) if r.parts]


def _merged(rewrites: Sequence[Rewrite], apart: set[str]) -> list[Rewrite]:
    """``rewrites`` with each group that replaces the same text merged as far as it merges: the
    largest estimate left starts a merge, each later one joins where :func:`merge_same_call`
    (keyword changes of one call), :func:`merge_independent` (a method call appended) or
    :func:`merge_chain` (changes to different calls of one method chain) takes it, and what
    joins none starts the next. A rewrite of text inside another's joins that one's group
    (:func:`_lifted`). A merged rewrite takes its first part's place; a rewrite that merges
    with none, and those in ``apart``, stay as they are."""
    out: list[Rewrite | None] = list(rewrites)
    lifted = _lifted(rewrites, apart)
    groups: dict[tuple[Path, int, int], list[int]] = {}
    for index, rewrite in enumerate(lifted):
        if not apart & set(rewrite.members):
            groups.setdefault((rewrite.file, rewrite.start, rewrite.end), []).append(index)
    for indices in groups.values():
        left = sorted(indices, key=lambda i: (-rewrites[i].speedup, i))
        while len(left) > 1:
            taken, merged = left[:1], None
            for index in left[1:]:
                group = [lifted[i] for i in sorted((*taken, index))]
                candidate = merge_same_call(group) or merge_independent(group) or merge_chain(group)
                if candidate is not None:
                    taken, merged = [*taken, index], candidate
            left = [i for i in left if i not in taken]
            if merged is not None:
                for index in taken:
                    out[index] = None
                out[min(taken)] = merged
    return [r for r in out if r is not None]


def _lifted(rewrites: Sequence[Rewrite], apart: set[str]) -> list[Rewrite]:
    """Each rewrite whose text lies strictly inside another's in the same file (RD203's
    ``ds.map(f)`` inside RD301's ``ds.map(f).batch(64)``, a chain's calls each recorded with
    the chain before them) as a rewrite of the largest such text, its own change spliced in,
    so that the merges can take both; every other rewrite, and those in ``apart``, as given.

    Raises:
        OSError: a file with a nested rewrite cannot be read.
    """
    out = []
    for rewrite in rewrites:
        outer = [
            o
            for o in rewrites
            if o.file == rewrite.file
            and o.start <= rewrite.start
            and rewrite.end <= o.end
            and (o.start, o.end) != (rewrite.start, rewrite.end)
            and not apart & set(o.members)
        ]
        if not outer or apart & set(rewrite.members):
            out.append(rewrite)
            continue
        big = max(outer, key=lambda o: (o.end - o.start, -o.start))
        text = read_source(rewrite.file)
        spliced = (
            text[big.start : rewrite.start] + rewrite.replacement + text[rewrite.end : big.end]
        )
        out.append(
            replace(rewrite, start=big.start, end=big.end, replacement=spliced,
                    first_line=big.first_line, last_line=big.last_line, code=spliced)
        )  # fmt: skip
    return out


def merge_chain(rewrites: Sequence[Rewrite]) -> Rewrite | None:
    """One rewrite applying each of ``rewrites``, which replace the same call or method chain,
    where each changes arguments no other changes (of different calls of the chain, or
    different arguments of one call), or appends a method call to it: RD301's ``batch(64)`` ->
    ``batch(256)``, RD203's ``map(f)`` -> ``map(f, num_parallel_calls=tf.data.AUTOTUNE)`` and
    RD202's appended ``.prefetch(...)`` on ``tf.data.Dataset.from_tensor_slices(x).map(f)
    .batch(64)``; RD301's ``padded_batch(64, ...)`` -> ``padded_batch(256, ...)`` and RD502's
    ``padded_shapes=None`` in the same call. Each argument is its own value (``batch``'s size
    does not depend on ``map``'s keywords, nor ``padded_batch``'s size on its shapes), so the
    changes are independent. None where a change is outside every call's parentheses (a callee
    replaced, RD107), inside a call nested in an argument, across two arguments (a keyword
    removed with its comma: :func:`merge_same_call`'s case), two rewrites change one argument,
    or add at one place, or the file with the result is not Python. Each rewrite's edits and
    the result are as in :func:`merge_independent`; named and carried as
    :func:`merge_same_call`'s.

    Raises:
        OSError: the file cannot be read.
    """
    return _merged_rewrite(rewrites, _chain_merge)


def _chain_merge(text: str, rewrites: Sequence[Rewrite]) -> tuple[str, str] | None:
    """:func:`merge_chain`'s merge of ``rewrites`` in the file's ``text``: the merged text (the
    replacement and the code alike), or None."""
    first = rewrites[0]
    base = text[first.start : first.end]
    calls = _chain_arguments(base)
    if not calls:
        return None
    edits: list[tuple[int, int, str]] = []
    owners: set[tuple[int, int]] = set()
    for rewrite in rewrites:
        mine = _edits(base, rewrite.replacement)
        appended = _appends(mine, len(base))
        owner = set() if appended else {_owner(calls, edit) for edit in mine}
        if None in owner:  # difflib may split one change: read it as one edit
            mine = _one_edit(base, rewrite.replacement)
            owner = {_owner(calls, edit) for edit in mine}
        if not mine or any(_clash(a, b) for a in mine for b in edits):
            return None
        if None in owner or owner & owners:
            return None
        owners |= owner
        edits += mine
    return _applied(text, first, edits)


def _applied(
    text: str, first: Rewrite, edits: list[tuple[int, int, str]]
) -> tuple[str, str] | None:
    """The replaced text of ``first`` with ``edits`` applied (offsets into it), as the merged
    replacement and code alike; None where the file with it is not Python."""
    merged = text[first.start : first.end]
    for start, end, new in sorted(edits, reverse=True):
        merged = merged[:start] + new + merged[end:]
    try:
        ast.parse(text[: first.start] + merged + text[first.end :])
    except (SyntaxError, ValueError):
        return None
    return merged, merged


def _one_edit(base: str, new: str) -> list[tuple[int, int, str]]:
    """``new``'s difference from ``base`` as one edit, between their common prefix and common
    suffix: ``padded_shapes=([200], [])`` -> ``padded_shapes=None`` is one change of one
    argument, where a word-by-word diff (:func:`_edits`) matched the tuple's ``)`` to the
    call's and gave two, the second outside the argument. Empty where they are equal."""
    if base == new:
        return []
    prefix = len(os.path.commonprefix([base, new]))
    suffix = 0
    while suffix < min(len(base), len(new)) - prefix and base[-1 - suffix] == new[-1 - suffix]:
        suffix += 1
    return [(prefix, len(base) - suffix, new[prefix : len(new) - suffix])]


@dataclass(frozen=True)
class _CallText:
    """One call of a method chain, as offsets in its text: ``begin`` / ``close`` bound what is
    inside its parentheses (``close`` is the ``)``); ``arguments``, each argument's span (a
    keyword's ``name=value``); ``nested``, the spans of the calls inside its arguments."""

    begin: int
    close: int
    arguments: tuple[tuple[int, int], ...]
    nested: tuple[tuple[int, int], ...]


def _chain_arguments(source: str) -> list[_CallText]:
    """Each call of the method chain ``source`` (an expression, or the value of one
    assignment), outermost first (:class:`_CallText`); empty where ``source`` is no call."""
    lead = len(source) - len(source.lstrip())
    body = source.lstrip()
    try:
        statement = ast.parse(body).body
    except (SyntaxError, ValueError):
        return []
    value = getattr(statement[0], "value", None) if len(statement) == 1 else None
    starts = rw.line_starts(body)

    def span(node: ast.AST) -> tuple[int, int]:
        return (
            lead + rw.char_offset(starts, node.lineno, node.col_offset, body),
            lead + rw.char_offset(starts, node.end_lineno, node.end_col_offset, body),
        )

    calls = []
    while isinstance(value, ast.Call):
        func_end = rw.char_offset(starts, value.func.end_lineno, value.func.end_col_offset, body)
        inner = [*value.args, *value.keywords]
        calls.append(
            _CallText(
                begin=lead + func_end,
                close=span(value)[1] - 1,
                arguments=tuple(span(a) for a in inner),
                nested=tuple(
                    span(n) for a in inner for n in ast.walk(a) if isinstance(n, ast.Call)
                ),
            )
        )
        value = value.func.value if isinstance(value.func, ast.Attribute) else None
        while isinstance(value, ast.Attribute):
            value = value.value
    return calls


def _owner(calls: list[_CallText], edit: tuple[int, int, str]) -> tuple[int, int] | None:
    """What ``edit`` changes: ``(call, argument)``, the index of the chain call whose
    parentheses hold it and of the argument whose span holds it (-1: added at the closing
    parenthesis, after the last argument); None where it spans two arguments, touches a call
    nested in one, or lies outside every call's parentheses."""
    start, end, _ = edit
    for index, call in enumerate(calls):
        if not (call.begin < start and end <= call.close):
            continue
        if any(start < b_end and b_start < end or b_start <= start < b_end
               for b_start, b_end in call.nested):  # fmt: skip
            return None
        if start == end == call.close:
            return index, -1
        for position, (a_start, a_end) in enumerate(call.arguments):
            if a_start <= start and end <= a_end:
                return index, position
        return None
    return None


def merge_same_call(rewrites: Sequence[Rewrite]) -> Rewrite | None:
    """One rewrite applying every keyword change of ``rewrites``, which replace the same call's
    text and each change only its keywords (removed, added or given another value); None where
    they cannot be merged.

    Each fix's changes are read from its code as a call (``ast``) and applied in turn to the
    call as written, with the rewriter the rules use (:func:`rnndoctor.rewrite.remove_keyword`,
    :func:`rnndoctor.rewrite.set_keyword`; a value keeps the fix's own text), so every other
    argument keeps the user's text, comments and line breaks. The result is checked as code: it
    must be the call with exactly those keyword changes, in order, its callee, positional
    arguments and ``**`` splats as written. None where a fix changes anything else (the
    callee, a positional argument, statements around the call), two fixes change one keyword
    differently, the call passes ``**kwargs`` and a keyword is added or set, or the check fails.

    The merged rewrite is named ``RD101+RD102`` after its parts (:attr:`Rewrite.parts`, a
    merged rewrite's own parts in its place) and carries the finding of the part with the
    largest estimated speedup.

    Raises:
        OSError: the file cannot be read.
    """
    return _merged_rewrite(rewrites, _keyword_merge)


def _keyword_merge(text: str, rewrites: Sequence[Rewrite]) -> tuple[str, str] | None:
    """:func:`merge_same_call`'s merge of ``rewrites`` in the file's ``text``: the replacement
    and the merged call, or None."""
    first = rewrites[0]
    merged = _merged_call(text[first.start : first.end], [r.code for r in rewrites])
    if merged is None:
        return None
    return _replacement(text, first.start, first.end, merged), merged


def _merged_rewrite(
    rewrites: Sequence[Rewrite],
    merge: Callable[[str, Sequence[Rewrite]], tuple[str, str] | None],
) -> Rewrite | None:
    """What :func:`merge_same_call` and :func:`merge_independent` share: two parts or more,
    all replacing the same text, merged by ``merge(text, rewrites)`` into ``(replacement,
    code)`` (None: they do not merge), named after the parts (``RD101+RD102``) and carrying
    the finding of the part with the largest estimated speedup.

    Raises:
        OSError: the file cannot be read.
    """
    parts = tuple(p for r in rewrites for p in r.parts or (r,))
    if len(parts) < 2 or len({(r.file, r.start, r.end) for r in rewrites}) != 1:
        return None
    first = rewrites[0]
    merged = merge(read_source(first.file), rewrites)
    if merged is None:
        return None
    replacement, code = merged
    best = max(parts, key=lambda r: r.speedup)
    return Rewrite(
        "+".join(p.fix_id for p in parts), best.finding, first.file, first.start, first.end,
        replacement, first.first_line, first.last_line, parts=parts, code=code,
    )  # fmt: skip


# Words, runs of white space and single other characters: the units the edits of two rewrites
# of one text are compared in (batch(32) -> batch(128) changes the word "32", not "3" alone).
_TOKEN = re.compile(r"\w+|\s+|[^\w\s]")


def merge_independent(rewrites: Sequence[Rewrite]) -> Rewrite | None:
    """One rewrite applying each of ``rewrites``, which replace the same expression, where all
    but one only append a method call to it and each changes other parts of it: RD301's
    ``batch(32)`` -> ``batch(128)`` and RD202's appended ``.prefetch(tf.data.AUTOTUNE)`` on one
    ``tf.data`` chain, of which the all-fixes copy held only the one estimated larger. None
    where two change a common part or append at one place, more than one does more than
    append, or the file with the result is not Python.

    Why appends only: a method appended to an expression's value (``.prefetch``) does not
    depend on the arguments inside it, while two changes inside one call can (a fix that
    replaces the callee, RD107, and a keyword fix written for the old one: those stay apart,
    as :func:`merge_same_call` leaves them).

    Each rewrite's edits are its differences from the original text, compared word by word
    (:data:`_TOKEN`, ``difflib``); the result applies every edit to the original, so each
    rewrite's own text survives as it wrote it. Named and carried as :func:`merge_same_call`'s
    (``RD301+RD202``, :attr:`Rewrite.parts`).

    Raises:
        OSError: the file cannot be read.
    """
    return _merged_rewrite(rewrites, _appended_merge)


def _appended_merge(text: str, rewrites: Sequence[Rewrite]) -> tuple[str, str] | None:
    """:func:`merge_independent`'s merge of ``rewrites`` in the file's ``text``: the merged
    text (the replacement and the code alike), or None."""
    first = rewrites[0]
    base = text[first.start : first.end]
    changes = [_edits(base, r.replacement) for r in rewrites]
    appends = [c for c in changes if _appends(c, len(base))]
    if not appends or len(changes) - len(appends) > 1:
        return None
    edits: list[tuple[int, int, str]] = []
    for mine in changes:
        if any(_clash(a, b) for a in mine for b in edits):
            return None
        edits += mine
    return _applied(text, first, edits)


def _edits(base: str, new: str) -> list[tuple[int, int, str]]:
    """``new``'s differences from ``base`` as ``(start, end, text)``: ``base[start:end]``
    (characters) becomes ``text``; compared by :data:`_TOKEN` units."""
    old, changed = _TOKEN.findall(base), _TOKEN.findall(new)
    offsets = [0]
    for token in old:
        offsets.append(offsets[-1] + len(token))
    matcher = difflib.SequenceMatcher(None, old, changed, autojunk=False)
    return [
        (offsets[i1], offsets[i2], "".join(changed[j1:j2]))
        for tag, i1, i2, j1, j2 in matcher.get_opcodes()
        if tag != "equal"
    ]


def _appends(edits: Sequence[tuple[int, int, str]], end: int) -> bool:
    """Whether ``edits`` only append a method call (``.prefetch(...)``) at ``end``."""
    return len(edits) == 1 and edits[0][:2] == (end, end) and edits[0][2].startswith(".")


def _clash(a: tuple[int, int, str], b: tuple[int, int, str]) -> bool:
    """Whether two edits of one text change a common part of it, or insert at one place (their
    order would be a guess)."""
    return a[0] == b[0] or (a[0] < b[1] and b[0] < a[1])


def _merged_call(before: str, codes: Sequence[str]) -> str | None:
    """``before`` with every code's keyword changes applied (see :func:`merge_same_call`)."""
    call = rw.parse_call(before)
    if call is None:
        return None
    old = {k.arg: ast.dump(k.value) for k in call.keywords if k.arg is not None}
    changes: dict[str, str | None] = {}  # a keyword's new value's source; None: removed
    for code in codes:
        node = rw.parse_call(code)
        if node is None or _fixed_part(node) != _fixed_part(call):
            return None
        new = {k.arg: k.value for k in node.keywords if k.arg is not None}
        mine: dict[str, str | None] = dict.fromkeys(old.keys() - new.keys())
        for name, value in new.items():
            if old.get(name) != ast.dump(value):
                mine[name] = ast.get_source_segment(code.strip(), value)
        for name, value in mine.items():
            if changes.setdefault(name, value) != value:
                return None
    result: str | None = before.strip()
    for name, value in changes.items():
        if value is None:
            result = rw.remove_keyword(result, name)
        else:
            result = rw.set_keyword(result, name, value, over_expression=True)
        if result is None:
            return None
    expected = [
        ("**" if k.arg is None else k.arg, ast.dump(k.value))
        if k.arg not in changes
        else (k.arg, _dump_source(changes[k.arg]))
        for k in call.keywords
        if k.arg is None or k.arg not in changes or changes[k.arg] is not None
    ]
    expected += [(n, _dump_source(v)) for n, v in changes.items() if v is not None and n not in old]
    node = rw.parse_call(result)
    if node is None or _fixed_part(node) != _fixed_part(call):
        return None
    written = [("**" if k.arg is None else k.arg, ast.dump(k.value)) for k in node.keywords]
    return result if written == expected else None


def _fixed_part(call: ast.Call) -> tuple[str, tuple[str, ...], tuple[str, ...]]:
    """What a keyword fix leaves as it is: the callee, the positional arguments and the ``**``
    splats (``ast.dump`` each)."""
    splats = tuple(ast.dump(k.value) for k in call.keywords if k.arg is None)
    return ast.dump(call.func), tuple(ast.dump(a) for a in call.args), splats


def _dump_source(source: str | None) -> str:
    """``ast.dump`` of an expression's source."""
    return ast.dump(ast.parse(source or "None", mode="eval").body)


def copy_script_path(dest: Path, script: Path, source_root: Path) -> Path:
    """Where the copy of ``script`` lives under ``dest``: its path relative to ``source_root``
    (its name alone when it is outside that root)."""
    try:
        relative = script.resolve().relative_to(source_root.resolve())
    except ValueError:
        relative = Path(script.name)
    return dest / relative


def build_copy(
    dest: Path, script: Path, source_root: Path, rewrites: Sequence[Rewrite], skip: Sequence[Path]
) -> Path:
    """Builds the patched copy of the script's folder under ``dest`` and returns the script's copy.

    The copy of the script's folder holds the patched files, a plain copy of the script, and a
    symbolic link to every other entry (``skip``: entries left out, e.g. the report folder).
    Each patched file must still compile.

    Args:
        dest: the copy's root (``<out>/verify/<fix>``); replaced when it exists.
        script: the user's script.
        source_root: the work tree the copy's paths are relative to.
        rewrites: compatible rewrites, in files inside the script's folder.
        skip: paths in the script's folder not to mirror.

    Raises:
        NotVerifiable: a patched file does not compile (the message names the file and line).
        OSError: the copy cannot be written.
    """
    script_dir = script.resolve().parent
    patched: dict[Path, str] = {}
    for file in dict.fromkeys(r.file.resolve() for r in rewrites):
        text = apply_rewrites(read_source(file), [r for r in rewrites if r.file.resolve() == file])
        try:
            compile(text, str(file), "exec", dont_inherit=True)
        except SyntaxError as exc:
            raise NotVerifiable(
                f"the rewritten code does not compile: {exc.msg} at {file}:{exc.lineno}"
            ) from None
        patched[file] = text
    copy = copy_script_path(dest, script, source_root)
    if dest.exists():
        shutil.rmtree(dest)
    copy.parent.mkdir(parents=True)
    real = {script.resolve(), *patched}
    _mirror(script_dir, copy.parent, patched, real, {p.resolve() for p in skip})
    if script.resolve() not in patched:
        shutil.copy2(script.resolve(), copy)
    return copy


def _mirror(
    src: Path, dst: Path, patched: dict[Path, str], real: set[Path], skip: set[Path]
) -> None:
    """Mirrors folder ``src`` into the existing folder ``dst``: patched files written, folders on
    the way to a real file recreated, every other entry linked to its original."""
    for entry in sorted(os.scandir(src), key=lambda e: e.name):
        path = Path(entry.path)
        target = dst / entry.name
        resolved = path.resolve()
        if resolved in skip or path in skip:
            continue
        if resolved in patched:
            with open(target, "w", encoding="utf-8", newline="") as f:
                f.write(patched[resolved])
            shutil.copymode(resolved, target)
        elif resolved in real:
            continue  # the script: copied by the caller
        elif entry.is_dir(follow_symlinks=False) and any(_inside(r, resolved) for r in real):
            target.mkdir()
            _mirror(path, target, patched, real, skip)
        else:
            target.symlink_to(resolved, target_is_directory=entry.is_dir())
