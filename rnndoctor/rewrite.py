"""Lossless edits of one recorded call's source. Pure: no TensorFlow, no I/O.

A fix rewrites the user's call by changing only what it needs: one keyword set, replaced or
removed, one method call appended. The call is parsed with ``ast`` to find the spans to change,
and only the changed piece is written (``ast.unparse`` of the new value, or the user's own text
for what stays), spliced into the original text: every other argument keeps the user's spelling,
quoting, comments and line breaks.
"""

from __future__ import annotations

import ast
import re


def parse_call(call_source: str | None) -> ast.Call | None:
    """The ``ast.Call`` of a recorded call's source, or None if it is not one call."""
    if not call_source:
        return None
    try:
        node = ast.parse(call_source.strip(), mode="eval").body
    except SyntaxError:
        return None
    return node if isinstance(node, ast.Call) else None


def _offsets(text: str) -> list[int]:
    """Character offset of the start of each line of ``text`` (index 0 is line 1), lines as
    Python's parser counts them (``\n``, ``\r\n``, ``\r``; not ``str.splitlines``, which also
    breaks at a form feed or U+2028 inside a string literal and would shift every later
    offset)."""
    return [0, *(m.end() for m in _LINE_END.finditer(text))]


_LINE_END = re.compile(r"\r\n|\r|\n")


def _pos(starts: list[int], line: int, col: int, text: str) -> int:
    """A character offset from ast's (1-based line, UTF-8 byte column) position."""
    begin = starts[line - 1]
    end = starts[line] if line < len(starts) else len(text)
    encoded = text[begin:end].encode()
    return begin + len(encoded[:col].decode(errors="replace"))


def line_starts(text: str) -> list[int]:
    """Character offset of the start of each line of ``text`` (index 0 is line 1), for
    :func:`char_offset`."""
    return _offsets(text)


def char_offset(starts: list[int], line: int, col: int, text: str) -> int:
    """A character offset in ``text`` from ast's (1-based line, UTF-8 byte column) position;
    ``starts`` from :func:`line_starts`."""
    return _pos(starts, line, col, text)


def _span(text: str, starts: list[int], node: ast.AST) -> tuple[int, int]:
    return (
        _pos(starts, node.lineno, node.col_offset, text),
        _pos(starts, node.end_lineno, node.end_col_offset, text),
    )


def _closing_paren(text: str, call: ast.Call, starts: list[int]) -> int:
    """The offset of the call's closing parenthesis."""
    end = _pos(starts, call.end_lineno, call.end_col_offset, text)
    return text.rindex(")", 0, end)


def set_keyword(
    call_source: str | None,
    name: str,
    value: str,
    *,
    over_expression: bool = False,
    beside_splat: bool = False,
) -> str | None:
    """``call_source`` with keyword ``name=value`` (``value`` is Python source) replaced where the
    call has it, else added after its last argument. Everything else is kept as written.

    Returns None when the source is not one call, when ``value`` does not parse, when the call
    passes ``**kwargs`` (the keyword could already be in there), or when the call passes the
    keyword a value that is not a literal (``padding=pad_mode``, ``workers=args.workers``): a
    literal over it would make whatever sets that value do nothing (:func:`read_values`).
    ``over_expression=True`` replaces any value, for a rewrite that means to (a ``fit`` whose
    ``x`` becomes the dataset built from it). ``beside_splat=True`` writes the keyword beside a
    ``**kwargs`` splat all the same, for a display-only fix that says the splat may hold it.
    """
    text = (call_source or "").strip()
    call = parse_call(text)
    if call is None or (not beside_splat and any(k.arg is None for k in call.keywords)):
        return None
    try:
        ast.parse(value, mode="eval")
    except SyntaxError:
        return None
    starts = _offsets(text)
    existing = next((k for k in call.keywords if k.arg == name), None)
    if existing is not None and not (over_expression or is_literal(existing.value)):
        return None
    if existing is not None:
        begin, end = _span(text, starts, existing.value)
        return text[:begin] + value + text[end:]
    arguments = [*call.args, *call.keywords]
    if not arguments:
        paren = _closing_paren(text, call, starts)
        return f"{text[:paren]}{name}={value}{text[paren:]}"
    last = max(arguments, key=lambda a: (a.end_lineno, a.end_col_offset))
    begin, end = _span(text, starts, last)
    own_line = _own_line(text, begin, end)
    if own_line is not None:  # one argument per line: the new one gets its own line too
        indent = text[text.rfind("\n", 0, begin) + 1 : begin]
        comma = text[end:].lstrip(" ").startswith(",")
        line = f"{indent}{name}={value}" + (",\n" if comma else "\n")
        head = text[: own_line[1]] if comma else f"{text[:end]},{text[end : own_line[1]]}"
        return head + line + text[own_line[1] :]
    return f"{text[:end]}, {name}={value}{text[end:]}"


