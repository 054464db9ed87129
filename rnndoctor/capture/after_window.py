"""The time outside the window: the ``fit`` loop read from the source, and the script's run-on.

Two things the diagnosis window alone cannot see (issue 12):

- **A fit in a loop.** :func:`fit_loop` reads the user's file (``ast``) for the ``for`` /
  ``while`` loops whose body holds the ``fit`` call's line, with their iteration counts where
  the source states them (:func:`enclosing_loops`): ``FitConfig.fit_in_loop``.
- **What runs after fit.** After the window, :func:`start` lets the script run on instead of
  stopping it at once, with the neutralisation still on: after a ``fit`` inside a loop until
  the loop's next ``fit`` call, bounded by the ``after the window`` budget; after a single
  ``fit`` until the script's end, bounded by the shorter ``after a single fit`` budget
  (:mod:`rnndoctor.capture.budget`; both within ``--timeout``). It counts and times the model calls
  (``Model.predict`` / ``evaluate`` / ``predict_on_batch`` / ``__call__``, the outermost call
  only) and the plain Python time around them. It stops (:func:`stop`, then
  ``CaptureSession.end_script`` as before) at the first of: the script's next ``fit`` call, its
  end, its first write outside ``--out`` (a file, a neutralised save, a TensorFlow or h5py write)
  or child command (:mod:`rnndoctor.capture.neutralise` asks
  :func:`stop_before_write` before the write happens, so the check still writes nothing a stopped
  script would not have written), or the budget (a timer raises ``StopScript`` in the main
  thread, through a signal handler where it can, so that a sleep or a join stops too; where the
  script still has not stopped 2 s later, the check ends without it). What it saw goes to
  ``facts.outside_window``. On the second single-sample ``predict`` call, ``predict``,
  ``model(x, training=False)`` and ``predict_on_batch`` on the same sample are timed against
  each other as interleaved bursts (paired, with intervals; the run-on's budget timer is paused
  meanwhile), for the rule that suggests them (RD406).
"""

from __future__ import annotations

import ast
import ctypes
import functools
import linecache
import os
import signal
import statistics
import threading
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from rnndoctor import cluster
from rnndoctor.capture import flavour, pairs, sites
from rnndoctor.capture.session import AfterWindowState, StopScript
from rnndoctor.facts import (
    SEEN_TO_THE_END,
    CodeLoop,
    FitLoop,
    ModelCallStats,
    OutsideWindowFacts,
    PairedRatio,
    Phase,
    SourceLocation,
    StrategyFacts,
)

if TYPE_CHECKING:
    from rnndoctor.capture.session import CaptureSession

_METHODS = ("predict", "evaluate", "predict_on_batch", "__call__")
_MAX_SIZES = 10
# The per-call comparison of RD406 (predict vs predict_on_batch vs model(x)): interleaved
# bursts of about _BURST_S each (at most _MAX_BURST_CALLS calls), until each way has the paired
# timer's floor (rnndoctor.paired: 10 calls and 1 s) or _TIMING_S ends. Source: rnndoctor's
# choice: three ways of 1 s each fit in it with room for slow calls (RD406 wants 3 pairs: a
# loaded 2-core machine made predict take 0.66 s a call on keras-io's char-level example, and
# 8 s gave one pair), and it is paused out of the run-on's budget.
_TIMING_S = 15.0
_BURST_S = 0.1
_MAX_BURST_CALLS = 50
_HOOKS_ATTR = "_rnndoctor_after_window_hooks"
# The signal that stops the script's main thread when the run-on's budget runs out, where it
# blocks in a system call (time.sleep, Thread.join, queue.get, a socket read): an exception set
# with PyThreadState_SetAsyncExc waits there until the call returns, which for a sleep or a join
# may be never (a new user's script slept for an hour after fit, and the check waited for its
# --timeout, then exited 4). Python retries an interrupted call only where the handler returns
# (PEP 475); this handler raises StopScript. A real-time signal: Python and TensorFlow use none.
_STOP_SIGNAL = signal.SIGRTMIN + 4 if hasattr(signal, "SIGRTMIN") else None
# Where the main thread has not stopped this long after the budget ran out (a C call that does
# not return to Python), the check ends from the timer's thread (CaptureSession.end_now).
# Source: rnndoctor's choice, twice the shortest run-on budget worth starting (1 s).
_END_GRACE_S = 2.0


