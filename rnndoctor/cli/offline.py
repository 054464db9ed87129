"""The commands that run no script: ``report`` and ``compare`` on saved facts, and ``rules``."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from rnndoctor.cli.common import claim_out, failed, fails, load_options, render, say_config
from rnndoctor.cli.console import Console
from rnndoctor.facts import Facts, Outcome
from rnndoctor.options import ExitCode, Options

if TYPE_CHECKING:
    from rnndoctor.engine import Report
    from rnndoctor.verify.summary import VerifySummary


def _read_json(path: Path) -> Any:
    """The JSON document in ``path``.

    Raises:
        ValueError: the file cannot be read or is not JSON (one line).
    """
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"cannot read {path}: {exc}") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path} is not JSON: {exc}") from None


def load_report_facts(path: Path) -> Facts:
    """Facts from a ``facts.json`` or a ``report.json`` (its ``facts``).

    Raises:
        ValueError: the file cannot be read, is not JSON, or holds no valid facts (one line).
    """
    data = _read_json(path)
    if isinstance(data, dict) and "facts" in data and "run" not in data:
        data = data["facts"]
    return Facts.from_dict(data)


def load_verification(path: Path) -> VerifySummary | None:
    """The verification of ``check --verify`` that ``path`` belongs to: a ``report.json``'s
    ``verified`` list and ``verification``, or, for a ``facts.json``, the ``verify.json`` beside
    it where it is that check's (:func:`_verification_beside`); None for a check without
    ``--verify``.

    Raises:
        ValueError: ``path`` cannot be read, or its ``verified`` entries are not valid.
    """
    from rnndoctor.verify.summary import VerifySummary

    data = _read_json(path)
    if isinstance(data, dict) and "run" in data and "verified" not in data:  # a facts.json
        return _verification_beside(path)
    if not isinstance(data, dict) or not isinstance(data.get("verified"), list):
        return None
    try:
        return VerifySummary.from_dict({**(data.get("verification") or {}),
                                        "verified": data["verified"]})  # fmt: skip
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"{path}: its 'verified' entries are not valid: {exc}") from None


def _verification_beside(facts_file: Path) -> VerifySummary | None:
    """The ``verify.json`` beside a ``facts.json``, where it is that check's: rnndoctor's (a
    JSON object with a valid ``verified`` list) and written after the facts (``--verify`` runs
    once the plain check has saved them); else None, so that a file of the user's with that
    name, or one older than the facts, is never shown as this run's measurement."""
    from rnndoctor.verify.output import VERIFY_JSON, read_own_json
    from rnndoctor.verify.summary import VerifySummary

    beside = facts_file.parent / VERIFY_JSON
    try:
        if beside.stat().st_mtime < facts_file.stat().st_mtime:
            return None
    except OSError:
        return None
    data = read_own_json(beside)
    try:
        return VerifySummary.from_dict(data) if data is not None else None
    except (KeyError, TypeError, ValueError):
        return None


def _load(path: Path, options: Options) -> Report:
    """The report of a saved run: the current rules on its facts, with its verification.

    Raises:
        ValueError: as :func:`load_report_facts` and :func:`load_verification`.
    """
    from rnndoctor.engine import evaluate

    report = evaluate(load_report_facts(path), select=options.select or None,
                      ignore=options.ignore or None, rule_options=options.rule_options)  # fmt: skip
    report.verification = load_verification(path)
    return report


def config_start(facts: Facts, fallback: Path) -> Path:
    """Where ``[tool.rnndoctor]`` is looked up for saved facts: the checked script's folder, as
    ``check`` did (the README: "the nearest one at or above the script's folder"; a report
    folder outside the project has no ``pyproject.toml`` of the project's), where that folder
    still exists here; else ``fallback`` (the facts file's folder: facts from another machine,
    or redacted paths)."""
    script = Path(facts.run.script) if facts.run and facts.run.script else None
    if script is not None and not script.is_absolute() and facts.run.cwd:
        script = Path(facts.run.cwd) / script
    if script is not None and script.parent.is_dir():
        return script.parent
    return fallback


