"""Geometry for the report's inline SVG charts.

Layout only: every value drawn is a measured value from the Facts or a Finding; these functions
place them on a canvas (pixel coordinates, rounded to 0.01 px) and compute no new measurement.
The charts are drawn by ``templates/report.html.j2`` without JavaScript; the shares the
breakdown bar draws come from :func:`rnndoctor.reports.shares.breakdown_shares`.
"""

from __future__ import annotations

import math
from typing import Any

import networkx as nx

from rnndoctor.facts import DataFacts, ProbePoint, SequenceInput
from rnndoctor.reports.shares import Breakdown

CHART_W = 600  # px, the width of every chart's viewBox
_STEPS_H = 120  # px, the step-time chart's height
_BAR_H = 26  # px, the breakdown bar's height
_CURVE_H = 160  # px, the batch-size curve's height
_HIST_H = 150  # px, the length histogram's height
_NODE_W, _NODE_H, _NODE_GAP_X, _NODE_GAP_Y = 180, 46, 24, 22  # px, data-graph boxes
_PAD = 28  # px, room for axis labels


def _r(value: float) -> float:
    return round(value, 2)


def step_chart(step_ms: list[float]) -> dict[str, Any] | None:
    """Bar geometry for the per-step times: one bar per measured step, scaled to the slowest.

    Returns ``{"w", "h", "bars": [{"x", "y", "w", "h", "ms", "i"}], "top_ms"}``; None without
    step times.
    """
    if not step_ms:
        return None
    top = max(step_ms) or 1.0
    width = CHART_W / len(step_ms)
    bars = [
        {
            "x": round(i * width, 2),
            "w": round(max(width - 1, 1), 2),
            "h": round(v / top * (_STEPS_H - 14), 2),
            "y": round(_STEPS_H - v / top * (_STEPS_H - 14), 2),
            "ms": v,
            "i": i + 1,
        }
        for i, v in enumerate(step_ms)
    ]
    return {"w": CHART_W, "h": _STEPS_H, "bars": bars, "top_ms": top}


def breakdown_bar(breakdown: Breakdown | None) -> dict[str, Any] | None:
    """A stacked bar of the median step: input, compute, host overhead (callbacks), other.

    Returns ``{"w", "h", "view_h", "parts": [{"key", "label", "ms", "share", "x", "w"}],
    "over_ms"}``;
    the parts are the breakdown's shown ones (more than 0 ms), each as wide as its share;
    ``over_ms`` is how much the probes' parts exceed the step, else 0. None when there is no
    breakdown or no positive step time.
    """
    if breakdown is None or breakdown.step_ms <= 0:
        return None
    x = 0.0
    out = []
    for part in breakdown.shown:
        width = (part.share or 0.0) * CHART_W
        out.append(
            {"key": part.key, "label": part.label, "ms": part.ms, "share": part.share,
             "x": _r(x), "w": _r(width)}
        )  # fmt: skip
        x += width
    return {"w": CHART_W, "h": _BAR_H, "view_h": _BAR_H + 4, "parts": out,
            "over_ms": breakdown.over_ms}  # fmt: skip


