"""RD301 small-batch: a larger batch trains measurably more samples per second.

What it detects:
    The batch-size probe (compute-only training steps on the user's own batches, tiled to 2x
    and 4x the batch size) measures 1.5x or more samples/s (``min_speedup``) at a larger batch
    than the user's. On a GPU where the probe could not run, a batch below 64
    (``gpu_small_batch``) is flagged at once, as ``info``.

Why it slows training:
    Each step has a fixed cost (Python dispatch, kernel launches, the optimizer update, the
    RNN's per-timestep loop) that a small batch does not amortise; on a GPU a small batch also
    leaves most of the device idle. The probe measures that on this model and this machine.

Evidence:
    ``probes.batch_probe``: the compute-only step time and samples/s at each batch size, and
    why a point stopped (memory estimate over the limit, out of memory, time budget). Each
    larger batch is timed in bursts interleaved with the user's batch (``point.paired``); the
    samples/s ratio and its 90% interval come from those pairs (``rnndoctor.paired
    .throughput_ratio``), widened on a noisy machine. The rule warns only when the interval's
    lower bound reaches ``min_speedup``; when only the median does, it is ``info``,
    "inconclusive: ...". Under load (the probe's phase noisy) it is also ``info``,
    "inconclusive", when the median falls short but a pair measured the gain past
    ``min_speedup``, or the pairs' upper bound does with the load's bias taken out (Bounds;
    ``rnndoctor.decide.decide``'s ``measured``: the load biases the median).
    The probe takes one early look at its pairs, at 5, and stops there where this rule's
    decision is already made: some larger batch's whole interval at or past ``min_speedup``
    (every pair past it, at 5 pairs), or every larger batch's below it
    (``capture/pairs.py: ThroughputDecided``, the cut-off handed to the probe by
    ``rnndoctor.engine.batch_min_speedup``; one look, at the sign test's 1-in-32 level, so a
    ratio on the cut-off clears it by chance at most that much more often); never on a phase
    noisy so far. The evidence's "cut short" then says so. Where the probe's time allowance
    ends the rounds with the decision not made (one slow pair of five keeps the interval
    across the cut-off), a second stage runs on to 10 pairs within one more allowance
    (``capture/pairs.py: EXTENDED_PAIRS``, ``EarlyLook.extends``), where the interval's lower
    bound is about the third-lowest pair's ratio, not the lowest; the evidence's "second stage" says
    so, and the rule decides on all the pairs (one more look: two in all).

Bounds:
    The gain is the measured throughput (samples/s) ratio, never a step-time ratio: a larger
    batch makes each step longer while samples/s rise, so the gain reads "samples/s", not
    "faster step". An inconclusive finding carries no speedup, so the forecast does not use it.
    With ``run_eagerly=True`` (``fit.run_eagerly``) the probe times eager steps, whose Python
    dispatch of every op is paid once per step whatever the batch: the gain says so, since a
    traced step (RD401's fix) has less of that cost for a larger batch to amortise.

    Under load, the figure reads low: a step costs a fixed host part once per batch and a
    compute part per sample, and a busy core slows the compute (spread over every core) far
    more than the host part (one Python thread), so the fixed cost a larger batch amortises
    looks smaller than it is (the demo: 1.49x under one busy core, 1.8–1.9x idle). Under load
    the rule therefore also reads the pairs' upper bound with the load's slowdown taken out of
    the compute (``rnndoctor.dispatch.unloaded_ratio``, ``compute_slowdown``: at most
    ``cpus / (cpus - foreign cores)``): where that reaches ``min_speedup``, the finding is
    "inconclusive", not absent.

Example:
    ``model.fit(x, y, batch_size=4)``

Use instead:
    ``model.fit(x, y, batch_size=16)`` with the learning rate scaled with the batch size, for
    arrays (NumPy, tensors, a DataFrame...): the inputs whose batch ``fit``'s ``batch_size``
    sets. A ``tf.data`` pipeline, a generator, a PyDataset or a torch DataLoader makes its own
    batches (Keras ignores ``fit``'s ``batch_size`` for them): ``ds.batch(16)``, a generator
    that yields batches of 16.

Fix safety:
    unsafe: the batch size changes the optimisation (gradient noise, steps per epoch). Scale
    the learning rate with it and check the validation metric: by the compiled optimizer
    (``fit.optimizer``; :func:`learning_rate_advice`), x the batch factor for SGD (the linear
    scaling rule, Goyal et al. 2017), about x sqrt(factor) for Adam and RMSprop (the
    square-root rule, Malladi et al. 2022), both named for another optimizer.
    display-only when an RNN layer is ``stateful=True``: its state row i carries over to row i
    of the next batch, so a new batch size changes the state layout (and the model's fixed
    batch shape). The rewrite is made where the value is written: the pipeline's ``batch`` call
    (or a Keras util's ``batch_size`` keyword), the line that assigns the name ``fit`` receives
    (``batch_size = 64`` for ``fit(..., batch_size=batch_size)``, ``fit.batch_size_location``),
    the option's ``default`` in its ``add_argument`` call for ``fit(...,
    batch_size=args.batch_size)`` when the script ran with that default (so that the option
    still sets the batch; a literal in the ``fit`` call would make it do nothing); where
    ``fit``'s value is a parameter of its function (``def train(bs)``), the same for what the
    caller passed (``fit.batch_size_argument``, followed on the run's call stack by
    ``capture/passed.py``), and an integer literal passed in is rewritten in the caller's call
    (``train(x, 64)``, the one literal of that value among its arguments); else the
    ``fit`` call (its integer literal, or a new keyword where it passes none); every other
    argument stays as written. ``fit``'s ``batch_size`` is never
    written where ``fit``'s ``x`` makes its own batches (``facts.data.kind``: a ``tf.data``
    dataset, a generator, a PyDataset, a tf_keras Sequence, a torch DataLoader), for which
    Keras ignores it.
    display-only, with the reason in the title and the code, where the batch cannot be
    rewritten exactly where it is made:

    - ``fit(..., batch_size=args.batch_size)`` run with that option given (``--batch-size 8``
      or ``--batch-size=8`` in the script's argv, ``facts.run.argv``; an abbreviation of it
      when its value is the batch ``fit`` ran with): the ``fit`` call keeps
      ``args.batch_size``, and the fix says to run with ``--batch-size 16`` (the command line,
      not the code). The option is found under any of the names its ``add_argument`` call
      gives it (``-b 8``, ``-b8``, an option with ``dest=``: ``fit.batch_size_options``,
      recorded by the capture from the source where that call precedes the ``fit`` line in
      its file), else under the attribute's name;
    - ``fit(..., batch_size=VALUE)`` whose ``VALUE`` is not an integer literal and was traced
      to no line and no argument (``args.batch_size`` with the parser built in another
      function below, a grouped ``-vb 8``, ``cfg.batch_size``, a parameter): a note to set it
      where its value is set, never a literal in the ``fit`` call, which would override it;
    - the line that assigns the name ``fit`` receives computes the value instead of writing a
      literal (``BATCH = int(os.environ.get("BS", "32"))``, ``bs = cfg["batch"]``, ``bs = base
      * 2``; ``rewrite.is_constant_expression``): a note at that line to set it where its
      value comes from (``run with BS=128`` for an environment variable), since a literal in
      its place would drop what sets it;
    - a ``fit`` call that passes ``**kwargs`` (``fit(x, y, **fit_kwargs)``: the splat may hold
      ``batch_size``, and a keyword beside it would clash, ``TypeError``), or one not recorded
      as one call (a notebook cell's ``%%time``): a note to set it where its value is set, never
      a sketch ``model.fit(..., batch_size=N)``, which would drop every argument of the call;
    - a generator, a PyDataset, a tf_keras ``Sequence`` or a torch ``DataLoader``: the
      ``fit`` call with the one integer literal equal to the batch size in its ``x`` call
      changed (``fit(batch_gen(32), ...)`` -> ``fit(batch_gen(128), ...)``: matched by value,
      so it is a sketch to check), else a note at the generator's ``def`` or the PyDataset's
      construction: "your generator yields batches of 32: make it yield batches of 128", with a
      note that ``steps_per_epoch`` counts batches where ``fit`` sets it;
    - a ``tf.data`` pipeline whose batch call reads its size from a name or an option
      (``batch(args.batch_size)``, ``batch(bs)``): a note at the batch call to set that value
      where it is set (to run with ``--batch-size 32`` where the argv gave the option), since
      a literal there would make the option do nothing, and the name may be read elsewhere;
    - a ``tf.data`` pipeline whose batch call was not recorded with its line: the dataset is
      already batched, so the note says where it batches (its batch step, or its source where
      it has no batch op) must change; neither ``fit``'s ``batch_size`` nor an appended
      ``ds.batch(...)`` (batches of batches) would.

Options:
    ``min_speedup`` = 1.5 (x (samples/s ratio)): the throughput ratio a larger batch must reach
    over the user's, in the probe, for the rule to report. Source: rnndoctor's choice.

    ``gpu_small_batch`` = 64 (samples): on a GPU where the probe could not run, a batch below
    this is reported (info), and the fix suggests this size. Source: rnndoctor's choice.

References:
    Goyal et al. (2017), "Accurate, Large Minibatch SGD: Training
    ImageNet in 1 Hour" (linear learning-rate scaling); TensorFlow guide "Optimize TensorFlow
    GPU performance with the TensorFlow Profiler".
"""

