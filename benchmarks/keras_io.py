"""Five public keras-io examples, checked as a new user would run them (issue 12's acceptance).

    python benchmarks/keras_io.py FOLDER [--scale 0.2] [--only NAME] [--keep DIR] [--no-shims]

FOLDER holds the examples' scripts, unmodified, under their own names (fetch them from the
keras-io repository; their code is not part of rnndoctor):

- ``bidirectional_lstm_imdb.py`` (examples/nlp), ``addition_rnn.py`` (examples/nlp),
  ``lstm_character_level_text_generation.py`` (examples/generative),
  ``timeseries_weather_forecasting.py`` (examples/timeseries), ``lstm_seq2seq.py``
  (examples/nlp).

For each one this builds, with no network, small synthetic stand-ins of its downloads in the
formats the script reads, under a temporary ``KERAS_HOME`` (so ``keras.utils.get_file`` and
``keras.datasets.imdb.load_data`` find them in their cache and download nothing):
``datasets/imdb.npz`` (ragged word-index lists, review lengths drawn to IMDB's shape),
``datasets/nietzsche.txt`` (lower-case pseudo prose), ``datasets/jena_climate_2009_2016.csv.zip``
(the 15 columns of the Jena climate CSV, 10-minute rows), ``datasets/fra-eng.zip`` (``fra.txt``:
English, tab, French, tab, attribution; lengths drawn to the first 10,000 pairs' shape). Then it
runs ``rnndoctor check`` on the script, unmodified, in a fresh temporary working directory
(the weather example extracts its CSV there), and prints one Markdown table: the script, its
findings by severity with their one-line claims and lines, the job forecast, and notes (the
check's outcome, where the run-on after the window stopped, what was neutralised).

``--scale`` sizes the synthetic data as a share of the real downloads (IMDB's 25,000 reviews a
split, Nietzsche's 600,893 characters, Jena's 420,551 rows; fra.txt always gets the 10,000 lines
the script reads), so steps per epoch, and with them the forecasts, are ``--scale`` of the real
job's. The addition example makes its own data.

Three shims, in a ``sitecustomize.py`` on the checked script's ``PYTHONPATH`` (never in
rnndoctor), let the scripts run unmodified on generated files; ``--no-shims`` leaves them out:

- ``keras.datasets.imdb.load_data`` pins the real file's sha256, so the shim lets
  ``keras.src.utils.file_utils.validate_file`` accept the generated ``imdb.npz`` (by its path;
  every other file is validated as usual).
- The weather example calls ``DataFrame.corr()`` on a frame holding the ``Date Time`` strings.
  pandas 1 dropped non-numeric columns there; pandas 2 raises. The shim restores the pandas 1
  default (``numeric_only=True``).
- The weather example builds ``ModelCheckpoint("model_checkpoint.h5", save_weights_only=True)``,
  which Keras 3 rejects at construction (a weights path must end in ``.weights.h5``); the shim
  renames such a path to ``model_checkpoint.weights.h5`` (rnndoctor neutralises the callback
  in any case: nothing is written).

The weather example needs pandas and matplotlib importable by the Python that runs rnndoctor
(``PYTHONPATH`` is passed on). Run by hand, never in CI; the table goes in the README.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent

# Sizes of the real downloads (the keras-io examples' own comments and the files' headers).
_IMDB_REVIEWS = 25_000  # per split
_IMDB_VOCABULARY = 88_584  # distinct word indices in imdb.npz
_NIETZSCHE_CHARS = 600_893
_JENA_ROWS = 420_551
_FRA_LINES = 10_000  # lstm_seq2seq.py reads num_samples = 10000 lines
_FLOORS = {"imdb": 2_000, "nietzsche": 20_000, "jena": 20_000}

_SITECUSTOMIZE = '''\
"""benchmarks/keras_io.py's shims (see its docstring); applied as each module is imported."""
import importlib.abc
import json
import os
import sys

_ACCEPT = set(json.loads(os.environ.get("RNNDOCTOR_KIO_ACCEPT", "[]")))


def _file_utils(module):
    original = module.validate_file

    def validate_file(fpath, file_hash, algorithm="auto", chunk_size=65535):
        if os.path.realpath(fpath) in _ACCEPT:
            return True
        return original(fpath, file_hash, algorithm=algorithm, chunk_size=chunk_size)

    module.validate_file = validate_file


def _pandas(module):
    original = module.DataFrame.corr

    def corr(self, method="pearson", min_periods=1, numeric_only=True):
        return original(self, method=method, min_periods=min_periods, numeric_only=numeric_only)

    module.DataFrame.corr = corr


