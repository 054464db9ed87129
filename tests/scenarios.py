"""Tiny real Keras models, one offending/compliant pair per RD1xx rule.

Shared by the integration tests (run live through ``rnndoctor.diagnose``) and by
``data/make_rule_fixtures.py``, which saves their facts for the TensorFlow-free unit tests.
Each construction line carries a ``# site:<rule>-<variant>`` marker so that tests can check the
recorded file:line.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

T, F = 6, 3  # timesteps, features


@dataclass
class Scenario:
    rule_id: str
    variant: str  # "offending" or "compliant"
    build: Callable[[], object]
    layer: str | None  # the layer path the finding must name (offending only)

    @property
    def marker(self) -> str:
        return f"site:{self.rule_id}-{self.variant}"


def line_of(marker: str, path: str | Path = __file__) -> int:
    """The line number that carries ``# <marker>`` in ``path``."""
    for number, text in enumerate(Path(path).read_text().splitlines(), start=1):
        if text.rstrip().endswith(f"# {marker}"):
            return number
    raise LookupError(marker)


def _seq(rnn):
    import keras

    model = keras.Sequential([keras.Input((T, F)), rnn, keras.layers.Dense(1)], name="seq")
    model.compile(optimizer="sgd", loss="mse")
    return model


def data(n: int = 64):
    import numpy as np

    rng = np.random.default_rng(0)
    return rng.normal(size=(n, T, F)).astype("float32"), rng.normal(size=(n, 1)).astype("float32")


def rd101_bad():
    from keras import layers

    return _seq(layers.LSTM(4, recurrent_dropout=0.25))  # site:RD101-offending


def rd101_good():
    from keras import layers

    return _seq(layers.LSTM(4, dropout=0.25))  # site:RD101-compliant


def rd102_bad():
    from keras import layers

    return _seq(layers.GRU(4, activation="relu"))  # site:RD102-offending


def rd102_good():
    from keras import layers

    return _seq(layers.GRU(4, activation="tanh"))  # site:RD102-compliant


def rd103_bad():
    from keras import layers

    return _seq(layers.LSTM(4, recurrent_activation="hard_sigmoid"))  # site:RD103-offending


def rd103_good():
    from keras import layers

    return _seq(layers.LSTM(4, recurrent_activation="sigmoid"))  # site:RD103-compliant


def rd104_bad():
    from keras import layers

    return _seq(layers.LSTM(4, unroll=True))  # site:RD104-offending


def rd104_good():
    from keras import layers

    return _seq(layers.LSTM(4, unroll=False))  # site:RD104-compliant


def rd105_bad():
    from keras import layers

    return _seq(layers.GRU(4, use_bias=False))  # site:RD105-offending


def rd105_good():
    from keras import layers

    return _seq(layers.GRU(4, use_bias=True))  # site:RD105-compliant


def rd106_bad():
    from keras import layers

    return _seq(layers.GRU(4, reset_after=False))  # site:RD106-offending


def rd106_good():
    from keras import layers

    return _seq(layers.GRU(4, reset_after=True))  # site:RD106-compliant


def rd107_bad():
    from keras import layers

    return _seq(layers.RNN(layers.LSTMCell(4)))  # site:RD107-offending


def rd107_good():
    from keras import layers

    return _seq(layers.LSTM(4))  # site:RD107-compliant


def rd108_bad():
    from keras import layers

    return _seq(layers.SimpleRNN(4))  # site:RD108-offending


def rd108_good():
    from keras import layers

    return _seq(layers.GRU(4))  # site:RD108-compliant


def rd109_bad():
    from keras import layers

    return _seq(layers.LSTM(4, use_cudnn=False))  # site:RD109-offending


def rd109_good():
    from keras import layers

    return _seq(layers.LSTM(4, use_cudnn="auto"))  # site:RD109-compliant


