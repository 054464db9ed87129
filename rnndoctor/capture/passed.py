"""Where a value that ``fit`` received through a parameter came from: the caller that passed it.

``def train(batch_size): model.fit(x, y, batch_size=batch_size)``, called as ``train(64)``,
``train(bs)`` or ``train(args.batch_size)``: the ``fit`` line names only a parameter, so the
line a fix must change is the caller's. The parameter is followed on the live call stack while
the user's ``fit`` runs, so the frames are the run's own, not guessed from names: a frame's
caller is the frame below it, and the caller's call is the one its current instruction runs,
found by that instruction's source span (``co_positions``, PEP 657), so two calls on one line
are told apart. Each step binds the parameter to the call's argument as Python does: its
keyword, else its position (one less where the call's receiver is the object a ``self`` or
``cls`` first parameter received, as for ``trainer.run(64)``; not through the class,
``Trainer.run(trainer, 64)``), and the binding is checked against the run's own values (the
caller's name, its attribute or the literal holds the value the parameter received). It stops
at a ``*args`` / ``**kwargs`` splat that may hold it, at a default (the call passes nothing),
at a value that does not match, and at a caller outside the user's files.
"""

from __future__ import annotations

import ast
import inspect
import linecache
import os
import sys
from dataclasses import dataclass
from types import FrameType

from rnndoctor.capture import sites

# The most calls a value is followed up through (train(bs) <- main(bs) <- ...). Source:
# rnndoctor's choice; a script's training code is rarely more than a few calls deep.
MAX_CALLS = 4


@dataclass(frozen=True)
class Passed:
    """One step up the stack: the ``call`` in ``file`` (its first line ``line``) that passed
    ``value`` for the parameter, the caller's ``frame`` (for the next step), and the file's
    ``source`` text."""

    file: str
    line: int
    call: ast.Call
    value: ast.expr
    frame: FrameType
    source: str

    def call_source(self) -> str | None:
        """The caller's call as the user wrote it."""
        return ast.get_source_segment(self.source, self.call)


def frame_at(filename: str, line: int) -> FrameType | None:
    """The innermost frame on the current stack that runs ``filename`` (compared as absolute
    paths) at ``line``; None when there is none."""
    want = os.path.abspath(filename)
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        if frame.f_lineno == line and os.path.abspath(frame.f_code.co_filename) == want:
            return frame
        frame = frame.f_back
    return None


def is_parameter(frame: FrameType, name: str) -> bool:
    """Whether ``name`` is a named parameter of ``frame``'s function (not ``*args`` or
    ``**kwargs``); never in a module, a lambda or a generator (whose caller is whatever
    resumed it, not the call that made it)."""
    code = frame.f_code
    if code.co_name in ("<module>", "<lambda>") or code.co_flags & 0x20:  # CO_GENERATOR
        return False
    named = code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]
    return name in named


def plain_scope(frame: FrameType, name: str) -> bool:
    """Whether ``name`` in ``frame`` is a name of the function's (or module's) own scope as the
    source shows it: not read in a comprehension's or a lambda's frame, nor a closure's free
    variable, whose binding lies in another scope than the line's."""
    code = frame.f_code
    own = code.co_name == "<module>" or not code.co_name.startswith("<")
    return own and name not in code.co_freevars


def passed_argument(frame: FrameType, name: str) -> Passed | None:
    """The argument the caller of ``frame``'s function passed for its parameter ``name``; None
    when ``name`` is not such a parameter (:func:`is_parameter`), the caller is not the user's
    code (:func:`rnndoctor.capture.sites.is_user_file`), its call cannot be found in its source,
    or the call passes nothing for ``name`` by keyword or position (a default, a splat)."""
    caller = frame.f_back
    if caller is None or not is_parameter(frame, name):
        return None
    filename = caller.f_code.co_filename
    if not sites.is_user_file(filename):
        return None
    source = "".join(linecache.getlines(os.path.abspath(filename)))
    call = _running_call(caller, source, frame.f_code.co_name)
    if call is None:
        return None
    value = _bound(frame, name, call)
    if value is None or not _holds(caller, value, frame.f_locals.get(name, _MISSING)):
        return None
    return Passed(os.path.abspath(filename), call.lineno, call, value, caller, source)


_MISSING = object()


def _holds(caller: FrameType, expr: ast.expr, received: object) -> bool:
    """Whether ``expr``, read in ``caller``'s frame, is the value the parameter ``received``: the
    run's own values check the binding (a method called through its class, ``Trainer.run(obj,
    16)``, binds otherwise than an attribute call looks). An integer literal, a name (local,
    global or builtin) and a name's attribute are read; any other expression cannot be read
    without running code, and is taken as bound (it only ever names the value in a note)."""
    if received is _MISSING:
        return False
    if isinstance(expr, ast.Constant):
        return _same(expr.value, received)
    if not isinstance(expr, (ast.Name, ast.Attribute)):
        return True
    held = _read(caller, expr)
    return held is not _MISSING and _same(held, received)


