"""Construction sites: the user's file:line where each Keras layer, dataset and callback was built.

``install()`` wraps ``keras.layers.Layer.__new__`` so that every layer remembers the innermost
stack frame that belongs to the user's code. A frame is the user's when its file is the script
being checked, or lies outside the standard library, site-packages and rnndoctor itself. So a
layer that Keras builds for the user (``Bidirectional`` clones its LSTM with ``from_config``) points
at the user's ``Bidirectional(LSTM(...))`` line, and a layer built in the user's own helper module
points at that helper.

The sites are kept in one :class:`SiteBook`, which the patched ``keras.layers.Layer`` carries
(``Layer._rnndoctor_sites``): construction sites are recorded from the first layer the user
builds, before any check starts (:func:`rnndoctor.record_construction_sites`), so the book is the
process's, and a :class:`~rnndoctor.capture.session.CaptureSession` holds the book it reads.
The dataset and callback hooks (:mod:`rnndoctor.capture.data`, :mod:`rnndoctor.capture.probes`,
:mod:`rnndoctor.capture.neutralise`) record into the same book.
"""

from __future__ import annotations

import ast
import functools
import linecache
import os
import re
import sys
import sysconfig
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rnndoctor.facts import SourceLocation

_CONTEXT_LINES = 3  # lines shown above and below a location in the report
_PACKAGE_DIR = str(Path(__file__).resolve().parents[1])
_EXAMPLES_DIR = os.path.join(_PACKAGE_DIR, "examples")

_BOOK_ATTR = "_rnndoctor_sites"  # the SiteBook, on the patched keras.layers.Layer class


def _weak_map() -> weakref.WeakKeyDictionary:
    return weakref.WeakKeyDictionary()


@dataclass
class SiteBook:
    """Where the user's code built things, keyed (weakly) by the objects themselves.

    Attributes:
        script: the real path of the user's script: its frames are user code wherever it lives.
        layers: Keras layer -> its construction site.
        datasets: tf.data dataset or PyDataset -> ``(method, site)``.
        callbacks: Keras callback built by the user's code -> its site.
        saving_callbacks: a callback that writes user state (``ModelCheckpoint``...) -> the
            user's line that built it (:mod:`rnndoctor.capture.neutralise`).
        compiles: Keras model -> the user's latest ``compile`` call on it
            (:mod:`rnndoctor.capture.loop`'s compile hook), with the call's full source.
    """

    script: str | None = None
    layers: weakref.WeakKeyDictionary = field(default_factory=_weak_map)
    datasets: weakref.WeakKeyDictionary = field(default_factory=_weak_map)
    callbacks: weakref.WeakKeyDictionary = field(default_factory=_weak_map)
    saving_callbacks: weakref.WeakKeyDictionary = field(default_factory=_weak_map)
    compiles: weakref.WeakKeyDictionary = field(default_factory=_weak_map)

    def lookup(self, table: str, obj: Any) -> Any:
        """``obj``'s entry in ``table`` (``"layers"``, ``"datasets"``...), or None."""
        try:
            return getattr(self, table).get(obj)
        except TypeError:  # not weak-referenceable
            return None


def book() -> SiteBook | None:
    """The book the construction-site hooks record into; None before :func:`install`."""
    keras = sys.modules.get("keras")
    layers = getattr(keras, "layers", None) if keras is not None else None
    layer_cls = getattr(layers, "Layer", None)
    return layer_cls.__dict__.get(_BOOK_ATTR) if layer_cls is not None else None


def lookup(table: str, obj: Any) -> Any:
    """``obj``'s entry in the book's ``table`` (``"layers"``, ``"datasets"``...), or None."""
    current = book()
    return current.lookup(table, obj) if current is not None else None


def record(table: str, obj: Any, value: Any) -> None:
    """Records ``value`` for ``obj`` in the book's ``table`` unless it holds one already."""
    current = book()
    if current is None or obj is None:
        return
    entries = getattr(current, table)
    try:
        if obj not in entries:
            entries[obj] = value
    except TypeError:  # not weak-referenceable
        pass


def record_latest(table: str, obj: Any, value: Any) -> None:
    """Records ``value`` for ``obj`` in the book's ``table``, replacing an earlier entry (a model
    compiled twice: the later ``compile`` is the one in force)."""
    current = book()
    if current is None or obj is None:
        return
    try:
        getattr(current, table)[obj] = value
    except TypeError:  # not weak-referenceable
        pass