def probe_curve(points: list[ProbePoint], unit: str = "batch size") -> dict[str, Any] | None:
    """The batch-size probe as a line of measured samples/s over evenly spaced probe points.

    Returns ``{"w", "h", "points": [{"x", "y", "label_y", "value", "samples_per_s",
    "step_time_ms"}], "stopped": [ProbePoint], "top", "path", "base", "axis_x1", "axis_x2",
    "label_y"}``; None when no point has a throughput.
    """
    measured = [p for p in points if p.samples_per_s]
    if not measured:
        return None
    top = max(p.samples_per_s or 0.0 for p in measured)
    span = CHART_W - 2 * _PAD
    step = span / max(1, len(measured) - 1)
    out = []
    for i, p in enumerate(measured):
        x = _PAD + (i * step if len(measured) > 1 else span / 2)
        y = _CURVE_H - _PAD - (p.samples_per_s or 0.0) / top * (_CURVE_H - 2 * _PAD)
        out.append(
            {"x": _r(x), "y": _r(y), "label_y": _r(y) - 8, "value": p.value,
             "samples_per_s": p.samples_per_s, "step_time_ms": p.step_time_ms}
        )  # fmt: skip
    path = " ".join(f"{'M' if i == 0 else 'L'}{p['x']},{p['y']}" for i, p in enumerate(out))
    return {
        "w": CHART_W, "h": _CURVE_H, "points": out, "top": top, "path": path, "unit": unit,
        "stopped": [p for p in points if p.stopped], "base": _CURVE_H - _PAD,
        "axis_x1": out[0]["x"] - 10, "axis_x2": CHART_W - 10, "label_y": _CURVE_H - 8,
    }  # fmt: skip


def data_graph(data: DataFacts | None) -> dict[str, Any] | None:
    """The tf.data pipeline DAG, layered top to bottom in dataflow order (networkx topological
    generations), one box per node.

    Returns ``{"w", "h", "nodes": [{"x", "y", "text_x", "op_y", "kind_y", "node"}],
    "edges": [{"x1", "y1", "x2", "y2"}], "node_w", "node_h"}``;
    None when there is no graph.
    """
    if data is None or not data.nodes:
        return None
    graph = nx.DiGraph()
    for node in data.nodes:
        graph.add_node(node.name, node=node)
    graph.add_edges_from((e.src, e.dst) for e in data.edges if e.src in graph and e.dst in graph)
    try:
        layers = list(nx.topological_generations(graph))
    except nx.NetworkXUnfeasible:  # a cycle: not a tf.data graph, draw in the given order
        layers = [[n.name] for n in data.nodes]
    widest = max(len(layer) for layer in layers)
    width = max(CHART_W, widest * (_NODE_W + _NODE_GAP_X))
    pos: dict[str, tuple[float, float]] = {}
    boxes = []
    for row, layer in enumerate(layers):
        row_w = len(layer) * _NODE_W + (len(layer) - 1) * _NODE_GAP_X
        for col, name in enumerate(sorted(layer)):
            x = (width - row_w) / 2 + col * (_NODE_W + _NODE_GAP_X)
            y = 4 + row * (_NODE_H + _NODE_GAP_Y)
            pos[name] = (x, y)
            boxes.append(
                {"x": _r(x), "y": _r(y), "text_x": _r(x) + 8, "op_y": _r(y) + 18,
                 "kind_y": _r(y) + 35, "node": graph.nodes[name]["node"]}
            )  # fmt: skip
    edges = [
        {
            "x1": _r(pos[a][0] + _NODE_W / 2),
            "y1": _r(pos[a][1] + _NODE_H),
            "x2": _r(pos[b][0] + _NODE_W / 2),
            "y2": _r(pos[b][1]),
        }  # fmt: skip
        for a, b in graph.edges
    ]
    height = 8 + len(layers) * (_NODE_H + _NODE_GAP_Y)
    return {"w": _r(width), "h": height, "nodes": boxes, "edges": edges,
            "node_w": _NODE_W, "node_h": _NODE_H}  # fmt: skip


def _lengths_label(lo: float, hi: float) -> str:
    """What one histogram bin ``[lo, hi)`` holds, in whole timesteps: ``length 30`` for a bin
    of one length, ``lengths 30–33`` for [30, 34) (the capture's bins have integer edges and
    hold ``lo`` up to ``hi - 1``: ``rnndoctor.capture.sequences._histogram``). Edges that are
    not whole numbers are shown as they are."""
    if not (float(lo).is_integer() and float(hi).is_integer()):
        return f"lengths {lo:g}–{hi:g}"
    first, last = int(lo), int(hi) - 1
    return f"length {first}" if last <= first else f"lengths {first}–{last}"