from __future__ import annotations

import ast
import re
from typing import NamedTuple

from rnndoctor import dispatch
from rnndoctor import rewrite as rw
from rnndoctor.decide import Decision, decide, describe, ratio_interval_words
from rnndoctor.facts import DataKind, Facts, ProbePoint, SourceLocation
from rnndoctor.findings import Evidence, Finding, Fix, FixSafety, Location, Severity
from rnndoctor.rules import NotEvaluated, Option, OptionValues, finding, rule
from rnndoctor.rules import _fastpath as fp
from rnndoctor.rules import _measured as m
from rnndoctor.stats import Interval

_MIN_SPEEDUP = Option(
    name="min_speedup",
    default=1.5,
    unit="x (samples/s ratio)",
    source="rnndoctor's choice",
    help="the samples/s ratio a larger batch must reach in the probe for the rule to report",
)
_GPU_SMALL_BATCH = Option(
    name="gpu_small_batch",
    default=64,
    unit="samples",
    source="rnndoctor's choice",
    help="on a GPU the probe could not measure, a batch below this is reported (info)",
)


class _Change(NamedTuple):
    """What RD301's fix writes: its ``code``, its ``location``, the user's code it replaces
    (``before``; None for a sketch), its ``safety``, and ``why`` it is display-only (added to the
    fix's title; None for a rewrite)."""

    code: str
    location: Location | None
    before: str | None
    safety: FixSafety = FixSafety.UNSAFE
    why: str | None = None