# -- loops, from the source ------------------------------------------------------------------
def _literal_names(tree: ast.Module) -> dict[str, int]:
    """Names assigned an int literal exactly once in the file (``EPOCHS = 40``)."""
    seen: dict[str, list[Any]] = {}
    for node in ast.walk(tree):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
            targets = [node.target]
        for target in targets:
            if isinstance(target, ast.Name):
                value = node.value if isinstance(node, ast.Assign) else None
                seen.setdefault(target.id, []).append(value)
    return {
        name: values[0].value
        for name, values in seen.items()
        if len(values) == 1 and isinstance(values[0], ast.Constant) and type(values[0].value) is int
    }


def _int_of(node: ast.expr, names: dict[str, int]) -> tuple[int, str] | None:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value, "literal"
    if isinstance(node, ast.Name) and node.id in names:
        return names[node.id], f"{node.id} = {names[node.id]}"
    return None


def _iterations(loop: ast.For | ast.While, names: dict[str, int]) -> tuple[int | None, str | None]:
    """The iterations of a ``for`` loop the source states, and how they were read."""
    if not isinstance(loop, ast.For):
        return None, None
    it = loop.iter
    if isinstance(it, (ast.List, ast.Tuple)) and not any(
        isinstance(e, ast.Starred) for e in it.elts
    ):
        return len(it.elts), f"a literal {type(it).__name__.lower()} of {len(it.elts)}"
    is_range = isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "range"
    if not is_range or it.keywords or not 1 <= len(it.args) <= 3:
        return None, None
    bounds = [_int_of(a, names) for a in it.args]
    if any(b is None for b in bounds):
        return None, None
    values = [b[0] for b in bounds if b is not None]
    count = len(range(*values))
    named = [b[1] for b in bounds if b is not None and b[1] != "literal"]
    source = f"range({', '.join(ast.unparse(a) for a in it.args)})"
    return count, source + (f", {'; '.join(named)}" if named else "")


def _parse(path: str) -> ast.Module | None:
    try:
        return ast.parse("".join(linecache.getlines(path)))
    except (SyntaxError, ValueError):
        return None


def enclosing_loops(path: str, line: int) -> list[CodeLoop]:
    """The ``for`` / ``while`` loops of ``path`` whose body holds ``line``, outermost first (a
    loop inside a function is listed where the function's body holds the line)."""
    tree = _parse(path)
    if tree is None:
        return []
    names = _literal_names(tree)
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, (ast.For, ast.While)) or not node.body:
            continue
        first, last = node.body[0].lineno, node.body[-1].end_lineno or node.body[-1].lineno
        if first <= line <= last:
            count, source = _iterations(node, names)
            kind = "for" if isinstance(node, ast.For) else "while"
            found.append(CodeLoop(node.lineno, kind, count, source))
    return sorted(found, key=lambda loop: loop.line)


def _product(loops: list[CodeLoop]) -> int | None:
    total = 1
    for loop in loops:
        if loop.iterations is None:
            return None
        total *= loop.iterations
    return total


def fit_loop(location: SourceLocation | None) -> FitLoop | None:
    """``FitConfig.fit_in_loop``: the loops around the ``fit`` call, or None (not in a loop)."""
    if location is None or not location.file or not location.line:
        return None
    loops = enclosing_loops(location.file, location.line)
    return FitLoop(loops=loops, calls=_product(loops)) if loops else None


