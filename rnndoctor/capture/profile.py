"""Profile summary: converts the captured XSpace with xprof and keeps what the rules need.

xprof (``tensorboard-plugin-profile``) does the conversion: ``xspace_to_tool_data`` with the
``overview_page``, ``framework_op_stats`` and ``input_pipeline_analyzer`` tools, the same code
TensorBoard's Profile tab runs. Nothing here parses protobufs by hand.

The capture child converts in a converter process of its own (:func:`summarize_in_subprocess`,
running :func:`main`), so that xprof never loads into the process that then runs the probes.
This module imports no TensorFlow: the converter starts in a fraction of a second.
"""

from __future__ import annotations

import glob
import json
import os
import shlex
import signal
import subprocess
import sys
import tempfile
from collections import defaultdict
from typing import Any

from rnndoctor.facts import InputPipelineSummary, OpStat, ProfileSummary

_TOP_N = 10  # op rows kept in the facts
_TOP_INPUT_OPS = 5  # tf.data iterator rows kept from input_pipeline_analyzer
_CUDNN_RNN_PREFIX = "CudnnRNN"  # CudnnRNN, CudnnRNNV2, CudnnRNNV3 and their Backprop ops


def _tool_json(paths: list[str], tool: str) -> Any:
    from xprof.convert import raw_to_tool_data

    data, _ = raw_to_tool_data.xspace_to_tool_data(paths, tool, {})
    if data is None:
        raise RuntimeError(f"xprof returned no {tool} data")
    return json.loads(data.decode() if isinstance(data, bytes) else data)


def _rows(table: dict[str, Any]) -> list[dict[str, Any]]:
    ids = [c["id"] for c in table.get("cols", [])]
    return [
        dict(zip(ids, (cell.get("v") for cell in row["c"]), strict=False))
        for row in table.get("rows", [])
    ]


def summarize_profile(logdir: str, profiled_steps: int, gpu_count: int) -> ProfileSummary:
    """Summarises the newest profile run under ``logdir`` (``<logdir>/plugins/profile/<run>/``).

    Never raises: a conversion failure lands in ``ProfileSummary.error``.
    """
    summary = _unconverted(logdir, profiled_steps)
    runs = sorted(glob.glob(os.path.join(logdir, "plugins", "profile", "*")))
    paths = sorted(glob.glob(os.path.join(runs[-1], "*.xplane.pb"))) if runs else []
    summary.xspace_files = paths
    if not paths:
        summary.error = "the profiler wrote no .xplane.pb file"
        return summary
    try:
        _read_overview(summary, _tool_json(paths, "overview_page"))
        busy = _read_op_stats(summary, _tool_json(paths, "framework_op_stats"))
        try:
            summary.input_pipeline = summarize_input_pipeline(
                _tool_json(paths, "input_pipeline_analyzer")
            )
        except Exception as exc:  # the other tools' results stay
            why = f"xprof input_pipeline_analyzer failed: {type(exc).__name__}: {exc}"
            summary.input_pipeline = InputPipelineSummary(not_measured=why[:300])
        if gpu_count:
            summary.cudnn_rnn_ops = sorted(
                {r["type"] for r in busy if str(r["type"]).startswith(_CUDNN_RNN_PREFIX)}
            )
        else:
            summary.cudnn_not_measured = (
                "no GPU visible to TensorFlow: cuDNN kernels cannot run, so their presence in the "
                "profile was not measured"
            )
    except Exception as exc:
        summary.error = f"xprof conversion failed: {type(exc).__name__}: {exc}"[:500]
    return summary


def _unconverted(logdir: str, profiled_steps: int) -> ProfileSummary:
    """The summary's fields that need no conversion (the folder, TensorBoard's command)."""
    return ProfileSummary(
        logdir=os.path.abspath(logdir),
        profiled_steps=profiled_steps,
        tensorboard_command=f"tensorboard --logdir {shlex.quote(os.path.abspath(logdir))}",
    )


