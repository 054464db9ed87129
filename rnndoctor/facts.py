"""Facts: everything rnndoctor measured or read in one run, as a typed, versioned, JSON schema.

The capture layer (the only one that imports TensorFlow) fills a :class:`Facts` and writes it to
``<out>/facts.json``; rules and reports only read it. ``Facts.from_dict(json.load(f))`` restores the
typed tree, so ``rnndoctor`` can re-run the rules and re-render offline without TensorFlow.

Schema version ``SCHEMA_VERSION`` (``MAJOR.MINOR``): a MINOR bump only adds optional fields; a
MAJOR bump renames or removes fields. Readers refuse a different MAJOR version.

Units live in field names: ``*_ms`` milliseconds, ``*_us`` microseconds, ``*_s`` seconds,
``*_share`` a fraction in [0, 1]. A field that could not be measured is ``None`` and, where it
matters, a sibling ``*_not_measured`` string says why.

Top-level sections (each ``None`` when the run ended before it was gathered):

- ``run``: :class:`RunInfo` — the script, its argv and cwd, and how the run ended.
- ``environment``: :class:`Environment` — Python, TF, Keras, CUDA/cuDNN build info, devices.
- ``model``: :class:`ModelFacts` — every layer (recursing through wrappers and nested models) and,
  per RNN layer, every argument that decides the cuDNN fast path plus the fast-path probe.
- ``fit``: :class:`FitConfig` — the arguments of the first ``fit`` call.
- ``steps``: :class:`StepTimes` — per-step wall times of the diagnosis window.
- ``profile``: :class:`ProfileSummary` — the TF profiler capture, summarised by xprof.
- ``data``: :class:`DataFacts` — how the data reaches training: its kind and, for tf.data, the
  pipeline graph (since 1.1).
- ``probes``: :class:`ProbeFacts` — input-only, compute-only, batch-size and steps_per_execution
  probes, callback and tracing costs, and the step-time breakdown they give (since 1.1).
- ``loop``: :class:`CustomLoopFacts` — a custom training loop (no ``fit``), found through the
  optimizer's gradient application (since 1.1).
- ``sequences``: :class:`SequenceFacts` — sampled sequence lengths, padding and masks per RNN
  input (since 1.1).
- ``strategy``: :class:`StrategyFacts` — the ``tf.distribute`` strategy the training ran under:
  replicas, workers, batch split, communication, the dataset's auto-shard policy, and one
  :class:`WorkerFacts` per worker (since 1.3; None without a strategy).
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import json
import os
import tempfile
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# The temporary files of Facts.save start with this (beside facts.json, in --out): no user's
# file does, so the check's cleanup of those a killed process left never touches one.
SAVE_TEMP_PREFIX = ".rnndoctor-facts-save-"


def _read_umask() -> int:
    """The process's umask, read without changing it where Linux shows it (``/proc/self/
    status``); else set and restored at once (``os.umask`` only sets and returns it)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


_UMASK = _read_umask()  # once, at import


def save_leftovers(folder: str | Path) -> list[Path]:
    """The temporary files :meth:`Facts.save` left in ``folder`` (a process killed mid-save)."""
    return sorted(Path(folder).glob(SAVE_TEMP_PREFIX + "*.tmp"))


SCHEMA_VERSION = "1.9"
# The consistency checks' smallest noise allowance, relative (StepTimes.noise_allowance): a
# window with a p90 within 5% of its median still allows 5% (half the smallest cut-off of the
# timed rules, RD404's 10%), so that a tight window does not turn ordinary probe jitter into
# "inconsistent".
CONSISTENCY_FLOOR = 0.05


# How ``ProbeFacts.compute_only_not_measured`` begins where the compute-only probe was not run
# because the input-only probe bounds the input wait (data in memory, under 1% of the step:
# ``rnndoctor.capture.probes._compute_skip``); the verdict quotes that bound only then.
COMPUTE_SKIPPED_FOR_INPUT_BOUND = "not run: the input-only probe produced a batch in"


class Outcome(enum.StrEnum):
    """How a capture ended (``RunInfo.outcome``); the values are what ``facts.json`` holds."""

    RUNNING = "running"  # the child is still working, or was killed
    COMPLETED = "completed"  # the diagnosis window finished
    NO_FIT = "no_fit"  # the script ended without calling Model.fit or applying gradients
    SCRIPT_ERROR = "script_error"  # the script raised, or its process ended
    CAPTURE_ERROR = "capture_error"  # the check could not run here, or rnndoctor failed
    TIMEOUT = "timeout"  # set by the parent when it killed the child
    INTERRUPTED = "interrupted"  # Ctrl-C

    @property
    def failed(self) -> bool:
        """The script failed or could not be checked (exit code 3)."""
        return self in (Outcome.SCRIPT_ERROR, Outcome.NO_FIT, Outcome.CAPTURE_ERROR)


class Phase(enum.StrEnum):
    """The capture's phases, as ``RunInfo.phase`` and ``RunInfo.phases`` name them."""

    STARTING = "starting"
    IMPORTING = "importing TensorFlow and Keras"
    RUNNING_SCRIPT = "running the script until its first Model.fit call or gradient update"
    STARTING_FIT = "starting fit (data adapter, model build)"
    WARMUP = "warm-up steps"
    MEASURED = "measured steps"
    PROFILED = "profiled steps"
    LOOP_WARMUP = "custom loop: warm-up steps"
    LOOP_MEASURED = "custom loop: measured steps"
    LOOP_PROFILED = "custom loop: profiled steps"
    LOOP_TWIN = "custom loop: traced twin of the eager step"
    LOOP_BASELINE = "custom loop: tracing baseline"
    MODEL = "model inspection and cuDNN fast-path probe"
    DATA = "data pipeline inspection"
    INPUT_PROBE = "input-only probe (sampling batches)"
    SEQUENCES = "sequence sampling"
    COMPUTE_PROBE = "compute-only probe"
    BATCH_PROBE = "batch-size probe"
    SPE_PROBE = "steps_per_execution probe"
    LENGTH_PROBE = "sequence length probe"
    PROFILE = "profile conversion (xprof)"
    AFTER_WINDOW = "after the window: the script runs on until its next fit call or its end"
    DONE = "done"


class DataKind(enum.StrEnum):
    """The known kinds of ``fit``'s ``x`` (``FitConfig.data_kind``, ``DataFacts.kind``); any
    other object is recorded by its type name."""

    TF_DATA = "tf.data"
    NUMPY = "numpy"
    NUMPY_MULTI = "numpy (multi-input)"
    TENSOR = "tensor"
    PYTHON_GENERATOR = "python_generator"
    PY_DATASET = "keras.PyDataset"
    TF_KERAS_SEQUENCE = "tf_keras.Sequence"  # Keras 2's keras.utils.Sequence (since 1.2)

    @staticmethod
    def is_array(kind: str | None) -> bool:
        """In-memory arrays (numpy, several numpy inputs, a tensor): Keras' array adapter
        batches them, with ``batch_size`` defaulting to 32."""
        return kind in (DataKind.NUMPY, DataKind.NUMPY_MULTI, DataKind.TENSOR)


# The fast-path arguments of LSTM/GRU and the value each takes by default, which is also the value
# the cuDNN kernel needs (Keras 3: `cudnn_ok`, `_do_lstm_arguments_support_cudnn`,
# `_do_gru_arguments_support_cudnn` in keras/src/backend/tensorflow/rnn.py, and
# `LSTM.inner_loop` / `GRU.inner_loop`). The capture builds its compliant twin from these; the
# verdict itself comes from running Keras' code. `dropout` is listed so that the probe tells
# whether input dropout blocks the fast path on the installed version.
FAST_PATH_DEFAULTS: dict[str, Any] = {
    "activation": "tanh",
    "recurrent_activation": "sigmoid",
    "recurrent_dropout": 0.0,
    "dropout": 0.0,
    "unroll": False,
    "use_bias": True,
    "reset_after": True,
    "use_cudnn": "auto",
}


@dataclass
class SourceLocation:
    """Where the user's code did something (built a layer, called ``fit``).

    Attributes:
        file: absolute path of the user's source file.
        line: 1-based line number.
        code: the stripped source line, or None if the file could not be read.
        call_source: the full source of the innermost constructor call on that line (may span
            several lines), as ``ast.get_source_segment`` returns it; None if not found.
        context_start: first line number of ``context``.
        context: a few source lines around ``line`` (for the report).
        end_line: the last line of the statement holding ``line`` (since 1.6, optional; None
            where the file did not parse): a fix that adds a statement after this one goes
            after ``end_line``, not inside a call that spans lines.
    """

    file: str
    line: int
    code: str | None = None
    call_source: str | None = None
    context_start: int | None = None
    context: list[str] = field(default_factory=list)
    end_line: int | None = None


@dataclass
class PhaseTime:
    """A phase of the capture and when it started, in seconds since the capture started;
    ``rss_mib``: the capture process's resident memory (MiB, ``VmRSS``) as the phase started
    (None where it could not be read), so that a check's memory can be split by phase."""

    name: str
    started_s: float
    rss_mib: float | None = None