# -- the run-on ------------------------------------------------------------------------------
def start(session: CaptureSession, model: Any) -> bool:
    """Lets the script run on after the window (the ``fit`` hook returns instead of stopping).

    Every ``fit`` runs on: a ``fit`` inside a loop of the user's file
    (``FitConfig.fit_in_loop``) until the loop's next call, under the ``after the window``
    budget (what runs between its calls is part of every iteration); a single ``fit`` until the
    script's end (or a later ``fit`` call), under the shorter ``after a single fit`` budget
    (what follows it runs once). Both end earlier at a write, and within ``--timeout``
    (:meth:`rnndoctor.capture.budget.Budgets.budget` caps every budget by the time left).

    A worker of a multi-worker job never runs on (:func:`multi_worker_reason`; a run note says
    why): the code after ``fit`` may make a collective call (``evaluate``, ``predict`` under the
    strategy), and a worker whose run-on stopped first would leave its peer blocked in
    TensorFlow's C++ collective until ``--timeout``.

    Returns:
        False when it should stop now: no ``fit`` facts, a worker of a multi-worker job, or less
        than 1 s left for the budget.
    """
    fit = session.facts.fit
    if fit is None:
        return False
    reason = multi_worker_reason(session.facts.strategy, os.environ)
    if reason is not None:
        session.facts.run.notes.append(f"no run-on after the window: {reason}")
        return False
    phase = "after the window" if fit.fit_in_loop is not None else "after a single fit"
    budget = session.budget(phase)
    if budget.seconds < 1.0:
        return False
    state = AfterWindowState(running=True, started=time.perf_counter(), budget=budget)
    state.model = model
    state.facts = OutsideWindowFacts(ended="running", budget_s=budget.seconds)
    session.after_window = state
    _install_hooks(session)
    run = session.facts.run
    if run.phases and run.phases[-1].name == Phase.DONE:
        run.phases.pop()  # the phase list ends with "done" once, after the run-on
    session.facts.outside_window = state.facts
    session.set_phase(Phase.AFTER_WINDOW)
    main = threading.main_thread().ident
    timer = threading.Timer(budget.seconds, _expire, args=(session, state, main))
    timer.daemon = True
    timer.start()
    state.timer = timer
    return True


def install_stop_signal(session: CaptureSession) -> None:
    """Installs the handler of :data:`_STOP_SIGNAL` (``session.stop_signal``), from the main
    thread as the capture starts, whichever thread later runs ``fit``: once the run-on's
    budget has run out (``AfterWindowState.expired``) and while the script has not returned
    (``session.script_over``), the handler ends the script as the other stops do
    (``CaptureSession.end_script``: no user code runs while it unwinds); any other time it
    does nothing. Nothing where no real-time signal exists (not Linux) or a handler cannot be
    installed: an asynchronous exception then stops the script, which a blocking call holds
    off, with the 2 s backstop behind it, and without ``end_script``'s guard against the
    user's ``finally`` clauses."""
    if _STOP_SIGNAL is None or threading.current_thread() is not threading.main_thread():
        return

    def handler(signum: int, frame: Any) -> None:
        state = session.after_window
        if state is None or not state.expired or session.script_over or session.stopping:
            return  # a stray signal, the script over, or a stop already unwinding it
        if state.own:
            return  # rnndoctor's own timing of the model calls: it ends the script after it
        session.end_script()

    try:
        signal.signal(_STOP_SIGNAL, handler)
    except (ValueError, OSError):
        return
    session.stop_signal = _STOP_SIGNAL


def multi_worker_reason(strategy: StrategyFacts | None, environ: Mapping[str, str]) -> str | None:
    """Why this process is a worker of a multi-worker job (no run-on after fit), or None.

    Args:
        strategy: the strategy facts of the window (``workers``: the cluster's worker tasks).
        environ: the process environment (``rnndoctor.cluster.in_multi_worker_job``: a worker
            of ``--workers`` or of a launched job, or a ``TF_CONFIG`` of several tasks).
    """
    workers = strategy.workers if strategy is not None else 1
    if workers <= 1 and not cluster.in_multi_worker_job(environ):
        return None
    count = f"{workers} workers" if workers > 1 else "a multi-worker job"
    return (
        f"this process is one worker of {count}: the code after fit may make a collective "
        "call (evaluate, predict), and a worker that stopped first would leave the others "
        "blocked in it until --timeout, so every worker stops at the end of its window"
    )


