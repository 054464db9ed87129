"""The verified fixes (``check --verify``) as every output shows them: the view of a
:class:`rnndoctor.verify.summary.VerifySummary`, and the terminal's table (``verify.md`` is
:func:`rnndoctor.reports.markdown.render_verify_markdown`).

:func:`build_verify_view` computes once what the HTML report, the Markdown reports
(``report.md`` and ``verify.md``), SARIF and the terminal show of each fix: its name, the status
with its error line or reason, the estimate beside the measurement with its interval (and the
gauge that draws them), the loss line, the CPU label and whether the patch holds it. Failed,
slower and unsafe fixes come first (``bad``: the outputs show them in red). Nothing here
measures: every figure is the verification's.
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass

from rnndoctor.reports import charts
from rnndoctor.verify.result import OVER_BUDGET, TOO_FEW_PAIRS, Status, Verified, sort_key
from rnndoctor.verify.summary import ALL, VerifySummary

NOT_MEASURED = "not measured"
NO_ESTIMATE = "none"  # the finding gave no speedup (an inconclusive one gives none)


def measured_cell(item: Verified) -> str:
    """The measurement: ``1.62x (90% interval 1.20–1.90x)``, with the CPU label when it
    applies; ``not measured`` when there is none."""
    return item.measured_text or NOT_MEASURED


def estimate_cell(item: Verified) -> str:
    """The finding's estimated speedup: ``2.50x``, or ``none``, ``none (inconclusive)`` where
    the finding's figure was inconclusive (it gives no speedup: a new user read "none" beside
    RD301's "inconclusive: 2.6x (90% interval 1.5–4.7x)"); for a copy of several fixes
    (merged, or all), its parts' own estimates, not combined
    (``rnndoctor.verify.session.parts_estimate``), where any part gave one."""
    if item.estimate:
        return f"{item.estimate:.2f}x"
    if len(item.rules) > 1 and item.estimate_text:
        return item.estimate_text
    if item.estimate_text and "inconclusive" in item.estimate_text:
        return f"{NO_ESTIMATE} (inconclusive)"
    return NO_ESTIMATE


def status_cell(item: Verified) -> str:
    """The status with its error line (failed) or reason: ``failed: ValueError: boom at
    train.py:12``."""
    detail = item.error if item.status == Status.FAILED else item.reason
    return f"{item.status}: {detail}" if detail else str(item.status)


def fix_name(item: Verified) -> str:
    """``RD101``, or ``all (RD101, RD301)`` for the all-fixes copy."""
    return f"{ALL} ({', '.join(item.rules)})" if item.fix == ALL else item.fix


@dataclass(frozen=True)
class VerifiedRow:
    """One verified fix as the outputs show it.

    Attributes:
        item: the verification's entry.
        name: :func:`fix_name`.
        status: the status's value (``confirmed``, ``failed`` ...), for CSS classes and SARIF.
        status_text: :func:`status_cell`.
        bad: failed, slower or unsafe: shown first, in red.
        estimate_text: :func:`estimate_cell`.
        measured_text: :func:`measured_cell`.
        gauge: the estimate and the measurement on the shared scale
            (:func:`rnndoctor.reports.charts.speedup_gauge`).
    """

    item: Verified
    name: str
    status: str
    status_text: str
    bad: bool
    estimate_text: str
    measured_text: str
    gauge: dict


@dataclass(frozen=True)
class VerifyView:
    """The verification, computed once for every output.

    Attributes:
        rows: the fixes, failed, slower and unsafe first (:func:`rnndoctor.verify.result.sort_key`).
        bad: how many rows are failed, slower or unsafe.
        patched: ``fixes.patch`` holds a confirmed fix.
        patch_href: the patch relative to the report folder (``fixes.patch``), for a link.
        apply_line: ``cd ROOT && git apply OUT/fixes.patch`` (None: nothing to apply).
        measured_on: ``cpu`` or ``gpu``.
        spent_s: what the A/B runs took (seconds).
        notes: the verification's notes.
        empty_patch: why ``fixes.patch`` is empty, a sentence (None: it holds a fix).
        unsafe_in_patch: the sentence naming the patch's unsafe fixes, which change what the
            model learns (None: it holds none); the apply line is never shown without it.
    """

    rows: tuple[VerifiedRow, ...]
    bad: int
    patched: bool
    patch_href: str | None
    apply_line: str | None
    measured_on: str
    spent_s: float
    notes: tuple[str, ...]
    empty_patch: str | None = None
    unsafe_in_patch: str | None = None

    def row_for(self, fix_id: str) -> VerifiedRow | None:
        """The row of fix ``fix_id`` (``RD101``, ``RD101-2``), or None."""
        return next((r for r in self.rows if r.item.fix == fix_id), None)


def build_verify_view(summary: VerifySummary) -> VerifyView:
    """The view of ``summary`` (one gauge scale for all its fixes, so their bars compare)."""
    items = sorted(summary.items, key=sort_key)
    values = [v for i in items for v in (i.estimate, i.measured, i.low, i.high) if v]
    scale = charts.speedup_scale(values)
    rows = tuple(
        VerifiedRow(
            item=i, name=fix_name(i), status=str(i.status), status_text=status_cell(i),
            bad=i.status.bad, estimate_text=estimate_cell(i), measured_text=measured_cell(i),
            gauge=charts.speedup_gauge(scale, i.estimate, i.measured, i.low, i.high),
        )
        for i in items
    )  # fmt: skip
    patch = summary.patch_path if summary.patched else None
    return VerifyView(
        rows=rows,
        bad=sum(r.bad for r in rows),
        patched=patch is not None,
        patch_href=os.path.basename(patch) if patch else None,
        apply_line=(
            f"cd {shlex.quote(summary.root)} && git apply {shlex.quote(patch)}" if patch else None
        ),  # quoted for a shell: a folder with a space pastes as it is
        measured_on=summary.measured_on,
        spent_s=summary.spent_s,
        notes=tuple(summary.notes),
        empty_patch=None if patch else empty_patch(items),
        unsafe_in_patch=unsafe_in_patch(items) if patch else None,
    )


def unsafe_in_patch(items: list[Verified]) -> str | None:
    """The sentence naming the fixes in ``fixes.patch`` whose safety is ``unsafe`` (they can
    change what the job computes: a larger batch without its learning rate, dropout removed,
    random draws in another order (RD203), a dataset pickled to worker processes (RD206)), or
    None; each rule's doc says how under "Fix safety" (a new user's trial read "change what the
    model learns" for RD203's parallel map).
    A new user's trial: "apply the confirmed fixes: ... git apply" put RD101 and RD301 in the
    training job with no word that either changes the model's training."""
    unsafe = [i.fix for i in items if i.in_patch and i.safety == "unsafe" and i.fix != ALL
              and "+" not in i.fix]  # fmt: skip
    if not unsafe:
        return None
    return (
        f"fixes.patch holds unsafe fixes, which can change what the job computes (the model, "
        f"its training, the order of random draws, how the data is loaded): "
        f"{', '.join(unsafe)}; read each one's fix and its rule's Fix safety before you apply it."
    )