def _fix(facts: Facts, size: int, current: int | None) -> _Change:
    """RD301's fix from the user's batch size ``current`` to ``size``, written where the batch is
    made (the docstring's Fix safety): for a ``tf.data`` pipeline its batch call; for a source
    that makes its own batches (:data:`_SOURCES`: a generator, a PyDataset...) a display-only
    sketch; for arrays and any other ``x`` Keras batches by ``batch_size`` (a DataFrame, a
    torch tensor) the line that sets the name ``fit`` receives as ``batch_size``, the
    ``add_argument`` call whose default gave ``args.batch_size``, the command line where the
    script's arguments set it, else the ``fit`` call."""
    kind = _data_kind(facts)
    if kind == DataKind.TF_DATA:
        return _pipeline_fix(facts, size, current)
    if kind in _SOURCES:  # any other kind (a DataFrame, a torch tensor...): Keras batches it
        return _source_fix(facts, kind, size, current)
    fit = facts.fit
    site = fit.batch_size_location if fit else None
    source = site.call_source if site else None
    value = rw.assigned_value(source)
    if value is not None and not rw.is_constant_expression(value):
        return _computed_note(facts, site, value, size, current)
    assigned = rw.set_assigned_value(source, str(size))
    if assigned is None and _is_add_argument(source):  # fit(..., batch_size=args.batch_size)
        assigned = rw.set_keyword(source, "default", str(size))
    elif assigned is None and current is not None and fit and fit.batch_size_argument:
        assigned = rw.set_call_literal(source, current, size)  # train(64) for def train(bs)
    if assigned is not None:
        return _Change(assigned, m.to_location(site), source)
    call = fit.location.call_source if fit and fit.location else None
    given = _option_given(facts, call, current)
    if given is not None:
        return _command_line_fix(facts, given, size, current)
    value = _batch_size_value(facts, call)
    passed = fit.batch_size_argument if fit else None
    if value is not None and (passed or not rw.is_int_literal(value)):
        # a name, an option, a config's field whose value was traced to no line: a literal in
        # fit would silently override whatever sets it
        options = fit.batch_size_options if fit else None
        own = rw.argument(call, 2, "batch_size") if passed else None
        if own is not None:  # def train(bs): fit(..., batch_size=bs), train(args.batch_size)
            return _value_note(facts, ast.unparse(own), options, size, current, passed)
        return _value_note(facts, ast.unparse(value), options, size, current)
    code = _set_batch_size(call, value, size)
    if code is None:
        return _unwritable_fit(facts, call, size)
    return _Change(code, m.fit_location(facts), call)


def _computed_note(
    facts: Facts, site: SourceLocation, value: ast.expr, size: int, current: int | None
) -> _Change:
    """The line that sets the name ``fit`` receives computes it (``BATCH = int(os.environ.get(
    "BS", "32"))``, ``bs = cfg["batch"]``, ``bs = base * 2``): a display-only note at that line,
    since a literal in its place would drop what sets the value (the environment variable, the
    command line, the config). It names the environment variable (``os.environ``,
    ``os.getenv``) or ``sys.argv`` the expression reads, where it reads one."""
    name = rw.assigned_name(site.call_source)
    written = (site.call_source or "").strip()  # as the user wrote it, quotes and all
    text = written.split("=", 1)[1].strip() if "\n" not in written else ast.unparse(value)
    ran = f" ({current} in this run)" if current else ""
    variables = _environment_variables(value)
    if len(variables) > 1:  # BS * NGPU: no single value to name
        where = f"the environment variables {', '.join(variables)}: set them to give {size}"
    elif variables:
        where = f"the environment variable {variables[0]}: run with {variables[0]}={size}"
    elif any(ast.unparse(n) in ("sys.argv", "argv") for n in ast.walk(value)):
        where = "the script's command line (sys.argv)"
    else:
        where = "what that expression reads"
    code = (
        f"# fit's batch_size is {name} = {text}{ran}: set it to {size} where its value comes "
        f"from\n# ({where}); a literal here would drop what sets it"
    )
    why = f"display-only: {name} is computed, not written as a literal"
    return _Change(code, m.to_location(site), None, FixSafety.DISPLAY_ONLY, why)


_GETENV = ("os.environ.get", "environ.get", "os.getenv", "getenv")
_ENVIRON = ("os.environ", "environ")


def _environment_variables(value: ast.expr) -> list[str]:
    """The environment variables ``value`` reads by a literal name: ``os.environ.get("BS")``,
    ``os.getenv("BS", "32")``, ``os.environ["BS"]`` (and ``environ``/``getenv`` imported by
    name), in source order."""
    found = []
    for node in ast.walk(value):
        key = None
        if isinstance(node, ast.Call) and node.args and ast.unparse(node.func) in _GETENV:
            key = node.args[0]
        elif isinstance(node, ast.Subscript) and ast.unparse(node.value) in _ENVIRON:
            key = node.slice
        if isinstance(key, ast.Constant) and isinstance(key.value, str):
            found.append((node.lineno, node.col_offset, key.value))
    return list(dict.fromkeys(name for *_, name in sorted(found)))  # each once, in order


def _batch_size_value(facts: Facts, call: str | None) -> ast.expr | None:
    """The expression that gave ``fit`` its batch size: the one a caller passed where ``fit``'s
    own is a parameter of its function (``facts.fit.batch_size_argument``: ``args.batch_size``
    for ``def train(bs)`` called as ``train(args.batch_size)``), else the ``fit`` call's own
    (``Model.fit(x, y, batch_size, ...)``: keyword or third positional); None when neither is
    written."""
    passed = facts.fit.batch_size_argument if facts.fit else None
    if passed:
        try:
            return ast.parse(passed, mode="eval").body
        except SyntaxError:
            pass
    return rw.argument(call, 2, "batch_size")


def _set_batch_size(call: str | None, value: ast.expr | None, size: int) -> str | None:
    """The ``fit`` call with its batch size ``size``: the integer literal it writes replaced in
    place, positional (``fit(x, y, 64)``: a keyword added beside it would be a second value,
    ``TypeError``) or keyword, beside a ``**kwargs`` splat too (a splat cannot hold a keyword
    the call writes); else the keyword added (None beside a splat, which may hold it)."""
    if value is not None:
        return rw.set_argument(call, 2, "batch_size", str(size)) or rw.set_keyword(
            call, "batch_size", str(size), beside_splat=True
        )
    return rw.set_keyword(call, "batch_size", str(size))


def _unwritable_fit(facts: Facts, call: str | None, size: int) -> _Change:
    """A display-only note where the ``fit`` call cannot take ``batch_size`` in place: it passes
    ``**kwargs`` (``fit(x, y, **fit_kwargs)``: a keyword beside the splat would clash with one
    it holds, ``TypeError: got multiple values for keyword argument``), or it was not recorded
    as one call. A sketch ``model.fit(..., batch_size=N)`` would drop every argument of the
    call."""
    splat = rw.splats(call)
    if splat:
        reason = f"your fit call passes **{splat[0]}, which may hold batch_size"
    else:
        reason = "the fit call was not recorded as one call"
    code = f"# {reason}: set batch_size to {size} where its value is set"
    return _Change(code, m.fit_location(facts), None, FixSafety.DISPLAY_ONLY,
                   f"display-only: {reason}")  # fmt: skip