def _library_dirs() -> tuple[str, ...]:
    dirs = {sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    dirs.add(_PACKAGE_DIR)
    return tuple(os.path.realpath(d) + os.sep for d in dirs if d)


_LIBRARY_DIRS = _library_dirs()


def is_user_file(filename: str) -> bool:
    """True when ``filename`` is the user's script or lies outside Python's and rnndoctor's dirs."""
    if not filename or filename.startswith("<"):
        return False
    real = os.path.realpath(filename)
    current = book()
    if current is not None and current.script is not None and real == current.script:
        return True
    if real.startswith(_EXAMPLES_DIR + os.sep):
        return True  # the bundled examples are user code, even when installed in site-packages
    return not real.startswith(_LIBRARY_DIRS)


def user_frame_location(
    skip: int = 1, call_names: tuple[str, ...] = (), outside: object | None = None
) -> SourceLocation | None:
    """The innermost user frame on the current stack, as a :class:`SourceLocation`.

    Args:
        skip: frames to skip from the caller's frame.
        call_names: names of the callable to look for on that line (``("LSTM",)``), used to pick
            the constructor call's source segment.
        outside: an object under construction: the user's frames running its own methods (a
            ``PyDataset`` subclass's ``__init__`` calling ``super().__init__(...)``) are passed
            over, for the line that builds it (``Batches(x, y, 32)``).
    """
    frame = sys._getframe(skip + 1)
    timed: tuple[int, Any] | None = None  # a %time / %%time body's line, its magic's frame
    while frame is not None:
        filename = frame.f_code.co_filename
        if outside is not None and frame.f_locals.get("self") is outside:
            pass
        elif filename in _TIMED_CODE and timed is None:
            timed = (0 if _timeit_setup(frame) else frame.f_lineno, None)
        elif timed is not None and timed[1] is None and frame.f_code.co_name in _MAGIC_CALLS:
            timed = (timed[0], frame)
        elif is_user_file(filename):
            if timed is not None and timed[1] is not None:
                line, lines = _timed_source(frame, *timed)
                return source_location(filename, line, call_names, lines=lines)
            return source_location(filename, frame.f_lineno, call_names)
        frame = frame.f_back
    return None


# IPython's %time and %%time compile the code they time under these names, not the cell's
# (IPython/core/magics/execution.py: ExecutionMagics.time), and run it from the shell's
# run_line_magic / run_cell_magic (IPython/core/interactiveshell.py), whose parameters hold the
# magic's name and the code as the user typed it. %timeit and %%timeit put the statement's
# parsed lines, numbered from 1 like %%time's, into a function compiled as "<magic-timeit>"
# (ExecutionMagics.timeit: TimeitTemplateFiller), after the setup statement (a %%timeit line's
# own code, also numbered from 1) and `_t0 = _timer()`.
_TIMED_CODE = ("<timed exec>", "<timed eval>", "<magic-timeit>")


def _timeit_setup(frame: Any) -> bool:
    """Whether ``frame`` runs a ``%%timeit`` line's setup statement: IPython's timing function
    before its ``_t0 = _timer()`` (the template in ExecutionMagics.timeit), where the setup and
    the body's first line share line 1."""
    return frame.f_code.co_filename == "<magic-timeit>" and "_t0" not in frame.f_locals


_MAGIC_CALLS = ("run_cell_magic", "run_line_magic")


def _timed_source(cell: Any, timed_line: int, magic: Any) -> tuple[int, list[str]]:
    """The user's line, and the cell's lines as typed, for code that IPython's ``%time`` /
    ``%%time`` (or ``%timeit`` / ``%%timeit``) ran at line ``timed_line`` of its own compiled
    copy, from the cell's frame ``cell`` (whose file holds IPython's transformed cell:
    ``get_ipython().run_cell_magic('time', '', '...')`` on line 1) and the magic call's frame
    ``magic``.

    A cell magic's body starts on the line after the ``%%time`` line (``timed_line`` 0: the
    magic's line itself, a ``%%timeit`` line's setup statement); a line magic's statement is on
    the line of its call. The lines returned put back the magic's line as typed
    (``%%time``, ``%time model.fit(x, y)``) in place of the transformed call, so the report shows
    the user's code."""
    transformed = linecache.getlines(cell.f_code.co_filename)
    at = cell.f_lineno
    name = str(magic.f_locals.get("magic_name", ""))
    argument = str(magic.f_locals.get("line", ""))
    if magic.f_code.co_name == "run_cell_magic":
        typed = [f"%%{name} {argument}".rstrip() + "\n"]
        typed += [x + "\n" for x in str(magic.f_locals.get("cell", "")).splitlines()]
        return at + timed_line, transformed[: at - 1] + typed + transformed[at:]
    call = transformed[at - 1] if 0 < at <= len(transformed) else ""
    indent = call[: len(call) - len(call.lstrip())]  # a %time line inside a block
    typed = [f"{indent}%{name} {argument}".rstrip() + "\n"]
    return at + timed_line - 1, transformed[: at - 1] + typed + transformed[at:]


def source_location(
    filename: str,
    line: int,
    call_names: tuple[str, ...] = (),
    *,
    lines: list[str] | None = None,
) -> SourceLocation:
    """Builds a :class:`SourceLocation` with the line, its context and the call's source.

    When ``call_names`` are given and the statement at ``line`` holds a call to one of them that
    starts on another line (``Bidirectional(`` on one line, ``LSTM(...)`` on the next), the
    location moves to the line where that call starts. ``lines``: the file's lines, where they
    are not linecache's (a notebook cell as typed, :func:`_timed_source`).
    """
    path = os.path.abspath(filename)
    lines = linecache.getlines(path) if lines is None else lines
    source = "".join(lines)
    if call_names and lines and _parse(source) is None:  # a cell as typed, with its magics
        source = "".join(_without_magic(x) for x in lines)
    node = _call_node(source, line, call_names) if lines and call_names else None
    if node is not None:
        line = node.lineno
    code = lines[line - 1].strip() if 0 < line <= len(lines) else None
    start = max(1, line - _CONTEXT_LINES)
    context = [s.rstrip("\n") for s in lines[start - 1 : line + _CONTEXT_LINES]]
    return SourceLocation(
        file=path,
        line=line,
        code=code,
        call_source=ast.get_source_segment(source, node) if node is not None else None,
        context_start=start if context else None,
        context=context,
        end_line=_statement_end(source, line) if lines else None,
    )


def _statement_end(source: str, line: int) -> int | None:
    """The last line of the innermost statement holding ``line`` in ``source``, or None."""
    statement = _innermost_statement(source, line)
    return (statement.end_lineno or statement.lineno) if statement is not None else None


@functools.lru_cache(maxsize=256)
def _innermost_statement(source: str, line: int) -> ast.stmt | None:
    """The innermost statement of ``source`` holding ``line`` (None: no such statement, or
    ``source`` does not parse). Cached: the padding hooks locate every batch a ``__getitem__``
    pads, at the same line of the same file."""
    tree = _parse(source)
    if tree is None:
        return None
    statements = [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.stmt) and n.lineno <= line <= (n.end_lineno or n.lineno)
    ]
    return min(statements, key=_span) if statements else None


