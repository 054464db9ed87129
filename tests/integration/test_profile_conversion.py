"""Where the capture converts the profile (``capture/conversion.py: convert_bounded``): the
capture child in the xprof converter process, the user's own process (``rnndoctor.diagnose``,
``DoctorCallback``) in one too, waited for in a thread; a converter past its budget leaves a note
and a cut-short phase, and the capture goes on. The ``--workers`` chief converts its merged trace of
every worker (``capture/distribute.py: trace_facts``) within the same phase's budget. The conversion
of a real profile is checked end to end (tests/e2e/test_check_cli.py, and
tests/e2e/test_distribute_e2e.py for the merged trace)."""

from __future__ import annotations

import gc
import os
import sys
import tempfile
import threading
import time

import pytest

pytest.importorskip("tensorflow")

from rnndoctor import cluster  # noqa: E402
from rnndoctor.capture import conversion, diagnosis, distribute, profile  # noqa: E402
from rnndoctor.capture.session import CaptureSession  # noqa: E402
from rnndoctor.capture.step_window import WindowOptions  # noqa: E402
from rnndoctor.facts import Facts, RunInfo, StrategyFacts  # noqa: E402

_NO_PROFILE = "the profiler wrote no .xplane.pb file"


def _session(tmp_path, child: bool, timeout_s: float = 600.0) -> CaptureSession:
    facts = Facts(run=RunInfo(script="x.py", argv=[], cwd="."))
    options = WindowOptions(profile_dir=str(tmp_path / "profile"), timeout_s=timeout_s)
    return CaptureSession(facts, options, None, child=child)


def _converted_through_the_converter(tmp_path, monkeypatch, child: bool):
    """A session (the capture child's, or the user's own process) converted with the real
    converter recorded and an in-process conversion refused: the session and each call's
    ``(thread name, arguments)``."""
    calls = []

    def recorded(*args):
        calls.append((threading.current_thread().name, args))
        return profile.summarize_in_subprocess(*args)

    def in_process(*args):
        raise AssertionError("converted in the process with a converter at hand")

    monkeypatch.setattr(conversion, "summarize_in_subprocess", recorded)
    monkeypatch.setattr(conversion, "summarize_profile", in_process)
    session = _session(tmp_path, child=child)
    diagnosis.convert_profile(session, 3, None)
    return session, calls


def test_the_capture_child_converts_in_the_converter_process(tmp_path, monkeypatch):
    session, calls = _converted_through_the_converter(tmp_path, monkeypatch, child=True)
    assert len(calls) == 1 and calls[0][1][:3] == (str(tmp_path / "profile"), 3, 0)
    assert session.facts.profile.error == _NO_PROFILE  # the converter's own answer
    assert session.facts.run.phase == "profile conversion (xprof)"


def test_the_users_own_process_converts_in_the_converter_process_from_a_thread(
    tmp_path, monkeypatch
):
    """``rnndoctor.diagnose`` and ``DoctorCallback``: the converter process keeps xprof's native
    log lines (dozens per profile) out of the user's output (a fresh user's ``diagnose()``
    printed them into their script's), its library out of the user's memory and a crash in it
    out of their training; a thread waits for it, within the phase's budget."""
    session, calls = _converted_through_the_converter(tmp_path, monkeypatch, child=False)
    ((thread, args),) = calls
    assert thread == "rnndoctor profile conversion"  # not the user's own thread
    assert args[:3] == (str(tmp_path / "profile"), 3, 0) and 0 < args[3] <= 600
    assert session.facts.profile.error == _NO_PROFILE  # the converter's own answer


def test_a_converter_that_cannot_start_leaves_the_users_process_to_convert(tmp_path, monkeypatch):
    """No interpreter at ``sys.executable`` (an embedded Python): the thread converts in the
    user's process, as before the converter; a converter that started and crashed is not
    retried there (a crash in xprof would end the user's training)."""
    monkeypatch.setattr(sys, "executable", str(tmp_path / "no-such-python"))
    session = _session(tmp_path, child=False)
    diagnosis.convert_profile(session, 3, None)
    assert session.facts.profile.error == _NO_PROFILE  # summarize_profile's own answer

    crashes = tmp_path / "python"
    crashes.write_text("#!/bin/sh\nkill -SEGV $$\n")
    crashes.chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(crashes))
    monkeypatch.setattr(conversion, "summarize_profile", lambda *args: 1 / 0)
    session = _session(tmp_path, child=False)
    diagnosis.convert_profile(session, 3, None)
    assert session.facts.profile.error.startswith(
        "xprof conversion failed: the converter was ended by SIGSEGV"
    )


