"""``diff RUN REF``: a run and its reference side by side, the first divergent step marked."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from harnessevolve.cli._errors import handle_errors
from harnessevolve.cli.options import JsonOut
from harnessevolve.cli.traj_cmd import read_trajectory
from harnessevolve.cli.ui import console
from harnessevolve.core.errors import TrajectoryError
from harnessevolve.core.files import read_json
from harnessevolve.core.signals import ErrorSignal
from harnessevolve.evaluate.alignment import AlignedRow, describe, first_divergence
from harnessevolve.evaluate.bounded_alignment import align_bounded
from harnessevolve.evaluate.signal_judge import JudgeCache, judge_signal

TABLE_ROWS = 200
"""Rows the table shows at most: a window around the first divergence (--json has them all)."""


def divergent_row(rows: list[AlignedRow], signal: ErrorSignal) -> int | None:
    """The row that shows the signal's divergence: the first unmatched row holding its run step or
    its reference step; else the row of its run step."""
    for i, row in enumerate(rows):
        run_step = row.run.step_id if row.run else None
        ref_step = row.reference.step_id if row.reference else None
        if not row.match and (
            (run_step is not None and run_step == signal.step)
            or (ref_step is not None and ref_step == signal.reference_step)
        ):
            return i
    return next((i for i, r in enumerate(rows) if r.run and r.run.step_id == signal.step), None)


def read_tools(path: Path) -> list[dict[str, Any]]:
    """Tool definitions from a harness directory (its tools) or a JSON file: a list of definitions,
    ``{"tools": [...]}``, or an ATIF trajectory carrying ``agent.tool_definitions``."""
    if path.is_dir():
        from harnessevolve.harness.load import load_harness

        return [t.openai_schema() for t in load_harness(path).tools]
    doc = read_json(path, error=TrajectoryError)
    if isinstance(doc, dict):
        agent = doc.get("agent")
        doc = doc.get("tools", agent.get("tool_definitions") if isinstance(agent, dict) else None)
    if not isinstance(doc, list) or not all(isinstance(d, dict) for d in doc):
        raise TrajectoryError(
            "not a list of tool definitions",
            file=str(path),
            field="tools",
            hint='give a harness directory, a JSON list of {"type": "function", "function": {...}}, '
            'or {"tools": [...]}',
        )
    return doc


@handle_errors
def diff(
    run: Annotated[
        Path, typer.Argument(help="The run's trajectory (ATIF or OpenAI chat).", show_default=False)
    ],
    reference: Annotated[
        Path,
        typer.Argument(metavar="REF", help="The reference trajectory of the same task.", show_default=False),
    ],
    tools: Annotated[
        Path | None,
        typer.Option(
            "--tools",
            help="Tool definitions the agent was offered, when the trajectories do not carry them: a "
            "harness directory or a JSON list of OpenAI-style definitions.",
            show_default=False,
        ),
    ] = None,
    judge_model: Annotated[
        str | None,
        typer.Option(
            "--judge-model",
            help="Also ask this model (any litellm name) to review the signal: it refines cause and "
            "hint where the rules are ambiguous and checks the reference is genuine (off by default; "
            "answers are cached).",
            show_default=False,
        ),
    ] = None,
    judge_cache: Annotated[
        Path | None,
        typer.Option(
            "--judge-cache",
            help="Cache folder for judge answers (default ~/.cache/harnessevolve).",
            show_default=False,
        ),
    ] = None,
    json_out: JsonOut = False,
) -> None:
    """Print a run and its reference aligned action by action, the first divergence marked.

    Below the table: the divergence's cause, severity and fix hint (as the evaluator records them).
    Steps are ATIF step_ids: the run's in "step", the reference's in "ref".
    """
    _diff(run, reference, json_out, tools, judge_model, judge_cache)


def _diff(
    run_path: Path,
    ref_path: Path,
    json_out: bool,
    tools_path: Path | None = None,
    judge_model: str | None = None,
    judge_cache: Path | None = None,
) -> None:
    run = read_trajectory(run_path, strict=False)
    reference = read_trajectory(ref_path, strict=False)
    tools = read_tools(tools_path) if tools_path is not None else None
    passed = run.extra.get("passed") is True
    score = float(run.extra.get("score", 0.0) or 0.0)
    aligned = align_bounded(run, reference, tools=tools)
    rows = aligned.rows
    signal = None if passed else first_divergence(run, reference, score=score, tools=tools)
    if signal is not None and judge_model:
        signal = judge_signal(signal, run, reference, model=judge_model, cache=JudgeCache(judge_cache))
    marked = divergent_row(rows, signal) if signal else None
    if json_out:
        document = {
            "rows": [
                {
                    "step": r.run.step_id if r.run else None,
                    "run": r.run.as_dict() if r.run else None,
                    "reference_step": r.reference.step_id if r.reference else None,
                    "reference_index": r.reference_index,
                    "reference": r.reference.as_dict() if r.reference else None,
                    "match": r.match,
                    "divergent": i == marked,
                }
                for i, r in enumerate(rows)
            ],
            "signal": signal.to_dict() if signal else None,
        }
        typer.echo(json.dumps(document, indent=2))
        return
    table = Table(
        title=escape(f"{run_path.name} vs {ref_path.name} ({run.task_id or reference.task_id or '?'})")
    )
    table.add_column("step", justify="right")
    table.add_column("run action", overflow="fold")
    table.add_column("ref", justify="right")
    table.add_column("reference action", overflow="fold")
    table.add_column("", justify="center")
    start = max(0, min((marked or 0) - TABLE_ROWS // 2, len(rows) - TABLE_ROWS))
    shown = range(start, min(len(rows), start + TABLE_ROWS))
    for i in shown:
        row = rows[i]
        mark = "[green]✓[/]" if row.match else "[red]✗[/]"
        style = None
        if i == marked:
            mark, style = "[bold red]◀ first divergence[/]", "bold"
        table.add_row(
            str(row.run.step_id) if row.run else "-",
            escape(describe(row.run) if row.run else "-"),
            str(row.reference.step_id) if row.reference else "-",
            escape(describe(row.reference) if row.reference else "-"),
            mark,
            style=style,
        )
    console.print(table)
    if len(shown) < len(rows):
        console.print(f"[dim]rows {start + 1}-{shown.stop} of {len(rows)} shown (--json gives every row)[/]")
    if aligned.banded:
        console.print(
            f"[dim]{len(rows)} rows: too long for the full alignment table, aligned within a band "
            "around the diagonal (exact matches only); the first divergence is exact[/]"
        )
    if signal is None:
        console.print("[green]the run passed its checker; nothing to diagnose[/]")
        return
    where = f"step {signal.step}" if signal.step is not None else "no step"
    ref_where = f" (reference step {signal.reference_step})" if signal.reference_step else ""
    console.print(f"first divergence: {where}{ref_where}")
    console.print(f"cause: [bold]{signal.cause.value}[/]   severity: {signal.severity:.2f}")
    console.print(f"hint: {escape(signal.hint)}")
    for gap in signal.gaps:
        console.print(f"[yellow]gap:[/] {escape(gap)}")
    if signal.judge:
        _print_judge(signal.judge)


def _print_judge(view: dict[str, Any]) -> None:
    if "error" in view:
        console.print(
            f"judge {escape(view['model'])}: no usable answer ({escape(view['error'])}); rules kept"
        )
        return
    verdict = (
        "agrees with the rules" if view["agrees"] else f"says {view['cause']} (rules: {view['rules_cause']})"
    )
    applied = "; applied, the rules were ambiguous" if view["applied"] else ""
    genuine = {True: "looks genuine", False: "does NOT look genuine", None: "not judged"}[
        view["reference_genuine"]
    ]
    cached = " (cached)" if view.get("cached") else ""
    console.print(f"judge {escape(view['model'])}{cached}: {verdict}{applied}; reference {genuine}")