def _data_kind(facts: Facts) -> str | None:
    """The kind of ``fit``'s ``x`` (``DataFacts.kind``, else ``FitConfig.data_kind``)."""
    if facts.data is not None:
        return facts.data.kind
    return facts.fit.data_kind if facts.fit else None


def _is_add_argument(source: str | None) -> bool:
    """Whether ``source`` is one ``add_argument(...)`` call (argparse), the site the capture
    records for ``fit(..., batch_size=args.batch_size)`` when the option's default gave the
    value (``rnndoctor.capture.sites.argparse_default_site``)."""
    call = rw.parse_call(source)
    func = call.func if call is not None else None
    return isinstance(func, ast.Attribute) and func.attr == "add_argument"


class _Given(NamedTuple):
    """A script argument that set ``fit``'s ``batch_size=args.batch_size``: the ``attribute``
    as the ``fit`` call writes it, the ``option`` as the command line typed it
    (``--batch-size``), its ``value`` as typed, and ``sep`` between them (``" "`` or ``"="``)."""

    attribute: str
    option: str
    value: str
    sep: str

    @property
    def typed(self) -> str:
        """The argument as the command line typed it (``--batch-size 8``)."""
        return f"{self.option}{self.sep}{self.value}"

    def run_with(self, size: int) -> str:
        """A fix's first line: run the script with the option at ``size``."""
        return (
            f"# run the script with {self.option}{self.sep}{size} in place of {self.typed} "
            f"({self.attribute} = {size});"
        )

    @property
    def why(self) -> str:
        """Why such a fix is display-only."""
        return (
            f"display-only: the command line sets the batch ({self.typed}): the change is to the "
            "command"
        )


def _option_given(facts: Facts, call: str | None, current: int | None) -> _Given | None:
    """The script argument that set ``fit``'s ``batch_size=NAME.ATTR`` (keyword, or third
    positional argument), read from the script's argv (``facts.run.argv``, before any ``--``):
    the last one that names the option and its value.

    Where the capture recorded the option's strings from its ``add_argument`` call
    (``facts.fit.batch_size_options``: ``["-b", "--batch-size"]``), any of them as argparse
    reads it: ``--batch-size 8``, ``--batch-size=8``, ``-b 8``, ``-b8``, ``-b=8``, or a prefix
    of a long one (argparse's abbreviations, ``--batch``) whose value is the batch ``fit`` ran
    with, ``current``. Else the option named after ``ATTR`` with dashes for underscores
    (``--batch-size`` or ``--batch_size``: argparse's default ``dest``) or such a prefix of it.
    None when ``fit`` passes no such attribute or no such argument was given (a short option
    in a group, ``-vb 8``, is not read)."""
    value = _batch_size_value(facts, call)
    recorded = facts.fit.batch_size_options if facts.fit else None
    return _argv_option(facts, value, current, recorded)


def _argv_option(
    facts: Facts, value: ast.expr | None, current: int | None, recorded: list[str] | None
) -> _Given | None:
    """The last argument of the script's argv (``facts.run.argv``, before any ``--``) that
    names the option behind ``value`` (``NAME.ATTR``, an argparse namespace's attribute) and
    its value (:func:`_option_token`; ``recorded``: the option's strings, when known); an
    abbreviation counts only with the value ``current``. None for any other ``value``."""
    if facts.run is None or not (
        isinstance(value, ast.Attribute) and isinstance(value.value, ast.Name)
    ):
        return None
    argv = list(facts.run.argv[1:])
    given = None
    for i, token in enumerate(argv):
        if token == "--":
            break
        found = _option_token(token, recorded, value.attr)
        if found is None:
            continue
        option, sep, typed, exact = found
        if sep is None:
            sep, typed = " ", argv[i + 1] if i + 1 < len(argv) else ""
        if exact or _int(typed) == current:
            given = _Given(ast.unparse(value), option, typed, sep)
    return given


def _option_token(
    token: str, recorded: list[str] | None, dest: str
) -> tuple[str, str | None, str, bool] | None:
    """How one argv ``token`` names the batch-size option: ``(option as typed, separator or
    None when the value is the next token, value, exact)``; ``exact`` is False for an
    abbreviation (a prefix of a long option). None when it does not name it. ``recorded``: the
    option strings from the ``add_argument`` call (None: the long option named after
    ``dest``)."""
    if not token.startswith("-") or len(token) < 2:
        return None
    word, eq, after = token.partition("=")
    sep = "=" if eq else None
    if recorded is None:
        if not word.startswith("--") or len(word) < 3:
            return None
        name = word[2:].replace("-", "_")
        if name == dest:
            return word, sep, after, True
        return (word, sep, after, False) if name and dest.startswith(name) else None
    longs = [o for o in recorded if len(o) > 2]
    if word in recorded:
        return word, sep, after, True
    for short in (o for o in recorded if len(o) == 2):
        if token.startswith(short) and _int(token[2:]) is not None:  # -b8, not -bn
            return short, "", token[2:], True
    if len(word) > 2 and any(o.startswith(word) for o in longs):
        return word, sep, after, False
    return None


def _int(text: str) -> int | None:
    try:
        return int(text)
    except ValueError:
        return None


