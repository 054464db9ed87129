"""The live phase display of ``rnndoctor check`` (rich, nothing else).

Apart from the terminal summary (:mod:`rnndoctor.reports.terminal`) because it runs while the
capture child runs the user's script: importing it must not load the renderers (jinja2,
networkx), whose memory would add to the check's peak, the capture's largest probe point
(README, "Benchmarks": overhead). The package's ``__init__`` imports the renderers on first use
for the same reason.
"""

from __future__ import annotations


class PhaseDisplay:
    """Shows the check's phases on stderr, each with its elapsed time (rich).

    Fed with the phases the capture child records (``facts.run.phases``), so even phases shorter
    than the polling interval are listed with their own durations. On a terminal the current
    phase has a live spinner; in CI logs each finished phase is one plain line.
    """

    def __init__(self) -> None:
        from rich.console import Console

        self.console = Console(stderr=True, highlight=False)
        self.shown = 0
        self.status = None
        self.seen: set[str] = set()  # the phases listed so far: one entered again says so

    def __enter__(self) -> PhaseDisplay:
        if self.console.is_terminal:
            self.status = self.console.status("starting the script")
            self.status.start()
        return self

    def line(self, name: str, seconds: float, state: str = "done") -> None:
        colour = "green" if state == "done" else "yellow"
        self.console.print(
            f"[{colour}]{state:<5}[/] {name:<52} {seconds:6.1f} s", markup=True, soft_wrap=True
        )

    def update(self, phases: list[tuple[str, float]], elapsed_s: float) -> None:
        """Prints newly finished phases; ``phases`` are (name, started_s) in order."""
        while self.shown + 1 < len(phases):
            name, start = phases[self.shown]
            self.line(self._label(name), phases[self.shown + 1][1] - start)
            self.shown += 1
        if self.status is not None and phases:
            name, start = phases[-1]
            self.status.update(f"{name}  {max(0.0, elapsed_s - start):5.1f} s")

    def close(self, phases: list[tuple[str, float]], elapsed_s: float, finished: bool) -> None:
        """Prints the rest; a last phase other than ``done`` was cut short (timeout, crash)."""
        self.update(phases, elapsed_s)
        if phases and phases[-1][0] != "done":
            name, start = phases[-1]
            self.line(self._label(name), max(0.0, elapsed_s - start),
                      "done" if finished else "cut")  # fmt: skip
        self.shown = len(phases)

    def _label(self, name: str) -> str:
        """``name``, with "(again)" where the phase was listed before (a probe measured again
        to check it against the window, as the batch-size probe's referee is: a new user read
        the list as a duplicate)."""
        again = name in self.seen
        self.seen.add(name)
        return f"{name} (again)" if again else name

    def __exit__(self, *exc) -> None:
        if self.status is not None:
            self.status.stop()