@dataclass
class Neutralised:
    """Something of the user's that would write user state, and that rnndoctor turned off during
    the check: ``what`` (``ModelCheckpoint callback``, ``model.save``, ...), ``detail`` (the path
    it would have written, where known) and where the user's code set it up or called it.
    ``calls``: how many calls were turned off there (a ``save_weights`` in a batch callback, say).
    """

    what: str
    detail: str | None = None
    location: SourceLocation | None = None
    calls: int = 1


@dataclass
class ChildCommand:
    """A command the user's script ran in a child process (since 1.2, optional): ``how``
    (``os.system`` or ``subprocess.Popen``, which ``subprocess.run`` / ``call`` /
    ``check_call`` / ``check_output`` go through), ``command`` (its command line, as text, cut
    at 300 characters), the user's line, ``calls`` (how many times that line ran it), and what it
    wrote under the user's tree (the script's folder and the working directory): ``wrote``, the
    paths created or changed between its start and the next command's start (or the check's
    end), less those the script's own Python code wrote; ``wrote_more``: paths past the first
    ten; ``tree_truncated``: the tree had more entries than were compared, or the command
    started after the first 50 (whose writes are looked for). Recorded, not blocked."""

    how: str
    command: str
    location: SourceLocation | None = None
    calls: int = 1
    wrote: list[str] = field(default_factory=list)
    wrote_more: int = 0
    tree_truncated: bool = False


@dataclass
class CutShort:
    """A capture phase that ran out of its time budget (or failed) and was cut short.
    ``budget_s`` is the phase's own budget in seconds; ``reason`` says what was left undone."""

    phase: str
    reason: str
    budget_s: float | None = None


@dataclass
class MachinePhase:
    """The machine's load over one capture phase (since 1.2; ``rnndoctor.machine.LoadSampler``).

    ``foreign_cpu_share``: CPU time of other processes / (wall time x CPUs), in [0, 1];
    ``foreign_cores`` the same as cores busy on average; ``load_avg_1m`` the 1-minute load
    average at the end of the phase; ``noisy``: other processes took at least a quarter of a core
    (``rnndoctor.machine.NOISY_FOREIGN_CORES``); ``widen_factor``: how much the intervals of the
    comparisons measured in this phase are widened (1.0: not at all); ``description``: the line
    the report shows (``noisy machine: ...``).
    """

    phase: str
    foreign_cpu_share: float
    foreign_cores: float
    load_avg_1m: float
    cpus: int
    wall_s: float
    noisy: bool = False
    widen_factor: float = 1.0
    description: str = ""


@dataclass
class RunInfo:
    """The user's script and how the capture ended.

    ``outcome`` is one of: ``running`` (the child is still working, or was killed),
    ``completed`` (the diagnosis window finished), ``no_fit`` (the script ended without calling
    ``Model.fit``), ``script_error`` (the script raised or its process ended), ``capture_error``
    (the check could not run: another Keras backend, no TensorFlow; or rnndoctor itself failed),
    ``timeout`` (set by the parent when it killed the child), ``interrupted`` (Ctrl-C).
    ``source_root`` is the git work tree holding the script (else the working directory where
    it holds the script, else the script's folder), and
    ``script_dir_in_source_root`` the script's folder relative to it: SARIF locations are
    relative to that root, as code-scanning tools resolve them, even after ``--redact``.
    ``job_id``: a launched multi-worker job's run (:func:`rnndoctor.cluster.job_id`), which the
    chief matches before it merges a worker's facts; None otherwise. ``exit_status`` (since
    1.5): the capture process's exit status as the check saw it (negative: minus the signal
    that ended it; None: killed by the check, at ``--timeout`` or Ctrl-C, or not recorded),
    which tells the chief of a launched job a worker that crashed in native code. ``cells``
    (since 1.6): in a notebook (``rnndoctor.diagnose``, ``DoctorCallback`` under IPython), the
    name IPython gives each cell whose code a location points at (``In[3]``), keyed by the file
    path the locations hold (ipykernel's ``/tmp/ipykernel_<pid>/<hash>.py``, which exists on no
    disk the user knows); empty elsewhere. ``tensorflow_names`` (since 1.6): for each file a
    location points at, the names that bind the ``tensorflow`` module there (``["tf"]``), from
    the file's ``import`` statements and, for the script or a notebook cell, the running
    namespace; an empty list: none (a fix written with ``tf.`` would raise ``NameError``); a
    file not listed: not known. ``written_files`` (since 1.7): the files outside ``--out`` the
    script's own Python code opened for writing, made or removed (absolute paths, as the check
    records them), which ``--verify`` puts back as they were after the plain check.
    """

    script: str
    argv: list[str]
    cwd: str
    outcome: Outcome = Outcome.RUNNING
    phase: str = Phase.STARTING
    message: str | None = None
    error_type: str | None = None
    error_location: SourceLocation | None = None
    started_utc: str | None = None
    wall_time_s: float | None = None
    notes: list[str] = field(default_factory=list)
    phases: list[PhaseTime] = field(default_factory=list)
    source_root: str | None = None
    script_dir_in_source_root: str | None = None
    neutralised: list[Neutralised] = field(default_factory=list)
    cut_short: list[CutShort] = field(default_factory=list)
    child_commands: list[ChildCommand] = field(default_factory=list)
    written_files: list[str] = field(default_factory=list)
    machine: list[MachinePhase] = field(default_factory=list)
    job_id: str | None = None
    exit_status: int | None = None
    cells: dict[str, str] = field(default_factory=dict)
    tensorflow_names: dict[str, list[str]] = field(default_factory=dict)

    def machine_of(self, phase: str) -> MachinePhase | None:
        """The load recorded over ``phase`` (the last one of that name), or None."""
        return next((m for m in reversed(self.machine) if m.phase == phase), None)

    def enter_phase(self, name: str, elapsed_s: float, rss_mib: float | None = None) -> None:
        """Sets the current ``phase`` and records when it started (``phases``), with the
        process's resident memory then (MiB) where the caller read it."""
        self.phase = name
        rss = round(rss_mib, 1) if rss_mib is not None else None
        self.phases.append(PhaseTime(name, round(elapsed_s, 3), rss))


@dataclass
class Device:
    """A device TensorFlow sees (``tf.config.list_physical_devices``)."""

    name: str
    device_type: str
    details: dict[str, Any] = field(default_factory=dict)


@dataclass
class Environment:
    """Software and hardware of the run (what TensorFlow's bug template asks for).

    ``run_functions_eagerly`` is read again when the diagnosis ends, so it holds the script's own
    ``tf.config.run_functions_eagerly`` setting. Since 1.1 (all optional):
    ``run_eagerly_location``: the user's line that turned eager execution on (the
    ``tf.config.run_functions_eagerly(True)`` call, or a ``compile(..., run_eagerly=True)``
    call; the last one seen). ``gpu_names`` / ``gpu_compute_capability`` (``"8.0"``): per GPU
    TensorFlow sees (``tf.config.experimental.get_device_details``). ``cudnn_runtime``: the
    version of the cuDNN library loaded at run time (``cudnnGetVersion``, ``"8.9.1"``), which can
    differ from ``cudnn_build``. ``nvidia_gpu_present``: whether the machine has an NVIDIA GPU,
    whatever TensorFlow sees (``nvidia_gpus`` lists them; ``nvidia_gpu_source`` says how it was
    found: ``nvidia-smi``, ``/proc/driver/nvidia/gpus`` or the PCI bus in ``/sys/bus/pci``).
    Each ``*_not_measured`` says why its value is absent. ``keras_flavour``: the Keras that ran
    the diagnosed model, with its version: ``"keras 3.15.1"`` (Keras 3) or ``"tf_keras 2.21.0"``
    (Keras 2, under ``TF_USE_LEGACY_KERAS=1`` or ``import tf_keras``); ``keras`` stays the
    installed Keras 3's version.
    """

    python: str
    platform: str
    keras: str
    keras_backend: str
    tensorflow: str | None = None
    cuda_build: str | None = None
    cudnn_build: str | None = None
    is_cuda_build: bool | None = None
    devices: list[Device] = field(default_factory=list)
    gpu_count: int = 0
    gpu_memory_mib: list[int] = field(default_factory=list)
    gpu_memory_not_measured: str | None = None
    cpu_count: int | None = None
    cpu_model: str | None = None
    precision_policy: str | None = None
    run_functions_eagerly: bool | None = None
    distribution_strategy: str | None = None
    run_eagerly_location: SourceLocation | None = None
    gpu_names: list[str] = field(default_factory=list)
    gpu_compute_capability: list[str] = field(default_factory=list)
    gpu_compute_capability_not_measured: str | None = None
    cudnn_runtime: str | None = None
    cudnn_runtime_not_measured: str | None = None
    nvidia_gpu_present: bool | None = None
    nvidia_gpus: list[str] = field(default_factory=list)
    nvidia_gpu_source: str | None = None
    nvidia_gpu_not_measured: str | None = None
    keras_flavour: str | None = None


