"""Writes a vocabulary file with plain open() before fit: not a Keras save, so the check lets it
happen, and the report says so."""

from _tiny import data, lstm_model

with open("vocab.txt", "w") as f:
    f.write("a\nb\n")
x, y = data()
lstm_model().fit(x, y, batch_size=16, epochs=1)
