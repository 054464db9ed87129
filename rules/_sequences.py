"""Shared logic of the sequence rules (RD110, RD111, RD114, RD303, RD501, RD502). Pure: no
TensorFlow, no I/O.

They read ``Facts.sequences`` (what the capture measured on sampled batches, see
``rnndoctor/capture/sequences.py``) and, for the RNN layers each input reaches, the model facts
and their cuDNN fast-path probe.
"""

from __future__ import annotations

import ast
import dataclasses
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass

from rnndoctor import dispatch
from rnndoctor import rewrite as rw
from rnndoctor import stats as bk
from rnndoctor.decide import Decision, decide
from rnndoctor.facts import Facts, ProbePoint, RNNLayer, SequenceInput
from rnndoctor.findings import Evidence, Fix, FixSafety, Location
from rnndoctor.paired import INTERVAL_PAIRS
from rnndoctor.rules import Option
from rnndoctor.rules import _fastpath as fp
from rnndoctor.rules import _measured as m
from rnndoctor.stats import Interval

# The padding rules' (RD501, RD502) error cut-off on the estimated speedup, as a rule option.
ERROR_SPEEDUP = Option(
    name="error_speedup",
    default=2.0,
    unit="x (estimated speedup: of the step, or of an epoch in samples/s)",
    source="rnndoctor's severity scale (rnndoctor/findings.py: Severity): error means the job "
    "runs at least 2x slower than it needs to",
    help="the speedup the estimate's whole interval must reach for an error (below: warning)",
)

# The check that fails on a GPU, in the installed Keras 3 source: `_cudnn_lstm` / `_cudnn_gru`
# call it on every mask before the fused kernel runs.
KERAS_MASK_CHECK = (
    "keras/src/backend/tensorflow/rnn.py: _assert_valid_mask (tf.Assert on "
    "_is_sequence_right_padded and not _has_fully_masked_sequence), called by _cudnn_lstm / "
    "_cudnn_gru"
)
LENGTH_SOURCES = {
    "mask_zero": "Embedding(mask_zero=True): id 0 is padding",
    "masking": "Masking(mask_value={value}): steps equal to it are padding",
    "ragged": "RaggedTensor row lengths",
    "mask": "the mask the layer receives",
    "pad_value": "no mask: runs of the pad step {value} at one end of each row",
    "none": "no mask and no pad value: every step counts",
}


def records(facts: Facts) -> list[SequenceInput]:
    """The sampled sequence inputs (empty when none were sampled)."""
    return list(facts.sequences.inputs) if facts.sequences is not None else []


def rnn_layer(facts: Facts, path: str) -> RNNLayer | None:
    """The model's RNN layer at ``path``, or by bare name (ragged inputs are recorded by name,
    during a ``fit`` that failed before the model's paths were known)."""
    if facts.model is None:
        return None
    layers = facts.model.rnn_layers
    return next((r for r in layers if r.path == path), None) or next(
        (r for r in layers if r.name == path or r.path.endswith(f"/{path}")), None
    )


def fed_layers(facts: Facts, record: SequenceInput) -> list[RNNLayer]:
    """The LSTM/GRU layers the input reaches, one per Bidirectional (see ``fp.rnn_layers``)."""
    listed = [rnn_layer(facts, p) for p in record.rnn_layers]
    paths = {r.path for r in listed if r is not None}
    return [r for r in fp.rnn_layers(facts) if r.path in paths]


@dataclass(frozen=True)
class CudnnVerdict:
    """Whether an LSTM/GRU runs the cuDNN kernel on a GPU ``now`` or ``after`` its RD1xx
    findings are fixed (None: not probed), and the basis of that verdict."""

    now: bool | None
    after: bool | None
    basis: str

    @property
    def eligible(self) -> bool:
        """Takes cuDNN now or once fixed; an unprobed LSTM/GRU counts, as Keras' defaults do."""
        return self.now is not False or self.after is not False


def cudnn_verdict(layer: RNNLayer) -> CudnnVerdict:
    probe = layer.fast_path
    if layer.kind not in fp.FUSED_KINDS:
        return CudnnVerdict(False, False, f"{layer.class_name} has no fused kernel")
    if probe is None or not probe.probed:
        why = probe.not_probed_reason if probe is not None else "probe disabled"
        return CudnnVerdict(None, None, f"not probed ({why}); LSTM/GRU defaults take cuDNN")
    after = bool(probe.takes_fast_path or probe.fixed_takes_fast_path)
    return CudnnVerdict(bool(probe.takes_fast_path), after, f"probed: {probe.source}")


def cudnn_evidence(layers: list[RNNLayer]) -> list[Evidence]:
    """One evidence item per layer: its cuDNN verdict now / once its RD1xx are fixed."""
    evidence = []
    for layer in layers:
        verdict = cudnn_verdict(layer)
        evidence.append(
            Evidence(
                f"{layer.path}: cuDNN on a GPU (now / once RD1xx are fixed)",
                f"{verdict.now} / {verdict.after}",
                source=verdict.basis,
            )
        )
    return evidence


def cudnn_sentence(layers: list[RNNLayer]) -> str:
    """When the GPU job meets the cuDNN mask check: now, or once the RD1xx fixes are applied."""
    verdicts = [(layer, cudnn_verdict(layer)) for layer in layers]
    now = [layer for layer, v in verdicts if v.now]
    if now and len(now) == len(layers):
        return (
            "On a GPU this layer runs the cuDNN kernel"
            if len(layers) == 1
            else ("On a GPU these layers run the cuDNN kernel")
        )
    if now:  # a new user's two LSTMs, one with activation='relu': only the other one does
        return f"On a GPU {layers_label(now)} {'runs' if len(now) == 1 else 'run'} the cuDNN kernel"
    blocked = sorted(
        {
            f"{arg} ({fp.RULE_OF_ARG.get(arg, '?')})"
            for layer, _ in verdicts
            for arg in (layer.fast_path.blocking_args if layer.fast_path else [])
        }
    )
    if blocked:
        return (
            "The layer misses the cuDNN kernel today only because of "
            + ", ".join(blocked)
            + "; once that is fixed, on a GPU it runs the cuDNN kernel"
        )
    return "On a GPU this LSTM/GRU runs the cuDNN kernel by default (not probed)"


def padding_location(facts: Facts, record: SequenceInput) -> tuple[Location | None, Evidence]:
    """The line that pads ``record``: the recorded padding call, else the line that built the
    data, else the ``fit`` call; with an evidence item saying which it is."""
    if record.padding_location is not None:
        what = record.padding_function or "padding call"
        if record.padding_function == "pad_sequences":
            what += f"(padding={record.padding_argument!r})"
        return fp.to_location(record.padding_location), Evidence(
            "padding call", what, source="hooked in the run"
        )
    for loc, what in (
        (facts.data.location if facts.data else None, "the line that built the training data"),
        (facts.fit.location if facts.fit else None, "the fit call"),
    ):
        if loc is not None:
            return fp.to_location(loc), Evidence(
                "padding call", f"not seen: located at {what}", source="capture"
            )
    return None, Evidence("padding call", "not seen", source="capture")


def length_source_text(record: SequenceInput) -> str:
    text = LENGTH_SOURCES.get(record.length_source, record.length_source)
    value = record.pad_value if record.pad_value is not None else record.mask_value
    return text.format(value=value)


def common_evidence(record: SequenceInput) -> list[Evidence]:
    return [
        Evidence("sequence input", record.input, source="model input"),
        Evidence("valid lengths from", length_source_text(record), source="sampled batches"),
        Evidence(
            "sampled", f"{record.sequences} sequences in {record.batches} batches",
            source="sampled batches",
        ),
    ]  # fmt: skip


