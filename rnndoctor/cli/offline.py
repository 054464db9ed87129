"""The commands that run no script: ``report`` and ``compare`` on saved facts, and ``rules``."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import typer

from rnndoctor.cli.common import failed, fails, load_options, render
from rnndoctor.cli.console import Console
from rnndoctor.facts import Facts, Outcome
from rnndoctor.options import ExitCode


def load_report_facts(path: Path) -> Facts:
    """Facts from a ``facts.json`` or a ``report.json`` (its ``facts``).

    Raises:
        ValueError: the file cannot be read, is not JSON, or holds no valid facts (one line).
    """
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"cannot read {path}: {exc}") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path} is not JSON: {exc}") from None
    if isinstance(data, dict) and "facts" in data and "run" not in data:
        data = data["facts"]
    return Facts.from_dict(data)


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
    options = load_options(dict(cli, out=cli.get("out") or str(folder)), folder, console)
    if options is None:
        return ExitCode.USAGE
    console.redact(options.redact, os.getcwd())
    report, written = render(facts, options, Path(options.out))
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
    """Runs the current rules on two runs' facts, prints the comparison and writes its HTML."""
    from rnndoctor.compare import compare_facts
    from rnndoctor.reports.compare import print_comparison, render_comparison_html

    try:
        before_facts, after_facts = load_report_facts(before), load_report_facts(after)
    except ValueError as exc:
        console.error(str(exc))
        return ExitCode.USAGE
    options = load_options(cli, before.resolve().parent, console)
    if options is None:
        return ExitCode.USAGE
    comparison = compare_facts(
        before_facts,
        after_facts,
        options.select or None,
        options.ignore or None,
        rule_options=options.rule_options,
    )
    print_comparison(comparison, str(before), str(after))
    html.write_text(render_comparison_html(comparison, str(before), str(after)), encoding="utf-8")
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