def remove_keyword(call_source: str | None, name: str) -> str | None:
    """``call_source`` without keyword ``name`` (with its separating comma); None when the source
    is not one call or does not write that keyword."""
    text = (call_source or "").strip()
    call = parse_call(text)
    if call is None:
        return None
    arguments = sorted([*call.args, *call.keywords], key=lambda a: (a.lineno, a.col_offset))
    index = next(
        (i for i, a in enumerate(arguments) if isinstance(a, ast.keyword) and a.arg == name), None
    )
    if index is None:
        return None
    starts = _offsets(text)
    begin, end = _span(text, starts, arguments[index])
    own_line = _own_line(text, begin, end)
    if own_line is not None:  # the keyword has its line(s) to itself: they go, with its comment
        kept = text[: own_line[0]] + text[own_line[1] :]
        if index + 1 == len(arguments) and not text[end:].lstrip(" ").startswith(","):
            if index == 0:
                return kept
            # the last argument, without a trailing comma: the previous one loses its comma
            previous = _span(text, starts, arguments[index - 1])[1]
            comma = text.index(",", previous)
            return kept[:comma] + kept[comma + 1 :]
        return kept
    if index > 0:  # from the end of the previous argument: its comma goes with this one
        begin = _span(text, starts, arguments[index - 1])[1]
    elif len(arguments) > 1:  # the first: up to the start of the next one
        end = _span(text, starts, arguments[1])[0]
    else:  # the only one: and a trailing comma, if any
        paren = _closing_paren(text, call, starts)
        end = paren
    return text[:begin] + text[end:]


def _own_line(text: str, begin: int, end: int) -> tuple[int, int] | None:
    """The span of the whole lines ``text[begin:end]`` occupies, with a trailing comma and
    comment, when nothing else is on them; None otherwise."""
    line_start = text.rfind("\n", 0, begin) + 1
    if text[line_start:begin].strip():
        return None
    rest = text[end:]
    newline = rest.find("\n")
    if newline < 0:
        return None
    tail = rest[:newline].strip()
    if tail not in ("", ",") and not tail.lstrip(",").lstrip().startswith("#"):
        return None
    return line_start, end + newline + 1


def keyword_source(call_source: str | None, name: str) -> str | None:
    """The user's source text of keyword ``name``'s value in the call, or None."""
    text = (call_source or "").strip()
    call = parse_call(text)
    if call is None:
        return None
    keyword = next((k for k in call.keywords if k.arg == name), None)
    return ast.get_source_segment(text, keyword.value) if keyword is not None else None


def append_method(statement: str | None, method: str, call: str) -> str | None:
    """``statement`` with ``.call`` appended right after its call to ``.method(...)``:
    ``ds = ds.map(f).batch(8)`` with ``("map", "cache()")`` -> ``ds = ds.map(f).cache().batch(8)``.

    The last such call in the statement wins. None when the statement does not parse or holds no
    call to ``.method``.
    """
    text = (statement or "").strip()
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return None
    calls = [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == method
    ]
    if not calls:
        return None
    target = max(calls, key=lambda n: (n.end_lineno, n.end_col_offset))
    _, end = _span(text, _offsets(text), target)
    return f"{text[:end]}.{call}{text[end:]}"


def assigned_name(statement: str | None) -> str | None:
    """The one plain name a statement assigns (``dataset_train = ...`` -> ``dataset_train``)."""
    try:
        tree = ast.parse((statement or "").strip())
    except SyntaxError:
        return None
    if len(tree.body) != 1:
        return None
    node = tree.body[0]
    targets = node.targets if isinstance(node, ast.Assign) else []
    if isinstance(node, ast.AnnAssign):
        targets = [node.target]
    if len(targets) == 1 and isinstance(targets[0], ast.Name):
        return targets[0].id
    return None


def same_except(before: str, after: str, keywords: tuple[str, ...]) -> bool:
    """Whether two calls' ASTs are equal once ``keywords`` are removed from both: what a lossless
    rewrite of ``before`` that changes only those keywords must satisfy."""

    def dump(text: str) -> str | None:
        call = parse_call(text)
        if call is None:
            return None
        call.keywords = [k for k in call.keywords if k.arg not in keywords]
        return ast.dump(call)

    left, right = dump(before), dump(after)
    return left is not None and left == right


