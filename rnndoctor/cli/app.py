"""The typer app: the commands' parameters and help, each command one delegation.

Defaults shown in the help come from :data:`rnndoctor.options.DEFAULTS`; a parameter left out on
the command line is None here, so that ``[tool.rnndoctor]`` can set it.
"""

from __future__ import annotations

import os
import sys
from importlib import resources
from pathlib import Path
from typing import Annotated, Any

import typer
from typer.core import TyperCommand

from rnndoctor import __version__, cluster
from rnndoctor.cli.console import Console
from rnndoctor.options import DEFAULTS, FAIL_ON, FORMATS, ExitCode

EXIT_CODES_HELP = f"""Exit codes:

  {ExitCode.OK:d}  nothing at or above --fail-on

  {ExitCode.FINDINGS:d}  findings at or above --fail-on

  {ExitCode.USAGE:d}  usage error (a missing script, a bad option, an --out holding files of yours
     with the names a check writes)

  {ExitCode.SCRIPT_FAILED:d}  the script failed before the diagnosis finished (raised, exited, its process died,
     or never called Model.fit), or cannot be checked here (another Keras backend, no
     TensorFlow); a partial report is still written

  {ExitCode.TIMEOUT:d}  timeout (--timeout): every process of the script is killed; a partial report is
     still written

  {ExitCode.INTERNAL:d}  internal error in rnndoctor (see <out>/script.log)

  {ExitCode.INTERRUPTED:d}  interrupted (Ctrl-C, SIGTERM or SIGHUP): every process of the script is killed;
     a partial report is still written
"""  # noqa: E501 (the help text keeps its line breaks)

_DEMO_FAIL_ON = "never"  # the demo shows findings; it does not gate on them

app = typer.Typer(
    name="rnndoctor",
    help="Diagnose slow RNN (LSTM/GRU) training in TensorFlow/Keras.\n\n" + EXIT_CODES_HELP,
    add_completion=False,
    no_args_is_help=True,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
)

Out = Annotated[
    str | None,
    typer.Option(
        "--out",
        help=f"Directory for the reports [default: {DEFAULTS.out}]; files of yours there with "
        "the names a check writes are never replaced (the check stops, exit 2).",
    ),
]
Steps = Annotated[
    int | None,
    typer.Option(
        "--steps",
        help="Measured training steps, after the warm-up; at the default, at least 1 s of them "
        f"where fit has the steps [{DEFAULTS.steps}].",
    ),
]
Warmup = Annotated[
    int | None,
    typer.Option("--warmup", help=f"Warm-up steps, run first and not timed [{DEFAULTS.warmup}]."),
]
ProfileSteps = Annotated[
    int | None,
    typer.Option(
        "--profile-steps", help=f"Steps captured by the TF profiler [{DEFAULTS.profile_steps}]."
    ),
]
Timeout = Annotated[
    float | None,
    typer.Option(
        "--timeout",
        help=f"Seconds before the script is killed [{DEFAULTS.timeout:g}]; with --verify, the "
        "limit of the whole command (the verification gets what the plain check left).",
    ),
]
FailOn = Annotated[
    str | None,
    typer.Option(
        "--fail-on",
        help=f"Exit 1 at or above this severity: {', '.join(FAIL_ON)} [{DEFAULTS.fail_on}].",
    ),
]
Formats = Annotated[
    list[str] | None,
    typer.Option(
        "--format",
        help=f"Report format: {', '.join(FORMATS[:-1])} or {FORMATS[-1]}; repeat it or separate "
        f"with commas [{','.join(DEFAULTS.format)}].",
    ),
]
Select = Annotated[
    list[str] | None, typer.Option("--select", help="Run only these rules (IDs or names).")
]
Ignore = Annotated[
    list[str] | None, typer.Option("--ignore", help="Skip these rules (IDs or names).")
]
Redact = Annotated[
    bool | None,
    typer.Option(
        "--redact/--no-redact",
        help="Remove home paths, user and host names and secret values from every report.",
    ),
]
Debug = Annotated[
    bool,
    typer.Option(
        "--debug",
        help="On failure, show the script's output with its tracebacks (and rnndoctor's own).",
    ),
]
NoProbes = Annotated[
    bool,
    typer.Option(
        "--no-probes",
        help="Skip the probes (input-only, compute-only, batch-size, steps_per_execution) and "
        "sequence sampling (faster, fewer findings: the rules that need them are not evaluated).",
    ),
]