@dataclass
class FastPathProbe:
    """Whether the installed Keras would run this layer on the cuDNN kernel on a GPU.

    Decided by exercising the installed Keras code path, not from a copy of its rules: a clone of
    the layer (``from_config``) is called once on a tiny tensor while ``keras.src.backend.lstm`` /
    ``gru`` are replaced by a spy. The layer's own ``inner_loop`` decides whether to call the
    backend kernel at all (``recurrent_dropout``, ``use_cudnn``); the spy then evaluates the
    backend's ``cudnn_ok`` (``keras/src/backend/tensorflow/rnn.py``) on exactly the arguments the
    layer passed, with GPU availability assumed. Masks are data-dependent and not part of it.

    Attributes:
        probed: False when the probe could not run (``not_probed_reason`` says why).
        takes_fast_path: the layer as configured would take the cuDNN kernel on a GPU.
        blocking_args: fast-path arguments that, each on its own, make Keras skip cuDNN.
        fixed_takes_fast_path: the layer with every blocking argument reset would take cuDNN.
            For ``simple_rnn`` / ``generic_rnn`` it is the verdict for ``replacement_class``
            built with the same arguments (and ``blocking_args`` are that layer's).
        dropout_keeps_fast_path: whether ``dropout > 0`` (input dropout) leaves the fast path
            open on this Keras version (probed on the compliant twin).
        replacement_class: the fused layer that can replace a SimpleRNN or RNN(cell) layer.
        source: the Keras functions that decided it.
    """

    probed: bool
    takes_fast_path: bool | None = None
    blocking_args: list[str] = field(default_factory=list)
    fixed_takes_fast_path: bool | None = None
    dropout_keeps_fast_path: bool | None = None
    replacement_class: str | None = None
    not_probed_reason: str | None = None
    source: str = ""


@dataclass
class RNNLayer:
    """One recurrent layer and every argument that decides the cuDNN fast path.

    ``kind`` is ``lstm`` / ``gru`` (Keras ``LSTM`` / ``GRU`` or subclasses), ``simple_rnn``,
    ``generic_rnn`` (``keras.layers.RNN`` around Keras' own ``LSTMCell`` / ``GRUCell`` /
    ``StackedRNNCells``), ``custom_cell`` (``RNN`` around a user-defined cell) or ``other_rnn``.
    ``args`` maps argument name to its value as the layer holds it (activations by name).
    ``receives_mask`` says whether the model graph passes a ``mask=`` to the layer (or to the
    wrapper holding it); None where the graph is not known (subclassed models). ``fed_by`` lists
    the paths of the layers or ops whose outputs the layer (or its wrapper) takes as input.
    ``init_params`` are the constructor's positional parameter names, in order (for fixes that
    rewrite a call with positional arguments).
    """

    path: str
    name: str
    class_name: str
    kind: str
    cell_class: str
    args: dict[str, Any] = field(default_factory=dict)
    cell_classes: list[str] = field(default_factory=list)
    wrappers: list[str] = field(default_factory=list)
    direction: str | None = None
    input_shape: list[int | None] | None = None
    dtype_policy: str | None = None
    location: SourceLocation | None = None
    fast_path: FastPathProbe | None = None
    receives_mask: bool | None = None
    fed_by: list[str] = field(default_factory=list)
    init_params: list[str] = field(default_factory=list)


@dataclass
class GraphEdge:
    """An edge of the model graph. ``kind``: ``contains`` (a wrapper or model holds a layer),
    ``feeds`` (a tensor flows from ``src`` to ``dst``) or ``mask`` (``src`` computes the mask that
    ``dst`` receives as its ``mask=`` argument). Nodes are layer paths; ops that are not layers
    (Keras records the mask as a ``NotEqual`` op) get a path under the model too."""

    src: str
    dst: str
    kind: str


@dataclass
class LayerInfo:
    """One layer of the model tree (``path`` joins the names from the model down with ``/``)."""

    path: str
    name: str
    class_name: str
    depth: int
    parent: str | None = None
    is_rnn: bool = False
    location: SourceLocation | None = None


@dataclass
class ModelFacts:
    """The model tree and graph. ``model_type`` is ``sequential``, ``functional`` or
    ``subclassed``. ``graph_edges`` hold the containment tree and, for functional and sequential
    models, the data flow between the top-level layers (a networkx DiGraph in the capture);
    ``graph_known`` is False for subclassed models, whose data flow lives in Python code."""

    name: str
    class_name: str
    model_type: str
    param_count: int | None = None
    layers: list[LayerInfo] = field(default_factory=list)
    rnn_layers: list[RNNLayer] = field(default_factory=list)
    graph_edges: list[GraphEdge] = field(default_factory=list)
    graph_known: bool = False


@dataclass
class CodeLoop:
    """A Python loop of the user's file around a call (since 1.2, optional): ``line`` (the
    ``for`` / ``while`` line), ``kind`` (``for`` or ``while``), ``iterations`` (known from the
    source: ``range(N)`` with literal bounds or a name assigned a literal once, a literal
    list or tuple; None otherwise) and ``iterations_source`` (how it was read)."""

    line: int
    kind: str = "for"
    iterations: int | None = None
    iterations_source: str | None = None


@dataclass
class FitLoop:
    """The first ``fit`` call sits inside Python loops of the user's file (since 1.2,
    optional): ``loops`` from the outermost to the innermost; ``calls``: the ``fit`` calls the
    loops make, the product of their iterations (None when one of them is unknown)."""

    loops: list[CodeLoop] = field(default_factory=list)
    calls: int | None = None


@dataclass
class FitConfig:
    """The first ``Model.fit`` call, and the compile settings in force then.

    ``steps_per_epoch`` is the argument as given; ``batches_per_epoch`` is the number of training
    steps per epoch Keras computed for ``fit`` (its ``params["steps"]``; None when unknown, as for
    a dataset of unknown length).

    Where a fix rewrites the user's code (optional, since 1.2): ``compile_location`` is the
    user's latest ``compile`` call on the model, with its full ``call_source``;
    ``batch_size_location`` / ``x_location`` are the last assignment (in the scope of the ``fit``
    line) to the name ``fit`` received as ``batch_size`` / ``x`` (``batch_size=batch_size``),
    with the whole statement as ``call_source``; None when the argument is not a plain name.
    For ``batch_size=args.batch_size`` (an attribute of a name assigned from ``parse_args()``),
    ``batch_size_location`` is the ``add_argument`` call for that attribute whose literal
    ``default`` equals the value, when no script argument may have set it and the source shows
    no other source of it (matched by names and value, not traced; it errs towards None:
    ``rnndoctor.capture.sites.argparse_default_site``), with that call as ``call_source``;
    else None.
    ``batch_size_options`` (since 1.6, optional): for ``batch_size=args.batch_size``, the
    option strings of the one ``add_argument`` call that sets that attribute (``["-b",
    "--batch-size"]``), whether or not the command line gave the option
    (``rnndoctor.capture.sites.argparse_options``), so that a rule finds it in the script's argv
    under any of its names; else None.
    ``batch_size_argument`` (since 1.6, optional): where ``fit``'s ``batch_size`` is a
    parameter of the function that calls ``fit`` (``def train(bs): ... fit(...,
    batch_size=bs)``), or an attribute of one (``def main(args)``), the argument the outermost
    caller passed, as written (``args.batch_size``, ``bs``, ``64``; for a namespace passed
    straight from a parsing call, ``main(parser.parse_args())``, the outermost parameter's
    attribute), followed on the run's call stack (``rnndoctor.capture.passed``); then
    ``batch_size_location`` and ``batch_size_options`` are that argument's, as above, and for
    an integer literal ``batch_size_location`` is the caller's call (``train(64)``), the only
    integer literal of that value among its arguments. None where ``fit`` writes its batch size
    itself.
    ``fit_in_loop`` (since 1.2, optional): the ``fit`` call is inside Python loops of the user's
    file (read from the source), or None.
    ``y_kind`` (since 1.2, optional): what ``fit`` received as ``y``: ``array`` (one array or
    tensor, with a ``shape``), ``list`` / ``tuple`` / ``dict`` (several targets), ``none``, or
    the type's name; None when not recorded.
    """

    data_kind: str
    batch_size: int | None = None
    epochs: int | None = None
    steps_per_epoch: int | None = None
    batches_per_epoch: int | None = None
    steps_per_execution: int | None = None
    run_eagerly: bool | None = None
    jit_compile: Any = None
    optimizer: str | None = None
    loss: str | None = None
    callbacks: list[str] = field(default_factory=list)
    has_validation: bool = False
    location: SourceLocation | None = None
    compile_location: SourceLocation | None = None
    batch_size_location: SourceLocation | None = None
    batch_size_options: list[str] | None = None
    batch_size_argument: str | None = None
    x_location: SourceLocation | None = None
    fit_in_loop: FitLoop | None = None
    y_kind: str | None = None