def argument(call_source: str | None, position: int | None, name: str) -> ast.expr | None:
    """The expression a call passes as keyword ``name``, else as its positional argument at
    ``position`` (None: keyword only); None when it passes neither, when a ``*args`` comes at
    or before ``position``, or when the source is not one call. What :func:`set_argument`
    would replace, for a rule that must first know whether it is a literal."""
    call = parse_call(call_source)
    if call is None:
        return None
    value = next((k.value for k in call.keywords if k.arg == name), None)
    if (
        value is None
        and position is not None
        and len(call.args) > position
        and not any(isinstance(a, ast.Starred) for a in call.args[: position + 1])
    ):
        value = call.args[position]
    return value


def splats(call_source: str | None) -> list[str]:
    """The ``**kwargs`` expressions a call passes, as source (``["common"]`` for
    ``LSTM(8, **common)``); empty where it passes none or the source is not one call. A keyword
    added beside one may clash with a key it holds (``TypeError`` at run time), which is why a
    fix that adds or sets one there is display-only."""
    call = parse_call(call_source)
    if call is None:
        return []
    return [ast.unparse(k.value) for k in call.keywords if k.arg is None]


def is_int_literal(node: ast.AST | None) -> bool:
    """Whether ``node`` is an integer literal (``64``; not ``True``, a bool): a value a fix may
    replace, where a name, an option's attribute or an expression is set elsewhere."""
    return isinstance(node, ast.Constant) and type(node.value) is int


def is_literal(node: ast.AST | None) -> bool:
    """Whether ``node`` is a Python literal (``0.2``, ``-1``, ``'post'``, ``True``, ``None``,
    ``(1, 2)``: what :func:`ast.literal_eval` accepts), not a value read from a name, an
    option's attribute, a call or any other expression."""
    if node is None:
        return False
    try:
        ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False
    return True


def read_values(
    call_source: str | None, names: tuple[str, ...] | list[str], positional_names=()
) -> dict[str, str]:
    """The arguments among ``names`` that the call passes as something other than a literal,
    mapped to their source text: ``{"padding": "pad_mode"}`` for
    ``pad_sequences(seqs, padding=pad_mode)``. ``positional_names`` (the callee's parameter
    order) finds an argument passed by position. A fix must not write a literal over such a
    value: the name, option or config that sets it would silently stop setting it."""
    order = list(positional_names)
    found = {}
    for name in names:
        position = order.index(name) if name in order else None
        value = argument(call_source, position, name)
        if value is not None and not is_literal(value):  # as written, quotes and all
            text = ast.get_source_segment((call_source or "").strip(), value)
            found[name] = " ".join((text or ast.unparse(value)).split())
    return found


def set_argument(call_source: str | None, position: int, name: str, value: str) -> str | None:
    """The call with its argument ``name`` set to ``value``: the positional argument at
    ``position`` when the call passes one there, else the keyword (replaced or added). None as
    for :func:`set_keyword`, a value that is not a literal included."""
    text = (call_source or "").strip()
    call = parse_call(text)
    if call is None:
        return None
    if len(call.args) > position and not any(
        isinstance(a, ast.Starred) for a in call.args[: position + 1]
    ):
        if not is_literal(call.args[position]):
            return None
        begin, end = _span(text, _offsets(text), call.args[position])
        return text[:begin] + value + text[end:]
    return set_keyword(text, name, value)


def set_assigned_value(statement: str | None, value: str) -> str | None:
    """``batch_size = 4`` -> ``batch_size = 16``: a one-name assignment with its value replaced
    (annotation and target kept as written); None for any other statement."""
    text = (statement or "").strip()
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return None
    if assigned_name(text) is None or tree.body[0].value is None:
        return None
    begin, end = _span(text, _offsets(text), tree.body[0].value)
    return text[:begin] + value + text[end:]


def assigned_value(statement: str | None) -> ast.expr | None:
    """The value of the one-name assignment ``statement`` (``batch_size = int(os.environ["BS"])``
    -> the call); None for any other statement."""
    text = (statement or "").strip()
    if assigned_name(text) is None:
        return None
    return ast.parse(text).body[0].value


def is_constant_expression(node: ast.AST | None) -> bool:
    """Whether ``node`` computes its value from literals alone (``64``, ``4 * 16``, ``2**6``):
    a value a fix may replace by another literal and lose nothing. A name, an attribute, a
    call, a subscript or any other read (``int(os.environ.get("BS", 32))``, ``cfg["bs"]``,
    ``base * 2``) is not: replacing it would drop what sets the value."""
    if node is None:
        return False
    allowed = (ast.Constant, ast.BinOp, ast.UnaryOp, ast.operator, ast.unaryop, ast.expr_context)
    return all(isinstance(n, allowed) for n in ast.walk(node))


