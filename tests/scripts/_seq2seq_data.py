"""Data of the lstm_seq2seq-shaped script (seq2seq_onehot.py): character sequences one-hot
encoded and padded with the one-hot vector of a space, as keras-io's lstm_seq2seq pads them.
Shared with the test, which computes the true padded fraction from the same data."""

import numpy as np

SOURCE_CHARS = " .abcdefghij"
TARGET_CHARS = " .abcdefghij\t\n"
ROWS = 256


def texts(seed: int, low: int, high: int) -> list[str]:
    """Sentences of words and single spaces, ending with a period (never with a space)."""
    rng = np.random.default_rng(seed)
    out = []
    for n in rng.integers(low, high, size=ROWS):
        words = ["".join(rng.choice(list("abcdefghij"), size=k)) for k in rng.integers(1, 6, n)]
        out.append(" ".join(words)[: 4 * n] + ".")
    return out


def one_hot(lines: list[str], chars: str) -> np.ndarray:
    steps = max(map(len, lines))
    x = np.zeros((len(lines), steps, len(chars)), dtype="float32")
    for i, line in enumerate(lines):
        for t, char in enumerate(line):
            x[i, t, chars.index(char)] = 1.0
        x[i, len(line) :, chars.index(" ")] = 1.0  # padded with the one-hot space
    return x


def data() -> tuple[list[str], list[str], np.ndarray, np.ndarray, np.ndarray]:
    source = texts(1, 1, 6)
    target = ["\t" + t + "\n" for t in texts(2, 1, 10)]
    encoder_in = one_hot(source, SOURCE_CHARS)
    decoder_in = one_hot(target, TARGET_CHARS)
    decoder_out = np.zeros_like(decoder_in)
    decoder_out[:, :-1] = decoder_in[:, 1:]  # the next character
    decoder_out[:, -1, TARGET_CHARS.index(" ")] = 1.0
    return source, target, encoder_in, decoder_in, decoder_out
