"""A warm ``--verify`` arm: the window-only child that measures one window per parent command.

With ``--window-only --control R,W`` the child runs the user's script up to ``fit`` (or its custom
training loop: both drivers call :class:`WarmWindows`), runs the warm-up steps, writes ``{"ready":
true}`` to W and waits for a line on R: ``go`` measures one window of ``--steps`` steps, and on
until they time ``rnndoctor.paired.ARM_WINDOW_S`` while the data lasts, and writes its result (one
JSON line, :func:`window_result`), then waits again; ``stop`` or the end of R ends the window as a
plain check's does. Between windows the child is blocked on its pipe (no step runs),
so the parent can alternate the windows of two warm processes, the original's and a patched copy's,
A B A B, without paying for the process start, TensorFlow's import, the script's data loading and
the train function's tracing again.

:class:`SampleCounter` counts the samples a ``tf.data`` input feeds each step when its batch size
is not a constant (``bucket_by_sequence_length``): a ``map`` after the user's last op adds the
batch's leading dimension to a ``tf.Variable`` (one ``AssignAdd`` per batch), read at each step's
end; the map runs in the step's own ``get_next`` (no prefetch is injected after it), so the
count between two step ends is the batch that step trained on.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rnndoctor.capture.step_window import StepWindow


class Control:
    """The two pipes to the parent (file descriptors inherited from it).

    Args:
        fds: ``"R,W"`` as ``Options.control`` holds them.

    Raises:
        ValueError: ``fds`` is not two integers.
        OSError: a descriptor is not open.
    """

    def __init__(self, fds: str):
        read_fd, write_fd = (int(v) for v in fds.split(","))
        self._commands = os.fdopen(read_fd, "r", encoding="utf-8")
        self._results = os.fdopen(write_fd, "w", encoding="utf-8")

    def send(self, message: dict[str, Any]) -> None:
        """Writes one JSON line to the parent (a broken pipe: the parent is gone, ignored)."""
        try:
            self._results.write(json.dumps(message) + "\n")
            self._results.flush()
        except (BrokenPipeError, OSError):
            pass

    def wait(self) -> bool:
        """Blocks for the parent's next line: True for ``go``, False for ``stop`` or the end."""
        try:
            line = self._commands.readline()
        except OSError:
            return False
        return line.strip() == "go"


class WarmWindows:
    """A warm arm's windows over the window's :class:`StepWindow`, for both drivers (the ``fit``
    callback and the custom-loop hook call :meth:`after_step` after each step's ``end_step``).

    After the warm-up it says ready and waits for the parent's command; after each window of
    ``measured_steps`` steps (and its time floor, ``WindowOptions.min_measured_s``) it sends the
    window (:func:`window_result`) and waits again.

    Args:
        control: the pipes to the parent.
    """

    def __init__(self, control: Control):
        self.control = control
        self.windows = 0  # windows begun (the parent's ``go`` lines)
        self.sent = False  # the window under way was sent (its steps are done)

    def after_step(
        self,
        steps: StepWindow,
        samples: int | None,
        final_loss: float | None,
        loss_step: int | None = None,
    ) -> bool | None:
        """What follows the step that just ended.

        Args:
            steps: the window's state (its ``step_ms`` are the current window's).
            samples: the samples of the current window's measured steps (None: unknown).
            final_loss: the loss logged at the last step (None: none).
            loss_step: the step of its epoch (1-based) that logged ``final_loss`` (None: none).

        Returns:
            None: go on (warm-up, or a window under way). True: a new window begins now (its
            steps and clock are reset; the caller resets its sample count). False: the parent
            said ``stop`` or closed its pipe: end the window as a plain check's ends.
        """
        if steps.warming_up():
            return None
        if self.windows == 0:
            self.control.send({"ready": True})
        elif steps.measuring():
            return None
        else:
            self._send(steps, samples, final_loss, loss_step)
        if not self.control.wait():
            return False
        self.windows += 1
        self.sent = False
        steps.new_window()
        return True

    def ended(
        self,
        steps: StepWindow,
        samples: int | None,
        final_loss: float | None,
        loss_step: int | None = None,
    ) -> None:
        """The training ended (its data ran out) in a window under way: sends that window as it
        is when it holds its ``measured_steps`` steps (it had gone on for its time floor,
        ``min_measured_s``); a shorter one is not sent, and the parent starts a fresh child.
        Arguments as :meth:`after_step`'s. A window :meth:`after_step` sent already (the
        parent's ``stop`` followed it) is not sent again."""
        if self.windows == 0 or self.sent or len(steps.step_ms) < steps.options.measured_steps:
            return
        self._send(steps, samples, final_loss, loss_step)

    def _send(
        self,
        steps: StepWindow,
        samples: int | None,
        final_loss: float | None,
        loss_step: int | None,
    ) -> None:
        """Sends the window under way (:func:`window_result`) and marks it sent."""
        self.control.send(
            window_result(steps.step_ms, samples, final_loss, self.windows - 1, loss_step)
        )
        self.sent = True


class SampleCounter:
    """Counts the samples of each batch a ``tf.data.Dataset`` yields.

    Args:
        dataset: the user's dataset as ``fit`` receives it (batched).

    Attributes:
        dataset: the same pipeline with the counting ``map`` appended: ``fit`` takes this one.
    """

    def __init__(self, dataset: Any):
        import tensorflow as tf

        self.variable = tf.Variable(0, dtype=tf.int64, trainable=False, name="rnndoctor_samples")
        variable = self.variable

        def count(*element: Any) -> Any:
            first = tf.nest.flatten(element)[0]
            added = variable.assign_add(tf.cast(tf.shape(first)[0], tf.int64))
            with tf.control_dependencies([added]):
                out = tf.nest.map_structure(tf.identity, element)
            return out[0] if len(out) == 1 else out

        options = tf.data.Options()
        # No prefetch injected after the count: it would run ahead of the steps by a buffer
        # whose fill varies (tf.data's inject_prefetch rewrite); the user's own ops are kept.
        options.experimental_optimization.inject_prefetch = False
        self.dataset = dataset.map(count).with_options(options)

    def read(self) -> int:
        """Samples counted so far."""
        return int(self.variable.numpy())


def window_result(
    step_ms: Sequence[float],
    samples: int | None,
    final_loss: float | None,
    index: int,
    loss_step: int | None = None,
) -> dict[str, Any]:
    """One window's JSON line.

    Args:
        step_ms: its measured step times (ms per step).
        samples: the samples those steps trained on (None: unknown); with
            ``steps_per_execution`` N > 1 each entry of ``step_ms`` is an execution's time over N,
            and ``samples`` counts that execution's samples over N, so the rate is unchanged.
        final_loss: the loss ``fit`` logged at its last step (None: none logged).
        index: the window's number in this process (0-based).
        loss_step: the step of its epoch (1-based) whose end logged ``final_loss``: with
            ``steps_per_execution`` N, N steps per measured step (None: not known).

    Returns:
        ``{"window", "steps", "step_time_ms", "samples", "samples_per_s", "final_loss",
        "loss_step"}``;
        ``samples_per_s`` is ``samples`` over the steps' summed time (None when either is 0 or
        unknown).
    """
    seconds = sum(step_ms) / 1000.0
    rate = samples / seconds if samples and seconds > 0 else None
    return {
        "window": index,
        "steps": len(step_ms),
        "step_time_ms": [round(v, 4) for v in step_ms],
        "samples": samples,
        "samples_per_s": None if rate is None else round(rate, 3),
        "final_loss": final_loss,
        "loss_step": loss_step,
    }