def move_chain_call(call_source: str | None, name: str) -> str | None:
    """``x.cache().map(f)`` with ``"cache"`` -> ``x.map(f).cache()``: the one ``.name(...)``
    call inside a method chain (not its last call) taken out of it, its receiver kept, and
    appended to the chain's end with its arguments as written. None when the source is not one
    call, or its chain holds no such call, more than one, or only as its last call."""
    text = (call_source or "").strip()
    call = parse_call(text)
    if call is None:
        return None
    inner = []
    node = call.func.value if isinstance(call.func, ast.Attribute) else None
    while node is not None:
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr == name:
                inner.append(node)
            node = node.func.value
        elif isinstance(node, ast.Attribute):
            node = node.value
        else:
            node = None
    last = call.func.attr if isinstance(call.func, ast.Attribute) else None
    if len(inner) != 1 or last == name:
        return None
    (moved,) = inner
    starts = _offsets(text)
    end = _span(text, starts, moved)[1]
    receiver_end = _span(text, starts, moved.func.value)[1]
    # the "." that starts ".cache(...)": past the receiver's closing parentheses, white space
    # and comments (whose own dots, "e.g.", are not it)
    gap = _GAP.match(text, receiver_end)
    dot = gap.end() if gap is not None else receiver_end
    if not text.startswith(".", dot):
        return None
    moved_text = text[dot:end]  # ".cache()" as written, arguments and all
    result = text[:dot] + text[end:] + moved_text
    try:
        ast.parse(result, mode="eval")
    except SyntaxError:
        return None
    return result


_GAP = re.compile(r"(?:\s+|#[^\n]*|\))*")


def set_call_literal(call_source: str | None, old: int, new: int) -> str | None:
    """``train(x, 64, epochs=3)`` with ``(64, 256)`` -> ``train(x, 256, epochs=3)``: the call
    with its one argument (positional or keyword) that is the integer literal ``old`` replaced
    by ``new``, every other argument as written. None when the source is not one call or not
    exactly one of its arguments is that literal."""
    text = (call_source or "").strip()
    call = parse_call(text)
    literal = the_int_literal(call, old) if call is not None else None
    if literal is None:
        return None
    begin, end = _span(text, _offsets(text), literal)
    return text[:begin] + str(int(new)) + text[end:]


def the_int_literal(call: ast.Call, value: object) -> ast.expr | None:
    """The one argument of ``call`` (positional or keyword) that is the integer literal
    ``value``; None when not exactly one is."""
    literals = [
        node
        for node in (*call.args, *(k.value for k in call.keywords))
        if is_int_literal(node) and node.value == value
    ]
    return literals[0] if len(literals) == 1 else None


def set_x_call_literal(call_source: str | None, old: int, new: int) -> tuple[str, str] | None:
    """``model.fit(batch_gen(32), epochs=2)`` with ``(32, 128)`` ->
    ``("model.fit(batch_gen(128), epochs=2)", "batch_gen(32)")``: the call with the one integer
    literal equal to ``old`` among the arguments of its ``x`` (its first positional argument, else
    its ``x`` keyword) replaced by ``new``, and the user's text of that ``x`` call.

    None when the source is not one call, when its ``x`` is not itself a call, or when that call
    has not exactly one argument (positional or keyword) that is the integer literal ``old``.
    Matched by value only: the literal is not known to be the batch size, so a fix built on it is
    a sketch to check by hand.
    """
    text = (call_source or "").strip()
    call = parse_call(text)
    if call is None:
        return None
    if call.args and not isinstance(call.args[0], ast.Starred):
        x = call.args[0]
    else:
        x = next((k.value for k in call.keywords if k.arg == "x"), None)
    if not isinstance(x, ast.Call):
        return None
    literals = [
        value
        for value in (*x.args, *(k.value for k in x.keywords))
        if is_int_literal(value) and value.value == old
    ]
    if len(literals) != 1:
        return None
    starts = _offsets(text)
    begin, end = _span(text, starts, literals[0])
    x_begin, x_end = _span(text, starts, x)
    return text[:begin] + str(int(new)) + text[end:], text[x_begin:x_end]


def rename_func(call_source: str | None, name: str) -> str | None:
    """The call with its callable renamed (``layers.SimpleRNN(8)`` -> ``layers.LSTM(8)``): only
    the last name of the callable changes."""
    text = (call_source or "").strip()
    call = parse_call(text)
    if call is None or not isinstance(call.func, (ast.Attribute, ast.Name)):
        return None
    _, end = _span(text, _offsets(text), call.func)
    old = call.func.attr if isinstance(call.func, ast.Attribute) else call.func.id
    return text[: end - len(old)] + name + text[end:]