# The converter's start: the capture child's import path appended to the converter's own, so
# that a PYTHONPATH entry relative to where the check started (which the child's sys.path holds
# made absolute) still finds rnndoctor and xprof from the converter's temporary folder; appended,
# no entry shadows the standard library or site-packages. Then main().
_CONVERTER = (
    "import json, sys; "
    "sys.path.extend(p for p in json.loads(sys.argv.pop(1)) if p not in sys.path); "
    "from rnndoctor.capture.profile import main; sys.exit(main())"
)
# The start of a summary's error where the converter process could not be started at all (no
# interpreter at sys.executable, no process allowed): only then may a caller convert in its
# own process instead (rnndoctor.capture.conversion).
NOT_STARTED = "xprof conversion failed: the converter could not run"
_LOG_TAIL_BYTES = 4096  # of the converter's output, read for its last line after a failure


def summarize_in_subprocess(
    logdir: str, profiled_steps: int, gpu_count: int, timeout_s: float
) -> ProfileSummary:
    """:func:`summarize_profile` run by a converter process (a fresh interpreter, ``python
    -P``, running :func:`main`), for the capture child and for the user's own process
    (``rnndoctor.diagnose``, ``DoctorCallback``).

    Why a process of its own: xprof's native library and what a conversion leaves in the heap
    stay resident after it (34 MiB after ``gc.collect`` and ``malloc_trim`` in a TensorFlow
    process, the demo's profile), and the child's peak comes later, in the batch-size probe,
    so they added to the check's peak memory (README, "Benchmarks": overhead). A native crash
    of xprof ends the converter, not the capture (nor the user's own training, under
    ``DoctorCallback``), and xprof's native logging (dozens of ``I0000 ...`` lines for a
    profile) goes to the converter's log file, not the user's terminal. The converter's
    working directory is a temporary folder, which also holds its result and its output
    (nothing lands in the user's tree; xprof's cache goes beside the profile, under
    ``--out``); it runs in the child's process group, which ``--timeout`` ends as a whole.

    Args:
        logdir: the profile folder (``<out>/profile``).
        profiled_steps: steps the profiler captured.
        gpu_count: GPUs visible to TensorFlow (0: cuDNN ops not looked for).
        timeout_s: seconds the conversion may take (the phase's budget left).

    Returns:
        the summary; where the converter gave none (it could not start: ``error`` starts with
        :data:`NOT_STARTED`; it crashed, it exited without a readable result), ``error`` says
        why, with the last line it printed.

    Raises:
        subprocess.TimeoutExpired: the converter ran past ``timeout_s`` (it was killed).
    """
    logdir = os.path.abspath(logdir)
    try:
        with tempfile.TemporaryDirectory(prefix="rnndoctor-xprof-") as folder:
            return _convert(folder, logdir, profiled_steps, gpu_count, timeout_s)
    except subprocess.TimeoutExpired:
        raise
    except (OSError, subprocess.SubprocessError, TypeError, ValueError) as exc:
        why = f"{type(exc).__name__}: {exc}"
    summary = _unconverted(logdir, profiled_steps)
    summary.error = f"{NOT_STARTED}: {why}"[:500]
    return summary


def _convert(
    folder: str, logdir: str, profiled_steps: int, gpu_count: int, timeout_s: float
) -> ProfileSummary:
    """One run of the converter in ``folder`` (:func:`summarize_in_subprocess`'s arguments)."""
    result, output = os.path.join(folder, "profile.json"), os.path.join(folder, "converter.log")
    paths = [p for p in sys.path if p and os.path.isabs(p)]
    command = [sys.executable, "-P", "-c", _CONVERTER, json.dumps(paths), logdir,
               str(profiled_steps), str(gpu_count), result]  # fmt: skip
    with open(output, "wb") as log:  # a file, not a pipe: xprof's logging stays out of memory
        done = subprocess.run(
            command, cwd=folder, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            timeout=max(0.1, timeout_s), check=False,
        )  # fmt: skip
    try:
        with open(result, encoding="utf-8") as file:
            return ProfileSummary.from_dict(json.load(file))
    except FileNotFoundError:
        why = _ending(done.returncode)
    except (OSError, ValueError) as exc:
        why = f"wrote a summary that could not be read ({exc})"
    summary = _unconverted(logdir, profiled_steps)
    summary.error = f"xprof conversion failed: the converter {why}{_last_line(output)}"[:500]
    return summary


