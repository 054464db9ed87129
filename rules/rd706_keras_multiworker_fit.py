"""RD706 keras-multiworker-fit: Keras' ``fit`` fails under MultiWorkerMirroredStrategy.

What it detects:
    The installed Keras' ``fit`` raised before its first training step under the strategy:
    ``ValueError: Attempt to convert a value (PerReplica:...) ... to a Tensor``, from
    ``strategy.reduce`` in ``_maybe_symbolic_build`` (``keras/src/backend/tensorflow/
    trainer.py``). The capture recognises that exact failure by its message and by the Keras
    frame that raised it (``rnndoctor/capture/distribute.py``: ``fit_failure_frame``), on the
    Keras that is installed: nothing is decided from a version number.

Why it slows training:
    It does not slow the job: it stops it. Every worker fails at the start, after the cluster
    has been scheduled; a worker that gets past the failure would wait for the others in the
    first collective. A pre-flight check (``rnndoctor check train.py --workers 2``) meets it on
    one machine before the job is launched at scale.

Evidence:
    ``strategy.fit_failure``: the exception's first line, the Keras file, function and line
    that raised it, the Keras version; ``strategy.strategy`` / ``workers`` / ``replicas``.

Example:
    ``strategy = tf.distribute.MultiWorkerMirroredStrategy()`` ... ``model.fit(ds)`` with
    Keras 3 (``import keras``)

Use instead:
    Either tf_keras (Keras 2, whose ``fit`` trains under this strategy): ``pip install
    tf-keras``, ``TF_USE_LEGACY_KERAS=1`` in every worker's environment and ``tf.keras`` in the
    script; or a custom loop with ``strategy.run`` over ``strategy.experimental_distribute_
    dataset(ds)``, whose gradients the Keras 3 optimizer applies.

Fix safety:
    display-only: both ways out change how the script trains (another Keras, or a loop of its
    own), so the fix is a sketch to adapt by hand.

References:
    keras-team/keras#20585 (``fit`` under MultiWorkerMirroredStrategy: "Attempt to convert a
    value (PerReplica...)"); tensorflow/tensorflow#72388 (the same failure reported against
    TensorFlow); TensorFlow guide "Multi-worker training with Keras" and "Custom training loop
    with Keras and MultiWorkerMirroredStrategy".
"""

from __future__ import annotations

from rnndoctor.facts import Facts
from rnndoctor.findings import Evidence, Finding, Fix, FixSafety, Severity
from rnndoctor.rules import _distributed as dist
from rnndoctor.rules import _fastpath as fp
from rnndoctor.rules import finding, rule

UPSTREAM_ISSUES = (
    "https://github.com/keras-team/keras/issues/20585",
    "https://github.com/tensorflow/tensorflow/issues/72388",
)
_FIX_CODE = """\
# Way out 1: tf_keras (Keras 2), whose fit trains under MultiWorkerMirroredStrategy.
#   pip install tf-keras ; run every worker with TF_USE_LEGACY_KERAS=1
import tensorflow as tf
keras = tf.keras  # tf_keras under TF_USE_LEGACY_KERAS=1

# Way out 2: keep Keras 3 and train with a custom loop under strategy.run.
dist_ds = strategy.experimental_distribute_dataset(ds)

@tf.function
def train_step(batch):
    def step(x, y):
        with tf.GradientTape() as tape:
            loss = tf.nn.compute_average_loss(
                loss_fn(y, model(x, training=True)), global_batch_size=GLOBAL_BATCH
            )
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss
    per_replica = strategy.run(step, args=batch)
    return strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None)

for batch in dist_ds:
    train_step(batch)"""


@rule(
    "RD706",
    "keras-multiworker-fit",
    "Keras 3's fit fails under MultiWorkerMirroredStrategy before its first step",
    needs=(),
    severity=Severity.ERROR,
)
def check(facts: Facts) -> list[Finding]:
    if dist.trained_without_strategy(facts):
        return []
    strategy = facts.strategy
    failure = strategy.fit_failure
    if failure is None:
        return []
    where = f"{failure.keras_file}:{failure.keras_line} ({failure.keras_function})"
    return [
        finding(
            message=(
                f"Keras {failure.keras_version or ''} fit fails under {strategy.strategy} "
                f"({strategy.workers} workers) before its first step: {failure.message} (raised "
                f"in {where}). Known upstream: {', '.join(UPSTREAM_ISSUES)}."
            ),
            location=fp.to_location(failure.location),
            evidence=(
                Evidence("error", failure.message, "", "the exception fit raised"),
                Evidence("raised in", where, "", "the traceback's Keras frame"),
                Evidence("Keras", failure.keras_version or "—", "", "keras.__version__"),
                Evidence("strategy", strategy.strategy, "", "the model's distribute_strategy"),
                Evidence("workers", strategy.workers, "", "TF_CONFIG's cluster"),
                Evidence("upstream issues", ", ".join(UPSTREAM_ISSUES), "", "issue trackers"),
            ),
            fix=Fix(
                title=(
                    "Run fit under tf_keras (TF_USE_LEGACY_KERAS=1 on every worker), or train "
                    "Keras 3 with a custom loop under strategy.run"
                ),
                code=_FIX_CODE,
                safety=FixSafety.DISPLAY_ONLY,
            ),
            gain="not measured: the job does not train at all until this is fixed",
        )
    ]
