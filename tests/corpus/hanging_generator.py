"""A Python generator that yields three batches, then blocks forever (a stuck reader)."""

import time

from _tiny import data, lstm_model

x, y = data()


def batches():
    for i in range(3):
        yield x[i * 16 : (i + 1) * 16], y[i * 16 : (i + 1) * 16]
    while True:
        time.sleep(0.5)


lstm_model().fit(batches(), epochs=1, steps_per_epoch=16)