def _last_line(path: str) -> str:
    """``": <the last line>"`` of the file at ``path`` (its last few KiB read), or ``""``."""
    try:
        with open(path, "rb") as file:
            file.seek(max(0, os.path.getsize(path) - _LOG_TAIL_BYTES))
            lines = file.read().decode("utf-8", "replace").strip().splitlines()
    except OSError:
        return ""
    return f": {lines[-1].strip()}" if lines else ""


def _ending(status: int) -> str:
    """How a process ended, from its exit status (negative: the signal that ended it)."""
    if status < 0:
        try:
            return f"was ended by {signal.Signals(-status).name}"
        except ValueError:
            return f"was ended by signal {-status}"
    return f"exited with status {status} and no summary"


_USAGE = "usage: python -m rnndoctor.capture.profile LOGDIR STEPS GPUS RESULT"


def main(argv: list[str] | None = None) -> int:
    """The converter: ``python -m rnndoctor.capture.profile LOGDIR STEPS GPUS RESULT`` writes
    :func:`summarize_profile`'s summary of LOGDIR (STEPS profiled steps, GPUS visible GPUs) to
    the file RESULT as JSON, whole or not at all (written beside it, then renamed). Exit status
    0, also when the summary holds an error; 2, with a usage line, for malformed arguments."""
    args = sys.argv[1:] if argv is None else argv
    try:
        logdir, steps, gpus, result = args
        counts = int(steps), int(gpus)
    except ValueError:
        print(_USAGE, file=sys.stderr)
        return 2
    summary = summarize_profile(logdir, *counts)
    with open(result + ".tmp", "w", encoding="utf-8") as file:
        json.dump(summary.to_dict(), file)
    os.replace(result + ".tmp", result)
    return 0


def _read_overview(summary: ProfileSummary, overview: Any) -> None:
    """Hardware type and xprof's verdict from the ``overview_page`` tables."""
    for table in overview if isinstance(overview, list) else []:
        props = table.get("p", {}) if isinstance(table, dict) else {}
        if "hardware_type" in props:
            summary.hardware_type = props["hardware_type"]
        if "statement" in props and summary.xprof_verdict is None:
            summary.xprof_verdict = props["statement"]
    if summary.xprof_verdict is not None:
        summary.xprof_step_time_measured = "No step time measured" not in summary.xprof_verdict


def _read_op_stats(summary: ProfileSummary, op_tables: Any) -> list[dict[str, Any]]:
    """Host/device self time (us), the idle share and the top ops from ``framework_op_stats``.

    Returns:
        The rows other than IDLE.
    """
    # xprof gives two tables: with and without IDLE. Use the first for the idle share.
    all_rows = _rows(op_tables[0])
    idle = sum(r["total_self_time"] for r in all_rows if r["type"] == "IDLE")
    busy = [r for r in all_rows if r["type"] != "IDLE"]
    side_total: dict[str, float] = defaultdict(float)
    for r in busy:
        side_total[r["host_or_device"]] += r["total_self_time"]
    total_busy = sum(side_total.values())
    summary.host_self_time_us = round(side_total.get("Host", 0.0), 3)
    summary.device_self_time_us = round(side_total.get("Device", 0.0), 3)
    summary.idle_share = idle / (idle + total_busy) if idle + total_busy else None

    by_type: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0.0, 0])
    for r in busy:
        acc = by_type[(r["type"], r["host_or_device"])]
        acc[0] += r["total_self_time"]
        acc[1] += int(r["occurrences"] or 0)
    summary.top_op_types = [
        OpStat(
            op_type=t,
            host_or_device=side,
            self_time_us=round(us, 3),
            share=us / total_busy if total_busy else 0.0,
            occurrences=n,
        )
        for (t, side), (us, n) in sorted(by_type.items(), key=lambda kv: -kv[1][0])[:_TOP_N]
    ]
    summary.top_ops = [
        OpStat(
            op_type=r["type"],
            host_or_device=r["host_or_device"],
            self_time_us=round(r["total_self_time"], 3),
            share=r["total_self_time"] / total_busy if total_busy else 0.0,
            occurrences=int(r["occurrences"] or 0),
            name=r["operation"],
        )
        for r in sorted(busy, key=lambda r: -r["total_self_time"])[:_TOP_N]
    ]
    return busy