@dataclass
class StepTimes:
    """Wall time per training step in the diagnosis window (``time.perf_counter``).

    A step's time runs from the end of the previous batch to the end of this one (Keras' batch
    callbacks), so it holds input, compute and callback time; ``train_function_ms`` runs from
    ``on_train_batch_begin`` to ``on_train_batch_end`` only. The first step of each epoch and the
    warm-up steps are excluded. The loss is read back at each step end, so GPU work is finished.
    ``source`` is ``fit``, or ``custom loop`` when the steps are a custom loop's (the time between
    consecutive gradient applications).

    Since 1.2: ``drifted`` / ``drift``: whether the measured steps drifted inside the window (the
    halves differ beyond their noise, a run of slow steps, or a level shift
    anywhere in the window; ``rnndoctor.machine.drift``) and
    the one-line description; ``final_loss``: the training loss ``fit`` logged at the window's
    last step (Keras' running mean over the epoch so far; None for a custom loop, or when the
    model logs no ``loss``), which ``--verify`` compares between the original and a fix.
    Since 1.6: ``final_loss_step``: the step of its epoch (1-based: the last step of the
    execution that logged it, however the Keras that ran numbers its batch hooks,
    ``rnndoctor.capture.step_window.BatchIndex``) at which ``final_loss`` was logged; with
    ``steps_per_execution`` N it is N steps past the one before per measured step. --verify
    prints it beside each arm's loss, whose comparison is a divergence check.
    """

    warmup_steps: int
    measured_steps: int
    step_time_ms: list[float] = field(default_factory=list)
    train_function_ms: list[float] = field(default_factory=list)
    median_step_time_ms: float | None = None
    p90_step_time_ms: float | None = None
    median_train_function_ms: float | None = None
    batch_size: int | None = None
    samples_per_s: float | None = None
    requested_steps: int | None = None
    source: str = "fit"
    drifted: bool | None = None
    drift: str | None = None
    final_loss: float | None = None
    final_loss_step: int | None = None

    def noise_allowance(self) -> float:
        """The window's noise allowance, relative: p90 / median step time, at least
        ``1 + CONSISTENCY_FLOOR`` (the median alone where the p90 is missing): how far a probe's
        figure may stray from the window's step before the two disagree (issue 11, item 3;
        ``rnndoctor.capture.probes.inconsistency``), and the verdict's remainder too."""
        step = self.median_step_time_ms
        if not step:
            return 1.0 + CONSISTENCY_FLOOR
        return max((self.p90_step_time_ms or step) / step, 1.0 + CONSISTENCY_FLOOR)


@dataclass
class OpStat:
    """One row of xprof's ``framework_op_stats`` (IDLE excluded), or a per-type aggregate."""

    op_type: str
    host_or_device: str
    self_time_us: float
    share: float
    occurrences: int = 0
    name: str | None = None


