"""The report's probe, data-pipeline, sequence and run sections, rendered from facts (no TF).

The numbers here are fixture values that exercise the renderer; the capture's real measurements
are tested in tests/integration and tests/e2e.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from rnndoctor.engine import evaluate
from rnndoctor.facts import (
    CutShort,
    DataFacts,
    DataNode,
    Facts,
    GraphEdge,
    LengthHistogram,
    Neutralised,
    ProbeFacts,
    ProbePoint,
    SequenceFacts,
    SequenceInput,
    SourceLocation,
    StepBreakdown,
    TraceCount,
)
from rnndoctor.reports import RENDERERS, charts

FIXTURE = Path(__file__).parents[1] / "data" / "rules" / "RD101-offending.json"
HOSTILE = "<script>alert(1)</script>"


def _facts() -> Facts:
    facts = Facts.from_dict(json.loads(FIXTURE.read_text())["facts"])
    site = SourceLocation(file=facts.run.script, line=12, code=f"ds = ds.map({HOSTILE})")
    facts.probes = ProbeFacts(
        input_only_ms=30.0,
        input_only_batches=8,
        input_only_method="fresh iterator",
        compute_only_ms=20.0,
        compute_only_batches=8,
        callback_ms=5.0,
        input_bound_share=0.5,
        input_share_check=0.6,
        breakdown=StepBreakdown(step_ms=50.0, input_ms=25.0, compute_ms=20.0, host_ms=5.0),
        batch_probe=[
            ProbePoint(4, 10.0, 400.0, 8),
            ProbePoint(8, 11.0, 727.0, 8),
            ProbePoint(16, None, None, 0, stopped=f"out of memory {HOSTILE}"),
        ],
        traces=[TraceCount(HOSTILE, traces=7, calls=9, role="custom_step", shapes=["(4, 9)"])],
    )
    facts.data = DataFacts(
        kind="tf.data",
        nodes=[
            DataNode("TensorSliceDataset/_1", "TensorSliceDataset", "source",
                     source_kind="tensor_slices"),
            DataNode(HOSTILE, "MapDataset", "map", python=True, location=site),
            DataNode("PrefetchDataset/_3", "PrefetchDataset", "prefetch", num_parallel_calls=-1),
        ],
        edges=[GraphEdge("TensorSliceDataset/_1", HOSTILE, "feeds"),
               GraphEdge(HOSTILE, "PrefetchDataset/_3", "feeds")],
        source_kinds=["tensor_slices"], sequential_maps=1, prefetch_last=True,
    )  # fmt: skip
    facts.sequences = SequenceFacts(
        batches_sampled=2,
        method="fresh iterator",
        inputs=[
            SequenceInput(
                input=HOSTILE, rnn_layers=["seq/lstm"], length_source="mask_zero",
                sequences=8, batches=2, lengths=[1, 2, 3, 9], padded_lengths=[9, 9],
                padded_fraction=0.6, pad_side="left", left_padded_rows=8,
                histogram=LengthHistogram(edges=[0, 3, 6, 9], counts=[3, 0, 1]),
            )
        ],
    )  # fmt: skip
    facts.run.neutralised = [Neutralised("ModelCheckpoint", f"/tmp/{HOSTILE}.keras", site)]
    facts.run.cut_short = [CutShort("batch-size probe", f"stopped {HOSTILE}", 6.0)]
    return facts


def test_sections_render_every_measured_value_and_escape_user_text():
    html = RENDERERS["html"](evaluate(_facts()))
    assert HOSTILE not in html
    for section in ("breakdown", "data", "sequences", "run"):
        assert f'<section id="{section}">' in html
    # the breakdown bar: one segment per part, widths proportional to the measured ms
    segs = re.findall(r'<rect class="seg (\w+)" x="([\d.]+)" y="2" width="([\d.]+)"', html)
    assert [s[0] for s in segs] == ["input", "compute", "host"]
    assert [float(s[2]) for s in segs] == [300.0, 240.0, 60.0]
    assert "cross-check: input-only / step = 60.0 %" in html
    # the batch-size curve has the two measured points; the stopped one is in the table
    assert html.count('<circle class="pt"') == 2
    assert "out of memory &lt;script&gt;" in html
    # the data graph: three boxes, two edges, the Python map flagged
    assert html.count('<rect class="node') == 3 and html.count('<line class="edge"') == 2
    assert 'class="node map python"' in html
    # the histogram: three bins, one padded-length marker at 9
    assert html.count('<line class="padded"') == 1
    assert "ModelCheckpoint" in html and "batch-size probe" in html


def test_data_graph_layers_follow_the_dataflow():
    graph = charts.data_graph(_facts().data)
    ys = [b["y"] for b in graph["nodes"]]
    assert ys == sorted(ys) and len(set(ys)) == 3  # a chain: one row per node, in order


def test_histogram_marks_rd501_boundaries_from_the_finding_only():
    seq = _facts().sequences.inputs[0]
    assert charts.length_histogram(seq, None)["bounds"] == []
    marked = charts.length_histogram(seq, [3, 6])
    assert [b["value"] for b in marked["bounds"]] == [3, 6]
    assert marked["bounds"][0]["x"] < marked["bounds"][1]["x"]


def test_histogram_bars_name_the_whole_lengths_their_bins_hold():
    """A bin [30, 31) holds the one length 30 (the capture's bins: integer edges, the right one
    excluded), not "lengths 30–31"."""
    from rnndoctor.facts import LengthHistogram

    seq = _facts().sequences.inputs[0]
    seq.histogram = LengthHistogram(edges=[30.0, 31.0, 35.0], counts=[4, 2])
    labels = [b["label"] for b in charts.length_histogram(seq, None)["bars"]]
    assert labels == ["length 30", "lengths 31–34"]
    seq.histogram = LengthHistogram(edges=[0.5, 2.5], counts=[3])  # not whole: as they are
    assert charts.length_histogram(seq, None)["bars"][0]["label"] == "lengths 0.5–2.5"


def test_the_environment_says_which_keras_ran_the_model():
    facts = _facts()
    for flavour, shown in (("tf_keras 2.21.0", "tf_keras 2.21.0 (Keras 2)"),
                           ("keras 3.15.1", "keras 3.15.1 (Keras 3)")):  # fmt: skip
        facts.environment.keras_flavour = flavour
        report = evaluate(facts)
        html = RENDERERS["html"](report)
        assert f"<tr><th>Keras that ran the model</th><td>{shown}</td></tr>" in html
        shown_md = shown.replace("_", "\\_")  # Markdown-escaped
        assert f"| Keras that ran the model | {shown_md} |" in RENDERERS["md"](report)


def test_the_step_time_section_never_prints_none():
    """A new user's trial: a Sequence input gave "batch size None, None samples/s" in
    report.md."""
    facts = _facts()
    assert facts.steps is not None and facts.steps.median_step_time_ms is not None
    facts.steps.batch_size, facts.steps.samples_per_s = None, None
    md = RENDERERS["md"](evaluate(facts))
    # the batch-size probe's sampled batches hold 4 rows (a new user's report read "batch size
    # unknown" above RD301's samples/s at 64): the throughput they give, marked as theirs
    step = facts.steps.median_step_time_ms
    from rnndoctor.reports.formatting import format_value

    about = format_value(4 * 1000.0 / step)
    assert (
        "- batch size unknown to fit (its input makes its own batches); the sampled batches hold "
        f"4 rows: about {about} samples/s at the median step (not counted per step)"
    ) in md
    assert f"about {about} samples/s at the median step, from the sampled batches' 4 rows" in (
        RENDERERS["html"](evaluate(facts))
    )
    facts.probes.batch_probe = []  # nothing sampled: unknown
    md = RENDERERS["md"](evaluate(facts))
    assert "- batch size unknown; throughput not measured (batch size unknown)" in md
    assert "None" not in md.split("## Step time")[1].split("##")[0]
    facts.steps.samples_per_s = 1234.5  # counted per step (a tf.data input of no fixed batch)
    md = RENDERERS["md"](evaluate(facts))
    assert "- batch size not constant (samples counted per step), 1234.5 samples/s" in md


def test_the_markdown_lists_keep_one_item_per_line():
    """A new user's report.md glued two items: "...rnndoctor's own measurements)- xprof
    input-pipeline analysis: ..." (a list line ending in a block tag lost its newline to
    trim_blocks); the run-on's model calls and the child commands are such lines in loops."""
    from rnndoctor.facts import (
        ChildCommand,
        InputPipelineSummary,
        ModelCallStats,
        OutsideWindowFacts,
        ProfileSummary,
    )

    facts = _facts()
    facts.profile = ProfileSummary(
        logdir="profile", xprof_verdict="No step time measured.", xprof_step_time_measured=False,
        input_pipeline=InputPipelineSummary(not_measured="No step time measured."),
    )  # fmt: skip
    site = SourceLocation(file=facts.run.script, line=30)
    facts.outside_window = OutsideWindowFacts(
        ended="script end", calls=[ModelCallStats("predict", calls=3, location=site),
                                   ModelCallStats("evaluate", calls=2, location=site)],
    )  # fmt: skip
    facts.run.child_commands = [ChildCommand("os.system", "echo a", site),
                                ChildCommand("os.system", "echo b", site)]  # fmt: skip
    lines = RENDERERS["md"](evaluate(facts)).splitlines()
    starts = ("- xprof overview verdict", "- xprof input-pipeline analysis", "- `predict`",
              "- `evaluate`", "- `os.system` `echo a`", "- `os.system` `echo b`")  # fmt: skip
    for start in starts:
        assert (
            [line for line in lines if start in line]
            == [line for line in lines if line.startswith(start)]
            != []
        ), start


def test_the_markdown_evidence_values_are_formatted_as_the_html_ones():
    """A new user's report.md printed "151.5162 ms" where report.html shows 151.516."""
    report = evaluate(_facts())
    md = RENDERERS["md"](report)
    html = RENDERERS["html"](report)
    values = [(e.value, f.rule_id) for f in report.findings for e in f.evidence
              if isinstance(e.value, float) and len(repr(e.value).split(".")[-1]) > 3]  # fmt: skip
    assert values, "the fixture has a float with more than 3 decimals"
    from rnndoctor.reports.formatting import format_value

    for value, _ in values:
        assert f"`{format_value(value)}`" in md and f"<code>{format_value(value)}</code>" in html


def test_a_probe_not_measured_without_a_reason_prints_no_none():
    """A new user's custom-loop report.md: "input-only time per batch: not measured: None"."""
    facts = _facts()
    facts.probes = ProbeFacts()
    md = RENDERERS["md"](evaluate(facts))
    assert "- input-only time per batch: not measured\n" in md
    assert "- compute-only step time: not measured\n" in md and ": None" not in md