def _command_line_fix(facts: Facts, given: _Given, size: int, current: int | None) -> _Change:
    """``fit(..., batch_size=args.batch_size)`` run with ``--batch-size 8``: the option sets the
    batch, so the fix is to the command line (display-only), and the ``fit`` call stays as it
    is (a literal there would make the option do nothing)."""
    if _int(given.value) == current:
        first = given.run_with(size)
    else:  # the script changed the value after parsing it
        first = (
            f"# the script ran with {given.typed} and fit's batch was {current}: give "
            f"{given.option} the value\n# that makes it {size} ({given.attribute} = {size} at the "
            "fit call);"
        )
    call = facts.fit.location.call_source if facts.fit and facts.fit.location else None
    own = rw.argument(call, 2, "batch_size")
    written = ast.unparse(own) if own is not None else given.attribute  # bs, for def train(bs)
    code = (
        f"{first}\n# keep fit(..., batch_size={written}) as it is: a literal there would "
        f"make {given.option} do nothing"
    )
    return _Change(code, m.fit_location(facts), None, FixSafety.DISPLAY_ONLY, given.why)


def _value_note(
    facts: Facts,
    text: str,
    options: list[str] | None,
    size: int,
    current: int | None,
    passed: str | None = None,
) -> _Change:
    """``fit(..., batch_size=VALUE)`` where ``VALUE`` (``text``: ``args.batch_size``, ``bs``,
    ``cfg.batch_size``) was traced to no line the fix could rewrite and to no argument the rule
    could read (a parser in another file than the ``fit`` call, a ``*args`` splat on the way, a
    grouped ``-vb 8``, a computed default, a config file): a display-only note, since a literal
    in the ``fit`` call would make whatever sets the value do nothing. ``options``: the strings
    of the argparse option behind it, when the capture recorded them; ``passed``: where
    ``text`` is a parameter of the function calling ``fit``, the argument its caller passed
    (``args.batch_size``)."""
    ran = f" ({current} in this run)" if current else ""
    came = f", passed in as {passed}" if passed else ""
    if options:
        names = "/".join(options)
        code = (
            f"# fit's batch_size comes from the option {names}: set it to {size} where its value "
            f"is set\n# (the command line, or the option's default); a literal in fit would "
            f"make {names} do nothing"
        )
        why = f"display-only: the option {names} sets the batch, and its value was not traced"
    else:
        code = (
            f"# fit's batch_size is {text}{came}{ran}: set it to {size} where its value is "
            "set;\n"
            f"# a literal in fit would override {text} and whatever sets it"
        )
        why = (
            f"display-only: fit's batch_size is {text}{came}, whose setting this run could not "
            "trace"
        )
    return _Change(code, m.fit_location(facts), None, FixSafety.DISPLAY_ONLY, why)


# The sources that make their own batches, which ``fit``'s ``batch_size`` does not set (Keras 3
# ``Model.fit``: "Do not specify the batch_size if your input data x is a keras.utils.PyDataset,
# tf.data.Dataset, torch.utils.data.DataLoader or Python generator function since they generate
# batches"; Keras 2 ignores it for a Sequence): what each is called, and how it makes a batch.
_SOURCES = {
    DataKind.PYTHON_GENERATOR: ("generator", "your generator yields", "make it yield"),
    DataKind.PY_DATASET: ("PyDataset", "your PyDataset's __getitem__ returns", "make it return"),
    DataKind.TF_KERAS_SEQUENCE: ("Sequence", "your Sequence's __getitem__ returns",
                                 "make it return"),
    "DataLoader": ("DataLoader", "your DataLoader yields", "give it batch_size for"),
}  # fmt: skip


def _source_fix(facts: Facts, kind: str, size: int, current: int | None) -> _Change:
    """The fix where ``fit``'s ``x`` makes its own batches (``kind`` in :data:`_SOURCES`: a
    generator, a PyDataset, a Sequence, a torch DataLoader): ``fit``'s ``batch_size`` does not
    set them, so no ``fit(..., batch_size=)`` rewrite. A display-only sketch: the ``fit`` call
    with the one integer literal equal to the batch size in its ``x`` call changed
    (``batch_gen(32)`` -> ``batch_gen(128)``, :func:`rnndoctor.rewrite.set_x_call_literal`),
    else a note at the line that makes the source (the generator's ``def``, the PyDataset's
    construction) saying where the batch must change."""
    name, makes, make = _SOURCES[kind]
    reason = f"fit's batch_size does not apply to a {name}: the {name} makes the batch"
    call = facts.fit.location.call_source if facts.fit and facts.fit.location else None
    changed = rw.set_x_call_literal(call, current, size) if current else None
    steps = _steps_note(facts, size, current)
    if changed is not None:
        code, source = changed
        lines = [
            code,
            f"# display-only: {current}, the one argument of {source} equal to the batch size, "
            "is taken to set it",
            f"# ({reason})",
            *steps,
        ]
        why = f"display-only: {source} is taken to make the batch ({reason})"
        return _Change("\n".join(lines), m.fit_location(facts), None, FixSafety.DISPLAY_ONLY, why)
    now = f"batches of {current}" if current else "its batches"
    first = f"# {makes} {now}: {make} batches of {size}"
    data = facts.data
    location = m.to_location(data.location) if data and data.location else m.fit_location(facts)
    code = "\n".join([first, f"# ({reason})", *steps])
    return _Change(code, location, None, FixSafety.DISPLAY_ONLY, f"display-only: {reason}")


def _steps_note(facts: Facts, size: int, current: int | None) -> list[str]:
    """A note where ``fit`` has ``steps_per_epoch``: it counts batches, so a larger batch makes
    each epoch more samples."""
    steps = facts.fit.steps_per_epoch if facts.fit else None
    if not steps or not current or size % current:
        return []
    times = size // current
    keep = f" (steps_per_epoch={steps // times} keeps them)" if steps % times == 0 else ""
    return [
        f"# steps_per_epoch={steps} counts batches: at batch {size} an epoch is {times}x the "
        f"samples{keep}"
    ]