@functools.lru_cache(maxsize=64)
def _parse(source: str) -> ast.Module | None:
    try:
        return ast.parse(source)
    except (SyntaxError, ValueError):
        return None


# Line magics whose argument is a Python statement (IPython/core/magics/execution.py).
_STATEMENT_MAGICS = ("time", "timeit", "prun")


def _without_magic(line: str) -> str:
    """``line`` of a notebook cell as typed, as Python: a statement magic's line (``%time
    model.fit(x)``) as its statement, another magic or shell line (``%%time``, ``!pip ...``)
    blank; line numbers kept."""
    stripped = line.lstrip()
    if not stripped.startswith(("%", "!")):
        return line
    name, _, rest = stripped[1:].partition(" ")
    if name in ("timeit", "%timeit"):  # a %%timeit line's argument is its setup statement
        name, rest = "timeit", _without_options(rest)
    if name in _STATEMENT_MAGICS and rest.strip():
        return line[: len(line) - len(stripped)] + rest.lstrip(" ")
    return "\n"


# %timeit's options that take a value (IPython/core/magics/execution.py: ExecutionMagics.timeit,
# parse_options "n:r:tcp:qov:", getopt's rules): "-n 10", "-n10", "-qn 10".
_TIMEIT_VALUE_OPTIONS = "nrpv"
_WORD = re.compile(r"\s*(\S+)")


def _without_options(rest: str) -> str:
    """A ``%timeit`` line's argument without its leading options, as getopt reads them
    (``-n1 -r 3 fit(x)``, ``-qn 5 fit(x)``, ``-n1 -- fit(x)``: ``fit(x)``); the statement
    itself as typed."""
    at = 0
    while (word := _WORD.match(rest, at)) is not None and word.group(1).startswith("-"):
        at = word.end()
        if word.group(1) == "--":
            break
        letters = word.group(1)[1:]
        takes = next((i for i, x in enumerate(letters) if x in _TIMEIT_VALUE_OPTIONS), None)
        if takes == len(letters) - 1 and (value := _WORD.match(rest, at)) is not None:
            at = value.end()  # the option's value is the next word
    return rest[at:].lstrip()


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
    statement = _innermost_statement(source, line)
    if statement is None:
        return None
    calls = [
        n for n in ast.walk(statement) if isinstance(n, ast.Call) and _call_name(n) in call_names
    ]
    spanning = [n for n in calls if n.lineno <= line <= (n.end_lineno or n.lineno)]
    return min(spanning or calls, key=lambda n: (_span(n), -n.col_offset), default=None)


