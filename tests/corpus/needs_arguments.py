"""The script's own argparse requires arguments, passed after `--` to rnndoctor."""

import argparse

from _tiny import data, lstm_model

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, required=True)
parser.add_argument("--batch-size", type=int, required=True)
args = parser.parse_args()
x, y = data()
lstm_model().fit(x, y, batch_size=args.batch_size, epochs=args.epochs)