def _same_samples(facts: Facts, size: int, current: int) -> str:
    """Where ``fit`` sets ``steps_per_epoch`` (it counts batches), the gain holds for an epoch of
    the same samples, which needs ``steps_per_epoch`` scaled down: the words saying so (with a
    space after), else ''."""
    steps = facts.fit.steps_per_epoch if facts.fit else None
    if not steps or not current or size <= current:
        return ""
    scaled = (
        f"steps_per_epoch={steps * current // size}"
        if steps * current % size == 0
        else (f"steps_per_epoch scaled by {current}/{size}")
    )
    return f"of the same samples ({scaled}; at steps_per_epoch={steps} each epoch trains " + (
        f"{size / current:g}x the samples and takes longer) "
    )


def _batch_fix(facts: Facts, title: str, change: _Change) -> Fix:
    """The finding's fix: ``change`` under ``title`` (with why it is display-only, where it
    is), made display-only for a stateful RNN (:func:`_stateful_fix`)."""
    if change.why:
        title = f"{title}; {change.why}"
    fix = Fix(title=title, code=change.code, safety=change.safety, before=change.before)
    return _stateful_fix(facts, fix)


def _stateful_fix(facts: Facts, fix: Fix) -> Fix:
    """A stateful RNN keeps one state per batch row, carried from batch to batch: a new batch
    size changes that layout (and the model's fixed ``batch_shape``), so the fix becomes a
    display-only sketch that says so."""
    layers = [
        r.path for r in (facts.model.rnn_layers if facts.model else []) if r.args.get("stateful")
    ]
    if not layers:
        return fix
    return Fix(
        title=fix.title + f"; {', '.join(layers)} is stateful=True: its state layout changes",
        code=(
            f"{fix.code}\n# stateful RNN ({', '.join(layers)}): state row i carries over to row i"
            " of the next batch; a new batch size needs the data re-chunked into that many "
            "parallel streams and the model's batch_shape changed to match"
        ),
        safety=FixSafety.DISPLAY_ONLY,
        before=None,
    )


def _pipeline_fix(facts: Facts, size: int, current: int | None) -> _Change:
    """The fix of a ``tf.data`` pipeline: its bucketing or batch call rewritten, else (no such
    call recorded with its line) a display-only sketch that says where the batch is made."""
    data = facts.data
    if data is None:
        return _dataset_sketch(facts, size, current)
    buckets = [n for n in m.nodes_of(facts, "bucket") if n.location is not None]
    if data.batch_kind == "bucket" and buckets:
        loc = buckets[-1].location
        code = _with_bucket_batch_sizes(loc.call_source, size)
        if code is None:  # a sketch with placeholder names: it replaces no code as written
            sketch = (
                f"ds = ds.bucket_by_sequence_length(length_fn, BOUNDARIES, "
                f"bucket_batch_sizes=[{size}] * (len(BOUNDARIES) + 1))"
            )
            return _Change(sketch, m.to_location(loc), None)
        return _Change(code, m.to_location(loc), loc.call_source)
    for kind in ("batch", "padded_batch"):
        nodes = [n for n in m.nodes_of(facts, kind) if n.location is not None]
        if nodes:
            node = nodes[-1]
            call = node.location.call_source
            by_batch = node.attrs.get("built_by", kind) in ("batch", "padded_batch")
            variable = rw.argument(call, 0 if by_batch else None, "batch_size")
            if variable is not None and not rw.is_int_literal(variable):
                return _variable_batch_note(facts, node.location, variable, size, current)
            if by_batch:
                code = rw.set_argument(call, 0, "batch_size", str(size))
            else:  # a Keras util (timeseries_dataset_from_array...): its batch_size keyword
                code = rw.set_keyword(call, "batch_size", str(size))
            if code is None:
                return _Change(f"ds = ds.{kind}({size})", m.to_location(node.location), None)
            return _Change(code, m.to_location(node.location), call)
    return _dataset_sketch(facts, size, current)


def _variable_batch_note(
    facts: Facts, loc: SourceLocation, value: ast.expr, size: int, current: int | None
) -> _Change:
    """A pipeline that batches by a value it reads (``batch(args.batch_size)``, ``batch(bs)``):
    a display-only note at the batch call, since a literal there would make the option (or
    the name, which other code may read) do nothing. Where the script's argv set the option
    (:func:`_argv_option`), the note says to run with the new value."""
    text = ast.unparse(value)
    ran = f" ({current} in this run)" if current else ""
    given = _argv_option(facts, value, current, None)
    if given is not None and _int(given.value) == current:
        first, why = given.run_with(size), given.why
    else:
        first = f"# your pipeline batches by {text}{ran}: set it to {size} where its value is set;"
        why = f"display-only: the pipeline batches by {text}, set elsewhere"
    code = f"{first}\n# keep the batch call as it is: a literal there would make {text} do nothing"
    return _Change(code, m.to_location(loc), None, FixSafety.DISPLAY_ONLY, why)


def _dataset_sketch(facts: Facts, size: int, current: int | None) -> _Change:
    """A ``tf.data`` pipeline whose batch call was not recorded with its line: the dataset
    ``fit`` receives is already batched (Keras iterates it as it is), so neither ``fit``'s
    ``batch_size`` nor an appended ``ds.batch(...)`` (batches of batches) changes the batch. A
    display-only note at the pipeline's line: where the pipeline batches, or, with no batch op
    in its graph, its source (``from_generator`` of batches), must make batches of ``size``."""
    data = facts.data
    now = f"batches of {current}" if current else "its batches"
    batch_kind = data.batch_kind if data else None
    batch_kind = batch_kind or next(
        (k for k in ("batch", "padded_batch") if m.nodes_of(facts, k)), None
    )
    if batch_kind is not None:
        where = f"your pipeline's {batch_kind} step makes {now}: set its batch size to {size}"
    elif data is not None and data.nodes:  # the graph was read, and holds no batch op
        where = (
            f"your dataset's source yields {now} (the pipeline has no batch op): make it yield "
            f"batches of {size}"
        )
    else:
        where = f"set the batch size where your pipeline makes {now} to {size}"
    reason = "fit's batch_size does not apply to a dataset: the dataset makes the batch"
    code = f"# {where}\n# ({reason}; appending .batch({size}) would batch its batches)"
    location = m.to_location(data.location) if data and data.location else m.fit_location(facts)
    return _Change(code, location, None, FixSafety.DISPLAY_ONLY, f"display-only: {reason}")


