"""``rnndoctor.diagnose(..., verify=True)``: the fixes that change the model or the data object,
measured A/B in this process.

What it applies (each to a copy; the user's model and arrays are not changed, though the
original model trains a few more steps, as ``diagnose`` itself does):

- RD101: the model cloned (``keras.models.clone_model``) with each LSTM/GRU's
  ``recurrent_dropout`` moved to ``dropout`` (the larger of the two), the same weights, compiled
  from the original's compile config (``Model.get_compile_config``);
- RD110: the input array (and per-step targets of the same shape) re-padded at the end, each
  row's valid steps kept in order (``x`` of token ids under ``Embedding(mask_zero=True)``);
- RD301: ``fit``'s ``batch_size`` set to the size the finding quotes (arrays only);
- RD501: arrays of token ids bucketed by length with the finding's boundaries
  (``tf.data.Dataset.bucket_by_sequence_length``, each sequence unpadded first).

What it cannot: a fix of the source (a ``tf.data`` pipeline's ops, ``compile`` arguments, a
custom loop) has no object to change here, and its entry says so; use ``rnndoctor check
--verify``. Windows alternate A B A B in this one process (no process start between them), so
a process-wide effect (memory, threads) is shared by both arms, and the original model's
weights keep training between its windows while the copy starts from the same weights.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from rnndoctor.capture.control import SampleCounter
from rnndoctor.capture.objects import without_recurrent_dropout
from rnndoctor.capture.step_window import WindowOptions
from rnndoctor.findings import Finding
from rnndoctor.paired import ARM_WINDOW_S
from rnndoctor.verify.result import Verified, measure
from rnndoctor.verify.run import MAX_PAIRS, Candidate, Run

IN_PROCESS = ("RD101", "RD110", "RD301", "RD501")
WINDOW_STEPS = 5  # measured steps per window (as rnndoctor.cli.arms.WINDOW_STEPS)


@dataclass
class Arm:
    """What one side of the A/B trains: the model, ``fit``'s ``x`` and keyword arguments."""

    model: Any
    x: Any
    kwargs: dict[str, Any]


def verify_in_process(
    findings: Sequence[Finding],
    original: Arm,
    fit: Callable[..., Any],
    on_cpu: bool,
    pairs: int = MAX_PAIRS,
) -> list[Verified]:
    """One entry per finding with a fix: measured A/B when an object-level fix applies, else
    ``not verifiable`` with the reason.

    Args:
        findings: the diagnosis' findings.
        original: the user's model, data and ``fit`` arguments.
        fit: ``Model.fit`` as Keras defines it (not rnndoctor's hook).
        on_cpu: the process sees no GPU (the cuDNN label applies).
        pairs: A/B pairs per fix (windows of ``WINDOW_STEPS`` steps each).
    """
    items = []
    for finding in findings:
        if finding.fix is None:
            continue
        item = Verified(fix=finding.rule_id, rules=[finding.rule_id], title=finding.fix.title,
                        safety=str(finding.fix.safety), estimate=finding.speedup,
                        estimate_text=finding.gain)  # fmt: skip
        items.append(item)
        try:
            patched = apply_fix(finding, original)
        except ValueError as exc:
            item.reason = str(exc)
            continue
        candidate = Candidate(finding.rule_id, Path("<in process>"))
        try:
            for pair in range(pairs):
                candidate.runs.append(_window(original, fit, "A", pair))
                candidate.runs.append(_window(patched, fit, "B", pair))
                if candidate.runs[-1].samples_per_s is None:
                    break
        except Exception as exc:  # the patched model or data does not train: the fix failed
            candidate.runs.append(Run("B", len(candidate.arm("B")), "<in process>", 0.0,
                                      error=f"{type(exc).__name__}: {exc}"[:300]))  # fmt: skip
        measure(item, candidate, on_cpu)
    return items


