"""``traj``: check, read and convert trajectories (ATIF, OpenAI chat messages)."""

from __future__ import annotations

import hashlib
import json
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from harnessevolve.cli._errors import EXIT_BAD_INPUT, err_console, handle_errors
from harnessevolve.cli.ui import console
from harnessevolve.core import atif
from harnessevolve.core.atif import Step, Trajectory
from harnessevolve.core.containment import check_output_path
from harnessevolve.core.errors import HarnessEvolveError, TrajectoryError
from harnessevolve.core.files import atomic_write_json, read_json
from harnessevolve.core.openai_chat import from_messages, to_messages

app = typer.Typer(
    help="Trajectories: validate ATIF files, show them step by step, convert to and from OpenAI chat.",
    no_args_is_help=True,
)


class Format(StrEnum):
    openai = "openai"
    atif = "atif"


def read_trajectory(path: Path, *, task_id: str | None = None, strict: bool = True) -> Trajectory:
    """An ATIF file, or OpenAI chat messages (a list or ``{"messages": [...]}``) imported as ATIF.
    ``strict``: see ``atif.from_dict``."""
    doc = read_json(path, error=TrajectoryError)
    if isinstance(doc, dict) and "schema_version" in doc:
        trajectory = atif.from_dict(doc, file=str(path), strict=strict)
    elif isinstance(doc, list) or (isinstance(doc, dict) and "messages" in doc):
        session = hashlib.sha256(path.read_bytes()).hexdigest()[:32]
        trajectory = from_messages(doc, session_id=session, file=str(path))
    else:
        raise TrajectoryError(
            "neither ATIF (no schema_version) nor OpenAI chat messages",
            file=str(path),
            field="schema_version",
            hint="an ATIF trajectory has schema_version, session_id, agent and steps",
        )
    return trajectory.with_extra(task_id=task_id) if task_id else trajectory


@app.command()
def validate(
    files: Annotated[list[Path], typer.Argument(help="ATIF trajectory files.", show_default=False)],
) -> None:
    """Check each file against ATIF v1.0-v1.5; one line per invalid file (naming step and field), exit 2."""
    bad = 0
    for path in files:
        try:
            trajectory = atif.load(path)
        except HarnessEvolveError as exc:
            bad += 1
            err_console.print(f"[bold red]invalid:[/] {escape(exc.one_line())}")
            if exc.hint:
                err_console.print(f"[dim]Hint:[/] {escape(exc.hint)}")
            continue
        console.print(
            f"ok: {escape(str(path))} ({len(trajectory.steps)} steps, {trajectory.task_id or 'no task id'})"
        )
    if bad:
        raise typer.Exit(EXIT_BAD_INPUT)


def _clip(text: str, limit: int) -> str:
    text = text.rstrip("\n")
    if limit and len(text) > limit:
        return f"{text[:limit]}… (+{len(text) - limit} chars)"
    return text


def _args(arguments: dict[str, Any], limit: int) -> str:
    return ", ".join(f"{k}={_clip(json.dumps(v, ensure_ascii=False), limit)}" for k, v in arguments.items())


def _step_body(step: Step, limit: int) -> str:
    lines: list[str] = []
    if step.message:
        lines.append(escape(_clip(step.message, limit)))
    if step.reasoning_content:
        lines.append(f"[dim]reasoning: {escape(_clip(step.reasoning_content, limit))}[/]")
    results = {o.source_call_id: o.content for o in step.observations}
    for call in step.tool_calls:
        lines.append(f"[bold cyan]→ {escape(call.function_name)}[/]({escape(_args(call.arguments, limit))})")
        if call.tool_call_id in results:
            lines.append(f"[green]  ← {escape(_clip(results[call.tool_call_id], limit))}[/]")
    for o in step.observations:
        if o.source_call_id is None:
            lines.append(f"[green]← {escape(_clip(o.content, limit))}[/]")
    if "error" in step.extra:
        lines.append(f"[bold red]error: {escape(str(step.extra['error']))}[/]")
    return "\n".join(lines) or "[dim](empty)[/]"


@app.command()
@handle_errors
def show(
    file: Annotated[Path, typer.Argument(help="An ATIF file (or OpenAI chat messages).", show_default=False)],
    width: Annotated[
        int,
        typer.Option(
            min=0, max=10**9, help="Truncate messages and observations to this many characters (0: never)."
        ),
    ] = 300,
) -> None:
    """Show a trajectory step by step: source, tool calls, observations (truncated) and errors."""
    trajectory = read_trajectory(file)
    extra = trajectory.extra
    facts = [
        f"task {extra.get('task_id', '-')}",
        f"agent {trajectory.agent_name} {trajectory.agent_version}",
        f"model {trajectory.model_name or '-'}",
        f"stop {extra.get('stop_reason', '-')}",
        f"answer {extra.get('answer', '-')!r}",
    ]
    if "score" in extra:
        facts.append(f"score {extra['score']}")
    table = Table(title=escape(f"{file.name}: " + " · ".join(facts)), show_lines=True)
    table.add_column("step", justify="right")
    table.add_column("source")
    table.add_column("content", overflow="fold")
    colours = {"system": "dim", "user": "yellow", "agent": "bold"}
    for step in trajectory.steps:
        source = f"[{colours.get(step.source, '')}]{step.source}[/]"
        table.add_row(str(step.step_id), source, _step_body(step, width))
    console.print(table)
    metrics = trajectory.final_metrics
    if metrics:
        console.print(" ".join(f"{k}={v}" for k, v in metrics.items()), style="dim")


@app.command()
@handle_errors
def convert(
    file: Annotated[Path, typer.Argument(help="An ATIF file or OpenAI chat messages.", show_default=False)],
    to: Annotated[Format, typer.Option("--to", help="Output format.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="File to write (replaced atomically).")],
    task_id: Annotated[str | None, typer.Option(help="Set extra.task_id of the ATIF output.")] = None,
) -> None:
    """Convert between ATIF and OpenAI chat messages (``{"messages": [...]}``)."""
    check_output_path(out, option="--out")
    trajectory = read_trajectory(file, task_id=task_id)
    if to is Format.openai:
        document: Any = {"messages": to_messages(trajectory)}
        if trajectory.model_name:
            document["model"] = trajectory.model_name
    else:
        document = trajectory.to_dict()
        atif.from_dict(document, file=str(out))  # never write what would not load back
    atomic_write_json(out, document)
    console.print(f"wrote {to.value} ({len(trajectory.steps)} steps) to {escape(str(out))}")