def empty_patch(items: list[Verified]) -> str:
    """Why ``fixes.patch`` is empty. The patch holds a fix confirmed on its own copy, or one
    call's fixes confirmed merged (``rnndoctor/verify/session.py: _patch``), so:

    - nothing confirmed: "No fix confirmed";
    - only the all-fixes copy confirmed: its fixes together made the script faster, and none
      was confirmed alone (each within noise, not decided, slower or failed); more pairs
      (``--verify-budget``) can decide those within noise, short of pairs or over budget;
    - a fix or a merged group confirmed and still out of the patch (its file outside the
      repository root): the notes say why."""
    confirmed = [i for i in items if i.status == Status.CONFIRMED]
    if not confirmed:
        return "No fix confirmed: fixes.patch is empty."
    own = [fix_name(i) for i in confirmed if i.fix != ALL]
    if own:
        return (
            f"fixes.patch is empty: {', '.join(own)} confirmed but not in the patch (see the "
            "notes)."
        )
    undecided = [
        i.fix
        for i in items
        if i.fix != ALL
        and (
            i.status == Status.WITHIN_NOISE
            or (i.reason or "").startswith((TOO_FEW_PAIRS, OVER_BUDGET))
        )
    ]  # not verifiable for want of pairs or budget; a display-only fix never will be
    more = "; more pairs (--verify-budget) can decide " + ", ".join(undecided) if undecided else ""
    return (
        f"fixes.patch is empty: {fix_name(confirmed[0])} confirmed together, but no fix was "
        f"confirmed on its own copy, which the patch needs{more}."
    )


def terminal_lines(summary: VerifySummary) -> list[tuple[str, bool]]:
    """The terminal's table, one ``(line, bad)`` per fix (bad: failed, slower or unsafe, to show
    in red), then the notes and the ``git apply`` line."""
    view = build_verify_view(summary)
    lines: list[tuple[str, bool]] = [("verify: fix, status, estimate, measured", False)]
    for row in view.rows:
        lines.append(
            (f"  {row.name:<10} {row.status_text}; estimate {row.estimate_text}; measured "
             f"{row.measured_text}; loss {row.item.loss}", row.bad)
        )  # fmt: skip
    lines += [(f"  note: {n}", False) for n in view.notes]
    if view.apply_line:
        if view.unsafe_in_patch:
            lines.append((view.unsafe_in_patch, True))
        lines.append((f"apply the confirmed fixes: {view.apply_line}", False))
    else:
        lines.append((view.empty_patch or "", False))
    return lines