def _scope_of(tree: ast.Module, line: int) -> ast.AST:
    """The innermost function whose body holds ``line``, else the module."""
    scopes = [
        n
        for n in ast.walk(tree)
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
        and n.lineno <= line <= (n.end_lineno or n.lineno)
    ]
    return min(scopes, key=_span, default=tree)


def _assigns(scope: ast.AST, name: str) -> list[ast.stmt]:
    """Assignments to the plain ``name`` in ``scope``, nested functions and classes excluded."""
    found: list[ast.stmt] = []
    pending = list(getattr(scope, "body", []))
    while pending:
        node = pending.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
            targets = [node.target]
        names = {t.id for target in targets for t in ast.walk(target) if isinstance(t, ast.Name)}
        if name in names:
            found.append(node)
        pending.extend(c for c in ast.iter_child_nodes(node) if isinstance(c, ast.stmt))
    return found


def _rebinds(scope: ast.AST, name: str, before_line: int) -> bool:
    """Whether ``scope`` (nested functions and classes excluded) binds ``name`` before
    ``before_line`` otherwise than by an assignment statement: a ``for`` or ``with`` target,
    an ``:=``; or has a comprehension whose variable it is, anywhere (a ``fit`` or a call
    inside the comprehension reads that variable, not the scope's)."""
    pending = list(ast.iter_child_nodes(scope))
    while pending:
        node = pending.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        pending.extend(ast.iter_child_nodes(node))
        line = getattr(node, "lineno", None)  # a comprehension has none: it counts anywhere
        if line is not None and line >= before_line:
            continue
        targets: list[ast.AST] = []
        if isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension, ast.NamedExpr)):
            targets = [node.target]
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            targets = [i.optional_vars for i in node.items if i.optional_vars is not None]
        if any(isinstance(n, ast.Name) and n.id == name for t in targets for n in ast.walk(t)):
            return True
    return False


def parse_statement(source: str | None) -> ast.stmt | None:
    """``source`` parsed as one statement (a site's ``call_source``); None when it is not
    exactly one statement or does not parse."""
    try:
        body = ast.parse((source or "").strip()).body
    except SyntaxError:
        return None
    return body[0] if len(body) == 1 else None


def _parameters(function: ast.AST) -> set[str]:
    args = function.args
    every = [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]
    return {a.arg for a in every if a is not None}


def assignment_site(filename: str, name: str, before_line: int) -> SourceLocation | None:
    """The last assignment to ``name`` before ``before_line`` in the scope that holds that line
    (the enclosing function, else the module; a function's global name: the module's), with
    the whole statement as ``call_source`` (``batch_size = 64``); None when there is none, when
    the name is a parameter of the enclosing function, when that scope also binds it otherwise
    before the line (a ``for`` or ``with`` target, ``:=``, a comprehension's variable: the
    assignment may not be what the line reads), or when the file cannot be parsed."""
    path = os.path.abspath(filename)
    source = "".join(linecache.getlines(path))
    tree = _parse(source) if source else None
    if tree is None:
        return None
    scope = _scope_of(tree, before_line)
    earlier = [n for n in _assigns(scope, name) if n.lineno < before_line]
    if not earlier and scope is not tree and name not in _parameters(scope):
        scope = tree  # a global
        earlier = [n for n in _assigns(tree, name) if n.lineno < before_line]
    if not earlier or _rebinds(scope, name, before_line):
        return None
    statement = max(earlier, key=lambda n: n.lineno)
    location = source_location(path, statement.lineno)
    location.call_source = ast.get_source_segment(source, statement)
    return location


# argparse's parsing methods (Lib/argparse.py: ArgumentParser.parse_args and its siblings).
_PARSE_CALLS = (
    "parse_args", "parse_known_args", "parse_intermixed_args", "parse_known_intermixed_args",
)  # fmt: skip


def _option_strings(call: ast.Call) -> list[str] | None:
    """An ``add_argument`` call's option strings, when all are literal strings of 2 characters
    or more that start with ``-``; None for a positional argument, or for anything else."""
    options = [a.value for a in call.args if isinstance(a, ast.Constant)]
    if not options or len(options) != len(call.args):
        return None
    if not all(isinstance(o, str) and len(o) > 1 and o.startswith("-") for o in options):
        return None
    return options


