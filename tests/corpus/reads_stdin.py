"""Asks for its data file on standard input before training."""

from _tiny import data, lstm_model

path = input("data file? ")
x, y = data()
lstm_model().fit(x, y, batch_size=16, epochs=1)