@dataclass(frozen=True)
class StepEstimate:
    """A padding fix's estimated speedup (RD501, RD502): of the step, or of an epoch in samples/s
    where bucketing adds steps (``epoch_steps``).

    ``padding``: padded timesteps now / after on the sampled sequences, with its 90% bootstrap
    interval (``padding_low`` / ``padding_high``; None where it cannot be formed). ``share``:
    the share of the window's step that grows with the padded length: the share of the
    compute-only step the sequence length probe measured to grow with it, times the
    compute-only step's share of the window's step (the input wait and the callbacks' hooks do
    not shrink), with ``share_low`` / ``share_high`` from the probe's interval; None where the
    probe did not measure it (``unmeasured`` says why): every part of the step is then taken to
    shrink with the padded timesteps, and the estimate is an upper bound. ``speedup`` /
    ``low`` / ``high``: the step's, ``1 / (1 - share + share / padding)`` (Amdahl's law for the
    part that shrinks; never above ``1 / (1 - share)`` nor below 1 for ``padding >= 1``), its
    interval from the two intervals' like bounds (the speedup grows with both): it covers the
    estimate where both cover theirs, at least 81% for two independent 90% intervals.

    ``slowdown_interval`` (``slowdown``, ``slowdown_low``, ``slowdown_high``; None, and 1,
    where not measured): how much slower the train function the fix runs is than the
    fixed-length one the window runs, at the same length: a bucketed or per-batch padded
    dataset has no fixed length, so Keras traces its train function once, for any length
    (``probes.length_any``; ``keras/src/backend/tensorflow/trainer.py``, its ``tf.function``
    traced for the iterator's element spec). It scales the compute-only part of the step after
    the fix (``compute``: that part of the real step, :func:`compute_part`):
    ``1 / (1 - compute + slowdown (compute - share + share / padding))``, equal to the above at
    a slowdown of 1, and under 1 where the slowdown takes back more than the padding saves.
    Its interval joins three intervals' like bounds then (at least 70%: Bonferroni's bound; the
    share and the slowdown share the half-length arm's bursts, so they are not independent).
    It is counted only where its whole interval is over 1x (:func:`_slowdown`).

    Where ``fit`` took arrays and no GPU runs the step, the probe feeds that function through
    a pipeline of the fix's kind, one sequence at a time (``piped``,
    ``probes.length_any_pipeline``), so the slowdown also holds that pipeline's cost on the
    cores that run the step, counted from 1x (:func:`_slowdown`). The window's input wait
    (Keras' array adapter) still counts as staying: a bound on the safe side, as the fix
    replaces it. Measured at half the length, the pipeline's cost is taken as a ratio of the
    step: a cost per sequence, in proportion to the step at the half length, where bucketed
    steps are about that long. Not measured (the third arm did not run or timed too few
    pairs), the gain says so (:data:`CPU_PIPELINE_CAVEAT`, ``pipeline_unpriced``).

    ``epoch_steps`` (RD501; None where not known): the steps of an epoch now and bucketed
    (:func:`bucketed_steps`). ``bucket_by_sequence_length`` ends each bucket in a partial batch,
    so an epoch takes more, smaller steps, and the part of each step that does not shrink with
    the length is paid per step: the estimate is then the epoch's (samples/s, as ``--verify``
    measures), with ``steps`` = bucketed / now. A partial batch's step is taken to cost as much
    as a full one of its length, ``1 / (steps (1 - compute + slowdown (compute - share /
    padding)))`` (the estimate and its low end), and at most its rows' part of one, ``1 /
    (steps (1 - compute + slowdown (compute - share)) + slowdown share / padding)`` (its high
    end): tests/scripts/padded_lstm.py took 16 -> 20 steps an epoch (512 sequences in 9
    buckets), its bucketed step ran 1.25x faster (the script's model alone, 8 interleaved
    rounds) and its epoch 0.98x and 0.99x (``--verify``, samples/s): 1.25 / (20 / 16), a small
    batch's step no shorter on 2 CPU cores.
    """

    padding: float
    padding_low: float | None
    padding_high: float | None
    share: float | None
    share_low: float | None
    share_high: float | None
    unmeasured: str | None
    evidence: tuple[Evidence, ...]
    widen_factor: float = 1.0  # the probe's interval, widened for its phase's load
    compute: float = 1.0
    slowdown_interval: Interval | None = None
    pipeline_unpriced: bool = False
    piped: bool = False
    pipeline_error: str | None = None
    epoch_steps: tuple[int, int] | None = None

    @property
    def steps(self) -> float:
        """Steps an epoch bucketed over now (1 where not known)."""
        return self.epoch_steps[1] / self.epoch_steps[0] if self.epoch_steps else 1.0

    def _added_steps(self) -> str:
        """``an epoch of 16 batches takes 20 steps (each bucket ends in a partial batch)``
        where bucketing adds steps to a measured estimate; "" elsewhere."""
        if self.epoch_steps is None or self.share is None or self.steps <= 1.0:
            return ""
        now, after = self.epoch_steps
        return (
            f"an epoch of {now} batches takes {after} steps (each bucket ends in a partial batch)"
        )

    @property
    def slowdown(self) -> float:
        return self.slowdown_interval.value if self.slowdown_interval else 1.0

    @property
    def slowdown_low(self) -> float:
        return self.slowdown_interval.low if self.slowdown_interval else 1.0

    @property
    def slowdown_high(self) -> float:
        return self.slowdown_interval.high if self.slowdown_interval else 1.0

    @property
    def speedup(self) -> float:
        return amdahl(self.padding, self.share, self.compute, self.slowdown, self.steps,
                      self.steps)  # fmt: skip

    @property
    def low(self) -> float | None:
        if self.padding_low is None:
            return None
        if self.share is None:
            return amdahl(self.padding_low, None)
        return amdahl(self.padding_low, self.share_low, self.compute, self.slowdown_high,
                      self.steps, self.steps)  # fmt: skip

    @property
    def high(self) -> float | None:
        if self.padding_high is None:
            return None
        if self.share is None:
            return amdahl(self.padding_high, None)
        return amdahl(self.padding_high, self.share_high, self.compute, self.slowdown_low,
                      self.steps)  # fmt: skip

    def _top(self, slowdown: bool, steps: bool) -> float:
        """The interval's top with or without the slowdown and the epoch's added steps."""
        return amdahl(self.padding_high or 0.0, self.share_high, self.compute,
                      self.slowdown_low if slowdown else 1.0,
                      self.steps if steps else 1.0)  # fmt: skip

    @property
    def slowed(self) -> bool:
        """Whether the slowdown of the function for any length (and its pipeline) is what makes
        the estimate negligible: without it, the added steps kept, the top of the interval
        would reach :data:`NEGLIGIBLE_SPEEDUP`."""
        if self.share is None or self.slowdown_interval is None:
            return False
        return self._top(slowdown=False, steps=True) >= NEGLIGIBLE_SPEEDUP

    @property
    def stepped(self) -> bool:
        """Whether the epoch's added steps are what makes the estimate negligible: per step,
        the slowdown kept, the top of the interval would reach :data:`NEGLIGIBLE_SPEEDUP`."""
        if self.share is None or self.epoch_steps is None:
            return False
        return self._top(slowdown=True, steps=False) >= NEGLIGIBLE_SPEEDUP

    def interval(self) -> Interval | None:
        """The estimate and its interval as :func:`rnndoctor.decide.decide` reads them (the
        bounds taken to hold the point estimate, ``widen_factor`` the probe's); None where the
        padding interval could not be formed. Its level is the padding bootstrap's 90% where
        the probe did not measure the share, else the joined intervals' floor, 81% (70% with
        the slowdown's interval: Bonferroni's bound, as the share and the slowdown share the
        half-length arm's bursts)."""
        if self.low is None or self.high is None:
            return None
        value = self.speedup
        return Interval(value, min(self.low, value), max(self.high, value), level=self.level,
                        widen_factor=self.widen_factor)  # fmt: skip

    @property
    def level(self) -> float:
        """The coverage of the estimate's interval: the padding bootstrap's 90% where the probe
        did not measure the share, else the floor of the joined intervals (:meth:`interval`)."""
        return 0.90 if self.share is None else 0.81 if self.slowdown_interval is None else 0.70

    def decision(self, cutoff: float) -> Decision:
        """Where the estimate stands against a speedup ``cutoff`` (issue 11: a finding fires at
        warning or error only where the interval clears its cut-off): CLEARS where its whole
        interval reaches ``cutoff``, INCONCLUSIVE where only the estimate does, BELOW where the
        estimate does not. Under load (the probe's phase noisy) also INCONCLUSIVE where the
        widened interval's top reaches ``cutoff``: the load biases the probe's ratio, and so
        the estimate, low (a busy core slows what does not shrink with the length as well),
        and a finding becomes inconclusive rather than vanishing. Without an interval (the
        padding bootstrap could not be formed), never CLEARS: INCONCLUSIVE where the estimate
        reaches ``cutoff``."""
        interval = self.interval()
        if interval is None:
            return Decision.INCONCLUSIVE if self.speedup >= cutoff else Decision.BELOW
        return decide(interval, cutoff, higher_is_worse=True, measured=interval)

    def reaches_error(self, cutoff: float) -> bool:
        """Whether the estimate supports an ``error`` at ``cutoff`` (2x: "runs at least 2x
        slower than it needs to"): its whole interval reaches it (:meth:`decision`) and the
        sequence length probe measured the share of the step that shrinks. An upper bound
        (every part of the step taken to shrink with the padding) cannot show that the step
        runs 2x slower than it needs to: a new user's ``Input((40,))`` model, which the probe
        could not cut, had RD501 as an error from that bound alone."""
        return self.share is not None and self.decision(cutoff) is Decision.CLEARS

    def inconclusive(self, cutoff: float) -> str:
        """Why a decision against ``cutoff`` is not CLEARS, for the finding's text:
        ``inconclusive: its interval reaches below the 1.05x cut-off``."""
        if self.interval() is None:
            return "inconclusive: no interval could be formed for it"
        return f"inconclusive: its interval reaches below the {cutoff:g}x cut-off"

    def negligible(self) -> bool:
        """Measured, and the interval's upper bound under :data:`NEGLIGIBLE_SPEEDUP`: the padding
        costs no step time worth a change."""
        return self.share is not None and (self.high or self.speedup) < NEGLIGIBLE_SPEEDUP

    def step_phrase(self) -> str:
        """``an estimated 1.35x (interval 1.22–1.46x) faster step`` (an epoch's, ``faster epoch
        (16 -> 20 steps)``, where bucketing adds steps); under 1x, ``no faster step, an
        estimated 0.93x (interval 0.85–1.02x) of its speed now``."""
        unit = "step"
        if self._added_steps() and self.epoch_steps is not None:
            now, after = self.epoch_steps
            unit = f"epoch ({now} -> {after} steps)"
        if self.speedup >= 1.0:
            return f"an estimated {self.gain_head()} faster {unit}"
        return f"no faster {unit}, an estimated {self.gain_head()} of its speed now"

    def negligible_reason(self) -> str:
        """Why the estimate is negligible (:meth:`negligible`), in a sentence: the share, the
        slowdown, the added steps, or the last two together."""
        added = self._added_steps()
        steps = (
            f"bucketed, {added}, and the part of each step that does not shrink is paid per step"
            if added
            else ""
        )
        both = bool(steps) and self.share is not None and self.slowdown_interval is not None
        if both and self.stepped == self.slowed:  # both needed, or either enough, to take it back
            if self._top(slowdown=False, steps=False) >= NEGLIGIBLE_SPEEDUP:
                fed = ", fed by a tf.data pipeline of its kind," if self.piped else ""
                return (
                    f" The train function the fix runs (traced for any length){fed} took "
                    f"{self.slowdown:.2f}x the time of one for a fixed length, at half the "
                    f"length, and {steps}: together they take back what the shorter padding "
                    "saves."
                )
        if self.stepped:
            return f" {steps[0].upper()}{steps[1:]}: that takes back what the padding saves."
        if self.slowed and self.piped:
            return (
                " On this machine a tf.data pipeline of the fix's kind, batching one sequence at "
                "a time, and the train function it feeds (traced for any length) took "
                f"{self.slowdown:.2f}x the time of cached batches on one traced for a fixed "
                "length, at half the length: that takes back what the shorter padding saves."
            )
        if self.slowed:
            return (
                " On this machine the train function a dataset of no fixed length runs (traced "
                f"for any length) took {self.slowdown:.2f}x the time of one traced for a fixed "
                "length, at half the length: that takes back what the shorter padding saves."
            )
        return (
            " The sequence length probe found too little of the step growing with the padded "
            f"length for bucketing to save {NEGLIGIBLE_SPEEDUP:g}x of it."
        )

    def gain_head(self) -> str:
        """``1.35x (interval 1.22–1.46x)``; unmeasured, ``1.77x (90% interval 1.61–1.86x;
        an upper bound)``."""
        level = "interval" if self.share is not None else "90% interval"
        bound = "" if self.share is not None else "an upper bound"
        interval = (
            f"{level} {self.low:.2f}\u2013{self.high:.2f}x"
            if self.low is not None and self.high is not None
            else ""
        )
        inside = "; ".join(p for p in (interval, bound) if p)
        return f"{self.speedup:.2f}x" + (f" ({inside})" if inside else "")

    def interval_words(self) -> str | None:
        """The estimate's interval and basis for the verdict and the forecast: ``interval
        1.03–1.73x, at least 70% coverage`` where the probe measured the share (:attr:`level`),
        ``90% interval 1.61–1.86x; an upper bound`` where it did not; None without one."""
        interval = self.interval()  # the bounds taken to hold the estimate, as decided on
        if interval is None:
            return "an upper bound" if self.share is None else None
        bounds = f"{interval.low:.2f}–{interval.high:.2f}x"
        if interval.widen_factor > 1.0:
            bounds += (
                f", the probe's interval widened {interval.widen_factor:.2f}x for the noisy machine"
            )
        if self.share is None:
            return f"90% interval {bounds}; an upper bound"
        return f"interval {bounds}, at least {self.level:.0%} coverage"

    def _coverage(self) -> str:
        """`` (at least 81% coverage)``: the joined interval's level (:attr:`level`), which its
        quote beside the estimate does not give."""
        return f" (at least {self.level:.0%} coverage)"

    def basis(self) -> str:
        """How the estimate was made, for the gain text."""
        padding = f"{self.padding:.2f}x fewer timesteps computed (padding included)"
        if self.padding_low is not None and self.padding_high is not None:
            padding += (
                f" (90% interval {self.padding_low:.2f}\u2013{self.padding_high:.2f}x over the "
                "sampled batches and sequences)"
            )
        if self.share is None:
            text = (
                f"{padding}, taken as the step's own: the share of the step that grows with the "
                f"padded length was not measured ({self.unmeasured}), so the parts that do not "
                "(the optimizer's update, the layers after the RNN, dispatch, the input wait) "
                "are counted as shrinking too"
            )
        else:
            text = (
                f"{padding}, on the {self.share:.0%} (90% interval {self.share_low:.0%}\u2013"
                f"{self.share_high:.0%}) of the step that grows with the padded length (the "
                "sequence length probe); the rest does not shrink"
            )
            if self.slowdown_interval is None:
                text += f". The interval joins both intervals' like bounds{self._coverage()}"
            elif self.piped:
                text += (
                    "; and the compute-only part of the step taken as the fix runs it, fed one "
                    "sequence at a time by a tf.data pipeline of its kind into a train function "
                    f"traced for any length: {self.slowdown:.2f}x ({self.slowdown_low:.2f}"
                    f"\u2013{self.slowdown_high:.2f}x, the 90% interval clipped at 1x) the time "
                    "of cached batches on one for a fixed length. The interval joins the three "
                    f"intervals' like bounds{self._coverage()}"
                )
            else:
                text += (
                    "; and the compute-only part of the step taken as the fix runs it, on a "
                    "train function traced for any length, "
                    f"{self.slowdown:.2f}x (90% interval {self.slowdown_low:.2f}\u2013"
                    f"{self.slowdown_high:.2f}x) the time of one for a fixed length. The interval "
                    f"joins the three intervals' like bounds{self._coverage()}"
                )
        if self._added_steps():
            text += (
                f". Bucketed, {self._added_steps()}, each paying the part of the step that does "
                "not shrink: the estimate is the epoch's, in samples/s"
            )
        if not self.pipeline_unpriced:
            return text
        error = self.pipeline_error
        return (
            text
            + CPU_PIPELINE_CAVEAT
            + (f" (the probe could not build one: {error})" if error else "")
        )