def _dest(call: ast.Call, options: list[str]) -> str | None:
    """The ``dest`` an ``add_argument`` call with ``options`` gives its value: its literal
    ``dest=``, else its first long option, else its first short one, leading dashes stripped and
    the others turned into underscores (argparse's ``_get_optional_kwargs``, for the default
    ``prefix_chars="-"``); None for a ``dest=`` that is not a literal string."""
    dest = next((k.value for k in call.keywords if k.arg == "dest"), None)
    if dest is not None:
        return (
            dest.value if isinstance(dest, ast.Constant) and isinstance(dest.value, str) else None
        )
    long = [o for o in options if o.startswith("--")]
    return (long or options)[0].lstrip("-").replace("-", "_")


def _given(options: list[str], argv: list[str]) -> bool:
    """Whether ``argv`` (the script's arguments) may set one of ``options``. Errs towards True:
    a token before ``--`` counts when it is a prefix of an option string longer than 2
    characters (argparse's ``allow_abbrev``, for ``--batch-size`` and ``-batch-size`` alike) or
    starts with an option string (``--batch-size=64``, ``-b64``), or when it is a single-dash
    group holding a short option's letter (``-vb 64``)."""
    shorts = {o[1] for o in options if len(o) == 2}
    longs = [o for o in options if len(o) > 2]
    for token in argv:
        if token == "--":
            break
        if not token.startswith("-") or token == "-":
            continue
        word = token.split("=", 1)[0]
        if any(o.startswith(word) or word.startswith(o) for o in longs):
            return True
        if any(word.startswith(o) for o in options):
            return True
        if not word.startswith("--") and shorts & set(word[1:]):
            return True
    return False


# The keywords of argparse's own ArgumentParser and add_argument (Lib/argparse.py, 3.11-3.13);
# any other (configargparse's env_var, default_config_files...) means another source of values.
_PARSER_KEYWORDS = frozenset({
    "prog", "usage", "description", "epilog", "parents", "formatter_class", "prefix_chars",
    "argument_default", "conflict_handler", "add_help", "allow_abbrev", "exit_on_error",
})  # fmt: skip
_ARGUMENT_KEYWORDS = frozenset({
    "action", "nargs", "const", "default", "type", "choices", "required", "help", "metavar",
    "dest", "version", "deprecated",
})  # fmt: skip


# Calls that read the state handed to them and change nothing of it: a namespace's whole state
# (``vars(args)``, ``args.__dict__``) passed to one of them is saved or logged, not changed
# (``json.dump(vars(args), f)``, ``print(vars(args))``, ``mlflow.log_params(vars(args))``,
# ``wandb.config.update(vars(args))``: ``update`` changes its receiver, not its argument).
_STATE_READERS = frozenset({
    "dump", "dumps", "safe_dump", "print", "pprint", "pformat", "dict", "str", "repr", "info",
    "debug", "warning", "log_params", "log_hyperparams", "update",
})  # fmt: skip


def _state_read(tree: ast.Module, names: set[str]) -> set[ast.AST]:
    """The ``vars(name)`` calls and ``name.__dict__`` attributes of ``names`` in ``tree`` that
    are an argument of a call in :data:`_STATE_READERS` (a new user's ``json.dump(vars(args),
    f)`` beside ``fit(..., batch_size=args.batch_size)`` had RD301's fix display-only)."""
    read: set[ast.AST] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or _call_name(node) not in _STATE_READERS:
            continue
        if _call_name(node) == "update" and not _updates_another(node):
            continue
        for arg in [*node.args, *(k.value for k in node.keywords)]:
            whole = (
                isinstance(arg, ast.Call) and _call_name(arg) == "vars" and len(arg.args) == 1
                and isinstance(arg.args[0], ast.Name) and arg.args[0].id in names
            ) or (
                isinstance(arg, ast.Attribute) and arg.attr == "__dict__"
                and isinstance(arg.value, ast.Name) and arg.value.id in names
            )  # fmt: skip
            if whole:
                read.add(arg)
    return read


def _updates_another(call: ast.Call) -> bool:
    """Whether ``call`` is an ``update`` method called on an object (``wandb.config.update``,
    ``d.update``), which changes that object and reads its arguments: not a bare ``update(...)``
    (a user's function, which may change what it is given), nor ``dict.update(vars(args),
    ...)``, whose first argument is the one it changes."""
    func = call.func
    if not isinstance(func, ast.Attribute):
        return False
    return not (isinstance(func.value, ast.Name) and func.value.id == "dict")