def apply_fix(finding: Finding, arm: Arm) -> Arm:
    """The arm with ``finding``'s fix applied to copies of its objects.

    Raises:
        ValueError: no object-level fix for this rule or this data (the message says why).
    """
    import numpy as np

    rule = finding.rule_id
    if rule not in IN_PROCESS:
        raise ValueError(
            f"not an object change rnndoctor applies in process ({rule}'s fix is to the source): "
            "run rnndoctor check --verify"
        )
    if rule == "RD101":
        return replace(arm, model=without_recurrent_dropout(arm.model))
    if not isinstance(arm.x, np.ndarray) or arm.x.ndim != 2:
        raise ValueError(f"{rule} in process needs fit's x as a 2-D array of token ids")
    if rule == "RD301":
        size = _quoted_batch_size(finding)
        return replace(arm, kwargs={**arm.kwargs, "batch_size": size})
    if rule == "RD110":
        y = arm.kwargs.get("y")
        per_step = isinstance(y, np.ndarray) and y.shape == arm.x.shape
        kwargs = {**arm.kwargs, "y": _post_padded(y, arm.x)} if per_step else dict(arm.kwargs)
        return replace(arm, x=_post_padded(arm.x, arm.x), kwargs=kwargs)
    return _bucketed(finding, arm)


def _window(arm: Arm, fit: Callable[..., Any], name: str, pair: int) -> Run:
    """One window of ``arm``'s ``fit``: one warm-up step, ``WINDOW_STEPS`` measured ones and
    on until they time ``ARM_WINDOW_S``, while its data lasts."""
    from rnndoctor.capture.window import WindowDone, make_window

    options = WindowOptions(warmup_steps=1, measured_steps=WINDOW_STEPS, profile_steps=0,
                            min_measured_s=ARM_WINDOW_S, window_only=True, probe_fast_path=False,
                            run_probes=False)  # fmt: skip
    window = make_window(arm.model, options)
    kwargs = dict(arm.kwargs)
    x = arm.x
    window.batch_size = kwargs.get("batch_size") or (None if _is_dataset(x) else 32)
    if window.batch_size is None:
        window.counter = SampleCounter(x)
        x = window.counter.dataset
    kwargs.pop("validation_split", None)  # no validation pass inside a window
    kwargs.pop("validation_data", None)
    kwargs["callbacks"] = [*(kwargs.get("callbacks") or []), window]
    kwargs.setdefault("verbose", 0)
    kwargs["epochs"] = max(2, int(kwargs.get("epochs") or 1))
    try:
        fit(arm.model, x, **kwargs)
    except WindowDone:
        pass
    times = window.step_times(window.batch_size)
    return Run(name, pair, "<in process>", round(sum(times.step_time_ms) / 1000.0, 3),
               samples_per_s=_rate(window, times.step_time_ms),
               final_loss=times.final_loss, loss_step=times.final_loss_step)  # fmt: skip


def _rate(window: Any, step_ms: list[float]) -> float | None:
    """Samples over the measured steps' time (samples/s)."""
    seconds = sum(step_ms) / 1000.0
    samples = window._samples
    return round(samples / seconds, 3) if samples and seconds > 0 else None


def _is_dataset(x: Any) -> bool:
    from rnndoctor.capture.data import data_kind

    return data_kind(x) == "tf.data"


def _quoted_batch_size(finding: Finding) -> int:
    """The batch size RD301's fix sets (its ``batch_size=N`` or ``= N``)."""
    import re

    match = re.search(
        r"batch_size\s*=\s*(\d+)|=\s*(\d+)\s*$", finding.fix.code if finding.fix else ""
    )
    if match is None:
        raise ValueError("the fix quotes no batch size to set")
    return int(match.group(1) or match.group(2))


def _post_padded(array: Any, x: Any) -> Any:
    """``array`` with each row's steps where ``x`` is not 0 moved to the row's start."""
    import numpy as np

    out = np.zeros_like(array)
    for i, (row, ids) in enumerate(zip(array, x, strict=True)):
        kept = row[ids != 0]
        out[i, : len(kept)] = kept
    return out


def _bucketed(finding: Finding, arm: Arm) -> Arm:
    """RD501: the arrays as a bucketed, shuffled ``tf.data`` pipeline (id 0 is padding)."""
    import numpy as np

    from rnndoctor.capture.objects import bucketed_dataset

    plan = finding.bucket_plan
    if plan is None or not plan.boundaries:
        raise ValueError("the finding gives no bucket boundaries")
    y = arm.kwargs.get("y")
    if not isinstance(y, np.ndarray) or y.shape != arm.x.shape:
        raise ValueError("RD501 in process needs per-step targets shaped like x")
    size = int(arm.kwargs.get("batch_size") or 32)
    dataset = bucketed_dataset(arm.x, y, list(plan.boundaries), size)
    kwargs = {k: v for k, v in arm.kwargs.items() if k not in ("y", "batch_size", "shuffle")}
    return replace(arm, x=dataset, kwargs=kwargs)
