"""Loads batches in worker processes: a PyDataset with use_multiprocessing=True, and a
multiprocessing pool the script never closes."""

import multiprocessing

import keras
import numpy as np
from _tiny import data, lstm_model


class Batches(keras.utils.PyDataset):
    def __init__(self, x, y, batch_size):
        super().__init__(workers=2, use_multiprocessing=True, max_queue_size=4)
        self.x, self.y, self.batch_size = x, y, batch_size

    def __len__(self):
        return len(self.x) // self.batch_size

    def __getitem__(self, i):
        s = slice(i * self.batch_size, (i + 1) * self.batch_size)
        return self.x[s], self.y[s]


def square(v):
    return v * v


if __name__ == "__main__":
    pool = multiprocessing.Pool(2)  # left open on purpose
    print(sum(pool.map(square, range(8))))
    x, y = data()
    lstm_model().fit(Batches(x, np.asarray(y), 16), epochs=1)