def _min_cell():
    import keras

    class MinimalCell(keras.layers.Layer):
        """A user-defined cell (the Keras guide's minimal RNN cell)."""

        def __init__(self, units, **kwargs):
            super().__init__(**kwargs)
            self.units = units
            self.state_size = units

        def build(self, input_shape):
            self.kernel = self.add_weight(shape=(input_shape[-1], self.units))
            self.recurrent_kernel = self.add_weight(shape=(self.units, self.units))

        def call(self, inputs, states):
            h = keras.ops.matmul(inputs, self.kernel)
            out = h + keras.ops.matmul(states[0], self.recurrent_kernel)
            return out, [out]

    return MinimalCell


def rd113_bad():
    from keras import layers

    return _seq(layers.RNN(_min_cell()(4)))  # site:RD113-offending


def rd113_good():
    from keras import layers

    return _seq(layers.GRU(4))  # site:RD113-compliant


def bidirectional_bad():
    """A Bidirectional LSTM inside a functional model (RD101)."""
    import keras
    from keras import layers

    inputs = keras.Input((T, F))
    x = layers.Bidirectional(layers.LSTM(4, recurrent_dropout=0.2))(inputs)  # site:RD101-bidi
    model = keras.Model(inputs, layers.Dense(1)(x), name="bidi")
    model.compile(optimizer="sgd", loss="mse")
    return model


def bidirectional_good():
    import keras
    from keras import layers

    inputs = keras.Input((T, F))
    x = layers.Bidirectional(layers.LSTM(4))(inputs)
    model = keras.Model(inputs, layers.Dense(1)(x), name="bidi")
    model.compile(optimizer="sgd", loss="mse")
    return model


def subclassed(act: str):
    """An LSTM inside a subclassed model (RD103 when hard_sigmoid)."""
    import keras

    class Tagger(keras.Model):
        def __init__(self):
            super().__init__(name="tagger")
            self.encoder = keras.layers.LSTM(4, recurrent_activation=act)  # site:RD103-subclassed
            self.head = keras.layers.Dense(1)

        def call(self, inputs):
            return self.head(self.encoder(inputs))

    model = Tagger()
    model.compile(optimizer="sgd", loss="mse")
    return model


SCENARIOS = [
    Scenario("RD101", "offending", rd101_bad, "seq/lstm"),
    Scenario("RD101", "compliant", rd101_good, None),
    Scenario("RD102", "offending", rd102_bad, "seq/gru"),
    Scenario("RD102", "compliant", rd102_good, None),
    Scenario("RD103", "offending", rd103_bad, "seq/lstm"),
    Scenario("RD103", "compliant", rd103_good, None),
    Scenario("RD104", "offending", rd104_bad, "seq/lstm"),
    Scenario("RD104", "compliant", rd104_good, None),
    Scenario("RD105", "offending", rd105_bad, "seq/gru"),
    Scenario("RD105", "compliant", rd105_good, None),
    Scenario("RD106", "offending", rd106_bad, "seq/gru"),
    Scenario("RD106", "compliant", rd106_good, None),
    Scenario("RD107", "offending", rd107_bad, "seq/rnn"),
    Scenario("RD107", "compliant", rd107_good, None),
    Scenario("RD108", "offending", rd108_bad, "seq/simple_rnn"),
    Scenario("RD108", "compliant", rd108_good, None),
    Scenario("RD109", "offending", rd109_bad, "seq/lstm"),
    Scenario("RD109", "compliant", rd109_good, None),
    Scenario("RD113", "offending", rd113_bad, "seq/rnn"),
    Scenario("RD113", "compliant", rd113_good, None),
]


def bidirectional_multiline():
    """The LSTM on the line after its Bidirectional (the frame's line is the wrapper's)."""
    import keras
    from keras import layers

    inputs = keras.Input((T, F))
    x = layers.Bidirectional(
        layers.LSTM(4, recurrent_dropout=0.2),  # site:RD101-bidi-multiline
    )(inputs)
    model = keras.Model(inputs, layers.Dense(1)(x), name="bidi")
    model.compile(optimizer="sgd", loss="mse")
    return model


def positional_activation():
    """RD102 with the activation passed positionally."""
    from keras import layers

    units = 4
    return _seq(layers.GRU(units, "relu", use_bias=True))  # site:RD102-positional