FIT_DATA_KEYWORDS = ("x", "y", "batch_size", "validation_split", "shuffle", "sample_weight")
# read too, and kept in the call: how the rewrite treats validation_split and the validation batch
_FIT_KEPT_READ = ("validation_data", "validation_batch_size")
_FIT_REFUSED = ("class_weight", "steps_per_epoch")


def fit_data_arguments(call_source: str | None) -> dict[str, str] | None:
    """The user's source text of what a ``model.fit(x, y, batch_size=..., validation_split=...,
    shuffle=..., sample_weight=...)`` call passes for its data, for a rewrite that moves them
    into a dataset: keys ``x``, ``y``, and ``batch_size``, ``validation_split``, ``shuffle``,
    ``sample_weight``, ``validation_data``, ``validation_batch_size`` when written.

    None when the call is no ``.fit(...)``, passes no ``x`` and ``y`` (or a ``sample_weight``)
    as plain names or attributes, passes anything past ``y`` by position, ``*args`` or
    ``**kwargs``, or an argument a dataset cannot carry the same way (``class_weight``: Keras
    maps it over a dataset's batches from a table as long as its largest key, unlike arrays;
    ``steps_per_epoch``: Keras does not restart a dataset each epoch).
    """
    text = (call_source or "").strip()
    call = parse_call(text)
    if call is None or len(call.args) > 2 or any(isinstance(a, ast.Starred) for a in call.args):
        return None
    if not isinstance(call.func, ast.Attribute) or call.func.attr != "fit":
        return None
    keywords = {k.arg: k.value for k in call.keywords}
    if None in keywords or any(name in keywords for name in _FIT_REFUSED):
        return None
    given: dict[str, ast.expr] = dict(zip(("x", "y"), call.args, strict=False))
    given.update(
        {k: v for k, v in keywords.items() if k in FIT_DATA_KEYWORDS or k in _FIT_KEPT_READ}
    )
    named = ("x", "y", "sample_weight") if "sample_weight" in given else ("x", "y")
    if not all(isinstance(given.get(k), (ast.Name, ast.Attribute)) for k in named):
        return None
    return {k: ast.get_source_segment(text, v) or ast.unparse(v) for k, v in given.items()}


def move_fit_data(call_source: str | None, dataset: str, validation: str | None) -> str | None:
    """The ``fit`` call with its data moved into ``dataset`` (Python source): ``x`` (first
    argument) replaced by it, ``y``, ``batch_size``, ``validation_split``, ``shuffle`` and
    ``sample_weight`` removed, and ``validation_data=validation`` added when given. Where the
    call keeps its own ``validation_data`` and writes ``batch_size`` (Keras validated in batches
    of it: ``validation_batch_size or batch_size``), ``validation_batch_size`` is set to it
    unless written. Every other argument keeps the user's text. None when
    :func:`fit_data_arguments` refuses the call.
    """
    text = (call_source or "").strip()
    given = fit_data_arguments(text)
    if given is None:
        return None
    call = parse_call(text)
    assert call is not None
    if call.args:
        begin, end = _span(text, _offsets(text), call.args[0])
        text = text[:begin] + dataset + text[end:]
    else:
        text = set_keyword(text, "x", dataset, over_expression=True) or text
    for name in ("y", "batch_size", "validation_split", "shuffle", "sample_weight"):
        text = _remove_argument(text, name, 1 if name == "y" else None)
    if validation is not None:
        text = set_keyword(text, "validation_data", validation, over_expression=True) or text
    elif "validation_data" in given and "batch_size" in given:
        if "validation_batch_size" not in given:
            text = set_keyword(text, "validation_batch_size", given["batch_size"]) or text
    return text


def _remove_argument(text: str, name: str, position: int | None) -> str:
    """``text`` without keyword ``name`` or, when given by position there, the positional
    argument ``position`` (the last positional one: ``fit(x, y)``'s ``y``)."""
    call = parse_call(text)
    assert call is not None
    if position is not None and len(call.args) == position + 1:
        starts = _offsets(text)
        begin, end = _span(text, starts, call.args[position])
        own_line = _own_line(text, begin, end)
        rest = text[end:].lstrip(" ")
        if own_line is not None and (rest.startswith(",") or call.keywords):
            return text[: own_line[0]] + text[own_line[1] :]  # its line, with its comment
        previous_end = _span(text, starts, call.args[position - 1])[1]
        return text[:previous_end] + text[end:]
    return remove_keyword(text, name) or text