def _expire(session: CaptureSession, state: AfterWindowState, main: int | None) -> None:
    """The budget is spent: records the facts, starts the backstop (:func:`_end_if_blocked`)
    and sends the main thread the stop signal (:func:`install_stop_signal`; where there is
    none, an asynchronous ``StopScript``). Nothing where the run-on had ended otherwise."""
    if not state.running or main is None:
        return
    budget = f"the after-the-window budget of {state.budget.seconds:g} s ran out"
    if not stop(session, "budget", budget):
        return  # the run-on ended otherwise meanwhile (the script's end, a write, a fit)
    state.expired = True
    backstop = threading.Timer(_END_GRACE_S, _end_if_blocked, args=(session,))
    backstop.daemon = True
    backstop.start()
    try:
        if session.stop_signal is not None:  # also where the main thread blocks in a syscall
            signal.pthread_kill(main, session.stop_signal)
        else:
            exc = ctypes.py_object(StopScript)
            ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(main), exc)
    except Exception:  # the backstop still ends the check
        pass


def _end_if_blocked(session: CaptureSession) -> None:
    """The main thread did not stop within :data:`_END_GRACE_S` of the budget's end: the check
    ends from here (its facts complete: the window and the run-on are over)."""
    if session.end_now is not None and not session.script_over:
        session.end_now(
            f"the script did not stop within {_END_GRACE_S:g} s of its run-on's end (a call "
            "that does not return to Python, or code that caught the stop): the check ended "
            "it there"
        )


def running(session: CaptureSession) -> bool:
    state = getattr(session, "after_window", None)
    return state is not None and state.running


def stop(session: CaptureSession, ended: str, detail: str | None = None) -> bool:
    """Ends the run-on's measurement and saves ``facts.outside_window`` (idempotent). Returns
    whether this call ended it (False: no run-on, or it had ended already)."""
    state = getattr(session, "after_window", None)
    if state is None or not state.running:
        return False
    with state.lock:
        if not state.running:
            return False
        state.running = False
        if state.timer is not None and state.timer is not threading.current_thread():
            state.timer.cancel()
        facts = state.facts
        facts.ended, facts.detail = ended, detail
        facts.seconds = round(time.perf_counter() - state.started - state.own_s, 4)
        facts.calls = [_call_stats(state, m) for m in _METHODS if state.durations.get(m)]
        inside = sum(c.total_s for c in facts.calls)
        facts.python_s = round(max(0.0, facts.seconds - inside), 4)
        _place_calls(session, facts.calls)
        if ended not in SEEN_TO_THE_END:
            facts.unreached_predict_lines = _unreached_predict(session, facts.calls)
    try:
        session.set_phase(Phase.DONE)  # saves the facts
    except Exception:  # a failed save (--out gone, a full disk) must not keep the stop from
        pass  # happening: the parent reads the facts saved before
    return True


def _unreached_predict(session: CaptureSession, calls: list[ModelCallStats]) -> list[int] | None:
    """The lines of the ``.predict(`` calls in the ``fit`` call's file, after its line, that the
    run-on did not reach (it records the line of each method's first call); None where that
    file cannot be read or parsed. RD406 passes a run-on that stopped early (at a write, at its
    budget) only where this is empty: a new user's ``model.save(...)`` right after ``fit``
    stopped it before the ``predict`` loop that follows, and RD406 had "passed". A ``predict``
    in a function defined above the ``fit`` line is not counted."""
    fit = session.facts.fit.location if session.facts.fit else None
    if fit is None or not fit.file:
        return None
    path = os.path.abspath(fit.file)
    lines = linecache.getlines(path)
    tree = sites._parse("".join(lines)) if lines else None
    if tree is None:
        return None
    seen = {
        c.location.line for c in calls
        if c.location is not None and os.path.abspath(c.location.file) == path
    }  # fmt: skip
    sites_after = {
        node.lineno for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
        and node.func.attr == "predict" and node.lineno > fit.line
    }  # fmt: skip
    return sorted(sites_after - seen)


