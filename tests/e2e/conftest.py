"""Runs of the bundled demo that several e2e files read (each `rnndoctor demo` run costs half a
minute on 2 cores, so one run serves every test that only reads its outputs)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest


@dataclass(frozen=True)
class DemoRun:
    """One ``rnndoctor demo`` run: its working folder, its ``--out``, the process and its wall
    time in seconds."""

    work: Path
    out: Path
    result: subprocess.CompletedProcess
    seconds: float


def _demo(work: Path, *args: str) -> DemoRun:
    out = work / "r"
    start = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "rnndoctor", "demo", "--out", str(out), *args],
        cwd=work, capture_output=True, text=True, timeout=300,
        env=dict(os.environ, COLUMNS="200"),
    )  # fmt: skip
    return DemoRun(work, out, result, time.monotonic() - start)


@pytest.fixture(scope="session")
def demo_run(tmp_path_factory) -> DemoRun:
    """``rnndoctor demo`` with every report format, run in an empty folder."""
    return _demo(tmp_path_factory.mktemp("demo"), "--format", "html,json,md,sarif")


@pytest.fixture(scope="session")
def fixed_run(tmp_path_factory) -> DemoRun:
    """``rnndoctor demo --fixed`` (the demo's fixed twin), run in an empty folder."""
    return _demo(tmp_path_factory.mktemp("fixed"), "--fixed")