# What a padding fix's estimate does not count where no GPU runs the step and the length probe did
# not time the fix's pipeline (StepEstimate.basis; capture/probes.py: _fix_pipeline times it).
# Measured on a new user's tagger (Embedding(mask_zero) -> LSTM(32) -> Dense, batch 16, 2 CPU
# cores), each script run alone three times, the median step of 200: its arrays cut to 30
# timesteps, 4.8-5.5 ms a step through Keras' array adapter, 7.2-9.8 ms through
# from_tensor_slices -> shuffle -> batch -> prefetch (the same batches, one length); RD501's
# bucketed copy, 7.1-8.7 ms against the original's 7.7-8.3 ms at 60 timesteps, as --verify
# measured (1.08x, 0.97-1.12x), where the length probe gave 1.27-1.38x.
CPU_PIPELINE_CAVEAT = (
    ". With no GPU, the fix's tf.data pipeline runs its per-sequence ops on the cores that run "
    "the step, a cost this estimate does not count; --verify measures it"
)
# An estimated speedup under this is no step time worth a change: RD502's default min_speedup
# (rules/rd502_global_max_padding.py), the least gain either padding rule reports as one.
NEGLIGIBLE_SPEEDUP = 1.05


def amdahl(
    padding: float,
    share: float | None,
    compute: float = 1.0,
    slowdown: float = 1.0,
    steps: float = 1.0,
    length_steps: float = 1.0,
) -> float:
    """The speedup where ``share`` of the step (None: all) shrinks ``padding``-fold, the
    ``compute`` part of it (which holds ``share``) runs ``slowdown`` times slower after the fix,
    and an epoch takes ``steps`` times as many steps, each paying the part that does not
    shrink, and the part that does ``length_steps`` times (``steps``: a partial batch's step
    as long as a full one of its length; 1: its rows' part of one) (:class:`StepEstimate`)."""
    if padding <= 0.0:
        return 0.0
    if share is None:
        return padding
    fixed = 1.0 - compute + slowdown * (compute - share)
    return 1.0 / (steps * fixed + length_steps * slowdown * share / padding)