def stop_before_write(session: CaptureSession, what: str) -> None:
    """Called by the neutralisation before a write of the user's code (a file, a save, a
    child command): once a run-on has begun, the script stops there, before the write (also
    while it unwinds after the run-on's end: a ``finally`` clause that writes)."""
    state = getattr(session, "after_window", None)
    if state is None:
        return
    if state.running:
        stop(session, "a write", f"the script was about to write ({what})"[:300])
    session.end_script()


def _call_stats(state: AfterWindowState, method: str) -> ModelCallStats:
    durations = state.durations[method]
    return ModelCallStats(
        method=method,
        calls=len(durations),
        total_s=round(sum(durations), 4),
        median_ms=round(statistics.median(durations) * 1000.0, 3),
        single_sample_calls=state.single.get(method, 0),
        batch_sizes=sorted(state.sizes.get(method, set()))[:_MAX_SIZES],
        location=state.locations.get(method),
    )


def _place_calls(session: CaptureSession, calls: list[ModelCallStats]) -> None:
    """Each call's loops (those not holding ``fit``) and its calls per ``fit`` call: per
    iteration of the fit loop for a call inside that loop's body; after a single ``fit``, the
    calls its loops make in all (the line runs after the one fit only)."""
    fit = session.facts.fit
    fit_loops = fit.fit_in_loop.loops if fit is not None and fit.fit_in_loop else []
    fit_lines = {loop.line for loop in fit_loops}
    for call in calls:
        if call.location is None:
            continue
        loops = enclosing_loops(call.location.file, call.location.line)
        call.loops = [loop for loop in loops if loop.line not in fit_lines]
        in_fit_loop = bool(fit_lines) and fit_loops[-1].line in {loop.line for loop in loops}
        if in_fit_loop or not fit_lines:
            call.calls_per_iteration = _product(call.loops)


# -- the model-call hooks --------------------------------------------------------------------
def _install_hooks(session: CaptureSession) -> None:
    """Wraps the model-call methods of ``keras.Model`` (and ``tf_keras.Model`` once imported)
    once per process; they count only while a run-on is active
    (``session.after_window.running``)."""
    for module in flavour.keras_modules(import_tf_keras=False):
        model_cls = module.Model
        holder = model_cls.__dict__.get(_HOOKS_ATTR)
        if holder is not None:
            holder["session"] = session
            continue
        holder = {"session": session}
        setattr(model_cls, _HOOKS_ATTR, holder)
        for method in _METHODS:
            setattr(model_cls, method, _wrap(holder, getattr(model_cls, method), method))


def _wrap(holder: dict[str, Any], original: Any, method: str) -> Any:
    @functools.wraps(original)
    def call(self, *args, **kwargs):
        session = holder["session"]
        state = getattr(session, "after_window", None)
        if state is None or not state.running or state.depth or state.own:
            return original(self, *args, **kwargs)
        state.depth += 1
        began = time.perf_counter()
        try:
            return original(self, *args, **kwargs)
        finally:
            elapsed = time.perf_counter() - began
            state.depth -= 1
            _count(state, method, elapsed, args, kwargs)
            if method == "predict" and state.single.get("predict") == 2 and not state.timed:
                _time_alternatives(session, state, self, args, kwargs)

    return call


def _rows(args: tuple, kwargs: dict[str, Any]) -> int | None:
    x = args[0] if args else kwargs.get("x", kwargs.get("inputs"))
    try:
        import keras

        leaves = keras.tree.flatten(x)
    except Exception:
        return None
    shape = getattr(leaves[0], "shape", None) if leaves else None
    try:
        return int(shape[0]) if shape is not None and len(shape) and shape[0] is not None else None
    except (TypeError, ValueError):
        return None