def _read(frame: FrameType, expr: ast.expr) -> object:
    """The value of ``expr``, a name (local, global or builtin) or a name's attributes
    (``self.trainer``, read statically: no property's code runs), in ``frame``; ``_MISSING``
    for any other expression, or one that cannot be read (no such name or attribute, a
    property)."""
    if isinstance(expr, ast.Attribute):
        owner = _read(frame, expr.value)
        if owner is _MISSING:
            return _MISSING
        try:  # static: a property's code is never run to compare
            value = inspect.getattr_static(owner, expr.attr)
        except AttributeError:
            return _MISSING
        return _MISSING if isinstance(value, property) else value
    if not isinstance(expr, ast.Name):
        return _MISSING
    scopes = (frame.f_locals, frame.f_globals, frame.f_builtins)
    return next((scope[expr.id] for scope in scopes if expr.id in scope), _MISSING)


def _same(a: object, b: object) -> bool:
    """The same object, or equal values of one type (``64`` and ``64``, not ``64`` and
    ``64.0`` or ``True``)."""
    if a is b:
        return True
    try:
        return type(a) is type(b) and bool(a == b)
    except Exception:  # an array's ambiguous truth value, a broken __eq__
        return False


def _running_call(caller: FrameType, source: str, callee: str) -> ast.Call | None:
    """The call ``caller`` is running, found in ``source`` by the span of its current
    instruction; where the span is unknown, the one call to a function named ``callee`` in
    the statement at the caller's line (None if not exactly one)."""
    tree = sites._parse(source) if source else None
    if tree is None:
        return None
    try:
        span = list(caller.f_code.co_positions())[caller.f_lasti // 2]
    except (IndexError, ValueError):
        span = (None, None, None, None)
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)]
    if None not in span:
        line, end_line, col, end_col = span
        exact = [
            n
            for n in calls
            if (n.lineno, n.end_lineno, n.col_offset, n.end_col_offset)
            == (line, end_line, col, end_col)
        ]
        if len(exact) == 1:
            return exact[0] if sites._call_name(exact[0]) == callee else None
    statement = sites._innermost_statement(source, caller.f_lineno)
    if statement is None:
        return None
    named = [
        n for n in ast.walk(statement) if isinstance(n, ast.Call) and sites._call_name(n) == callee
    ]
    return named[0] if len(named) == 1 else None


def _bound(frame: FrameType, name: str, call: ast.Call) -> ast.expr | None:
    """The expression of ``call`` that Python binds to the parameter ``name`` of ``frame``'s
    function: its keyword, else its positional argument (a method called on an attribute,
    ``trainer.train(64)``, has its ``self`` bound already); None for a splat before or at that
    position, a keyword-only parameter passed by no keyword, or no such argument."""
    for keyword in call.keywords:
        if keyword.arg == name:
            return keyword.value
    if any(k.arg is None for k in call.keywords):
        return None  # **kwargs may hold it
    code = frame.f_code
    positional = code.co_varnames[: code.co_argcount]
    if name not in positional:
        return None  # keyword-only, passed by no keyword
    position = positional.index(name)
    if _receiver_bound(frame, call):
        position -= 1
    if position < 0 or position >= len(call.args):
        return None
    if any(isinstance(a, ast.Starred) for a in call.args[: position + 1]):
        return None
    return call.args[position]


def _receiver_bound(frame: FrameType, call: ast.Call) -> bool:
    """Whether ``call`` (``obj.run(16)``) binds the first parameter of ``frame``'s function to
    its receiver, so that its first argument is the function's second parameter: the call is
    on an attribute and the first parameter is named ``self`` or ``cls``, and, where the
    receiver is a name or a name's attributes that the caller's frame can read, it is the
    object that parameter received (or an instance of the class ``cls`` received). Through
    the class, ``Trainer.run(trainer, 16)``, nothing is bound."""
    code = frame.f_code
    first = code.co_varnames[0] if code.co_argcount else None
    if not isinstance(call.func, ast.Attribute) or first not in ("self", "cls"):
        return False
    received = frame.f_locals.get(first, _MISSING)
    receiver = _read(frame.f_back, call.func.value) if frame.f_back is not None else _MISSING
    if receiver is _MISSING or received is _MISSING:
        return True  # Trainer().run(16), self.trainers[0].run(16): an instance's method
    if receiver is received:
        return True
    return first == "cls" and isinstance(received, type) and isinstance(receiver, received)


def follow(frame: FrameType, name: str, max_calls: int = MAX_CALLS) -> list[Passed]:
    """The calls that handed the parameter ``name`` of ``frame``'s function down to it, the
    innermost first: each step's argument, where it is itself a plain name that is a parameter
    of its caller's function never assigned there before the call, is followed one call up
    (at most ``max_calls``). Empty when ``name`` is not a parameter of ``frame``'s function or
    its caller cannot be read (:func:`passed_argument`)."""
    chain: list[Passed] = []
    while len(chain) < max_calls:
        step = passed_argument(frame, name)
        if step is None:
            break
        chain.append(step)
        value = step.value
        if not isinstance(value, ast.Name) or not is_parameter(step.frame, value.id):
            break
        if sites.assignment_site(step.file, value.id, step.line) is not None:
            break  # reassigned in the caller before its call: that line is the site
        frame, name = step.frame, value.id
    return chain