def compute_part(facts: Facts) -> tuple[float, str]:
    """The compute-only step's share of the real step, at most 1, and what it rests on: from
    the compute-only probe's pairs with the real step, the callbacks' hooks added
    (:func:`rnndoctor.dispatch.real_scale`, as RD403 takes it), where they give an interval and
    agree with the window (:func:`rnndoctor.dispatch.uses_pairs`); else of the window's median
    step (``probes.breakdown``: compute / step); 1 where there is neither, or the probe
    disagreed with the window (the compute probe is skipped where the input wait is bounded
    under 1% of a long step: the compute is then the step).

    Why the pairs first: the window's 20 steps can hold a slow stretch its halves do not show
    as drift. A new user's tagger (LSTM(32), batch 32, 2 CPU cores) had its window's steps at
    11 ms, then 17-22 ms from step 15 on (median 16.9 ms), while the probe's real and
    compute-only steps, side by side, took 10.9 and 10.5 ms: of the window, the compute part
    read 0.62 and RD501 1.53x; the next check read 2.32x, and ``--verify`` measured 1.73x."""
    probes = facts.probes
    if probes is not None and dispatch.uses_pairs(probes):
        paired = probes.compute_paired
        return dispatch.real_scale(probes, 0.0, 0.0), (
            f"the compute-only probe's {paired.pairs} pairs: compute-only over the real step "
            f"({paired.median_b_ms:.4g} / {paired.median_a_ms:.4g} ms) with the callbacks' "
            f"{probes.callback_ms or 0.0:.4g} ms"
        )
    breakdown = probes.breakdown if probes is not None else None
    if breakdown is None or not breakdown.step_ms or probes.inconsistent:
        return 1.0, "the whole step (no breakdown of it)"
    part = min(1.0, max(0.0, breakdown.compute_ms / breakdown.step_ms))
    return (
        part,
        f"compute-only {breakdown.compute_ms:.4g} ms of the {breakdown.step_ms:.4g} ms step",
    )


def step_estimate(
    facts: Facts,
    record: SequenceInput,
    padding: float,
    boundaries: tuple[int, ...] | None,
    points: list[ProbePoint],
    unmeasured: str | None,
    any_length: ProbePoint | None = None,
    any_unmeasured: str | None = None,
) -> StepEstimate:
    """The step-time estimate of a fix that cuts ``record``'s padded timesteps ``padding``-fold
    (bucketed at ``boundaries``, or per-batch padding where None), scaled by the share of the
    step the sequence length probe found to grow with the padded length (its ``points``: the
    full length and the half, ``points[1].paired`` = full / half; ``unmeasured``: the probe's
    reason where it has no pairs).

    The share: with a compute-only step of ``c + v T`` for ``T`` padded timesteps, the pairs'
    ratio ``r`` of the step at ``T`` over the step at ``h T`` gives ``v T / (c + v T) = (1 - 1 /
    r) / (1 - h)``, clipped to [0, 1], its interval from the ratio's (widened for the probe
    phase's load: :func:`rnndoctor.rules._measured.ratio_interval`), times
    :func:`compute_part`. Fewer than 3 pairs leave it unmeasured.

    The slowdown (:class:`StepEstimate`): ``any_length`` (``probes.length_any``) paired with
    the half-length point, ``1 / ratio`` with its widened interval, counted where that whole
    interval is over 1x; where it has fewer than 3 pairs, did not run (``any_unmeasured`` says
    why, where it would have) or its interval holds 1x, 1, and the evidence says so. Where its
    batches came through a pipeline of the fix's kind (``probes.length_any_pipeline``), counted
    from 1x whatever its interval.
    """
    plow, phigh = _padding_interval(record, boundaries)
    paired = points[1].paired if len(points) == 2 else None
    if paired is None or paired.pairs < INTERVAL_PAIRS or not points[0].value:
        why = unmeasured or (
            f"the sequence length probe timed {paired.pairs if paired else 0} pairs"
            if points
            else "these facts hold no sequence length probe: it runs from 30% of the "
            "timesteps padded, or 5% padded to one global maximum, since schema 1.6"
        )
        return StepEstimate(padding, plow, phigh, None, None, None, why, (),
                            pipeline_unpriced=_pipeline_unpriced(facts, None))  # fmt: skip
    half = points[1].value / points[0].value
    ratio = m.ratio_interval(facts, paired)
    part, part_text = compute_part(facts)

    def grows(r: float) -> float:
        return (1.0 - 1.0 / r) / (1.0 - half) if r > 0 and half < 1.0 else 0.0

    def share(r: float) -> float:
        return min(1.0, max(0.0, grows(r)))

    clipped_text = _clipped(grows(ratio.high) > 1.0, grows(ratio.low) < 0.0, half)
    evidence = (
        Evidence(
            f"compute-only step at {points[0].value} / {points[1].value} timesteps",
            f"{points[0].step_time_ms} / {points[1].step_time_ms}", "ms",
            source=f"sequence length probe, {paired.pairs} interleaved pairs",
        ),
        Evidence(
            "share of the compute-only step that grows with the padded length",
            f"{share(ratio.value):.0%} (90% interval {share(ratio.low):.0%}\u2013"
            f"{share(ratio.high):.0%})", "",
            source=f"step ratio {ratio.value:.2f}x (90% interval {ratio.low:.2f}\u2013"
            f"{ratio.high:.2f}x): (1 - 1 / ratio) / (1 - {half:.2f}){clipped_text}",
        ),
        Evidence("compute-only step's part of the real step", round(part, 4), "",
                 source=part_text),
    )  # fmt: skip
    slowdown, more = _slowdown(facts, points[1], any_length, any_unmeasured)
    widen = max(ratio.widen_factor, slowdown.widen_factor if slowdown else 1.0)
    epoch, said = bucketed_steps(facts, record, boundaries)
    return StepEstimate(padding, plow, phigh, share(ratio.value) * part, share(ratio.low) * part,
                        share(ratio.high) * part, None, evidence + more + said, widen, part,
                        slowdown, _pipeline_unpriced(facts, any_length),
                        _piped(facts, any_length), facts.probes.length_any_pipeline_error,
                        epoch)  # fmt: skip