def _count(
    state: AfterWindowState, method: str, elapsed: float, args: tuple, kwargs: dict[str, Any]
) -> None:
    with state.lock:
        if not state.running:
            return
        state.durations.setdefault(method, []).append(elapsed)
        rows = _rows(args, kwargs)
        if rows is not None:
            state.sizes.setdefault(method, set()).add(rows)
            if rows == 1:
                state.single[method] = state.single.get(method, 0) + 1
        if method not in state.locations:
            names = (method,) if method != "__call__" else ()
            state.locations[method] = sites.user_frame_location(skip=1, call_names=names)


def _time_alternatives(
    session: CaptureSession, state: AfterWindowState, model: Any, args: tuple, kwargs: dict
) -> None:
    """Times the ways to run the model on the same single sample against each other, paired
    (:func:`_paired_calls`), with the run-on's budget timer paused meanwhile (its time is
    rnndoctor's own, not the script's: ``own_s``)."""
    state.timed = True
    if any(getattr(layer, "stateful", False) for layer in _layers(model)):
        state.facts.detail = "per-call costs not measured: a stateful layer's states would change"
        return
    x = args[0] if args else kwargs.get("x")
    ways = {
        "predict": lambda: model.predict(x, verbose=0),
        "model(x, training=False)": lambda: model(x, training=False),
        "predict_on_batch": lambda: model.predict_on_batch(x),
    }
    began = time.perf_counter()
    state.own = True
    if state.timer is not None:
        state.timer.cancel()
    allowance = min(_TIMING_S, max(0.0, session.budgets.overall_left()))
    deadline = time.monotonic() + allowance
    try:
        medians, ratios = _paired_calls(ways, lambda: deadline - time.monotonic())
        state.facts.per_call_ms, state.facts.per_call_paired = medians, ratios
    except Exception as exc:  # never break the user's script over a measurement
        state.facts.detail = f"per-call costs not measured: {type(exc).__name__}"
    finally:
        state.own = False
        state.own_s += time.perf_counter() - began
        _restart_timer(session, state)
    if state.expired:  # the budget ran out as the timing began: the stop signal waited for it
        session.end_script()


def _paired_calls(ways: dict[str, Any], left: Any) -> tuple[dict[str, float], list[PairedRatio]]:
    """Interleaved bursts of each way (``rnndoctor.capture.pairs.alternate``): each way first
    runs twice untimed (building, tracing; the second call sizes its bursts to about
    ``_BURST_S``), then rounds of one burst per way until each has 10 calls and 1 s, or the
    allowance ``left()`` ends. Returns each way's median ms per call, and the paired ratio of
    the first way (``predict``) over each other."""
    arms = []
    for name, run in ways.items():
        run()
        t0 = time.perf_counter()
        run()
        calls = max(1, min(_MAX_BURST_CALLS, round(_BURST_S / max(time.perf_counter() - t0, 1e-6))))
        arms.append(pairs.ArmRecord(name, _burst(run, calls)))
    cut_short = pairs.alternate(arms, left)
    medians = {a.name: round(statistics.median(a.per_step_ms), 3) for a in arms if a.per_step_ms}
    ratios = [pairs.pair(arms[0], b, phase=Phase.AFTER_WINDOW.value, cut_short=cut_short)
              for b in arms[1:]]  # fmt: skip
    return medians, [r for r in ratios if r is not None]


def _burst(run: Any, calls: int) -> Any:
    def burst() -> list[tuple[float, int]]:
        t0 = time.perf_counter()
        for _ in range(calls):
            run()
        return [((time.perf_counter() - t0) * 1000.0 / calls, calls)]

    return burst


def _restart_timer(session: CaptureSession, state: AfterWindowState) -> None:
    """Starts the budget timer again for what is left of the run-on's budget (script time)."""
    if not state.running or state.budget is None:
        return
    used = time.perf_counter() - state.started - state.own_s
    remaining = max(0.0, min(state.budget.seconds - used, session.budgets.overall_left()))
    main = threading.main_thread().ident
    timer = threading.Timer(remaining, _expire, args=(session, state, main))
    timer.daemon = True
    timer.start()
    state.timer = timer


def _layers(model: Any) -> list[Any]:
    try:
        return list(model._flatten_layers(include_self=False))
    except Exception:
        return list(getattr(model, "layers", []))