def test_a_converter_past_its_budget_leaves_a_note_and_a_cut_short_phase(tmp_path, monkeypatch):
    hangs = tmp_path / "python"  # in place of the converter's interpreter: xprof hanging
    hangs.write_text("#!/bin/sh\nexec sleep 60\n")
    hangs.chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(hangs))
    session = _session(tmp_path, child=True, timeout_s=10.0)  # the phase gets its 2 s floor
    diagnosis.convert_profile(session, 3, None)
    assert session.facts.profile is None
    assert session.facts.run.notes == [
        "profile not converted: profile conversion did not finish within its 2 s budget"
    ]
    (cut,) = session.facts.run.cut_short
    assert cut.phase == "profile conversion" and cut.budget_s == 2.0
    assert cut.reason == "the xprof conversion did not finish"


def _chief(tmp_path, monkeypatch) -> tuple[CaptureSession, StrategyFacts]:
    """A ``--workers`` chief whose trace of two workers wrote one xplane file each."""
    run = tmp_path / "trace" / "plugins" / "profile" / "2026_12_04_22_00_00"
    run.mkdir(parents=True)
    for port in (4001, 4002):
        (run / f"127.0.0.1_{port}.xplane.pb").write_bytes(b"")
    monkeypatch.setenv(cluster.TRACE_LOGDIR_VAR, str(tmp_path / "trace"))
    monkeypatch.setenv(cluster.TRACE_SERVICES_VAR, "grpc://127.0.0.1:4001,grpc://127.0.0.1:4002")
    session = _session(tmp_path, child=True, timeout_s=10.0)  # the phase gets its 2 s floor
    session.distribute_state = distribute.DistributeState(trace=object())
    return session, StrategyFacts(strategy="MultiWorkerMirroredStrategy", workers=2)


def test_the_chiefs_merged_trace_converts_within_the_budget(tmp_path, monkeypatch):
    session, facts = _chief(tmp_path, monkeypatch)
    monkeypatch.setattr(profile, "host_op_times", lambda path, scratch: {"MatMul": (600.0, 3)})
    hangs = tmp_path / "python"  # in place of the converter's interpreter: xprof hanging
    hangs.write_text("#!/bin/sh\nexec sleep 60\n")
    hangs.chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(hangs))
    started = time.monotonic()
    distribute.trace_facts(session, facts)
    assert time.monotonic() - started < 10.0  # the 2 s budget, not the converter's 60 s
    assert [w.task for w in facts.traced] == ["worker:0", "worker:1"]  # the op stats kept
    assert facts.profile_hosts == ["127.0.0.1_4001", "127.0.0.1_4002"]
    assert session.facts.profile is None
    assert session.facts.run.notes == [
        "profile not converted: profile conversion did not finish within its 2 s budget"
    ]
    (cut,) = session.facts.run.cut_short
    assert cut.phase == "profile conversion" and cut.reason == "the xprof conversion did not finish"


def test_a_workers_op_stats_past_the_budget_leave_not_measured(tmp_path, monkeypatch):
    session, facts = _chief(tmp_path, monkeypatch)
    temporary = tmp_path / "tmp"  # the temporary directory, for this test alone
    temporary.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temporary))
    release = threading.Event()

    def stuck(paths, tool):
        release.wait(60)  # xprof stuck on one host's file (its copy, in a temporary folder)
        raise RuntimeError("released")

    def converter(*args):
        raise AssertionError("the merged profile was converted after the op stats overran")

    monkeypatch.setattr(profile, "_tool_json", stuck)
    monkeypatch.setattr(conversion, "summarize_in_subprocess", converter)
    started = time.monotonic()
    try:
        distribute.trace_facts(session, facts)
    finally:
        release.set()
    assert time.monotonic() - started < 10.0
    assert facts.not_measured == (
        "the workers' op stats: profile conversion did not finish within its 2 s budget"
    )
    assert list(temporary.iterdir()) == []  # the copies, removed under the stuck thread
    time.sleep(0.2)  # the thread left behind finishes: it never writes into the facts
    assert facts.traced == [] and facts.collective_share is None
    (cut,) = session.facts.run.cut_short
    assert cut.phase == "profile conversion" and cut.budget_s == 2.0


def test_op_stats_that_spend_the_budget_leave_the_merged_summary_unstarted(tmp_path, monkeypatch):
    session, facts = _chief(tmp_path, monkeypatch)

    def slow(path, scratch):
        time.sleep(0.6)  # two hosts: 1.2 s of the 2 s budget, less than a conversion needs
        return {"MatMul": (600.0, 3)}

    def converter(*args):
        raise AssertionError("a converter started with less than a conversion's time left")

    monkeypatch.setattr(profile, "host_op_times", slow)
    monkeypatch.setattr(conversion, "summarize_in_subprocess", converter)
    distribute.trace_facts(session, facts)
    assert [w.task for w in facts.traced] == ["worker:0", "worker:1"]
    (note,) = session.facts.run.notes
    assert (
        note.startswith("profile not converted: ")
        and "of the 2 s profile conversion budget" in note
    )
    assert note.endswith("under the 1 s a conversion is started with")
    left = float(note.split(": ", 1)[1].split(" s of", 1)[0])
    assert left < 1.0  # the op stats spent at least 1.2 s of the 2 s