def bucketed_steps(
    facts: Facts, record: SequenceInput, boundaries: tuple[int, ...] | None
) -> tuple[tuple[int, int] | None, tuple[Evidence, ...]]:
    """The steps of an epoch now and bucketed at ``boundaries`` (None: per-batch padding, whose
    steps do not change: None, no evidence), and its evidence row.

    Each bucket ends in a partial batch (:func:`rnndoctor.stats.bucketed_batches`, over the
    sampled lengths), for an epoch of ``N`` sequences: ``fit``'s batches an epoch
    (``fit.batches_per_epoch``, Keras' count) times the batch size, at most a batch over.
    Not known (None, and a row that says so) where ``fit`` gave ``steps_per_epoch`` (an epoch
    is then not a pass over the data) or Keras did not count its batches."""
    if boundaries is None:
        return None, ()
    label = "steps an epoch, now / bucketed"
    fit = facts.fit
    now = fit.batches_per_epoch if fit is not None and not fit.steps_per_epoch else None
    total = sum(record.length_counts)
    if not now or not total:
        why = "steps_per_epoch given" if fit is not None and fit.steps_per_epoch else "unknown"
        return None, (Evidence(label, f"not counted: {why}", "", source="fit"),)
    batch = batch_size(record)
    dist = bk.LengthDistribution(tuple(record.length_values), tuple(record.length_counts))
    after, buckets = bk.bucketed_batches(dist, boundaries, batch, now * batch)
    after = max(now, after)
    source = (
        f"fit's {now} batches of {batch}; bucketed: each of {buckets} buckets' share of "
        f"the {total} sampled sequences in batches of {batch}, its last one partial"
    )
    return (now, after), (Evidence(label, f"{now} / {after}", "steps", source=source),)


def _clipped(over: bool, under: bool, half: float) -> str:
    """What the share's interval clipped (a ratio ``over`` what the linear model allows, or
    ``under`` it; ``half``: the halved length's fraction), said rather than hidden."""
    clipped = []
    if over:
        clipped.append(
            f"a ratio past {1.0 / half:.2f}x (a step growing in proportion to the length) "
            "reads as 100%"
        )
    if under:
        clipped.append("a ratio under 1x (no shorter step at half the length) reads as 0%")
    return f"; clipped to the share's range: {' and '.join(clipped)}" if clipped else ""


def _piped(facts: Facts, any_length: ProbePoint | None) -> bool:
    """Whether the length probe's third arm timed the fix's pipeline with its function, with
    pairs enough for an interval (``probes.length_any_pipeline``)."""
    paired = any_length.paired if any_length is not None else None
    probes = facts.probes
    return (
        probes is not None
        and probes.length_any_pipeline is not None
        and paired is not None
        and paired.pairs >= INTERVAL_PAIRS
    )


def _pipeline_unpriced(facts: Facts, any_length: ProbePoint | None) -> bool:
    """Whether the fix's ``tf.data`` pipeline would run on the cores that run the step
    (``Facts.fix_pipeline_on_step_cores``: arrays fed ``fit`` and no GPU runs the step) and the
    length probe did not time it (:func:`_piped`): :data:`CPU_PIPELINE_CAVEAT`."""
    return facts.fix_pipeline_on_step_cores() and not _piped(facts, any_length)


def _padding_interval(
    record: SequenceInput, boundaries: tuple[int, ...] | None
) -> tuple[float | None, float | None]:
    """The padding ratio's 90% bootstrap interval (``rnndoctor.stats.padding_speedup_interval``;
    None, None where it cannot be formed)."""
    try:
        dist = bk.LengthDistribution(tuple(record.length_values), tuple(record.length_counts))
        return bk.padding_speedup_interval(
            dist, boundaries or (), batch_size(record), record.padded_lengths, record.batch_sizes
        )
    except (ValueError, ZeroDivisionError):
        return None, None


def _slowdown(
    facts: Facts, half: ProbePoint, any_length: ProbePoint | None, unmeasured: str | None
) -> tuple[Interval | None, tuple[Evidence, ...]]:
    """The train function for any length over the one for a fixed length, at ``half``'s
    length (:func:`step_estimate`), with the fix's pipeline where the probe fed it through one
    (``probes.length_any_pipeline``): the interval (None where not measured or not counted)
    and its evidence."""
    paired = any_length.paired if any_length is not None else None
    pipeline = facts.probes.length_any_pipeline if facts.probes is not None else None
    label = (
        "train function traced for any length (the fix's), at the half length"
        if pipeline is None
        else "a tf.data pipeline of the fix's kind, one sequence at a time, and its train "
        "function (traced for any length), at the half length"
    )
    if paired is None or paired.pairs < INTERVAL_PAIRS:
        why = unmeasured or (f"{paired.pairs} pairs" if paired is not None else None)
        if why is None:  # not run where it need not: the window's function is for any length
            return None, ()
        return None, (Evidence(label, f"not measured: {why}", "", source="sequence length probe"),)
    ratio = m.ratio_interval(facts, paired)
    source = (
        f"sequence length probe: {half.step_time_ms} / {any_length.step_time_ms} ms a "
        f"compute-only step, {paired.pairs} interleaved pairs"
    ) + (f"; the fix's pipeline: {pipeline}" if pipeline is not None else "")
    cached = "cached batches on " if pipeline is not None else ""
    figure = (
        f"{1.0 / ratio.value:.2f}x (90% interval {1.0 / ratio.high:.2f}\u2013"
        f"{1.0 / ratio.low:.2f}x) the time of {cached}the one for {half.value} timesteps"
    )
    if pipeline is None and ratio.high >= 1.0:
        # counted only where its whole interval is a slowdown: one whose interval holds 1x
        # (the function for any length no slower, within the probe's noise) would only widen
        # the estimate's interval by its noise (tests/scripts/padded_lstm.py: 0.96-1.15x, its
        # intervals up to 0.76-1.48x, took RD502 from a warning to "inconclusive" in 2 of 3
        # checks), and a faster one is no gain the padding fix can claim
        said = "faster: no gain of the padding fix" if ratio.low > 1.0 else "within its noise of 1x"
        return None, (Evidence(label, f"{figure}: {said}, not counted", "", source=source),)
    # The fix's pipeline adds work to the same batches cached, and takes none away: its ratio
    # counts from 1x, its noise below 1x clipped (a faster function for any length is no gain
    # of the padding fix either). Counted only where its whole interval is over 1x, as the
    # function alone is (above), its intervals (from 0.85-0.96x) held 1x in three checks of
    # tests/scripts/padded_lstm.py and left its RD501 at 1.46-1.73x; counted from 1x,
    # 1.31-1.62x (--verify, samples/s: 0.98x and 0.99x).
    floor = 1.0 if pipeline is not None else 0.0
    slowdown = Interval(max(floor, 1.0 / ratio.value), max(floor, 1.0 / ratio.high),
                        max(floor, 1.0 / ratio.low), widen_factor=ratio.widen_factor)  # fmt: skip
    said = ": counted from 1x (a pipeline takes no work away)" if ratio.high >= 1.0 else ""
    return slowdown, (Evidence(label, figure + said, "", source=source),)