def summarize_input_pipeline(tables: Any) -> InputPipelineSummary:
    """Reads xprof's ``input_pipeline_analyzer`` JSON (a list of DataTables).

    The device-side table's properties give ``infeed_percent_average`` (the share of step time
    waiting for input) and ``input_conclusion``; where xprof measured no step time (CPU-only
    runs), ``not_measured`` keeps its conclusion verbatim. The host-side table (column
    ``opName``) lists the tf.data iterator ops with their self time: the slowest are kept.
    """
    result = InputPipelineSummary()
    device: dict[str, Any] | None = None
    host_rows: list[dict[str, Any]] = []
    for table in tables if isinstance(tables, list) else []:
        if not isinstance(table, dict):
            continue
        props = table.get("p", {}) or {}
        ids = [c.get("id") for c in table.get("cols", [])]
        if "input_conclusion" in props and device is None:
            device = props
        if "opName" in ids:
            host_rows = _rows(table)
    if device is not None:
        conclusion = device.get("input_conclusion") or None
        steps = _float(device.get("steptime_ms_average"))
        percent = _float(device.get("infeed_percent_average"))
        if steps and percent is not None:
            result.input_share = round(percent / 100.0, 4)
            result.verdict = conclusion
        else:
            result.not_measured = conclusion or "xprof measured no step time"
    else:
        result.not_measured = "xprof's input_pipeline_analyzer gave no step-time table"
    total = sum(_float(r.get("selfTimeInMs")) or 0.0 for r in host_rows)
    for r in sorted(host_rows, key=lambda r: -(_float(r.get("selfTimeInMs")) or 0.0))[
        :_TOP_INPUT_OPS
    ]:
        self_ms = _float(r.get("selfTimeInMs")) or 0.0
        result.slowest_ops.append(
            OpStat(
                op_type=str(r.get("category") or "tf.data"),
                host_or_device="Host",
                self_time_us=round(self_ms * 1000.0, 3),
                share=self_ms / total if total else 0.0,
                occurrences=int(_float(r.get("count")) or 0),
                name=str(r.get("opName")),
            )
        )
    return result


def _float(value: Any) -> float | None:
    try:
        return None if value in (None, "") else float(value)
    except (TypeError, ValueError):
        return None


def host_op_times(xplane_path: str, scratch: str | None = None) -> dict[str, tuple[float, int]]:
    """One host's ``framework_op_stats``: op type -> (self time in us, occurrences), IDLE left
    out. The file is converted alone, from a copy in a temporary folder (inside ``scratch``
    when given, so that a caller which stops waiting can remove it): xprof caches the op
    stats of all the hosts of a run folder (``ALL_HOSTS.op_stats_v2.pb``) and would answer
    for all of them.

    Raises:
        Exception: whatever xprof raises on the file.
    """
    import shutil
    import tempfile

    with tempfile.TemporaryDirectory(
        prefix="rnndoctor-host-", dir=scratch, ignore_cleanup_errors=True
    ) as folder:
        copy = os.path.join(folder, os.path.basename(xplane_path))
        shutil.copyfile(xplane_path, copy)
        rows = _rows(_tool_json([copy], "framework_op_stats")[0])
    totals: dict[str, tuple[float, int]] = {}
    for r in rows:
        if r["type"] == "IDLE":
            continue
        us, n = totals.get(r["type"], (0.0, 0))
        totals[r["type"]] = (us + float(r["total_self_time"]), n + int(r["occurrences"] or 0))
    return totals


if __name__ == "__main__":
    sys.exit(main())