def _namespace_only_parsed(
    tree: ast.Module,
    namespace: str | None,
    aliases: tuple[str, ...] = (),
    parsed_call: bool = False,
) -> bool:
    """Whether every assignment to the name ``namespace`` in ``tree`` is the result of an
    argparse parsing call (``args = parser.parse_args()``; the first target of ``args, rest =
    parser.parse_known_args()``), there is at least one, and none of its attributes is ever
    stored to (``args.batch_size = ...``, ``for args.batch_size in ...``), nor its whole state
    (``setattr(args, ...)``, ``vars(args)``, ``args.__dict__``, unless handed to a call that
    only reads it: :func:`_state_read`).

    ``aliases``: the parameters that handed the same namespace on to the ``fit`` call (``def
    main(opts)`` called as ``main(args)``, :mod:`rnndoctor.capture.passed`): each is held to the
    same rules, but may be assigned nowhere. ``parsed_call``: the namespace went from a parsing
    call straight into a call (``main(parser.parse_args())``), so that no name holds it but the
    aliases (``namespace`` None), and that call stands for the assignment."""
    names = {n for n in (namespace, *aliases) if n}
    parsed = parsed_call
    read = _state_read(tree, names)
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            if node.value.id in names and (
                isinstance(node.ctx, ast.Store) or (node.attr == "__dict__" and node not in read)
            ):
                return False
        if isinstance(node, ast.Call) and _call_name(node) in ("setattr", "vars"):
            if any(isinstance(a, ast.Name) and a.id in names for a in node.args[:1]):
                if node not in read:
                    return False
    for node in ast.walk(tree):
        targets: list[ast.expr] = []
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.NamedExpr)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
            targets = [node.target]
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            targets = [i.optional_vars for i in node.items if i.optional_vars is not None]
        for target in targets:
            held = {n.id for n in ast.walk(target) if isinstance(n, ast.Name)} & names
            if not held:
                continue
            value = getattr(node, "value", None)
            first = target.elts[0] if isinstance(target, ast.Tuple) and target.elts else target
            if not (
                isinstance(node, ast.Assign)
                and isinstance(value, ast.Call)
                and _call_name(value) in _PARSE_CALLS
                and isinstance(first, ast.Name)
                and held == {first.id}
            ):
                return False
            parsed = parsed or first.id == namespace
    return parsed


