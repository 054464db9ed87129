"""fit(epochs=1) in a loop that writes a log line after each call: the check runs on after the
window (the fit is in a loop) but stops before the write, so the folder is left unchanged."""

from _tiny import data, lstm_model

x, y = data()
model = lstm_model()
for round_ in range(3):
    model.fit(x, y, batch_size=16, epochs=1)
    loss = float(model.evaluate(x, y, verbose=0))
    with open("rounds.log", "a") as f:
        f.write(f"{round_} {loss}\n")
