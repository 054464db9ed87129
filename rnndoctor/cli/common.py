"""The steps ``check`` and the offline commands share: options, rendering, the fail-on gate."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rnndoctor import outdir
from rnndoctor.cli.console import Console
from rnndoctor.facts import Facts, Outcome
from rnndoctor.options import FAIL_ON, Options, OptionsError, load_config, resolve

if TYPE_CHECKING:
    from rnndoctor.engine import Report
    from rnndoctor.verify.summary import VerifySummary

_NEVER = FAIL_ON[-1]  # --fail-on never: the exit code does not depend on findings


def load_options(cli: Mapping[str, Any], start: Path, console: Console) -> Options | None:
    """Options from the command line over ``[tool.rnndoctor]`` (nearest ``pyproject.toml`` at or
    above ``start``) over the defaults, validated; None after a usage error (already printed)."""
    try:
        options = resolve(cli, load_config(start))
        options.validate()
    except OptionsError as exc:
        console.error(str(exc))
        return None
    return options


def say_config(options: Options, console: Console) -> None:
    """Names the ``pyproject.toml`` whose ``[tool.rnndoctor]`` the options came from, if any."""
    if options.config_file:
        console.say(f"rnndoctor: options from {options.config_file} [tool.rnndoctor]", err=True)


def claim_out(out: Path, names: tuple[str, ...], console: Console) -> bool:
    """Claims the report folder ``out`` for a command that writes ``names`` there
    (:func:`rnndoctor.outdir.claim`); False after saying in one line why it cannot: it holds
    files of the user's under those names, or it cannot be created or written."""
    try:
        outdir.claim(out, names)
    except outdir.ForeignFiles as exc:
        console.error(str(exc))
        return False
    except OSError as exc:
        console.error(f"cannot create or write the output directory {out}: {exc.strerror}")
        return False
    return True


def render(
    facts: Facts, options: Options, out: Path, verification: VerifySummary | None = None
) -> tuple[Report, dict[str, Path]]:
    """Runs the rules and writes the reports (with ``verification``, a saved ``--verify``'s,
    when given); returns the Report and the written paths."""
    from rnndoctor.engine import evaluate
    from rnndoctor.reports import write_reports

    report = evaluate(
        facts,
        select=options.select or None,
        ignore=options.ignore or None,
        rule_options=options.rule_options,
    )
    report.verification = verification
    if options.redact:
        from rnndoctor.redact import redact_report

        report = redact_report(report)
    return report, write_reports(report, out, options.format)


def fails(report: Report, fail_on: str) -> bool:
    """Whether ``report`` has a finding at or above ``fail_on`` (``never``: never)."""
    from rnndoctor.findings import Severity

    return report.fails(None if fail_on == _NEVER else Severity.parse(fail_on))


def outcome(value: str) -> Outcome | None:
    """``RunInfo.outcome`` as an :class:`Outcome`; None for a value this version does not know."""
    try:
        return Outcome(value)
    except ValueError:
        return None


def failed(value: str) -> bool:
    """The run's outcome says the script failed or could not be checked (exit code 3)."""
    known = outcome(value)
    return known is not None and known.failed
