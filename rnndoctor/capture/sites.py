"""Construction sites: the user's file:line where each Keras layer was built.

``install()`` wraps ``keras.layers.Layer.__new__`` so that every layer remembers the innermost
stack frame that belongs to the user's code. A frame is the user's when its file is the script
being checked, or lies outside the standard library, site-packages and rnndoctor itself. So a
layer that Keras builds for the user (``Bidirectional`` clones its LSTM with ``from_config``) points
at the user's ``Bidirectional(LSTM(...))`` line, and a layer built in the user's own helper module
points at that helper.
"""

from __future__ import annotations

import ast
import functools
import linecache
import os
import sys
import sysconfig
import weakref
from pathlib import Path

from rnndoctor.facts import SourceLocation

_CONTEXT_LINES = 3  # lines shown above and below a location in the report
_PACKAGE_DIR = str(Path(__file__).resolve().parents[1])
_EXAMPLES_DIR = os.path.join(_PACKAGE_DIR, "examples")

_sites: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_script: str | None = None
_installed = False


def _library_dirs() -> tuple[str, ...]:
    dirs = {sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    dirs.add(_PACKAGE_DIR)
    return tuple(os.path.realpath(d) + os.sep for d in dirs if d)


_LIBRARY_DIRS = _library_dirs()


def set_script(path: str | None) -> None:
    """Marks ``path`` as the user's script: its frames count as user code wherever it lives."""
    global _script
    _script = os.path.realpath(path) if path else None


def is_user_file(filename: str) -> bool:
    """True when ``filename`` is the user's script or lies outside Python's and rnndoctor's dirs."""
    if not filename or filename.startswith("<"):
        return False
    real = os.path.realpath(filename)
    if _script is not None and real == _script:
        return True
    if real.startswith(_EXAMPLES_DIR + os.sep):
        return True  # the bundled examples are user code, even when installed in site-packages
    return not real.startswith(_LIBRARY_DIRS)


def user_frame_location(skip: int = 1, call_names: tuple[str, ...] = ()) -> SourceLocation | None:
    """The innermost user frame on the current stack, as a :class:`SourceLocation`.

    Args:
        skip: frames to skip from the caller's frame.
        call_names: names of the callable to look for on that line (``("LSTM",)``), used to pick
            the constructor call's source segment.
    """
    frame = sys._getframe(skip + 1)
    while frame is not None:
        if is_user_file(frame.f_code.co_filename):
            return source_location(frame.f_code.co_filename, frame.f_lineno, call_names)
        frame = frame.f_back
    return None


def source_location(filename: str, line: int, call_names: tuple[str, ...] = ()) -> SourceLocation:
    """Builds a :class:`SourceLocation` with the line, its context and the call's source.

    When ``call_names`` are given and the statement at ``line`` holds a call to one of them that
    starts on another line (``Bidirectional(`` on one line, ``LSTM(...)`` on the next), the
    location moves to the line where that call starts.
    """
    path = os.path.abspath(filename)
    lines = linecache.getlines(path)
    node = _call_node("".join(lines), line, call_names) if lines and call_names else None
    if node is not None:
        line = node.lineno
    code = lines[line - 1].strip() if 0 < line <= len(lines) else None
    start = max(1, line - _CONTEXT_LINES)
    context = [s.rstrip("\n") for s in lines[start - 1 : line + _CONTEXT_LINES]]
    return SourceLocation(
        file=path,
        line=line,
        code=code,
        call_source=ast.get_source_segment("".join(lines), node) if node is not None else None,
        context_start=start if context else None,
        context=context,
    )


@functools.lru_cache(maxsize=64)
def _parse(source: str) -> ast.Module | None:
    try:
        return ast.parse(source)
    except (SyntaxError, ValueError):
        return None


def _call_name(node: ast.Call) -> str | None:
    func = node.func
    if isinstance(func, ast.Attribute):
        return func.attr
    if isinstance(func, ast.Name):
        return func.id
    return None


def _span(node: ast.AST) -> int:
    return (getattr(node, "end_lineno", None) or node.lineno) - node.lineno


def _call_node(source: str, line: int, call_names: tuple[str, ...]) -> ast.Call | None:
    """The innermost call to one of ``call_names`` in the innermost statement at ``line``.

    Calls that span ``line`` win; otherwise any such call of that statement is taken (the frame's
    line is where the enclosing call started, as for a wrapper's argument on the next line).
    """
    tree = _parse(source)
    if tree is None:
        return None
    statements = [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.stmt) and n.lineno <= line <= (n.end_lineno or n.lineno)
    ]
    if not statements:
        return None
    statement = min(statements, key=_span)
    calls = [
        n for n in ast.walk(statement) if isinstance(n, ast.Call) and _call_name(n) in call_names
    ]
    spanning = [n for n in calls if n.lineno <= line <= (n.end_lineno or n.lineno)]
    return min(spanning or calls, key=lambda n: (_span(n), -n.col_offset), default=None)


def site_of(layer: object) -> SourceLocation | None:
    """The recorded construction site of ``layer``, or None if it was built before ``install``."""
    try:
        return _sites.get(layer)
    except TypeError:
        return None


def install() -> None:
    """Wraps ``keras.layers.Layer.__new__`` to record construction sites. Idempotent.

    ``__new__`` rather than ``__init__``: Keras inspects ``cls.__init__`` (``Operation.__new__``
    builds each layer's auto-config from its signature), so ``__init__`` must stay untouched.
    """
    global _installed
    if _installed:
        return
    import keras

    original = keras.layers.Layer.__new__

    def __new__(cls, *args, **kwargs):  # noqa: N807 - it replaces __new__
        obj = original(cls, *args, **kwargs)
        try:
            if obj not in _sites:
                names = tuple({cls.__name__, *(c.__name__ for c in cls.__mro__[:3])})
                _sites[obj] = user_frame_location(skip=1, call_names=names)
        except Exception:  # recording a site must never break the user's model
            pass
        return obj

    keras.layers.Layer.__new__ = staticmethod(__new__)
    _installed = True