def _with_bucket_batch_sizes(call: str | None, size: int) -> str | None:
    """``ds.bucket_by_sequence_length(f, B, [64] * 9)`` -> ``...(f, B, [128] * (len(B) + 1))``:
    the bucketed pipeline's batch size is its ``bucket_batch_sizes`` (tf.data.Dataset
    .bucket_by_sequence_length: one batch size per bucket, ``len(bucket_boundaries) + 1``).
    None where the call reads its sizes from a name (``bucket_batch_sizes=BATCH_SIZES``): a list
    written over it would leave the name that sets them unused."""
    node = fp.parse_call(call)
    if node is None:
        return None
    bounds = (
        node.args[1]
        if len(node.args) > 1
        else next((k.value for k in node.keywords if k.arg == "bucket_boundaries"), None)
    )
    current = rw.argument(call, 2, "bucket_batch_sizes")
    if bounds is None or isinstance(current, (ast.Name, ast.Attribute, ast.Subscript)):
        return None  # sizes read from a name (BATCH_SIZES): a list here would orphan it
    sizes = ast.parse(f"[{size}] * (len({ast.unparse(bounds)}) + 1)", mode="eval").body
    if len(node.args) > 2:
        node.args[2] = sizes
    else:
        node.keywords = [k for k in node.keywords if k.arg != "bucket_batch_sizes"]
        node.keywords.append(ast.keyword(arg="bucket_batch_sizes", value=sizes))
    return ast.unparse(node)


def _throughput(facts: Facts, base: ProbePoint, point: ProbePoint) -> Interval:
    """The samples/s ratio of ``point`` over ``base`` with its interval: the paired step-time
    ratio scaled by the batch ratio (``rnndoctor.paired.throughput_ratio``), widened for the
    probe's machine load; facts without a pairing (before schema 1.2) give the median only."""
    if point.paired is not None:
        i = m.ratio_interval(facts, point.paired)
        scale = point.value / base.value
        return Interval(i.value * scale, i.low * scale, i.high * scale, i.level, i.widen_factor,
                        i.no_interval)  # fmt: skip
    return m.point_interval((point.samples_per_s or 0.0) / (base.samples_per_s or 1.0))


def _measured_throughput(facts: Facts, base: ProbePoint, point: ProbePoint) -> Interval | None:
    """The samples/s ratio of ``point`` over ``base`` as its pairs measured it, before any
    widening: the bootstrap interval, or the pairs' extremes for fewer than
    ``rules/_measured.py: MIN_PAIRS`` pairs; its upper bound as it would read had the probe's
    machine load slowed only the compute (``rnndoctor.dispatch.unloaded_ratio``, Bounds). What
    :func:`rnndoctor.decide.decide` reads under load. None without a pairing."""
    paired = point.paired
    if paired is None:
        return None
    scale = point.value / base.value
    low, high = min(paired.low, paired.ratio), max(paired.high, paired.ratio)
    if scale > 1.0:
        slowdown = dispatch.compute_slowdown(m.phase_load(facts, paired.phase))
        high = dispatch.unloaded_ratio(high * scale, scale, slowdown) / scale
    return Interval(paired.ratio * scale, low * scale, high * scale, paired.level)


def _basis(point: ProbePoint) -> str:
    paired = point.paired
    if paired is None:
        return "compute-only medians, not paired (facts before schema 1.2)"
    return (
        f"{paired.pairs} interleaved pairs, {paired.steps_a} and {paired.steps_b} timed steps"
        + (f"; cut short: {paired.cut_short}" if paired.cut_short else "")
        + (f"; second stage: {paired.second_stage}" if paired.second_stage else "")
    )


# Optimizers that scale each step by a running estimate of the gradient's second moment, for
# which the square-root scaling rule holds (Malladi, Lyu, Panigrahi and Arora, "On the SDEs and
# Scaling Rules for Adaptive Gradient Algorithms", NeurIPS 2022: RMSprop and Adam; the rule
# also moves the betas and epsilon, hence "about"), matched on the optimizer's name as Keras
# gives it (``fit.optimizer``), normalised by :func:`optimizer_kind`.
ADAPTIVE_OPTIMIZERS = ("adam", "adamw", "nadam", "adamax", "rmsprop")


def optimizer_kind(name: str | None) -> str:
    """The optimizer's kind from its recorded name: lower case, without a trailing ``_N`` and
    without underscores. Keras 3 names an optimizer ``to_snake_case`` of its class plus a
    uniquifier (``keras/src/optimizers/base_optimizer.py``: ``auto_name``): ``rm_sprop``,
    ``adam_w``, ``adam_1``; tf_keras uses the class's name (``Adam``, ``RMSprop``). A name the
    user set, or a loss-scale wrapper (``loss_scale_optimizer``), matches no kind: ""."""
    text = re.sub(r"_\d+$", "", (name or "").lower())
    return text.replace("_", "")


def learning_rate_advice(optimizer: str | None, factor: float) -> str:
    """How the learning rate goes with a batch ``factor`` times larger, for the compiled
    ``optimizer``'s name: SGD, the linear scaling rule (x factor: Goyal et al., "Accurate, Large
    Minibatch SGD", 2017); Adam and RMSprop (:data:`ADAPTIVE_OPTIMIZERS`), the square-root rule
    (x sqrt(factor)); another or an unknown optimizer, both, to choose from. Advice only: the
    fix changes the batch size alone."""
    name = optimizer_kind(optimizer)
    linear = f"x{factor:g}, the linear scaling rule for SGD"
    root = f"about x{factor**0.5:.1f}, the square-root rule for Adam and RMSprop"
    if name in ("sgd", "sgdw"):
        return f"scale the learning rate with it ({linear})"
    if name in ADAPTIVE_OPTIMIZERS:
        return f"scale the learning rate with it ({root}; {optimizer} is adaptive)"
    return f"retune the learning rate for it ({linear}; {root})"