Verify = Annotated[
    bool,
    typer.Option(
        "--verify",
        help="After the check, apply each fix that rewrites the script to a copy of it and time "
        "it A/B against the original (A B A B, separate processes); writes verify.json, "
        "verify.md and fixes.patch (the confirmed fixes). Your files are not changed.",
    ),
]
Workers = Annotated[
    int | None,
    typer.Option(
        "--workers",
        help="Launch N local workers on 127.0.0.1 with a generated TF_CONFIG (a "
        "MultiWorkerMirroredStrategy pre-flight), merged into one report [1].",
    ),
]
VerifyBudget = Annotated[
    float | None,
    typer.Option(
        "--verify-budget",
        help="Seconds the --verify runs may take together, the arms' starts included [3x the "
        "plain check's wall time; at most what --timeout leaves].",
    ),
]


def _version(value: bool) -> None:
    if value:
        typer.echo(f"rnndoctor {__version__}")
        raise typer.Exit(ExitCode.OK)


@app.callback()
def _main(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """Diagnose slow RNN (LSTM/GRU) training in TensorFlow/Keras."""


class _CheckCommand(TyperCommand):
    """``check``: an unknown option was most likely meant for the user's script."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, args)
        except Exception as exc:
            # click's NoSuchOption (typer 0.12+ uses click, later versions a vendored copy)
            if type(exc).__name__ == "NoSuchOption" and getattr(exc, "option_name", None):
                exc.message += (  # type: ignore[attr-defined]
                    f". Arguments for your script go after `--`: rnndoctor check SCRIPT -- "
                    f"{exc.option_name} ..."  # type: ignore[attr-defined]
                )
            raise


def _console(ctx: typer.Context, debug: bool = False) -> Console:
    """This invocation's Console (``main`` passes one as the context object)."""
    console = ctx.ensure_object(Console)
    console.debug = debug
    return console


@app.command(epilog=EXIT_CODES_HELP, cls=_CheckCommand)
def check(
    ctx: typer.Context,
    script: Annotated[Path, typer.Argument(help="The training script, run as `python SCRIPT`.")],
    script_args: Annotated[
        list[str] | None, typer.Argument(help="Arguments for the script, after --.")
    ] = None,
    out: Out = None,
    steps: Steps = None,
    warmup: Warmup = None,
    profile_steps: ProfileSteps = None,
    timeout: Timeout = None,
    fail_on: FailOn = None,
    formats: Formats = None,
    select: Select = None,
    ignore: Ignore = None,
    redact: Redact = None,
    debug: Debug = False,
    no_probes: NoProbes = False,
    verify: Verify = False,
    verify_budget: VerifyBudget = None,
    workers: Workers = None,
) -> None:
    """Run SCRIPT for a short diagnosis window and report why its RNN training is slow.

    Defaults can be set in a [tool.rnndoctor] table of the pyproject.toml at or above the
    script's folder.
    """
    from rnndoctor.cli.check import run_check

    cli = dict(
        out=out, steps=steps, warmup=warmup, profile_steps=profile_steps, timeout=timeout,
        fail_on=fail_on, format=formats, select=select, ignore=ignore, redact=redact,
        debug=debug, no_probes=no_probes, verify=verify, verify_budget=verify_budget,
        workers=workers,
    )  # fmt: skip
    if workers is not None and workers > 1:  # a local multi-worker pre-flight
        from rnndoctor.cli.workers import run_workers_check

        args = list(script_args or [])
        raise typer.Exit(run_workers_check(script, args, cli, _console(ctx, debug)))
    task = _launched_task(ctx)
    if task is not None:  # one worker of the user's own launcher (a multi-worker TF_CONFIG)
        from rnndoctor.cli.launched import run_launched_check

        args = list(script_args or [])
        raise typer.Exit(run_launched_check(script, args, cli, task, _console(ctx, debug)))
    raise typer.Exit(run_check(script, list(script_args or []), cli, _console(ctx, debug)))


def _launched_task(ctx: typer.Context) -> cluster.LaunchedTask | None:
    """This process's task in a multi-worker ``TF_CONFIG``; a usage error (exit 2) for a
    ``TF_CONFIG`` that cannot be read."""
    try:
        return cluster.launched_task(os.environ)
    except (ValueError, TypeError, AttributeError) as exc:
        _console(ctx).error(f"TF_CONFIG cannot be read: {exc}")
        raise typer.Exit(ExitCode.USAGE) from None


def example_path(fixed: bool = False) -> Path:
    """The bundled example script (installed as package data with rnndoctor)."""
    name = "charlm_stdlib_fixed.py" if fixed else "charlm_stdlib.py"
    return Path(str(resources.files("rnndoctor.examples").joinpath(name)))


@app.command(epilog=EXIT_CODES_HELP)
def demo(
    ctx: typer.Context,
    fixed: Annotated[
        bool, typer.Option("--fixed", help="Run the variant with the fixes applied.")
    ] = False,
    out: Out = None,
    steps: Steps = None,
    timeout: Timeout = None,
    fail_on: Annotated[
        str,
        typer.Option(
            "--fail-on", help=f"Exit 1 at or above this severity [{_DEMO_FAIL_ON}, for the demo]."
        ),
    ] = _DEMO_FAIL_ON,
    formats: Formats = None,
    redact: Redact = None,
    debug: Debug = False,
) -> None:
    """Check the bundled example: a character-level LSTM trained on the standard library's
    source lines."""
    from rnndoctor.cli.check import run_check

    cli = dict(out=out, steps=steps, timeout=timeout, fail_on=fail_on, format=formats,
               redact=redact, debug=debug)  # fmt: skip
    raise typer.Exit(run_check(example_path(fixed), [], cli, _console(ctx, debug)))


@app.command(epilog=EXIT_CODES_HELP)
def report(
    ctx: typer.Context,
    facts_file: Annotated[Path, typer.Argument(help="A facts.json (or report.json) from a check.")],
    out: Annotated[
        str | None, typer.Option("--out", help="Output directory [the facts file's folder].")
    ] = None,
    fail_on: FailOn = None,
    formats: Formats = None,
    select: Select = None,
    ignore: Ignore = None,
    redact: Redact = None,
) -> None:
    """Re-run the rules on saved facts and render the reports again, offline.

    Imports no TensorFlow: works on any machine with rnndoctor installed. The reports go next to
    the facts file unless --out says otherwise.
    """
    from rnndoctor.cli.offline import run_report

    cli = dict(out=out, fail_on=fail_on, format=formats, select=select, ignore=ignore,
               redact=redact)  # fmt: skip
    raise typer.Exit(run_report(facts_file, cli, _console(ctx)))


@app.command(epilog=EXIT_CODES_HELP)
def merge(
    ctx: typer.Context,
    facts_files: Annotated[
        list[Path], typer.Argument(help="The workers' facts-worker-<i>.json files.")
    ],
    out: Annotated[
        str | None, typer.Option("--out", help="Output directory [the first file's folder].")
    ] = None,
    fail_on: FailOn = None,
    formats: Formats = None,
    select: Select = None,
    ignore: Ignore = None,
    redact: Redact = None,
) -> None:
    """Merge the facts of a multi-worker job's workers into one report, offline.

    For workers on hosts without a shared --out: copy each worker's facts-worker-<i>.json to
    one machine, then merge them here (no TensorFlow needed).
    """
    from rnndoctor.cli.launched import run_merge

    cli = dict(out=out, fail_on=fail_on, format=formats, select=select, ignore=ignore,
               redact=redact)  # fmt: skip
    raise typer.Exit(run_merge(facts_files, cli, _console(ctx)))


@app.command()
def compare(
    ctx: typer.Context,
    before: Annotated[Path, typer.Argument(help="report.json or facts.json of the first run.")],
    after: Annotated[Path, typer.Argument(help="report.json or facts.json of the second run.")],
    html: Annotated[
        Path, typer.Option("--html", help="Where to write the HTML comparison.")
    ] = Path("rnndoctor-compare.html"),
    select: Select = None,
    ignore: Ignore = None,
) -> None:
    """Compare two runs: the measured step-time ratio, the findings fixed and the findings new.

    The current rules run on both runs' facts, with the same --select / --ignore.
    """
    from rnndoctor.cli.offline import run_compare

    cli = dict(select=select, ignore=ignore)
    raise typer.Exit(run_compare(before, after, html, cli, _console(ctx)))


@app.command()
def rules(
    ctx: typer.Context,
    rule_id: Annotated[
        str | None, typer.Argument(help="A rule ID or name: print its documentation.")
    ] = None,
) -> None:
    """List the rules, or print one rule's documentation."""
    from rnndoctor.cli.offline import show_rules

    raise typer.Exit(show_rules(rule_id, _console(ctx)))


def main() -> None:
    """Console-script entry point.

    An unexpected error in rnndoctor itself exits 5 with one line (``check --debug`` or
    ``RNNDOCTOR_DEBUG=1`` show the traceback), never 1, which CI gates read as "findings".
    """
    from rnndoctor.cli.signals import stop_on_signals

    stop_on_signals()  # SIGTERM and SIGHUP end the script's processes as Ctrl-C does
    console = Console()  # the commands find it as their context object
    try:
        app(obj=console)
    except Exception as exc:
        if console.debug or os.environ.get("RNNDOCTOR_DEBUG"):
            raise
        console.error(
            f"internal error: {type(exc).__name__}: {exc} (--debug or RNNDOCTOR_DEBUG=1 shows "
            "the traceback)"
        )
        sys.exit(ExitCode.INTERNAL)