@dataclass
class ProfileSummary:
    """The ``tf.profiler.experimental`` capture of a few steps, converted by xprof.

    ``host_self_time_us`` / ``device_self_time_us`` sum the self-time of all non-idle ops per side
    (from ``framework_op_stats``); ``top_op_types`` aggregates self-time per op type;
    ``cudnn_rnn_ops`` lists ops whose type starts with ``CudnnRNN`` (None: no GPU, not measured).
    ``xprof_verdict`` is xprof's overview-page statement, kept verbatim.
    """

    logdir: str
    profiled_steps: int = 0
    xspace_files: list[str] = field(default_factory=list)
    hardware_type: str | None = None
    xprof_verdict: str | None = None
    xprof_step_time_measured: bool | None = None
    host_self_time_us: float | None = None
    device_self_time_us: float | None = None
    idle_share: float | None = None
    top_op_types: list[OpStat] = field(default_factory=list)
    top_ops: list[OpStat] = field(default_factory=list)
    cudnn_rnn_ops: list[str] | None = None
    cudnn_not_measured: str | None = None
    error: str | None = None
    tensorboard_command: str | None = None
    input_pipeline: InputPipelineSummary | None = None

    def to_dict(self) -> dict[str, Any]:
        """The JSON-serialisable dict, as ``Facts.to_dict`` writes it under ``profile``."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Any) -> ProfileSummary:
        """Restores a summary from ``to_dict`` output (the xprof converter's result,
        ``rnndoctor.capture.profile.summarize_in_subprocess``).

        Raises:
            ValueError: ``data`` is not a profile summary.
        """
        if not isinstance(data, dict):
            raise ValueError("profile must be an object")
        return _build(cls, data, "profile")


@dataclass
class InputPipelineSummary:
    """xprof's ``input_pipeline_analyzer`` for the profiled steps, where it gives one.

    ``input_share`` is xprof's share of the step time spent waiting for input (device side);
    ``slowest_ops`` are the tf.data ops with the most self-time, as xprof lists them. On CPU-only
    runs xprof gives no step-time analysis: then ``not_measured`` says so, verbatim where xprof
    said it, and rnndoctor's own probes (:class:`ProbeFacts`) carry the breakdown.
    """

    input_share: float | None = None
    verdict: str | None = None
    slowest_ops: list[OpStat] = field(default_factory=list)
    not_measured: str | None = None


@dataclass
class DataNode:
    """One node of the tf.data pipeline graph (the dataset's serialised GraphDef).

    ``op`` is the GraphDef op (``ParallelMapDatasetV2``), ``kind`` a normalised kind:
    ``source``, ``map``, ``batch``, ``padded_batch``, ``bucket``, ``prefetch``, ``cache``,
    ``shuffle``, ``repeat``, ``filter``, ``interleave``, ``take``, ``other``.
    ``num_parallel_calls``: the value in the graph (-1 is AUTOTUNE; None: not a parallel op).
    ``python``: the op runs Python (``from_generator``, ``py_function``, ``numpy_function``).
    ``source_kind`` (sources only): ``tensor_slices``, ``tensors``, ``generator``, ``files``,
    ``range``, ``other``. ``location``: the user's line that built it, where it was recorded.
    """

    name: str
    op: str
    kind: str
    num_parallel_calls: int | None = None
    python: bool = False
    source_kind: str | None = None
    location: SourceLocation | None = None
    attrs: dict[str, Any] = field(default_factory=dict)


@dataclass
class DataFacts:
    """How the training data reaches ``fit`` (or the custom loop).

    ``kind``: ``tf.data``, ``numpy``, ``numpy (multi-input)``, ``tensor``, ``python_generator``,
    ``keras.PyDataset``, ``tf_keras.Sequence`` or the type name. ``reiterable``: a fresh
    iterator can be made without consuming the user's one (False for a Python generator).
    ``location``: the user's line that built the object passed to ``fit`` (for tf.data: the
    last pipeline call, e.g. ``.batch``).

    tf.data only: ``nodes`` / ``edges`` are the pipeline's GraphDef as a DAG (edge ``src`` feeds
    ``dst``; nodes in dataflow order, the last is the one ``fit`` iterates); ``source_kinds``,
    ``sequential_maps`` / ``parallel_maps`` (counts), ``batch_kind`` (``batch``,
    ``padded_batch``, ``bucket``, None), ``has_cache``, ``has_shuffle``, ``prefetch_last``
    (the last op before the iterator is a ``prefetch``), ``python_ops`` (nodes running Python),
    ``cardinality`` (``tf.data.experimental.cardinality``: -1 infinite, -2 unknown).

    PyDataset only: ``workers``, ``use_multiprocessing``, ``max_queue_size`` as the object holds
    them (Keras 3 ``PyDataset.__init__``). A tf_keras ``Sequence`` (``tf_keras.Sequence``)
    holds none of them: Keras 2 takes them as ``fit`` arguments (``Model.fit`` in
    tf_keras/src/engine/training.py), and they are read from the ``fit`` call, with its defaults.

    tf.data graph rewrites that run when the iterator is made, from the dataset's options (since
    1.1): ``map_parallelization`` (a ``map`` without ``num_parallel_calls`` whose function is
    stateless runs in parallel anyway; those maps are counted in ``auto_parallel_maps``, not in
    ``sequential_maps``) and ``inject_prefetch`` (tf.data appends ``prefetch(AUTOTUNE)`` when
    the pipeline does not end in one). ``batch_bytes``: mean size of one sampled batch in bytes
    (all components), None when no batch was sampled.

    The model inputs' dtypes and shapes as the data delivers them (optional, since 1.2):
    ``input_dtypes`` (``float64``) and ``input_shapes`` (one per input, flattened in the
    structure's order; the first dimension is the batch, None when not fixed), read from the
    dataset's ``element_spec`` (its first component when elements are ``(x, y[, w])``) or from
    the arrays passed as ``x``.

    tf.data only (optional, since 1.2): ``array_location``: where the one array the pipeline's
    source was built from (``timeseries_dataset_from_array(x_train, ...)``,
    ``from_tensor_slices(x)``: a plain name) was last assigned, with the whole statement as
    ``call_source`` (``x_train = df[cols].values``); None when the source is not one such
    call, or the name has no assignment in the file.

    Keras 3 PyDataset only (optional, since 1.6): ``init_location``: the ``super().__init__(...)``
    call in the ``__init__`` of the user's PyDataset class (the one call to its base's
    ``__init__`` there, with the call as ``call_source``), which sets ``workers`` and
    ``use_multiprocessing``; None where the class defines no ``__init__`` in a user file or
    holds no single such call. ``built_with_keywords``: whether keywords given where the
    dataset is built (``location``) reach ``PyDataset.__init__``: the class has no ``__init__``
    of its own, or its ``__init__`` passes its own ``**kwargs`` on in that call.
    """

    kind: str
    reiterable: bool | None = None
    location: SourceLocation | None = None
    nodes: list[DataNode] = field(default_factory=list)
    edges: list[GraphEdge] = field(default_factory=list)
    source_kinds: list[str] = field(default_factory=list)
    sequential_maps: int = 0
    parallel_maps: int = 0
    batch_kind: str | None = None
    has_cache: bool = False
    has_shuffle: bool = False
    prefetch_last: bool | None = None
    python_ops: list[str] = field(default_factory=list)
    cardinality: int | None = None
    workers: int | None = None
    use_multiprocessing: bool | None = None
    max_queue_size: int | None = None
    graph_not_measured: str | None = None
    auto_parallel_maps: int = 0
    map_parallelization: bool | None = None
    inject_prefetch: bool | None = None
    batch_bytes: int | None = None
    input_dtypes: list[str] = field(default_factory=list)
    input_shapes: list[list[int | None]] = field(default_factory=list)
    array_location: SourceLocation | None = None
    init_location: SourceLocation | None = None
    built_with_keywords: bool | None = None


@dataclass
class PairedRatio:
    """A paired comparison of two arms (since 1.2; ``rnndoctor.paired``): interleaved bursts A B
    A B ..., each arm after its own warm-up (or, where the arms share a train function, all
    rounds in one interleaved ``fit`` after one warm-up: ``capture/interleave.py``).

    ``ratio``: the median over pairs of ``a / b`` per-step times (> 1: B takes less time per
    step); ``low`` / ``high``: its bootstrap interval at ``level`` (0.90), as measured (rules
    widen it by the ``widen_factor`` of the phase's :class:`MachinePhase`); ``pairs``: the pairs
    behind it; ``median_a_ms`` / ``median_b_ms``: each arm's median per-step time;
    ``steps_a`` / ``steps_b``: timed steps of each arm; ``spread_a`` / ``spread_b``: each arm's
    (p90 - p10) / median over its bursts; ``widen_factor``: widening already applied (1.0);
    ``cut_short``: why it stopped before each arm had its 10 steps and 1 s (None: it had them);
    ``phase``: the capture phase it was measured in; ``a`` / ``b``: what each arm ran.
    Since 1.4, ``second_stage``: why the pairs went on past the first stage (its interval
    straddled a rule's cut-off: ``capture/pairs.py: alternate``; or the time allowance ended
    with the rule's decision not made at the early look: ``EarlyLook.extends``); None: one
    stage.
    """

    ratio: float
    low: float
    high: float
    level: float = 0.90
    pairs: int = 0
    median_a_ms: float = 0.0
    median_b_ms: float = 0.0
    steps_a: int = 0
    steps_b: int = 0
    spread_a: float = 0.0
    spread_b: float = 0.0
    widen_factor: float = 1.0
    cut_short: str | None = None
    phase: str | None = None
    a: str = ""
    b: str = ""
    second_stage: str | None = None


@dataclass
class ProbePoint:
    """One point of a compute-only probe: ``value`` is the batch size (batch-size probe) or the
    ``steps_per_execution`` (steps_per_execution probe); times are medians after warm-up.
    ``stopped`` says why this point has no time (out of memory, out of its time budget).
    ``memory_estimate_mib``: the extra memory this point was estimated to need before it ran
    (batch-size probe; None where no estimate could be made). Since 1.2, ``paired``: this point
    against the probe's first point (b, or steps_per_execution 1), timed in interleaved bursts
    (A = the first point, B = this one; for the batch-size probe ``ratio`` is the step-time
    ratio: the samples/s ratio is ``ratio x value / first value``)."""

    value: int
    step_time_ms: float | None = None
    samples_per_s: float | None = None
    steps: int = 0
    stopped: str | None = None
    memory_estimate_mib: float | None = None
    paired: PairedRatio | None = None


@dataclass
class CallbackTime:
    """A user callback's batch hooks (``on_train_batch_begin`` + ``on_train_batch_end``):
    median wall time per training step, in milliseconds."""

    name: str
    per_step_ms: float
    location: SourceLocation | None = None


@dataclass
class StepArgument:
    """One argument of a step function as its calls passed it (flattened: ``batch[0]``).

    ``kind``: ``tensor`` (a tf.Tensor, a Keras/TF variable or a numpy array) or ``python`` (any
    other Python value: ``tf.function`` traces once per distinct value). ``dtype``: the tensor's
    dtype name (``float32``). ``spec``: the ``tf.TensorSpec`` code that accepts every shape seen,
    with ``None`` for the batch dimension and for each dimension that varied between calls
    (``tf.TensorSpec([None, None], tf.int32)``); None for Python values. ``shapes``: the distinct
    shapes seen (at most a few), as strings; ``values_seen``: distinct Python values seen."""

    name: str
    kind: str = "tensor"
    dtype: str | None = None
    spec: str | None = None
    shapes: list[str] = field(default_factory=list)
    values_seen: int = 0


@dataclass
class TraceCount:
    """A ``tf.function`` and how often it was traced during the window.

    ``role``: ``train_function`` (Keras' train step, called by ``fit`` or by a loop of
    ``train_on_batch``), ``custom_step`` (a user function that applies gradients) or ``other``.
    ``calls``: calls seen; ``shapes`` distinct input shapes seen, as strings (at most a few).

    Since 1.1 (all optional): ``traces`` is TensorFlow's own count
    (``Function.experimental_get_tracing_count``), summed over ``instances``: the ``tf.function``
    objects that wrap the same Python code (TensorFlow's retracing warning groups calls the same
    way; a ``tf.function`` created inside a loop gives one instance per iteration).
    ``traced_calls``: calls that traced (the first always does). ``total_call_ms``: wall time of
    all calls; ``median_call_ms``: median wall time of a call that did not trace;
    ``tracing_ms``: the measured cost of tracing, ``sum(traced call - median_call_ms)`` over the
    calls that traced (None when no call ran without tracing, so there is no baseline).
    ``baseline_calls``: when every call of a custom loop's step traced, rnndoctor called it that
    many more times after the window with the last call's arguments (no new shape, so no
    tracing) to measure ``median_call_ms``; those calls are not in ``calls``.
    ``reduce_retracing`` / ``has_input_signature``: the function's settings. ``arguments``: its
    arguments as observed. ``not_counted``: why ``calls`` and times are absent (TensorFlow's
    tracing count is still given)."""

    name: str
    traces: int
    calls: int = 0
    role: str = "other"
    location: SourceLocation | None = None
    shapes: list[str] = field(default_factory=list)
    instances: int = 1
    traced_calls: int = 0
    total_call_ms: float | None = None
    median_call_ms: float | None = None
    tracing_ms: float | None = None
    reduce_retracing: bool | None = None
    has_input_signature: bool | None = None
    arguments: list[StepArgument] = field(default_factory=list)
    not_counted: str | None = None
    baseline_calls: int = 0


@dataclass
class StepBreakdown:
    """The median step split into input, compute and host overhead, in milliseconds.

    ``compute_ms``: the compute-only probe (training steps on batches cached in memory).
    ``host_ms``: the measured per-step time of the user's callbacks' batch hooks.
    ``input_ms``: waiting for the next batch: ``real_step_ms x (1 - 1 / r)`` where the paired
    probe ran (``r``: ``ProbeFacts.compute_paired.ratio``, the median over pairs of real /
    compute-only; ``real_step_ms - compute_ms`` when ``r`` equals the arms' medians' ratio),
    else what remains, ``max(0, step_ms - compute_ms - host_ms)``.
    ``other_ms`` is the remainder ``step_ms - input_ms - compute_ms - host_ms``, kept so the
    parts always sum to ``step_ms``: negative when the probes add up to more than the step;
    with the paired probe it also holds the gap, of either sign, between ``compute_ms`` (the
    arm's median) and the compute time the pairs' ratio gives (``real_step_ms / r``), and it
    may be positive (Keras' own per-step callbacks such as the progress bar, and the
    difference between the window's steps and the probe's).
    """

    step_ms: float
    input_ms: float
    compute_ms: float
    host_ms: float
    other_ms: float = 0.0


# ``ProbeFacts.batch_probe_not_measured`` / ``spe_probe_not_measured`` of a probe the check did
# not run because --select / --ignore left out every rule that reads it
# (``rnndoctor.engine.unread_probes``); a later evaluation of those facts with the rule gives
# "not evaluated", never a pass.
PROBE_UNREAD = "not run: every rule that reads it is left out (--select / --ignore)"
# how each probe's ``*_not_measured`` begins when the check ran no probes at all (--no-probes, a
# worker of a multi-worker job): the rules that rest on the probes are "not evaluated", never a
# pass (``rules/_measured.py: require_probes``)
PROBES_NOT_RUN = "not run: this check ran no probes"
# Each probe as the reports name it, and its ``ProbeFacts`` field saying why it measured nothing
PROBE_NOT_MEASURED_FIELDS = (
    ("input-only probe", "input_only_not_measured"),
    ("compute-only probe", "compute_only_not_measured"),
    ("batch-size probe", "batch_probe_not_measured"),
    ("steps_per_execution probe", "spe_probe_not_measured"),
    ("sequence length probe", "length_probe_not_measured"),
)


@dataclass
class ProbeFacts:
    """rnndoctor's own probes (DESIGN.md, Measurement). Every time is a median after warm-up.

    ``input_only_ms``: time per batch of a fresh iterator over the user's own data with no model
    (``input_only_method`` says how: ``fresh iterator``, or ``timed as it flowed`` for inputs
    that cannot be re-iterated). ``compute_only_ms``: a training step on ``compute_only_batches``
    batches cached in memory (same shapes), so input costs nothing. ``input_bound_share``:
    ``(step - compute_only - callbacks) / step`` in [0, 1] (paired: from ``real_step_ms``,
    below); ``input_share_check``:
    ``input_only / step``, the cross-check, of the step the share is of (since 1.6: the paired
    ``real_step_ms + callback_ms`` where the share is paired; before, always the window's
    median step). ``batch_probe``: compute-only samples/s at b, 2b, 4b.
    ``spe_probe``: compute-only step time at steps_per_execution 1 and 16. ``callbacks``: per
    user callback. ``traces``: tracing counts. Each ``*_not_measured`` says why a probe is absent.

    The fresh-iterator input-only time is the wall time of the batches after the first two
    divided by their number (a rate: a prefetching or parallel pipeline hands out batches in
    bursts, which a per-call median would misread); inputs timed as they flowed use the median
    per batch. ``memory_limit_mib`` is the memory the batch-size probe may use
    (``memory_limit_source``: ``MemAvailable`` of /proc/meminfo, the GPU's free memory, or the
    ``RNNDOCTOR_PROBE_MEMORY_MIB`` environment variable).

    ``real_step_ms``: the same ``fit`` on the user's own data (a fresh iterator, no callbacks),
    timed in bursts alternating with the compute-only bursts, so that both see the same machine
    load; the input-bound share is then ``real_step x (1 - 1 / r) / (real_step + callbacks)``,
    ``r`` the pairs' median ratio (``compute_paired.ratio``; ``(real_step - compute_only) /
    (real_step + callbacks)`` when ``r`` equals the arms' medians' ratio). None where the data
    cannot be iterated again (a Python generator) or is a ``PyDataset``: the share then uses
    the window's step.

    Since 1.2: ``compute_paired``: the real step (A) against the compute-only step (B), paired
    (``ratio`` = real / compute-only). ``inconsistent``: why the compute-only probe disagrees
    with the window beyond the window's own noise (``compute-only 406 ms > step 253 ms``), after
    one re-measurement (``remeasured``); the rules that rest on it are then not evaluated.
    ``batch_probe_inconsistent``: the same for the batch-size probe's first point (the user's
    batch) against the window's median step.

    Since 1.6: ``batch_real_paired``: where that first point disagreed with the window and with
    the compute-only probe's real step (timed in another phase; or that probe timed none), the
    real step (A) against the point's cached batches (B), timed again in bursts alternating in
    the batch-size probe's phase; with at least 3 pairs, the point is consistent where B is not
    longer than A beyond the window's own noise (p90 / median, not widened for load).

    Since 1.6: ``length_probe``: the compute-only step on the sampled batches as they are
    (``value``: their median padded length, timesteps) and on the same batches cut to half
    that length along the time axis (the model's one sequence input, and targets or weights
    of the same length), timed in interleaved bursts (``length_probe[1].paired``: A = the full
    length over B = the half); the share of the step that grows with the padded length is
    ``(1 - 1 / ratio) / (1 - half / full)``. ``length_probe_not_measured``: why not.
    ``length_rejected`` (since 1.6, optional): the length, timesteps, the model failed to train
    on when the probe cut its batches to half (a functional model whose ``Input`` fixes the
    length, a ``Flatten`` after the RNN): it takes one length only, so bucketed batches of
    other lengths would fail too; None where it trained, or the probe did not get that far.
    ``length_mixed_error`` (since 1.7, optional): where the model trained at both lengths, each
    on a function traced for it, the error (one line) of two steps on batches of both lengths
    through one function traced for an unknown length, as bucketed or per-batch padded batches
    reach it (a tagger's ``TimeDistributed(Dense)``, traced for an unknown length): their fixes
    would fail too; None where those steps ran, or were not tried
    (``length_mixed_not_tried`` says why, since 1.7: the probe's budget had run out).
    ``length_any`` (since 1.8, optional): the halved batches on a train function traced for
    any length, which RD501's and RD502's fixes run (a dataset whose time axis is None), timed
    in the same rounds (``length_any.paired``: A = ``length_probe[1]``, the half on its own
    function for one length, over B = this one; a ratio under 1 is the slowdown of the
    function for any length); None where it was not run: the window's function is for any
    length already (its batches of several lengths), the model failed on mixed lengths, the
    two other arms did not both run, or the mixed lengths were not tried. A point with no time
    (``stopped``) where its budget ran out or it timed nothing.
    ``length_any_not_measured`` (since 1.8, optional): why it was not timed where it would run.
    ``length_any_pipeline`` (since 1.9, optional): where ``length_any``'s batches came through
    the fix's own kind of ``tf.data`` pipeline, one sequence at a time (``fit`` took arrays and
    no GPU runs the step), its ops (``capture/probes.py: FIX_PIPELINE``); its ratio is then the
    slowdown of the pipeline and the function together. None where they were cached batches.
    ``length_any_pipeline_error`` (since 1.9, optional): where that pipeline could not be built
    from the sampled batches, the error (one line); the arm then timed cached batches.
    """

    input_only_ms: float | None = None
    input_only_batches: int = 0
    input_only_method: str | None = None
    input_only_not_measured: str | None = None
    compute_only_ms: float | None = None
    compute_only_batches: int = 0
    compute_only_not_measured: str | None = None
    callback_ms: float | None = None
    callbacks: list[CallbackTime] = field(default_factory=list)
    input_bound_share: float | None = None
    input_share_check: float | None = None
    breakdown: StepBreakdown | None = None
    batch_probe: list[ProbePoint] = field(default_factory=list)
    batch_probe_not_measured: str | None = None
    spe_probe: list[ProbePoint] = field(default_factory=list)
    spe_probe_not_measured: str | None = None
    traces: list[TraceCount] = field(default_factory=list)
    memory_limit_mib: float | None = None
    memory_limit_source: str | None = None
    real_step_ms: float | None = None
    compute_paired: PairedRatio | None = None
    inconsistent: str | None = None
    remeasured: bool = False
    batch_probe_inconsistent: str | None = None
    batch_real_paired: PairedRatio | None = None
    length_probe: list[ProbePoint] = field(default_factory=list)
    length_probe_not_measured: str | None = None
    length_rejected: int | None = None
    length_mixed_error: str | None = None
    length_mixed_not_tried: str | None = None
    length_any: ProbePoint | None = None
    length_any_not_measured: str | None = None
    length_any_pipeline: str | None = None
    length_any_pipeline_error: str | None = None


@dataclass
class CustomLoopFacts:
    """A custom training loop: the script applied gradients through a Keras optimizer outside
    ``fit`` (``Optimizer.apply_gradients`` / ``apply``, hooked).

    ``eager``: the gradients were applied outside any ``tf.function`` (every step runs op by op
    in Python). ``step_function``: the ``tf.function`` that applies them, if any.
    ``location``: the user's ``apply_gradients`` call; ``step_location``: the loop's step
    function definition or call. Step times of the loop go to ``Facts.steps``.

    Since 1.1 (all optional): ``step_is_tf_function``: ``step_function`` is a ``tf.function``
    (otherwise it is the plain Python function whose body applied the gradients, or None when
    the loop body sits at module level). ``functions_run_eagerly``: a ``tf.function`` step ran
    eagerly because of ``tf.config.run_functions_eagerly(True)``. ``step_arguments``: the step
    function's arguments as its calls passed them. ``model``: the name of the ``keras.Model``
    whose trainable variables the optimizer updated (``model_not_found`` says why there is none).
    ``variables_updated``: how many variables one gradient application updates.

    The traced twin (eager loops only, and ``tf.function`` steps under
    ``run_functions_eagerly``): the step function is called on one batch it received, kept in
    memory, first as the loop ran it (eagerly; ``eager_call_ms``, median wall time per call),
    then wrapped in ``tf.function`` (``traced_call_ms``, after one tracing call, whose wall time
    is ``twin_tracing_ms``); ``twin_calls`` timed calls each. ``twin_not_measured`` says why
    there is no twin (a step that calls ``.numpy()`` cannot be traced, say). The twin trains the
    model for those extra calls (the script is stopped afterwards). Since 1.2, ``twin_paired``:
    the eager call (A) against the traced one (B), timed in interleaved bursts.
    """

    eager: bool
    optimizer: str | None = None
    location: SourceLocation | None = None
    step_function: str | None = None
    step_location: SourceLocation | None = None
    steps_seen: int = 0
    step_is_tf_function: bool = False
    functions_run_eagerly: bool = False
    step_arguments: list[StepArgument] = field(default_factory=list)
    model: str | None = None
    model_not_found: str | None = None
    variables_updated: int | None = None
    eager_call_ms: float | None = None
    traced_call_ms: float | None = None
    twin_tracing_ms: float | None = None
    twin_calls: int = 0
    twin_not_measured: str | None = None
    twin_paired: PairedRatio | None = None


@dataclass
class LengthHistogram:
    """Valid sequence lengths in ``bins`` equal-width bins: ``edges`` has len(counts)+1 values;
    bin i holds lengths in [edges[i], edges[i+1]) (the capture's edges are whole numbers and
    the last one lies past the longest length)."""

    edges: list[float] = field(default_factory=list)
    counts: list[int] = field(default_factory=list)


@dataclass
class SequenceInput:
    """One sequence input of the model that reaches an RNN, measured on the sampled batches.

    ``input``: the model input's name (or path); ``rnn_layers``: the RNN layer paths it feeds.
    ``length_source``: how valid lengths were found: ``mask_zero`` (``Embedding(mask_zero=True)``,
    id 0), ``masking`` (``Masking(mask_value=v)``, ``mask_value`` set), ``ragged`` (row lengths),
    ``mask`` (the mask a layer received), or ``pad_value`` (no mask: runs of a constant pad
    value at one end; ``mask_used`` is then False and the model computes on the padding), or
    ``none`` (no mask and no pad value found: every step counts as valid).
    ``lengths``: the valid length of each sampled sequence (up to a cap, ``lengths_truncated``).
    ``padded_lengths``: the time dimension of each sampled batch. ``padded_fraction``: padded
    timesteps / all timesteps over the sample. ``pad_side``: ``right``, ``left``, ``holes``
    (masked steps between valid ones), ``none`` (no padding) or ``mixed``. ``fully_masked_rows``:
    sequences with no valid step. ``global_max_padding``: every batch has the same padded length,
    the maximum over the sample, while per-batch maxima are shorter.

    Since 1.1 also (all optional): ``length_values`` / ``length_counts``: the exact distribution
    of valid lengths over every sampled sequence (sorted distinct lengths in timesteps, and the
    number of sequences of each; never truncated). ``batch_sizes``: the rows of each sampled
    batch (with ``padded_lengths``, the timesteps computed). ``per_batch_padded_fraction``: the
    expected padded fraction with each batch padded to its own longest sequence
    (``rnndoctor/stats.py``). ``input_rank``: rank of the model input array (2: ids,
    3: features). ``targets_per_step``: the targets have the input's (batch, time) shape.
    ``padding_location``: the user's call that padded this input (``padding_function``:
    ``pad_sequences``, ``padded_batch`` or ``bucket_by_sequence_length``; ``padding_argument``:
    its ``padding=`` value, ``pre`` when left to pad_sequences' default), where rnndoctor saw it;
    ``target_padding_location``: the call that padded the per-step targets.

    Since 1.2 also (optional, ``length_source="pad_value"`` only): ``pad_value``: the step that
    pads, as text (``"-1"``, ``"0"``, ``"one-hot vector of index 3"``, ``"vector of 0.0"``);
    ``mask_value`` is then that value where the step is one id or a vector of one value;
    ``pad_index`` / ``pad_depth``: the hot index and the width of a one-hot pad vector.
    """

    input: str
    rnn_layers: list[str] = field(default_factory=list)
    length_source: str = "mask"
    mask_value: Any = None
    mask_used: bool = True
    ragged: bool = False
    batches: int = 0
    sequences: int = 0
    lengths: list[int] = field(default_factory=list)
    lengths_truncated: bool = False
    padded_lengths: list[int] = field(default_factory=list)
    padded_fraction: float | None = None
    pad_side: str | None = None
    left_padded_rows: int = 0
    holed_rows: int = 0
    fully_masked_rows: int = 0
    global_max_padding: bool | None = None
    per_batch_padded_fraction: float | None = None
    quantiles: dict[str, float] = field(default_factory=dict)
    histogram: LengthHistogram | None = None
    padding_location: SourceLocation | None = None
    length_values: list[int] = field(default_factory=list)
    length_counts: list[int] = field(default_factory=list)
    batch_sizes: list[int] = field(default_factory=list)
    input_rank: int | None = None
    targets_per_step: bool | None = None
    padding_function: str | None = None
    padding_argument: str | None = None
    target_padding_location: SourceLocation | None = None
    pad_value: str | None = None
    pad_index: int | None = None
    pad_depth: int | None = None


@dataclass
class SequenceFacts:
    """Sampled sequence data (``batches_sampled`` batches, as ``method`` says: a fresh iterator,
    or batches as they flowed through ``fit``). ``not_measured`` says why nothing was sampled."""

    batches_sampled: int = 0
    method: str | None = None
    inputs: list[SequenceInput] = field(default_factory=list)
    not_measured: str | None = None


@dataclass
class ModelCallStats:
    """One kind of model call the script made after the diagnosis window (since 1.2,
    optional): ``method`` (``predict``, ``evaluate``, ``predict_on_batch``, ``__call__``),
    ``calls``, ``total_s`` / ``median_ms`` (wall time per call), ``single_sample_calls`` (calls on
    a batch of one sample), ``batch_sizes`` (the distinct sizes seen, up to ten), ``location``
    (the user's line of the first call), ``loops`` (the user's loops around that line that do not
    hold the ``fit`` call) and ``calls_per_iteration`` (the calls those loops make per ``fit``
    call, their iterations multiplied: per iteration of the fit loop, or, after a single
    ``fit``, in all; None when one is unknown)."""

    method: str
    calls: int = 0
    total_s: float = 0.0
    median_ms: float | None = None
    single_sample_calls: int = 0
    batch_sizes: list[int] = field(default_factory=list)
    location: SourceLocation | None = None
    loops: list[CodeLoop] = field(default_factory=list)
    calls_per_iteration: int | None = None


# How a run-on after the window that saw everything up to the script's end or its next fit
# ends (OutsideWindowFacts.ended): the capture looks for the predict calls an earlier stop left
# unreached, and RD406 takes no finding for a pass only from these.
SEEN_TO_THE_END = ("script end", "next fit call")


@dataclass
class OutsideWindowFacts:
    """What the script did after the diagnosis window (since 1.2, optional).

    After the window the script runs on, with the neutralisation still on, until its next
    ``fit`` call, its end, its first write to a file or its budget (``after the window`` for a
    ``fit`` inside a loop, ``FitConfig.fit_in_loop``; the shorter ``after a single fit``
    otherwise: ``rnndoctor/capture/budget.py``), and then stops as before (``ended``:
    ``next fit call``, ``script end``, ``a write``, ``budget``, ``error``). ``seconds``: the
    wall time it ran; ``budget_s``; ``calls``: the model calls it made
    (:class:`ModelCallStats`); ``python_s``: the time outside those calls (plain Python, data
    preparation, printing). ``per_call_ms``: one call on the same single sample as a
    ``predict`` call, timed by rnndoctor: ``predict``, ``model(x, training=False)``,
    ``predict_on_batch`` (each way's median ms per call over interleaved bursts; not measured
    for a stateful RNN, whose states a call would change); ``per_call_paired``: the paired
    ratio of ``predict`` (arm ``a``) over each other way (arm ``b``), with its interval.
    ``detail``: what stopped it, in words. ``unreached_predict_lines`` (since 1.7, optional):
    where it stopped before the script's end or its next ``fit`` call, the lines of the
    ``.predict(`` calls after the ``fit`` line in that file that it did not reach (empty: none;
    None: not looked for, or the file could not be read).
    """

    ended: str
    seconds: float = 0.0
    budget_s: float | None = None
    calls: list[ModelCallStats] = field(default_factory=list)
    python_s: float | None = None
    per_call_ms: dict[str, float] = field(default_factory=dict)
    per_call_paired: list[PairedRatio] = field(default_factory=list)
    detail: str | None = None
    unreached_predict_lines: list[int] | None = None


@dataclass
class WorkerFacts:
    """One worker of a distributed job (since 1.3): what its own capture measured.

    ``index``: the worker's position in the merged report (0: the chief, or the only worker);
    ``task``: its ``TF_CONFIG`` task (``worker:1``), or ``local`` for a single-host strategy.
    ``median_step_time_ms`` / ``step_time_ms``: its window's step times. In synchronous training
    every worker's step ends in the same all-reduce, so these are nearly equal even when one
    worker is slow; ``outside_collectives_ms`` is the part of its step spent outside the
    collectives (input wait + compute: its compute-only probe plus its input wait, from
    ``ProbeFacts.breakdown``), which is where a straggler shows. ``input_bound_share``: its
    ``ProbeFacts.input_bound_share``. ``outcome``: its capture's ``RunInfo.outcome``;
    ``message``: why it failed, if it did. ``facts_file``: its ``facts-worker-<i>.json``.

    From the chief's trace of all workers (``--workers``; ``traced_host``: the worker's host in
    the profile run): op self time, summed over the host's threads, over the trace, which is
    the same wall-clock window on every worker (one ``client.trace`` call starts them all;
    ``traced_ms``: its duration), so the figures compare across workers: ``collective_ms``
    (all-reduce and the other collective ops, where a worker waits for the others),
    ``input_ms`` (tf.data ops and the Python functions they run), ``compute_ms`` (every other
    op); ``outside_collectives_ms`` is ``input_ms + compute_ms``; ``input_bound_share`` is
    ``input_ms / (input_ms + compute_ms + collective_ms)``.
    """

    index: int
    task: str = "local"
    host: str | None = None
    median_step_time_ms: float | None = None
    step_time_ms: list[float] = field(default_factory=list)
    outside_collectives_ms: float | None = None
    input_ms: float | None = None
    compute_ms: float | None = None
    input_bound_share: float | None = None
    outcome: str | None = None
    message: str | None = None
    facts_file: str | None = None
    collective_ms: float | None = None
    traced_host: str | None = None
    traced_ms: float | None = None


@dataclass
class KerasFitFailure:
    """Keras' ``fit`` failed under the strategy before its first step (since 1.3).

    ``message``: the exception, one line; ``keras_file`` / ``keras_function`` / ``keras_line``:
    the frame of the installed Keras that raised it (``keras/src/backend/tensorflow/trainer.py``,
    ``_maybe_symbolic_build``), as the traceback gave it; ``location``: the user's ``fit`` call;
    ``keras_version``: the Keras that failed.
    """

    message: str
    keras_file: str | None = None
    keras_function: str | None = None
    keras_line: int | None = None
    location: SourceLocation | None = None
    keras_version: str | None = None


@dataclass
class StrategyFacts:
    """The ``tf.distribute`` strategy the training ran under (since 1.3).

    ``strategy``: the public name (``MirroredStrategy``, ``MultiWorkerMirroredStrategy``);
    ``strategy_class``: the Python class (``CollectiveAllReduceStrategy``). ``replicas``:
    ``num_replicas_in_sync`` (over all workers); ``workers``: the worker tasks of the cluster
    (``chief`` and ``worker`` in ``TF_CONFIG``; 1 for a single-host strategy); ``task_type`` /
    ``task_id``: this process's task. ``global_batch_size``: the batch the dataset yields (the
    global batch: ``fit`` and ``experimental_distribute_dataset`` split it across the replicas);
    ``per_replica_batch_size``: ``global_batch_size / replicas``.

    ``communication``: the all-reduce implementation, ``RING``, ``NCCL`` or ``AUTO``
    (``tf.distribute.experimental.CommunicationImplementation``, from the strategy's
    communication options), None when the strategy has none; ``cross_device_ops``: the class
    that reduces across devices (``CollectiveAllReduce``, ``NcclAllReduce``...).

    ``auto_shard_policy``: the dataset's ``options().experimental_distribute.auto_shard_policy``
    (``AUTO``, ``FILE``, ``DATA``, ``OFF``, ``HINT``); ``auto_shard_resolved``: what it does for
    this job, ``FILE``, ``DATA`` or ``OFF``, following ``tf.data``'s auto-shard rewrite (AUTO is
    FILE on a pipeline that reads files, else DATA; one input worker shards nothing: OFF), with
    ``auto_shard_reason`` in words. ``distributed_by``: who distributed the dataset, ``keras``
    (``fit`` calls ``experimental_distribute_dataset`` itself), ``experimental_distribute_dataset``
    or ``distribute_datasets_from_function`` (the user's call, at ``distribute_location``), or
    None when neither was seen. ``dataset_location``: the user's line that built the dataset.

    ``per_worker``: one :class:`WorkerFacts` per worker (one entry for a single process).
    ``fit_failure``: Keras' ``fit`` failed under this strategy before its first step.
    ``profile_logdir``: the merged profile run of all workers (``--workers``) and
    ``profile_hosts``: the hosts it holds; ``traced``: the chief's per-worker figures from that
    run (:class:`WorkerFacts`, the trace fields only; the merge folds them into
    ``per_worker``); ``collective_share``: the collective ops' share of all op self time in the
    run (every host). ``gradient_bytes``: the bytes of the trainable variables, which one
    all-reduce of the gradients moves per step; ``not_measured``: what could not be read, and
    why.
    """

    strategy: str
    strategy_class: str = ""
    replicas: int = 1
    workers: int = 1
    task_type: str | None = None
    task_id: int | None = None
    global_batch_size: int | None = None
    per_replica_batch_size: int | None = None
    communication: str | None = None
    cross_device_ops: str | None = None
    auto_shard_policy: str | None = None
    auto_shard_resolved: str | None = None
    auto_shard_reason: str | None = None
    distributed_by: str | None = None
    distribute_location: SourceLocation | None = None
    dataset_location: SourceLocation | None = None
    per_worker: list[WorkerFacts] = field(default_factory=list)
    fit_failure: KerasFitFailure | None = None
    profile_logdir: str | None = None
    profile_hosts: list[str] = field(default_factory=list)
    traced: list[WorkerFacts] = field(default_factory=list)
    collective_share: float | None = None
    gradient_bytes: int | None = None
    not_measured: str | None = None


@dataclass
class Facts:
    """The root of ``facts.json``."""

    run: RunInfo
    schema_version: str = SCHEMA_VERSION
    tool_version: str = ""
    environment: Environment | None = None
    model: ModelFacts | None = None
    fit: FitConfig | None = None
    steps: StepTimes | None = None
    profile: ProfileSummary | None = None
    data: DataFacts | None = None
    probes: ProbeFacts | None = None
    loop: CustomLoopFacts | None = None
    sequences: SequenceFacts | None = None
    outside_window: OutsideWindowFacts | None = None
    strategy: StrategyFacts | None = None

    def to_dict(self) -> dict[str, Any]:
        """Returns the JSON-serialisable dict (dataclasses recursively converted)."""
        return dataclasses.asdict(self)

    def fix_pipeline_on_step_cores(self) -> bool:
        """Whether a padding fix's per-sequence ``tf.data`` pipeline would run on the cores that
        run the step, where today's input costs no per-sequence op: ``fit`` took arrays or
        tensors (``fit.data_kind``), which Keras' array adapter batches by slicing whole
        batches, and no GPU runs the step (``environment.gpu_count``). The length probe then
        times that pipeline (``capture/probes.py: _fix_pipeline``), and the padding rules say
        where it did not (``rules/_sequences.py: CPU_PIPELINE_CAVEAT``). A ``tf.data`` input
        pays its per-sequence ops before the fix as after; with a GPU the pipeline runs on the
        host beside the device's step."""
        kind = self.fit.data_kind if self.fit is not None else None
        env = self.environment
        return DataKind.is_array(kind) and env is not None and not env.gpu_count

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Facts:
        """Restores typed facts from ``to_dict`` output.

        A document of an older MINOR version is read as the current one (the fields it lacks
        stay None / empty).

        Raises:
            ValueError: the schema's MAJOR version differs from ``SCHEMA_VERSION``'s, or the data
                is not a facts document.
        """
        if not isinstance(data, dict) or not isinstance(data.get("run"), dict):
            raise ValueError("not an rnndoctor facts document (no 'run' section)")
        version = str(data.get("schema_version", ""))
        if version.split(".")[0] != SCHEMA_VERSION.split(".")[0]:
            raise ValueError(
                f"facts schema {version!r} is not readable by this rnndoctor "
                f"(schema {SCHEMA_VERSION})"
            )
        try:
            facts = _build(cls, data)
        except ValueError as exc:
            raise ValueError(f"not a valid facts document: {exc}") from None
        facts.schema_version = SCHEMA_VERSION  # an older MINOR reads as this one, fields absent
        return facts

    def save(self, path: str | Path) -> None:
        """Writes the facts as JSON, atomically (a reader never sees half a file): each save
        writes a temporary file of its own beside ``path`` (:data:`SAVE_TEMP_PREFIX`, which no
        user's file bears: :func:`save_leftovers` finds those a killed process left) and
        renames it over ``path``, so that saves from two threads (the capture's main thread and
        a timer's, as a check ends) never mix their bytes; the last rename wins. The file gets
        the permissions a plain write would (``0o666`` less the umask).

        Raises:
            OSError: the file cannot be written (the temporary file is removed).
        """
        path = Path(path)
        text = json.dumps(self.to_dict(), indent=2, default=_json_default)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=SAVE_TEMP_PREFIX, suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as file:
                if hasattr(os, "fchmod"):
                    os.fchmod(file.fileno(), 0o666 & ~_UMASK)  # mkstemp's file is 0600
                file.write(text)
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.remove(tmp)
            raise

    @classmethod
    def load(cls, path: str | Path) -> Facts:
        """Reads ``facts.json``. Raises ``ValueError`` / ``OSError`` as ``from_dict`` / open do."""
        return cls.from_dict(json.loads(Path(path).read_text()))


def _json_default(value: Any) -> Any:
    # numpy scalars and other odd values from Keras configs: keep them readable, never crash.
    for attr in ("item", "tolist"):
        if hasattr(value, attr):
            return getattr(value, attr)()
    return repr(value)


_KIND = {str: "a string", int: "an integer", float: "a number", bool: "true or false"}


def _build(tp: Any, value: Any, path: str = "facts") -> Any:
    """Converts plain JSON data into the annotated type ``tp`` (dataclasses, lists, optionals).

    Raises:
        ValueError: a value does not have its field's type; the message names the field's path.
    """
    if value is None:
        return None
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1:
            return _build(args[0], value, path)
        return value  # a union of several types (dict[str, Any] values, say): kept as read
    if origin is list:
        if not isinstance(value, list):
            raise ValueError(f"{path} must be a list")
        (item,) = typing.get_args(tp) or (Any,)
        return [_build(item, v, f"{path}[{i}]") for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise ValueError(f"{path} must be an object")
        return value
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        try:
            return tp(value)
        except ValueError:
            choices = ", ".join(m.value for m in tp)
            raise ValueError(f"{path} must be one of {choices}, not {value!r}"[:200]) from None
    if dataclasses.is_dataclass(tp):
        if not isinstance(value, dict):
            raise ValueError(f"{path} must be an object")
        hints = typing.get_type_hints(tp)
        known = {f.name for f in dataclasses.fields(tp)}
        try:
            return tp(
                **{k: _build(hints[k], v, f"{path}.{k}") for k, v in value.items() if k in known}
            )
        except TypeError as exc:  # a required field is missing
            raise ValueError(f"{path}: {exc}") from None
    if tp in _KIND:
        ok = isinstance(value, tp) and (tp is bool or not isinstance(value, bool))
        if tp is float:
            ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        if not ok:
            raise ValueError(f"{path} must be {_KIND[tp]}, not {value!r}"[:200])
    return value