def _eager_note(facts: Facts) -> str:
    """Where the model ran with ``run_eagerly=True``, that the probe measured eager steps: an
    eager step pays Python's dispatch of every op once per step, whatever the batch, so a larger
    batch amortises more of it than a traced step has to amortise, and the gain of a traced
    step (RD401's fix) may be smaller. ``""`` otherwise."""
    if not (facts.fit and facts.fit.run_eagerly):
        return ""
    return (
        "; measured on eager steps (run_eagerly=True, RD401): a traced step has less per-step "
        "overhead for a larger batch to amortise, so check again once RD401 is fixed"
    )


def _measured_finding(
    facts: Facts, options: OptionValues, measured: list[ProbePoint], evidence: tuple[Evidence, ...]
) -> list[Finding]:
    """The finding from the probe's measured points (none when the gain is below the cut-off).

    The point quoted is the strongest evidence: a point whose whole interval clears the cut-off
    before one whose median alone does (a 3.8x median with a 0.2-5.2x interval says less than
    2.0x with 1.8-2.3x), and among equals the larger median gain."""
    base = measured[0]
    rank = {Decision.CLEARS: 2, Decision.INCONCLUSIVE: 1, Decision.BELOW: 0}
    best, gain, decision = max(
        (
            (
                p,
                g,
                decide(
                    g,
                    options.min_speedup,
                    higher_is_worse=True,
                    measured=_measured_throughput(facts, base, p),
                ),
            )
            for p, g in ((p, _throughput(facts, base, p)) for p in measured[1:])
        ),
        key=lambda pgd: (rank[pgd[2]], pgd[1].value),
    )
    if decision is Decision.BELOW:
        return []
    ratio = gain.value
    quoted = describe(decision, gain, kind="ratio")
    severity = Severity.WARNING if decision is Decision.CLEARS else Severity.INFO
    evidence = (
        *evidence,
        Evidence(f"samples/s ratio, batch {best.value} / {base.value}", quoted, "",
                 _basis(best)),
        *m.unloaded_evidence(facts, best.paired, best.value / base.value,
                             best.value / base.value),
        *m.noisy_evidence(facts),
    )  # fmt: skip
    change = _fix(facts, best.value, base.value)
    return [
        finding(
            severity=severity,
            message=(
                f"Batch size {base.value} leaves throughput on the table: the batch-size probe "
                f"(on batches cached in memory) trains {best.samples_per_s:,.0f} samples/s at "
                f"batch {best.value} "
                f"against {base.samples_per_s:,.0f} at {base.value}, each from its median step; "
                f"its interleaved pairs: {quoted} samples/s (the median of their ratios, which "
                "the decision reads)."
            ),
            location=change.location,
            evidence=evidence,
            fix=_batch_fix(
                facts,
                f"Use batch size {best.value}, and "
                f"{learning_rate_advice(facts.fit.optimizer, best.value / base.value)} in your "
                "optimizer: the code below changes the batch size only",
                change,
            ),
            gain=(
                f"measured compute-only throughput {quoted} samples/s at batch "
                f"{best.value} (each step is longer; more samples per second): an epoch "
                f"{_same_samples(facts, best.value, base.value)}takes about 1/{ratio:.1f} of "
                f"the time, if the input pipeline keeps up (see RD201){_eager_note(facts)}"
            ),
            speedup=round(ratio, 2) if decision is Decision.CLEARS else None,
            speedup_interval=(
                ratio_interval_words(gain) if best.paired is not None else None
            ),  # as the finding quotes it; unpaired points (facts before 1.2) have none
        )
    ]


@rule(
    "RD301",
    "small-batch",
    "a probe at 2x/4x the batch size gives >= 1.5x samples/s (on GPU: batch < 64, info)",
    needs=("probes", "fit"),
    severity=Severity.WARNING,
    options=(_MIN_SPEEDUP, _GPU_SMALL_BATCH),
)
def check(facts: Facts, options: OptionValues) -> list[Finding]:
    m.require_probes(facts, "batch-size", facts.probes.batch_probe_not_measured)
    points = facts.probes.batch_probe
    measured = [p for p in points if p.samples_per_s]
    evidence = tuple(
        Evidence(
            f"batch {p.value}",
            p.samples_per_s if p.samples_per_s else p.stopped,
            "samples/s" if p.samples_per_s else "",
            f"compute-only, {p.step_time_ms:.2f} ms per step" if p.step_time_ms else "not run",
        )
        for p in points
    )
    beside = facts.probes.batch_real_paired
    if beside is not None and points:  # the first point re-timed beside the real step
        evidence += (
            Evidence(
                f"batch {points[0].value} beside the real step",
                f"{beside.median_b_ms:.2f} ms against {beside.median_a_ms:.2f} ms",
                "",
                f"{beside.pairs} pairs in the batch-size probe's phase, after the point "
                "disagreed with the window and the compute-only probe's real step",
            ),
        )
    if len(measured) >= 2:
        if facts.probes.batch_probe_inconsistent:  # no finding on an inconsistent probe
            raise NotEvaluated(
                f"probe inconsistent with the window ({facts.probes.batch_probe_inconsistent})"
            )
        return _measured_finding(facts, options, measured, evidence)
    env = facts.environment
    size = m.batch_size(facts)
    if env is not None and env.gpu_count and size and size < options.gpu_small_batch:
        change = _fix(facts, options.gpu_small_batch, size)
        why = facts.probes.batch_probe_not_measured or "the batch-size probe did not run"
        return [
            finding(
                severity=Severity.INFO,
                message=(
                    f"Batch size {size} on a GPU: most of the device idles at this size "
                    "(the batch-size probe could not measure it)."
                ),
                location=change.location,
                evidence=(*evidence, Evidence("batch size", size, "", "fit")),
                fix=_batch_fix(
                    facts, "Try a larger batch, and scale the learning rate with it", change
                ),
                gain=f"not measured: {why}",
            )
        ]
    return []