def median(values: list[int]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return float(ordered[mid]) if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def batch_size(record: SequenceInput) -> int:
    """The most common rows per sampled batch (the training batch size), the smallest on a tie
    (:func:`rnndoctor.stats.most_common_batch_size`, as capture records
    ``per_batch_padded_fraction``); 1 where no batch was sampled."""
    return bk.most_common_batch_size(record.batch_sizes or [1])


# -- code for fixes ------------------------------------------------------------------------------


def data_names(facts: Facts) -> tuple[str, str]:
    """The names the user's ``fit`` call gives its inputs and targets (``x``, ``y`` otherwise;
    ``rnndoctor.diagnose(model, data, y=...)`` is read the same way)."""
    names = ["x", "y"]
    loc = facts.fit.location if facts.fit else None
    node = fp.parse_call(loc.call_source if loc else None)
    func = node.func if node is not None else None
    called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
    if node is None or called not in ("fit", "diagnose"):
        return names[0], names[1]
    positional = node.args[1:3] if called == "diagnose" else node.args[:2]
    given: dict[str, ast.expr] = {"xy"[i]: arg for i, arg in enumerate(positional)}
    for keyword in node.keywords:
        if keyword.arg in ("x", "data", "y"):
            given["y" if keyword.arg == "y" else "x"] = keyword.value
    for i, key in enumerate("xy"):
        value = given.get(key)
        if isinstance(value, (ast.Name, ast.Attribute)):
            names[i] = ast.unparse(value)
    return names[0], names[1]


# Keras 3's ``Model.fit`` parameters in their order (keras/src/trainers/trainer.py: Trainer.fit):
# a call's positional arguments, read by name.
FIT_PARAMETERS = (
    "x", "y", "batch_size", "epochs", "verbose", "callbacks", "validation_split",
    "validation_data", "shuffle", "class_weight", "sample_weight", "initial_epoch",
    "steps_per_epoch", "validation_steps", "validation_batch_size", "validation_freq",
)  # fmt: skip
# The kinds of ``fit``'s ``x`` (``DataKind``) that ``from_tensor_slices`` takes under the user's
# own name; None: not recorded (facts from before the kind was).
_ARRAY_KINDS = (None, "numpy", "numpy (multi-input)", "tensor")


@dataclass(frozen=True)
class FitData:
    """The user's ``fit`` data as the padding fixes' pipelines (RD501, RD502) write it.

    ``x``, ``y``: the names the call gives its input and target arrays (plain names or
    attributes), else the placeholders ``x`` / ``y``, which ``head`` names as such.
    ``weights``: the source text of its ``sample_weight``, which the pipeline carries as each
    element's third part (``fit`` on a dataset raises on ``sample_weight``); None without one.
    ``shuffle``: the source text of its ``shuffle`` where written. ``head``: comment lines to
    put above the code (the placeholders). ``notes``: comment lines to put after the pipeline:
    the ``fit`` call on it (what to leave out, what to keep) and, per argument the pipeline does
    not carry, what to do with it. ``exact``: the names are the user's and every argument is
    carried or kept as it is; False makes the fix display-only.
    """

    x: str
    y: str
    weights: str | None
    shuffle: str | None
    head: tuple[str, ...]
    notes: tuple[str, ...]
    exact: bool

    @property
    def arrays(self) -> list[str]:
        """``[x_tr, y_tr]`` or ``[x_tr, y_tr, w_tr]``: the parts of the pipeline's elements."""
        return [self.x, self.y] + ([self.weights] if self.weights else [])

    @property
    def parameters(self) -> str:
        """``x, y`` or ``x, y, w``: the parameters of a function mapped over the elements."""
        return "x, y, w" if self.weights else "x, y"

    @property
    def shuffled(self) -> bool:
        """Whether the pipeline shuffles: Keras' default (True) unless ``shuffle=False``."""
        return self.shuffle != "False"


def _comment(text: str) -> list[str]:
    return textwrap.wrap(
        text, 96, initial_indent="# ", subsequent_indent="# ", break_long_words=False,
        break_on_hyphens=False,
    )  # fmt: skip


def _and(names: list[str]) -> str:
    return ", ".join(names[:-1]) + f" and {names[-1]}" if len(names) > 1 else names[0]


def _fit_arguments(facts: Facts) -> tuple[dict[str, ast.expr], list[str]] | None:
    """The recorded ``fit`` (or ``rnndoctor.diagnose``) call's arguments by parameter name, and
    the text of those it passes that cannot be named (``*args``, ``**kwargs``, past the last
    parameter); None where no such call was recorded or it does not parse."""
    loc = facts.fit.location if facts.fit else None
    node = fp.parse_call(loc.call_source if loc else None)
    func = node.func if node is not None else None
    called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
    if node is None or called not in ("fit", "diagnose"):
        return None
    names = ("model", "x") if called == "diagnose" else FIT_PARAMETERS
    given: dict[str, ast.expr] = {}
    unread: list[str] = []
    for i, arg in enumerate(node.args):
        if isinstance(arg, ast.Starred) or i >= len(names):
            unread.append(ast.unparse(arg))
        else:
            given[names[i]] = arg
    for keyword in node.keywords:
        if keyword.arg is None:
            unread.append(f"**{ast.unparse(keyword.value)}")
        else:  # diagnose(model, data=...): data is fit's x
            given["x" if (called, keyword.arg) == ("diagnose", "data") else keyword.arg] = (
                keyword.value
            )
    return given, unread


def fit_data(facts: Facts) -> FitData:
    """What the user's ``fit`` call (or ``rnndoctor.diagnose``) passes for its data, for the
    padding fixes' pipelines: see :class:`FitData`.

    Names are the user's where ``fit`` takes arrays (``facts.fit.data_kind``) under plain names
    or attributes; otherwise (a generator, a ``PyDataset``, an expression, no recorded call)
    the code says ``x`` / ``y`` and a comment marks them as placeholders. ``sample_weight`` is
    carried into the pipeline; ``batch_size``, ``shuffle`` and ``y`` move into it; ``fit`` keeps
    every other argument, ``validation_data`` included (``validation_batch_size`` set to the
    ``batch_size`` it was validated with, where written). Not carried exactly, each with its
    comment: ``class_weight`` (kept in ``fit``: Keras maps it over a dataset's batches,
    ``keras/src/trainers/data_adapters/tf_dataset_adapter.py``: ``make_class_weight_map_fn``,
    gathering from a table as long as the dict's largest key, so a label above that key fails on
    a CPU and weighs 0 on a GPU, where arrays weigh it 1.0), ``validation_split`` (Keras raises
    on it with a dataset; beside ``validation_data`` Keras ignores it, and so does the code),
    ``steps_per_epoch`` (Keras reads a dataset on across epochs without restarting it) and
    arguments that cannot be named (``**kwargs``).
    """
    kind = facts.fit.data_kind if facts.fit else None
    read = _fit_arguments(facts)
    given, unread = read if read is not None else ({}, [])

    def own(name: str) -> bool:
        value = given.get(name)
        return kind in _ARRAY_KINDS and isinstance(value, (ast.Name, ast.Attribute))

    x = ast.unparse(given["x"]) if own("x") else "x"
    y = ast.unparse(given["y"]) if own("y") else "y"
    placeholders = [
        f"{name} (your {what})"
        for name, what in (("x", "padded input array"), ("y", "target array"))
        if not own(name)
    ]
    head: list[str] = []
    if placeholders:
        if read is None:
            where = "the fit call was not recorded"
        elif "x" not in given:
            where = "the fit call passes no x"
        else:
            where = f"fit takes {ast.unparse(given['x'])}"
            where += f", a {kind}" if kind not in _ARRAY_KINDS else ""
        head = _comment(
            "A sketch: placeholders, not names from your script: "
            f"{' and '.join(placeholders)} ({where})."
        )
    value = given.get("sample_weight")
    weights = None
    if value is not None and not (isinstance(value, ast.Constant) and value.value is None):
        weights = ast.unparse(value)
    shuffle = ast.unparse(given["shuffle"]) if "shuffle" in given else None
    data = FitData(x, y, weights, shuffle, tuple(head), (), not placeholders)
    notes, exact = _fit_notes(data, given, unread, recorded=read is not None)
    return FitData(x, y, weights, shuffle, tuple(head), tuple(notes), data.exact and exact)


def _fit_line(given: dict[str, ast.expr], uncarried: bool) -> str:
    """The comment on the ``fit`` call that takes the pipeline: what to leave out, what to add."""
    validation = "validation_data" in given
    out = [n for n in ("y", "batch_size", "sample_weight", "shuffle") if n in given]
    if "validation_split" in given and validation:
        out.append("validation_split")
    line = "model.fit(dataset, ...), the dataset as x"
    if out:
        them = "them" if len(out) > 1 else "it"
        line += f": leave out {_and(out)} (the dataset holds {them}"
        ignored = "; Keras ignores validation_split beside validation_data"
        line += (ignored if "validation_split" in out else "") + ")"
    if validation and "batch_size" in given and "validation_batch_size" not in given:
        size = ast.unparse(given["batch_size"])
        line += f", add validation_batch_size={size} (validation_data was batched by batch_size)"
    return (
        line
        + "; keep every other argument as it is"
        + (", but for those below" if uncarried else "")
    )


def _fit_notes(
    data: FitData, given: dict[str, ast.expr], unread: list[str], recorded: bool
) -> tuple[list[str], bool]:
    """The comment lines after the pipeline (:class:`FitData`'s ``notes``), and whether every
    argument is carried or kept as it is."""
    split = ast.unparse(given["validation_split"]) if "validation_split" in given else None
    split_alone = split is not None and "validation_data" not in given
    exact = not ({"class_weight", "steps_per_epoch"} & given.keys() or unread or split_alone)
    notes = _comment(_fit_line(given, not exact) + ".")
    if not recorded:
        notes = _comment(
            "model.fit(dataset, ...): leave out y, batch_size, shuffle and sample_weight (the "
            "dataset holds them); validation_split does not apply to a dataset, so pass "
            "validation_data (built the same way from held-out arrays)."
        )
    if data.weights is not None:
        notes += _comment(
            f"sample_weight={data.weights} rides in the dataset as each element's third part "
            "(fit raises on sample_weight with a dataset)."
        )
    if "class_weight" in given:
        notes += _comment(
            f"class_weight={ast.unparse(given['class_weight'])}: keep it in fit: Keras weighs "
            "the dataset's batches by it (tf_dataset_adapter.py: make_class_weight_map_fn) as it "
            "did the arrays only where no label is above the dict's largest key (such a label: "
            "an error on a CPU, weight 0 on a GPU; on arrays, weight 1.0): list every class in it."
        )
    if split_alone:
        notes += _comment(
            f"validation_split={split} is not carried (fit raises on it with a dataset): Keras "
            "validated on the last part of the arrays; with "
            f"n = int(len({data.x}) * (1 - {split})), build this dataset from "
            f"{', '.join(f'{a}[:n]' for a in data.arrays)} and validation_data the same way, "
            f"unshuffled, from {', '.join(f'{a}[n:]' for a in data.arrays)}."
        )
    if "steps_per_epoch" in given:
        notes += _comment(
            f"steps_per_epoch={ast.unparse(given['steps_per_epoch'])} is not carried: Keras "
            "reads a dataset on from epoch to epoch without restarting it (a finite one runs out "
            "of data), and this one holds other batches than fit took: leave it out to go "
            "through the data once an epoch, or add .repeat() and count this dataset's batches."
        )
    if data.shuffle is not None and data.shuffle not in ("True", "False"):
        notes += _comment(
            f"shuffle={data.shuffle}: the .shuffle above shuffles the whole training set each "
            'epoch (with "batch", Keras shuffled within batch-sized chunks); leave it out '
            f"where {data.shuffle} is False."
        )
    if unread:
        notes += _comment(
            f"fit also gets {', '.join(unread)}, not read here: what it holds is not carried "
            "(a sample_weight in it goes into the dataset as its third part; batch_size, "
            "shuffle and validation_split out of fit)."
        )
    return notes, exact


def any_length_input(record: SequenceInput) -> str:
    """The comment that the model's ``Input`` must take any length, with the shape for the
    input's rank: ``(None,)`` for token ids (rank 2), ``(None, n_features)`` for features
    (rank 3: the feature count is not recorded), ``(None, ...)`` where the rank is unknown."""
    shape = {2: "(None,)", 3: "(None, n_features)"}.get(record.input_rank, "(None, ...)")
    return f"# The model's Input must take any length: keras.Input(shape={shape})."


def pad_step_code(record: SequenceInput, module: str = "tf") -> str:
    """The pad step as code: the value (``-1``, ``0.0``), or the one-hot vector
    (``tf.one_hot(3, 40)`` / ``np.eye(40)[3]``)."""
    if record.pad_index is not None and record.pad_depth is not None:
        if module == "np":
            return f"np.eye({record.pad_depth}, dtype='float32')[{record.pad_index}]"
        return f"tf.one_hot({record.pad_index}, {record.pad_depth})"
    return repr(record.mask_value if record.mask_value is not None else 0)


def valid_steps_expr(record: SequenceInput, var: str) -> tuple[str, str]:
    """A TF expression for the valid steps of one unbatched sequence ``var``, and its comment.

    Without a mask (``length_source="pad_value"``) only the run of the pad step at the padded end
    is padding: the same step inside a sequence (a space between words) is data, so the valid
    steps are those before (right padding) or after (left padding) the last / first real one.
    """
    if record.length_source == "pad_value" and record.pad_value is not None:
        pad = pad_step_code(record)
        rank3 = record.input_rank is not None and record.input_rank >= 3
        real = (
            f"tf.reduce_any(tf.not_equal({var}, {pad}), axis=-1)"
            if rank3
            else f"tf.not_equal({var}, {pad})"
        )
        reverse = ", reverse=True" if record.pad_side != "left" else ""
        side = "start" if record.pad_side == "left" else "end"
        return (
            f"tf.cumsum(tf.cast({real}, tf.int32){reverse}) > 0",
            f"the run of the pad step ({record.pad_value}) at the {side} is padding",
        )
    value = record.mask_value if record.mask_value is not None else 0
    if record.input_rank is not None and record.input_rank >= 3:
        return (
            f"tf.reduce_any(tf.not_equal({var}, {value!r}), axis=-1)",
            f"a step whose features all equal {value!r} is padding",
        )
    comment = {
        "mask_zero": "Embedding(mask_zero=True): id 0 is padding",
        "masking": f"Masking(mask_value={value!r})",
    }.get(record.length_source, f"{value!r} is the pad value")
    return f"tf.not_equal({var}, {value!r})", comment


def unpad_function(
    record: SequenceInput, per_step_targets: bool, weights: bool = False
) -> list[str]:
    """``def unpad(x, y)``: drops the padded steps of one (unbatched) sequence and, when the
    targets are per step, the same steps of the targets.

    ``weights``: the elements carry ``fit``'s ``sample_weight`` as a third part,
    ``def unpad(x, y, w)``: a weight per sample passes as it is; with per-step targets a weight
    per step (its first dimension is the sequence's length) loses the same steps as the targets.
    """
    expr, comment = valid_steps_expr(record, "x")
    y_out = "tf.boolean_mask(y, valid)" if per_step_targets else "y"
    if not weights:
        return [
            "def unpad(x, y):",
            f"    valid = {expr}  # {comment}",
            f"    return tf.boolean_mask(x, valid), {y_out}",
        ]
    per_step = [
        "    if w.shape.rank and w.shape[0] == valid.shape[0]:  # a weight per step, as y",
        "        w = tf.boolean_mask(w, valid)",
    ]
    return [
        "def unpad(x, y, w):",
        f"    valid = {expr}  # {comment}",
        *(per_step if per_step_targets else []),
        f"    return tf.boolean_mask(x, valid), {y_out}, w",
    ]


def iter_findable(facts: Facts) -> Iterator[tuple[SequenceInput, list[RNNLayer]]]:
    """Each sampled (non-ragged) input with the LSTM/GRU layers it reaches."""
    for record in records(facts):
        if not record.ragged and record.sequences:
            yield record, fed_layers(facts, record)


def layers_label(layers: list[RNNLayer]) -> str:
    return " and ".join(fp.layer_label(layer) for layer in layers) or "the RNN"


def require_sampled(facts: Facts) -> None:
    """Raises ``NotEvaluated`` when no sequence input was measured and the facts say why (the
    rule then reports "not evaluated", never a pass). A model without RNN layers passes.

    Raises:
        NotEvaluated: nothing was sampled, with the capture's reason.
    """
    from rnndoctor.rules import NotEvaluated

    sequences = facts.sequences
    if sequences is None or sequences.inputs or not sequences.not_measured:
        return
    if facts.model is not None and not facts.model.rnn_layers:
        return
    raise NotEvaluated(f"sequences were not sampled: {sequences.not_measured}")


def embedding_call(facts: Facts) -> str | None:
    """The source of the model's ``Embedding(...)`` call where it has exactly one Embedding
    layer and its call was recorded (``model.layers[].location``), else None."""
    layers = [info for info in (facts.model.layers if facts.model else []) if info.class_name
              == "Embedding"]  # fmt: skip
    if len(layers) != 1 or layers[0].location is None:
        return None
    return layers[0].location.call_source


def mask_advice(record: SequenceInput, embedding: str | None = None) -> tuple[str, list[str]]:
    """For an unmasked input with padding: a sentence and the code of a mask that the installed
    Keras 3 keeps on the cuDNN fast path (``keras/src/backend/tensorflow/rnn.py``: a mask must
    be right-padded): ``Embedding(mask_zero=True)`` with pad id 0 (another pad id is remapped to
    0 first, and the vocabulary grows by one), or ``Masking(mask_value=...)`` on features, with
    the padding at the end. ``embedding``: the user's ``Embedding(...)`` call
    (:func:`embedding_call`), which the pad-id-0 code rewrites with ``mask_zero=True``, every
    other argument as written."""
    rank3 = record.input_rank is not None and record.input_rank >= 3
    pad = record.pad_value if record.pad_value is not None else repr(record.mask_value)
    left = record.pad_side == "left"
    end = " and pad at the end instead of the start (cuDNN takes right-padded masks only)"
    code: list[str] = []
    if not rank3:
        if record.mask_value in (0, None):
            sentence = "Add mask_zero=True to the Embedding (id 0 pads)"
            own = rw.set_keyword(embedding, "mask_zero", "True")
            code.append(own or "layers.Embedding(vocab_size, dim, mask_zero=True)")
        else:
            sentence = f"Remap the pad id {pad} to 0 and add mask_zero=True to the Embedding"
            code.append(f"x = np.where(x == {pad}, 0, x + 1)  # pad id -> 0, real ids shift by 1")
            code.append("layers.Embedding(vocab_size + 1, dim, mask_zero=True)")
    elif record.pad_index is None and record.mask_value is not None:
        sentence = f"Put keras.layers.Masking(mask_value={record.mask_value!r}) before the RNN"
        code.append(f"layers.Masking(mask_value={record.mask_value!r})  # first layer")
    else:
        sentence = (
            f"Pad with zero vectors instead of the {pad} and put "
            "keras.layers.Masking(mask_value=0.0) before the RNN"
        )
        pads = "(x == PAD).all(axis=-1)"
        run = (
            f"np.logical_and.accumulate({pads}, axis=1)"
            if left  # numpy arrays have no .flip method: np.flip reverses the time axis
            else f"np.flip(np.logical_and.accumulate(np.flip({pads}, axis=1), axis=1), axis=1)"
        )
        code += [
            f"PAD = {pad_step_code(record, 'np')}",
            f"x[{run}] = 0.0  # only the run at the padded end, not the same step inside",
            "layers.Masking(mask_value=0.0)  # first layer",
        ]
    return sentence + (end if left else ""), code


def one_length_fix(
    fix: Fix,
    rejected: int | None,
    error: str | None,
    mixed: str | None = None,
    mixed_not_tried: str | None = None,
) -> Fix:
    """``fix`` (RD501's bucketing, RD502's per-batch padding: batches of other lengths than
    the model was trained on) as a display-only sketch where the sequence length probe found
    the model does not train on them: not on a shorter length (``rejected``, timesteps: the
    rule's ``probes.length_rejected``, with the probe's reason, ``error``, quoted: a functional
    model whose ``Input`` fixes it, a ``Flatten`` after the RNN), or not on two lengths through
    one train function traced for any length, as those fixes feed it (``mixed``, the error:
    the rule's ``probes.length_mixed_error``; a tagger whose ``TimeDistributed(Dense)``
    trained at 60 and at 30 timesteps, each alone, and whose bucketing fix, pasted, failed at
    its first batch; with ``Dense`` in its place, which applies to the last axis, both lengths
    train). Pasted as it is, the fix would fail the same way (a new user's ``Input((40,))``
    model got an unsafe bucketing rewrite); its first lines say what to change first. ``fix``
    itself where the probe found neither, or did not run; where it did not try the mixed
    lengths (``mixed_not_tried``: ``probes.length_mixed_not_tried``), its title says so."""
    if rejected is None and mixed is None:
        if mixed_not_tried:
            return dataclasses.replace(
                fix, title=f"{fix.title} (not tried on batches of mixed lengths: {mixed_not_tried})"
            )
        return fix
    if rejected is not None:
        title = "your model trains on one length only"
        note = (
            f"# your model did not train on batches of {rejected} timesteps (the sequence length "
            f"probe: {error or 'it failed'})\n# batches of other lengths need a model built for "
            "any length first: keras.Input(shape=(None, ...)), and no layer\n# after the RNN "
            "that needs the length (Flatten, RepeatVector(N), a Dense over the time axis)"
        )
    else:
        title = "your model does not train on mixed lengths"
        note = (
            "# your model trained at each length alone, not on batches of two lengths through "
            f"one function (the sequence length probe: {mixed})\n# a layer that needs the "
            "length fails where it varies: TimeDistributed(Dense(...)) can be Dense(...), which "
            "applies to\n# the last axis at any length; an RNN with unroll=True, Flatten, "
            "RepeatVector(N) or a Reshape to the length need a model of one length"
        )
    return Fix(
        title=f"{fix.title}; display-only: {title}",
        code=f"{note}\n{fix.code}",
        safety=FixSafety.DISPLAY_ONLY,
        before=None,
        location=fix.location,
    )
