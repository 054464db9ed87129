"""A plain LSTM job; the test caps the batch-size probe's memory (RNNDOCTOR_PROBE_MEMORY_MIB) so
that its larger batches do not fit, as a huge batch would not on a real accelerator."""

from _tiny import data, lstm_model

x, y = data(1024)
lstm_model().fit(x, y, batch_size=64, epochs=1)