def _defaults_elsewhere(tree: ast.Module, dest: str) -> bool:
    """Whether ``tree`` shows another source of ``dest``'s value than its ``add_argument``
    default and the command line, among those read from the source: a ``set_defaults`` call
    naming it or passing ``**``; a parser reading files (``fromfile_prefix_chars``) or given
    ``**``; an ``ArgumentParser`` or ``add_argument`` keyword that is not argparse's own
    (configargparse's ``env_var``, ``default_config_files``); an import of configargparse or
    jsonargparse; a store to any ``.default`` (an action's default changed after the fact); or
    a parsing call given arguments (a list in the source, ``sys.argv[1:]``, a namespace)."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            modules = [a.name for a in node.names] + [getattr(node, "module", None) or ""]
            if any(m.split(".")[0] in ("configargparse", "jsonargparse") for m in modules):
                return True
        if isinstance(node, ast.Attribute) and node.attr == "default":
            if isinstance(node.ctx, ast.Store):
                return True
        if not isinstance(node, ast.Call):
            continue
        name, keywords = _call_name(node), {k.arg for k in node.keywords}
        if name == "set_defaults" and keywords & {dest, None}:
            return True
        if name == "ArgumentParser" and (
            "fromfile_prefix_chars" in keywords or not keywords <= _PARSER_KEYWORDS
        ):
            return True
        if name == "add_argument" and not keywords <= _ARGUMENT_KEYWORDS:
            return True
        if name in _PARSE_CALLS and (node.args or node.keywords):
            return True
    return False


def _argument_call(
    tree: ast.Module,
    namespace: str | None,
    dest: str,
    before_line: int,
    aliases: tuple[str, ...] = (),
    parsed_call: bool = False,
) -> tuple[ast.Call, list[str]] | None:
    """The one ``add_argument`` call in ``tree`` with literal option strings that sets ``dest``,
    before ``before_line``, and those option strings, when the name ``namespace`` is only ever
    assigned from a parsing call (:func:`_namespace_only_parsed`, with its ``aliases`` and
    ``parsed_call``); else None (none, or more than one such call)."""
    if not _namespace_only_parsed(tree, namespace, aliases, parsed_call):
        return None
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _call_name(node) == "add_argument":
            options = _option_strings(node)
            if options is not None and _dest(node, options) == dest:
                found.append((node, options))
    if len(found) != 1 or found[0][0].lineno >= before_line:
        return None
    return found[0]


def argparse_options(
    filename: str,
    namespace: str | None,
    dest: str,
    before_line: int,
    aliases: tuple[str, ...] = (),
    parsed_call: bool = False,
) -> list[str] | None:
    """The option strings (``["-b", "--batch-size"]``) of the ``add_argument`` call before
    ``before_line`` in ``filename`` that sets the attribute ``dest`` of the name ``namespace``
    (``args.batch_size``), read from the source as :func:`argparse_default_site` reads it, but
    whatever the value and the command line: what a rule needs to find the option in the
    script's argv under any of its names (``-b 8``, ``--bs=8``, one with ``dest=``). None when
    the file cannot be parsed, ``namespace`` is assigned otherwise than from a parsing call, or
    not exactly one such call sets ``dest``. ``aliases`` and ``parsed_call``: the parameters
    that handed the namespace on, as :func:`_namespace_only_parsed` reads them."""
    path = os.path.abspath(filename)
    source = "".join(linecache.getlines(path))
    tree = _parse(source) if source else None
    found = (
        _argument_call(tree, namespace, dest, before_line, aliases, parsed_call)
        if tree is not None
        else None
    )
    return None if found is None else found[1]


def argparse_default_site(
    filename: str,
    namespace: str | None,
    dest: str,
    before_line: int,
    value: object,
    argv: list[str],
    aliases: tuple[str, ...] = (),
    parsed_call: bool = False,
) -> SourceLocation | None:
    """The ``add_argument`` call before ``before_line`` in ``filename`` for the attribute
    ``dest`` of the name ``namespace`` (``args.batch_size`` for ``add_argument("--batch-size",
    type=int, default=64)``), with the call as ``call_source``, when the source shows that the
    value the script used, ``value``, came from that call's literal ``default``: the default
    equals ``value`` (same type); no token of ``argv`` (the script's arguments) may set the
    option (:func:`_given`); ``namespace`` is only ever assigned from a parsing call and never
    changed after it (:func:`_namespace_only_parsed`); and no other source of values appears
    in the file (:func:`_defaults_elsewhere`). The match is by names and value, read from the
    source, not traced; it errs towards no site (a parser returned from the user's own
    function, ``args = parse()``, gives none).

    None when any of that does not hold, when more than one ``add_argument`` call with literal
    option strings sets ``dest``, when the call passes ``**`` or ``choices`` (a new default may
    not be among them), or when the file cannot be parsed. A fix that rewrites the default
    keeps the option working; one that writes a literal into the ``fit`` call would make the
    option do nothing. ``aliases`` and ``parsed_call``: the parameters that handed the namespace
    on to the ``fit`` call (``def main(args)``), as :func:`_namespace_only_parsed` reads them."""
    path = os.path.abspath(filename)
    source = "".join(linecache.getlines(path))
    tree = _parse(source) if source else None
    if tree is None or _defaults_elsewhere(tree, dest):
        return None
    found = _argument_call(tree, namespace, dest, before_line, aliases, parsed_call)
    if found is None:
        return None
    call, options = found
    keywords = {k.arg: k.value for k in call.keywords}
    default = keywords.get("default")
    if None in keywords or "choices" in keywords or not isinstance(default, ast.Constant):
        return None
    if type(default.value) is not type(value) or default.value != value or _given(options, argv):
        return None
    location = source_location(path, call.lineno, ("add_argument",))
    location.call_source = ast.get_source_segment(source, call)
    return location


def notebook_cells(facts: Any, files: set[str] | None = None) -> dict[str, str]:
    """In a notebook, the name IPython gives each cell that a location of ``facts`` points at
    (``{"/tmp/ipykernel_41/1284195517.py": "In[3]"}``), from the running shell's
    ``compile.format_code_name`` (IPython 8 and later: ``("Cell", "In[3]")`` for a cell's file,
    None for a real file); empty outside IPython, or for an IPython without it. ``files``:
    :func:`location_files` of ``facts``, where the caller has it."""
    shell_module = sys.modules.get("IPython")
    shell = shell_module.get_ipython() if shell_module is not None else None
    name = getattr(getattr(shell, "compile", None), "format_code_name", None)
    if name is None:
        return {}
    cells = {}
    for file in location_files(facts) if files is None else files:
        try:
            named = name(file)
        except Exception:  # a label is a nicety: never break the diagnosis
            named = None
        if named and len(named) == 2 and str(named[0]) == "Cell":
            cells[file] = str(named[1])
    return cells


def tensorflow_names(facts: Any, files: set[str] | None = None) -> dict[str, list[str]]:
    """For each file a location of ``facts`` points at, the names bound to the ``tensorflow``
    module there at module level (``facts.run.tensorflow_names``): from the file's top-level
    ``import tensorflow`` and ``import tensorflow as tf`` statements (its text as linecache
    holds it; an import inside a function binds no module name), and, for the run's script or a
    notebook cell, the names in the ``__main__`` namespace that hold the module (a cell that
    imported it earlier). A file is left out (not known) where it does not parse, or where
    ``tf`` is bound to something else (``import tensorflow.compat.v1 as tf``): a fix must then
    neither assume ``tf`` is missing nor import it over the user's. ``files``:
    :func:`location_files` of ``facts``, where the caller has it."""
    main = sys.modules.get("__main__")
    module = sys.modules.get("tensorflow")
    namespace = vars(main) if main is not None else {}
    running = sorted(n for n, v in namespace.items() if module is not None and v is module)
    other_tf = "tf" in namespace and namespace["tf"] is not module
    script = os.path.realpath(facts.run.script) if facts.run.script else None
    names: dict[str, list[str]] = {}
    for file in location_files(facts) if files is None else files:
        tree = _parse("".join(linecache.getlines(file)))
        if tree is None:
            continue
        found, other = _module_imports(tree)
        if os.path.realpath(file) == script or file in facts.run.cells:
            found.update(running)
            other = other or other_tf
        if not other or "tf" in found:
            names[file] = sorted(found)
    return names


def _module_imports(tree: ast.Module) -> tuple[set[str], bool]:
    """The names a module's top-level statements (and those of its top-level ``if`` / ``try``
    / ``with`` blocks) bind to ``tensorflow`` itself, and whether one binds ``tf`` to
    something else (another import, an assignment)."""
    found: set[str] = set()
    other = False
    stack: list[ast.stmt] = list(tree.body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Import):
            for alias in node.names:
                name = alias.asname or alias.name.split(".")[0]
                # "import tensorflow.keras" binds tensorflow itself; "... as tf" the submodule
                if alias.name == "tensorflow" or (not alias.asname and name == "tensorflow"):
                    found.add(name)
                elif name == "tf":
                    other = True
        elif isinstance(node, ast.ImportFrom):
            other = other or any((a.asname or a.name) == "tf" for a in node.names)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            other = other or any(isinstance(t, ast.Name) and t.id == "tf" for t in targets)
        elif isinstance(node, (ast.If, ast.Try, ast.With)):
            typing_only = isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
            for block in (
                ("orelse",) if typing_only else ("body", "orelse", "finalbody", "handlers")
            ):
                for child in getattr(node, block, []):
                    stack.extend(child.body if isinstance(child, ast.ExceptHandler) else [child])
    return found, other


def location_files(facts: Any) -> set[str]:
    """Every ``file`` of a location in ``facts`` (in its document: dicts with ``file`` and
    ``line``), and the run's ``script``."""
    document = facts.to_dict()
    files: set[str] = set()
    stack = [document]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if isinstance(item.get("file"), str) and "line" in item:
                files.add(item["file"])
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    script = (document.get("run") or {}).get("script") if isinstance(document, dict) else None
    if isinstance(script, str):
        files.add(script)
    return files