def test_a_thread_left_behind_starts_no_other_host_and_removes_its_late_files(
    tmp_path, monkeypatch
):
    session, facts = _chief(tmp_path, monkeypatch)
    temporary = tmp_path / "tmp"  # the temporary directory, for this test alone
    temporary.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temporary))
    release, returned = threading.Event(), threading.Event()
    hosts = []

    def stuck(path, scratch):
        hosts.append(path)
        release.wait(60)  # xprof stuck on the first host past the budget
        # then writes its cache beside the copy, after the chief removed the folder
        os.makedirs(os.path.join(scratch, "late"), exist_ok=True)
        open(os.path.join(scratch, "late", "ALL_HOSTS.op_stats_v2.pb"), "w").close()
        returned.set()
        return {"MatMul": (600.0, 3)}

    monkeypatch.setattr(profile, "host_op_times", stuck)
    try:
        distribute.trace_facts(session, facts)
    finally:
        release.set()
    assert returned.wait(10)
    for _ in range(50):  # the thread's own removal, after its host
        if not list(temporary.iterdir()):
            break
        time.sleep(0.1)
    assert list(temporary.iterdir()) == []
    assert len(hosts) == 1  # the second host was never started
    assert facts.traced == []


def _users_session_on(folder, release: threading.Event, wrote: threading.Event):
    """A session in the user's own process whose profile is the temporary ``folder``, and a
    conversion stuck in xprof until ``release``, then writing its cache into the folder."""

    def stuck(logdir, steps, gpus, timeout_s):
        release.wait(60)
        os.makedirs(logdir, exist_ok=True)  # xprof's write racing a removal of the folder
        open(os.path.join(logdir, "ALL_HOSTS.op_stats_v2.pb"), "w").close()
        wrote.set()
        raise RuntimeError("released")

    facts = Facts(run=RunInfo(script="x.py", argv=[], cwd="."))
    options = WindowOptions(profile_dir=folder.path, timeout_s=10.0, profile_keeper=folder)
    return CaptureSession(facts, options, None, child=False), stuck


def _gone(path: str) -> bool:
    for _ in range(50):  # the thread's own removal, once xprof returns
        gc.collect()  # xprof's exception, kept for the caller, holds the thread's frames
        if not os.path.exists(path):
            return True
        time.sleep(0.1)
    return False


@pytest.mark.parametrize("how", ["removed", "dropped"])
def test_a_conversion_left_behind_keeps_the_temporary_folder_until_xprof_returns(
    tmp_path, monkeypatch, how
):
    """``rnndoctor.diagnose`` without ``out``: a conversion past its budget runs on in a thread
    that reads the temporary folder. Removed meanwhile (diagnose raising after the window), the
    folder is removed again once xprof has written into it; dropped with the report, it stays
    until xprof returns, then goes."""
    from rnndoctor.api import TemporaryFolder

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    release, wrote = threading.Event(), threading.Event()
    folder = TemporaryFolder()
    path = folder.path
    session, stuck = _users_session_on(folder, release, wrote)
    monkeypatch.setattr(conversion, "summarize_in_subprocess", stuck)
    try:
        diagnosis.convert_profile(session, 3, None)  # its 2 s budget runs out
        assert session.facts.profile is None and session.facts.run.cut_short
        if how == "removed":
            folder.remove()
        else:
            del folder, session
            gc.collect()
            assert os.path.isdir(path)  # the thread still holds it
    finally:
        release.set()
    assert wrote.wait(10) and _gone(path)


def test_no_temporary_folder_leaves_the_op_stats_not_measured_and_the_hosts_kept(
    tmp_path, monkeypatch
):
    session, facts = _chief(tmp_path, monkeypatch)

    def unwritable(*args, **kwargs):
        raise PermissionError(13, "Permission denied", "/tmp")

    monkeypatch.setattr(distribute.tempfile, "mkdtemp", unwritable)
    monkeypatch.setattr(conversion, "summarize_in_subprocess", lambda *args: None)
    distribute.trace_facts(session, facts)  # before: the OSError went up to collect
    assert facts.not_measured.startswith("the workers' op stats: no temporary folder: ")
    assert facts.profile_hosts == ["127.0.0.1_4001", "127.0.0.1_4002"] and facts.traced == []