def _model_checkpoint(module):
    original = module.ModelCheckpoint.__init__

    def __init__(self, filepath, *args, **kwargs):
        name = str(filepath)
        if kwargs.get("save_weights_only") and name.endswith(".h5"):
            if not name.endswith(".weights.h5"):
                filepath = name[: -len(".h5")] + ".weights.h5"
        original(self, filepath, *args, **kwargs)

    module.ModelCheckpoint.__init__ = __init__


_PATCHES = {
    "keras.src.utils.file_utils": _file_utils,
    "pandas": _pandas,
    "keras.src.callbacks.model_checkpoint": _model_checkpoint,
}


class _After(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name not in _PATCHES:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None and spec.loader is not None:
                break
        else:
            return None
        exec_module = spec.loader.exec_module

        def patched(module):
            exec_module(module)
            _PATCHES[name](module)

        spec.loader.exec_module = patched
        return spec


sys.meta_path.insert(0, _After())
'''


# -- the synthetic downloads -----------------------------------------------------------------
def _imdb(datasets: Path, scale: float, rng: np.random.Generator) -> list[str]:
    """``imdb.npz``: x_train / x_test as object arrays of word-index lists (1-based frequency
    ranks, Zipf-distributed; load_data adds its start and offset), y as 0/1 labels. Review
    lengths are log-normal with IMDB's median of about 174 words and a long tail."""
    n = max(_FLOORS["imdb"], round(_IMDB_REVIEWS * scale))

    def split() -> tuple[np.ndarray, np.ndarray]:
        lengths = np.clip(rng.lognormal(np.log(174), 0.75, n).astype(int), 10, 2_500)
        words = np.empty(n, dtype=object)
        for i, length in enumerate(lengths):
            ranks = rng.zipf(1.3, int(length))
            words[i] = [int(r) for r in np.minimum(ranks, _IMDB_VOCABULARY)]
        return words, rng.integers(0, 2, n)

    (x_train, y_train), (x_test, y_test) = split(), split()
    path = datasets / "imdb.npz"
    np.savez(path, x_train=x_train, y_train=y_train, x_test=x_test, y_test=y_test)
    return [str(path.resolve())]


def _nietzsche(datasets: Path, scale: float, rng: np.random.Generator) -> list[str]:
    """``nietzsche.txt``: pseudo prose of Zipf-weighted made-up words, sentences and lines."""
    chars = max(_FLOORS["nietzsche"], round(_NIETZSCHE_CHARS * scale))
    letters = list("etaoinshrdlcumwfgypbvkjxqz")
    weights = np.linspace(2.0, 0.1, len(letters))
    weights /= weights.sum()
    vocabulary = [
        "".join(rng.choice(letters, size=int(rng.integers(1, 10)), p=weights)) for _ in range(3_000)
    ]
    ranks = np.minimum(rng.zipf(1.2, chars // 2), len(vocabulary)) - 1
    marks = rng.choice([",", ".", ";", "!", "?", ":", "--"], size=len(ranks))
    pieces, total, line = [], 0, 0
    for rank, mark, roll in zip(ranks, marks, rng.random(len(ranks)), strict=True):
        word = vocabulary[rank] + (str(mark) if roll < 0.08 else "")
        line += len(word) + 1
        pieces.append(word + ("\n" if line > 70 else " "))
        line = 0 if line > 70 else line
        total += len(word) + 1
        if total >= chars:
            break
    (datasets / "nietzsche.txt").write_text("".join(pieces), encoding="utf-8")
    return []


_JENA_COLUMNS = [
    ("p (mbar)", 989.2, 8.4), ("T (degC)", 9.4, 8.4), ("Tpot (K)", 283.5, 8.5),
    ("Tdew (degC)", 4.96, 6.7), ("rh (%)", 76.0, 16.5), ("VPmax (mbar)", 13.6, 7.7),
    ("VPact (mbar)", 9.5, 4.2), ("VPdef (mbar)", 4.1, 4.9), ("sh (g/kg)", 6.0, 2.7),
    ("H2OC (mmol/mol)", 9.6, 4.2), ("rho (g/m**3)", 1216.1, 39.98), ("wv (m/s)", 2.1, 1.5),
    ("max. wv (m/s)", 3.6, 2.4), ("wd (deg)", 174.7, 86.7),
]  # fmt: skip  # (name, mean, std) of the real file's columns


def _jena(datasets: Path, scale: float, rng: np.random.Generator) -> list[str]:
    """``jena_climate_2009_2016.csv.zip``: ``Date Time`` (``dd.mm.yyyy HH:MM:SS``, every 10
    minutes from 2009-01-01 00:10) and the 14 measured columns, each a daily and a yearly
    cycle plus noise around the real column's mean and spread."""
    rows = max(_FLOORS["jena"], round(_JENA_ROWS * scale))
    t = np.arange(rows)
    day, year = 2 * np.pi * t / 144, 2 * np.pi * t / (144 * 365)
    buffer = io.StringIO()
    writer = csv.writer(buffer, quoting=csv.QUOTE_MINIMAL, lineterminator="\n")
    writer.writerow(["Date Time", *(name for name, _, _ in _JENA_COLUMNS)])
    columns = []
    for k, (_, mean, std) in enumerate(_JENA_COLUMNS):
        cycle = 0.5 * np.sin(day + k) + 0.7 * np.sin(year + 0.3 * k)
        columns.append(np.round(mean + std * (cycle + 0.4 * rng.standard_normal(rows)), 2))
    start = np.datetime64("2009-01-01T00:10")
    stamps = start + t.astype("timedelta64[m]") * 10
    for i, stamp in enumerate(stamps.astype(object)):
        writer.writerow([stamp.strftime("%d.%m.%Y %H:%M:%S"), *(c[i] for c in columns)])
    path = datasets / "jena_climate_2009_2016.csv.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("jena_climate_2009_2016.csv", buffer.getvalue())
    return []


def _phrase(rng: np.random.Generator, length: int, words: list[str]) -> str:
    text = ""
    while len(text) < length:
        text += ("" if not text else " ") + str(rng.choice(words))
    return text[: max(1, length - 1)].rstrip() + str(rng.choice([".", "!", "?"]))


def _fra(datasets: Path, scale: float, rng: np.random.Generator) -> list[str]:
    """``fra-eng.zip`` holding ``fra.txt`` (``English<TAB>French<TAB>attribution``, shortest
    pairs first, as in the real file) and ``_about.txt``. The English side is 3 to 16
    characters, the French side mostly 10 to 25 with a tail to 57, so the one-hot sequences the
    script pads with the space vector are about as padded as with the real first 10,000."""
    english = ["go", "run", "hi", "wow", "i see", "we won", "help me", "stop it", "i am ok"]
    french = ["va", "cours", "salut", "je vois", "nous avons", "aide-moi", "arrête", "ça va"]
    lines = []
    for i in range(_FRA_LINES):
        en_len = 3 + int(13 * i / _FRA_LINES) + int(rng.integers(0, 2))
        fr_len = int(np.clip(rng.lognormal(np.log(14 + 6 * i / _FRA_LINES), 0.35), 3, 57))
        fr_len = 57 if i == _FRA_LINES - 1 else fr_len
        lines.append(
            f"{_phrase(rng, en_len, english).capitalize()}\t"
            f"{_phrase(rng, fr_len, french).capitalize()}\t"
            f"CC-BY 2.0 (France) Attribution: tatoeba.org #{1000 + i} (synthetic)"
        )
    path = datasets / "fra-eng.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("fra.txt", "\n".join(lines) + "\n")
        archive.writestr("_about.txt", "synthetic stand-in made by benchmarks/keras_io.py\n")
    return []


@dataclass(frozen=True)
class Example:
    """One keras-io example: its file name, what its downloads are made of, and the shims it
    needs (besides the data)."""

    script: str
    make: Callable[[Path, float, np.random.Generator], list[str]] | None
    downloads: str


EXAMPLES = [
    Example("bidirectional_lstm_imdb.py", _imdb, "imdb.npz (datasets cache)"),
    Example("addition_rnn.py", None, "none: the script makes its data"),
    Example("lstm_character_level_text_generation.py", _nietzsche, "nietzsche.txt"),
    Example("timeseries_weather_forecasting.py", _jena, "jena_climate_2009_2016.csv.zip"),
    Example("lstm_seq2seq.py", _fra, "fra-eng.zip (fra.txt)"),
]


# -- one check -------------------------------------------------------------------------------
def _check(example: Example, folder: Path, args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    """Generates the example's data, runs ``rnndoctor check`` on it, returns report.json plus
    ``exit`` and ``wall_s``."""
    home, work, shim = tmp / "keras_home", tmp / "work", tmp / "shim"
    for d in (home / "datasets", work, shim):
        d.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(12)
    accept = example.make(home / "datasets", args.scale, rng) if example.make else []
    env = dict(os.environ, KERAS_HOME=str(home), MPLBACKEND="Agg", COLUMNS="200")
    if not args.no_shims:
        (shim / "sitecustomize.py").write_text(_SITECUSTOMIZE)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(shim), env.get("PYTHONPATH")]))
        env["RNNDOCTOR_KIO_ACCEPT"] = json.dumps(accept)
    out = (Path(args.keep) / Path(example.script).stem) if args.keep else tmp / "report"
    script = tmp / "work" / example.script
    script.write_bytes((folder / example.script).read_bytes())  # the user's folder: unmodified
    command = [*args.rnndoctor, "check", str(script), "--out", str(out), "--format",
               "json,md,html", "--fail-on", "never", "--timeout", str(args.timeout)]  # fmt: skip
    started = time.monotonic()
    result = subprocess.run(command, cwd=work, env=env, capture_output=True, text=True)
    wall = round(time.monotonic() - started, 1)
    try:
        doc = json.loads((out / "report.json").read_text())
    except (OSError, ValueError):
        doc = {"findings": [], "facts": None}
    doc["exit"], doc["wall_s"] = result.returncode, wall
    doc["stderr_tail"] = result.stderr.strip().splitlines()[-2:]
    doc["work_after"] = sorted(p.name for p in work.iterdir())
    return doc


# -- the table -------------------------------------------------------------------------------
def _claim(finding: dict[str, Any]) -> str:
    loc = finding.get("location") or {}
    where = f" (line {loc['line']})" if loc.get("line") else " (no line)"
    first = finding["message"].split(". ")[0].rstrip(".")
    return f"{finding['rule_id']} {first[:160]}{where}"


def _findings(doc: dict[str, Any]) -> str:
    parts = []
    for severity in ("error", "warning", "info"):
        found = [f for f in doc["findings"] if f["severity"] == severity]
        if found:
            parts.append(f"**{severity}**: " + "; ".join(_claim(f) for f in found))
    return "<br>".join(parts) or "none"


def _forecast(doc: dict[str, Any]) -> str:
    from rnndoctor.engine import evaluate
    from rnndoctor.facts import Facts

    if not doc.get("facts"):
        return "none (no facts)"
    forecast = evaluate(Facts.from_dict(doc["facts"])).forecast
    if forecast is None:
        return "none"
    text = (
        f"{forecast.now_s:.0f} s = {forecast.step_time_ms:.1f} ms/step x "
        f"{forecast.steps_per_epoch} x {forecast.epochs} ep"
    )
    if forecast.fit_calls and forecast.fit_calls > 1:
        text += f" x {forecast.fit_calls} fit calls"
    if forecast.outside_s is not None:
        text += f"; {forecast.outside_s:.1f} s outside fit per call"
    if forecast.after_s is not None:
        text += f"; after: {forecast.after_s:.0f} s ({forecast.after_model.split(':')[0]})"
    return text


def _notes(doc: dict[str, Any]) -> str:
    facts = doc.get("facts") or {}
    run = facts.get("run") or {}
    notes = [f"exit {doc['exit']}, {doc['wall_s']} s, outcome {run.get('outcome')}"]
    if run.get("message"):
        notes.append(str(run["message"])[:160])
    ow = facts.get("outside_window")
    if ow:
        notes.append(f"run-on {ow['seconds']:.1f} s, ended: {ow['ended']}"
                     + (f" ({ow['detail'][:90]})" if ow.get("detail") else ""))  # fmt: skip
    neutralised = sorted({n["what"] for n in run.get("neutralised", [])})
    if neutralised:
        notes.append("neutralised: " + ", ".join(neutralised))
    for command in run.get("child_commands", []):
        notes.append(f"child command `{command['command'][:60]}` wrote {len(command['wrote'])}")
    return "; ".join(notes)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", help="the folder holding the five keras-io scripts")
    parser.add_argument("--scale", type=float, default=0.2)
    parser.add_argument("--only", action="append", help="a script's stem; repeat")
    parser.add_argument("--keep", help="write each report under DIR/<script stem>/")
    parser.add_argument("--timeout", type=int, default=600)
    parser.add_argument("--no-shims", action="store_true")
    parser.add_argument("--json", help="also write the rows and reports' findings here")
    parser.add_argument("--rnndoctor", nargs="+", default=[sys.executable, "-m", "rnndoctor"])
    args = parser.parse_args()
    folder = Path(args.folder).resolve()
    chosen = [e for e in EXAMPLES if not args.only or Path(e.script).stem in args.only]
    rows = []
    for example in chosen:
        if not (folder / example.script).is_file():
            print(f"missing: {folder / example.script}", file=sys.stderr)
            continue
        with tempfile.TemporaryDirectory(prefix="keras-io-") as tmp:
            doc = _check(example, folder, args, Path(tmp))
        row = {"script": example.script, "findings": _findings(doc),
               "forecast": _forecast(doc), "notes": _notes(doc)}  # fmt: skip
        rows.append({**row, "doc": {k: doc.get(k) for k in ("findings", "exit", "work_after")}})
        print(f"{example.script}: {row['notes']}", file=sys.stderr)
    print("| script | findings (severity: rule, claim, line) | job forecast | notes |")
    print("|---|---|---|---|")
    for row in rows:
        print(f"| {row['script']} | {row['findings']} | {row['forecast']} | {row['notes']} |")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