def length_histogram(seq: SequenceInput, boundaries: list[int] | None = None) -> dict | None:
    """The valid-length histogram of one sequence input, with the batches' padded lengths and
    the suggested bucket boundaries (from the RD501 finding) marked.

    Returns ``{"w", "h", "bars", "padded": [{"x", "value"}], "bounds": [{"x", "value"}],
    "top", "x_max", "base", "x0", "x1", "label_y"}``; None without a histogram.
    """
    hist = seq.histogram
    if hist is None or not hist.counts or len(hist.edges) != len(hist.counts) + 1:
        return None
    lo = min(hist.edges[0], 0.0)
    x_max = max([hist.edges[-1], *seq.padded_lengths, *(boundaries or [])]) or 1.0
    span = CHART_W - 2 * _PAD

    def sx(v: float) -> float:
        return _r(_PAD + (v - lo) / (x_max - lo) * span)

    top = max(hist.counts) or 1
    base = _HIST_H - _PAD
    bars = []
    for i, count in enumerate(hist.counts):
        x1, x2 = sx(hist.edges[i]), sx(hist.edges[i + 1])
        h = count / top * (base - 8)
        bars.append(
            {"x": x1, "w": _r(max(x2 - x1 - 1, 1)), "y": _r(base - h), "h": _r(h), "count": count,
             "lo": hist.edges[i], "hi": hist.edges[i + 1],
             "label": _lengths_label(hist.edges[i], hist.edges[i + 1])}
        )  # fmt: skip
    padded = [{"x": sx(v), "value": v} for v in sorted(set(seq.padded_lengths))]
    bounds = [{"x": sx(v), "value": v} for v in sorted(set(boundaries or []))]
    return {"w": CHART_W, "h": _HIST_H, "bars": bars, "padded": padded, "bounds": bounds,
            "top": top, "x_max": x_max, "base": base, "x0": sx(lo), "x1": sx(x_max),
            "label_y": _HIST_H - 6}  # fmt: skip


_GAUGE_W, _GAUGE_H = 260, 34  # px, a verified fix's estimate-vs-measured gauge
_GAUGE_FLOOR, _GAUGE_CEIL = 0.5, 2.0  # the gauge's scale spans at least 0.5x-2x (log)


def speedup_scale(values: list[float]) -> tuple[float, float]:
    """The shared log scale of the verified fixes' gauges: ``(lowest, highest)`` speedup drawn,
    covering 1x, every value given (estimates, intervals) and at least 0.5x-2x."""
    positive = [v for v in values if v > 0]
    return min([_GAUGE_FLOOR, *positive]) / 1.1, max([_GAUGE_CEIL, *positive]) * 1.1


def speedup_gauge(
    scale: tuple[float, float],
    estimate: float | None,
    measured: float | None,
    low: float | None,
    high: float | None,
) -> dict[str, Any]:
    """One verified fix on the shared log ``scale`` (:func:`speedup_scale`): the 1x line, the
    estimate's mark, the measured speedup's dot and its 90% interval as a bar.

    Returns ``{"w", "h", "one_x", "est_x", "meas_x", "low_x", "high_x", "ticks": [{"x",
    "label"}]}``, an ``*_x`` None where that value is missing.
    """
    lo, hi = (math.log(v) for v in scale)

    def x(value: float | None) -> float | None:
        if value is None or value <= 0:
            return None
        return _r(4 + (math.log(value) - lo) / (hi - lo) * (_GAUGE_W - 8))

    ticks = [{"x": x(t), "label": f"{t:g}x"} for t in (0.5, 1.0, 2.0, 4.0, 8.0)
             if scale[0] <= t <= scale[1]]  # fmt: skip
    return {"w": _GAUGE_W, "h": _GAUGE_H, "one_x": x(1.0), "est_x": x(estimate),
            "meas_x": x(measured), "low_x": x(low), "high_x": x(high), "ticks": ticks}  # fmt: skip