def run_report(facts_file: Path, cli: Mapping[str, Any], console: Console) -> ExitCode:
    """Re-runs the rules on saved facts and writes the reports (``out`` defaults to the facts
    file's folder); the exit code follows the saved outcome, then ``--fail-on``."""
    from rnndoctor.reports.terminal import summary_lines

    console.redact(False)
    try:
        facts = load_report_facts(facts_file)
    except ValueError as exc:
        console.error(str(exc))
        return ExitCode.USAGE
    folder = facts_file.resolve().parent
    start = config_start(facts, folder)
    options = load_options(dict(cli, out=cli.get("out") or str(folder)), start, console)
    if options is None:
        return ExitCode.USAGE
    say_config(options, console)
    script = os.path.join(facts.run.cwd or "", facts.run.script) if facts.run.script else None
    console.redact(options.redact, os.getcwd(), script)
    try:
        verification = load_verification(facts_file)
    except ValueError as exc:
        console.error(str(exc))
        return ExitCode.USAGE
    from rnndoctor.reports import FILENAMES

    if not claim_out(Path(options.out).resolve(), tuple(FILENAMES.values()), console):
        return ExitCode.USAGE
    report, written = render(facts, options, Path(options.out), verification)
    for line in summary_lines(report, written):
        console.say(line)
    if failed(facts.run.outcome):
        return ExitCode.SCRIPT_FAILED
    if facts.run.outcome == Outcome.TIMEOUT:
        return ExitCode.TIMEOUT
    return ExitCode.FINDINGS if fails(report, options.fail_on) else ExitCode.OK


def run_compare(
    before: Path, after: Path, html: Path, cli: Mapping[str, Any], console: Console
) -> ExitCode:
    """Runs the current rules on two runs' facts, prints the comparison (with each verified
    report's estimate against measurement per rule) and writes its HTML. ``[tool.rnndoctor]``
    comes from the first run's script's project, as ``report`` reads it (:func:`config_start`).

    Like a check's ``--out`` (:mod:`rnndoctor.outdir`), compare never replaces a file it did not
    write: where ``html`` exists and is not a compare page
    (:func:`rnndoctor.reports.compare.is_comparison_page`), it refuses with one line and
    ``ExitCode.USAGE`` before printing or writing anything; a compare page there is replaced."""
    from rnndoctor.compare import compare_reports
    from rnndoctor.reports.compare import (
        GENERATOR,
        is_comparison_page,
        print_comparison,
        render_comparison_html,
    )

    try:
        start = config_start(load_report_facts(before), before.resolve().parent)
    except ValueError as exc:
        console.error(str(exc))
        return ExitCode.USAGE
    options = load_options(cli, start, console)
    if options is None:
        return ExitCode.USAGE
    say_config(options, console)
    if html.is_dir():
        console.error(f"--html {html} is a folder: give the path of the page to write")
        return ExitCode.USAGE
    if (html.exists() or html.is_symlink()) and not is_comparison_page(html):
        console.error(
            f"--html {html} exists and is not an rnndoctor compare page (no <meta "
            f'name="generator" content="{GENERATOR}"> in its head), and compare would replace '
            "it: move or delete it, or choose another --html"
        )
        return ExitCode.USAGE
    try:
        comparison = compare_reports(_load(before, options), _load(after, options))
    except ValueError as exc:
        console.error(str(exc))
        return ExitCode.USAGE
    print_comparison(comparison, str(before), str(after))
    page = render_comparison_html(comparison, str(before), str(after))
    try:
        html.write_text(page, encoding="utf-8")
    except OSError as exc:
        console.error(f"cannot write --html {html}: {exc.strerror or exc}")
        return ExitCode.USAGE
    typer.echo(f"html comparison: {html}")
    return ExitCode.OK


def show_rules(rule_id: str | None, console: Console) -> ExitCode:
    """Lists the rules, or prints one rule's documentation (by ID or name)."""
    from rnndoctor.rules import all_rules, get_rule

    if rule_id is None:
        for rule in all_rules():
            typer.echo(f"{rule.id}  {rule.name:<34} {rule.summary}")
        return ExitCode.OK
    try:
        rule = get_rule(rule_id)
    except KeyError:
        console.error(f"no rule {rule_id!r} (see `rnndoctor rules`)")
        return ExitCode.USAGE
    typer.echo(rule.doc)
    return ExitCode.OK
