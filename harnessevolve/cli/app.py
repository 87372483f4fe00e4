"""The ``harnessevolve`` command."""

from __future__ import annotations

from typing import Any

import typer
import typer.rich_utils

from harnessevolve import __version__
from harnessevolve.cli import (
    clean_cmd,
    compare_cmd,
    diff_cmd,
    gate_cmd,
    harness_cmds,
    models_cmd,
    refs_cmd,
    report_cmd,
    run_cmd,
    status_cmd,
    tasks_cmd,
    train_cmd,
    traj_cmd,
)


def _one_line_usage_error(error: Any) -> None:  # typer's own (vendored) click ClickException
    """Refusals made by typer/click itself (an unknown choice of an enum option, a missing
    argument) in the tool's own shape: one ``Error:`` line naming the option, then a hint."""
    if error.__class__.__name__ == "NoArgsIsHelpError":  # typer prints the help instead
        return
    ctx = getattr(error, "ctx", None)
    command = ctx.command_path if ctx is not None else "harnessevolve"
    message = " ".join(error.format_message().split())
    typer.echo(f"Error: {message}", err=True)
    typer.echo(f"Hint: `{command} --help` lists the options and their choices", err=True)


# typer prints click's own refusals through rich_utils.rich_format_error (a boxed panel); every
# refusal of this CLI is one line and a hint instead, whoever raises it.
typer.rich_utils.rich_format_error = _one_line_usage_error  # type: ignore[assignment]  # same call, other parameter name

app = typer.Typer(
    name="harnessevolve",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode="rich",
    help="Evolve an LLM agent's harness (prompts, skills, tools, loop settings) against benchmark tasks, "
    "guarded by quality, performance and held-out gates, over a git-versioned harness directory.",
)
app.command()(harness_cmds.init)
app.command()(harness_cmds.validate)
app.command(name="run")(run_cmd.run_command)
app.command(name="gate")(gate_cmd.gate_command)
app.command()(report_cmd.report)
app.command()(status_cmd.status)
app.command()(status_cmd.log)
app.add_typer(refs_cmd.app, name="refs")
app.add_typer(traj_cmd.app, name="traj")
app.add_typer(tasks_cmd.app, name="tasks")
app.add_typer(models_cmd.app, name="models")
app.add_typer(compare_cmd.app, name="compare")
app.command()(diff_cmd.diff)
app.command()(train_cmd.train)
app.command()(clean_cmd.clean)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"harnessevolve {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Show the version and exit."
    ),
) -> None:
    pass


def main() -> None:
    app()