def site_of(layer: object) -> SourceLocation | None:
    """The recorded construction site of ``layer``, or None if it was built before ``install``."""
    return lookup("layers", layer)


def install(script: str | None = None) -> SiteBook:
    """Wraps ``keras.layers.Layer.__new__`` to record construction sites. Idempotent.

    ``__new__`` rather than ``__init__``: Keras inspects ``cls.__init__`` (``Operation.__new__``
    builds each layer's auto-config from its signature), so ``__init__`` must stay untouched.

    Args:
        script: the user's script (``rnndoctor check``): its frames count as user code wherever
            it lives. None leaves the book's script as it is.

    Returns:
        The book the hooks record into (the one installed earlier, when there is one).
    """
    import keras

    layer_cls = keras.layers.Layer
    current = layer_cls.__dict__.get(_BOOK_ATTR)
    if current is None:
        current = SiteBook()
        original = layer_cls.__new__
        layers = current.layers

        def __new__(cls, *args, **kwargs):  # noqa: N807 - it replaces __new__
            obj = original(cls, *args, **kwargs)
            try:
                if obj not in layers:
                    names = tuple({cls.__name__, *(c.__name__ for c in cls.__mro__[:3])})
                    layers[obj] = user_frame_location(skip=1, call_names=names)
            except Exception:  # recording a site must never break the user's model
                pass
            return obj

        layer_cls.__new__ = staticmethod(__new__)
        setattr(layer_cls, _BOOK_ATTR, current)
    if script:
        current.script = os.path.realpath(script)
    return current
