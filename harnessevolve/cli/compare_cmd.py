"""``compare``: arms x seeds on one benchmark, each cell resumable, merged into one table.

``harnessevolve compare PLAN.yaml`` (same as ``compare run PLAN.yaml``) runs a plan's cells;
``harnessevolve compare merge DIR...`` joins finished cells of several output folders into one table.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from typer.core import TyperGroup

from harnessevolve.cli._errors import EXIT_INTERRUPTED, handle_errors
from harnessevolve.cli.options import JsonOut
from harnessevolve.cli.progress import progress_hooks
from harnessevolve.compare.merge import load_results, result_files
from harnessevolve.compare.plan import Plan, load_plan
from harnessevolve.compare.runner import CellDone, Comparison, run_comparison
from harnessevolve.compare.table import build_table, markdown
from harnessevolve.core.containment import check_output_path
from harnessevolve.core.interrupts import stop_signals

lines = Console(stderr=True, highlight=False, soft_wrap=True)
"""Progress lines go to standard error: standard output holds the table (or the JSON)."""


class PlanOrCommand(TyperGroup):
    """``compare PLAN.yaml ...`` is ``compare run PLAN.yaml ...``: anything but a subcommand's
    name (or --help) in first place goes to ``run``."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in ("--help", "-h"):
            args = ["run", *args]
        return super().parse_args(ctx, args)


app = typer.Typer(
    cls=PlanOrCommand,
    no_args_is_help=True,
    add_completion=False,
    help="Compare arms (the seed harness, evolve runs, best-of-k at matched rollouts, GEPA, fixed harnesses) "
    "over seeds on one benchmark's test split, one resumable cell at a time: "
    "`harnessevolve compare PLAN.yaml` (`--resume` picks a killed comparison up where it stopped; "
    "`--cells seed=0` runs some cells now, the rest later), then `harnessevolve compare merge DIR...` "
    "to join folders made on other machines or days.",
)


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


def _cell_line(done: CellDone) -> str:
    r = done.result
    passed = sum(1 for v in r.tasks.values() if v >= 1.0)
    extra = f", k={r.details['k']}, pass@k {_pct(r.oracle)}" if r.kind == "best-of-k" else ""
    extra += f", ${r.cost_usd:.2f}" if r.cost_usd > 0 else ""
    eta = f", ETA {_duration(done.eta_s)}" if done.eta_s is not None else ""
    return (
        f"[{done.index}/{done.total}] {r.cell_id}: test {r.score * 100:.1f} "
        f"({passed}/{len(r.tasks)} passed{extra}), "
        f"{r.rollouts} rollouts, {r.wall_s:.1f} s; elapsed {_duration(done.elapsed_s)}{eta}"
    )


def _pct(scores: dict[str, float] | None) -> str:
    values = list((scores or {}).values())
    return f"{sum(values) / len(values) * 100:.1f}" if values else "-"


def _command(
    plan: Path,
    out: Path,
    resume: bool,
    cells: list[str],
    max_hours: float | None,
    max_cost_usd: float | None = None,
) -> str:
    words = ["harnessevolve", "compare", "run", str(plan), "--out", str(out)]
    words += ["--resume"] if resume else []
    for selector in cells:
        words += ["--cells", selector]
    words += ["--max-hours", f"{max_hours:g}"] if max_hours is not None else []
    words += ["--max-cost-usd", f"{max_cost_usd:g}"] if max_cost_usd is not None else []
    return shlex.join(words)


def _print_table(
    folders: list[Path],
    *,
    arm_order: list[str],
    as_json: bool,
    comparison: Comparison | None,
    html: Path | None = None,
) -> None:
    results = load_results(folders) if comparison is None or result_files(comparison.out) else []
    table = build_table(results, arm_order)
    if html is not None and results:
        from harnessevolve.compare.html_page import write_page

        write_page(html, table)
        lines.print(f"HTML page: {html}", markup=False)
    if as_json:
        doc: dict[str, Any] = {"table": table.to_json()}
        if comparison is not None:
            doc["comparison"] = {
                "out": str(comparison.out),
                "ran": list(comparison.ran),
                "skipped": list(comparison.skipped),
                "left": list(comparison.left),
                "stopped": comparison.stopped,
                "elapsed_s": round(comparison.elapsed_s, 1),
                "cost_usd": round(comparison.cost_usd, 6),
            }
        typer.echo(json.dumps(doc, indent=2))
    elif results:
        typer.echo(markdown(table))


@app.command("run")
@handle_errors
def run_command(
    plan_file: Annotated[
        Path, typer.Argument(metavar="PLAN", help="The comparison plan (YAML, version: 1).")
    ],
    out: Annotated[
        Path,
        typer.Option("--out", "-o", help="The output folder: one folder per cell, its result file in it."),
    ] = Path("compare-out"),
    resume: Annotated[
        bool,
        typer.Option(
            "--resume", help="Go on in an output folder that holds cells: skip finished ones, rerun the rest."
        ),
    ] = False,
    cells: Annotated[
        list[str] | None,
        typer.Option(
            "--cells",
            help="Run only the cells a selector picks: seed=0, arm=evolve, kind=best-of-k, arm=evolve,seed=1 "
            "(repeatable: a cell any selector picks runs).",
        ),
    ] = None,
    max_hours: Annotated[
        float | None,
        typer.Option(
            "--max-hours", min=0, max=24 * 366, help="Stop cleanly between cells after this many hours."
        ),
    ] = None,
    max_cost_usd: Annotated[
        float | None,
        typer.Option(
            "--max-cost-usd",
            min=0,
            max=1e9,
            help="Stop cleanly between cells once this invocation's cells cost this many dollars.",
        ),
    ] = None,
    html: Annotated[
        Path | None,
        typer.Option("--html", help="Also write the table and its plots as one self-contained HTML page."),
    ] = None,
    verbose: Annotated[
        bool,
        typer.Option("--verbose", "-v", help="Show each cell's run log too (its decisions, its stages)."),
    ] = False,
    json_out: JsonOut = False,
) -> None:
    """Run a plan's cells (arm x seed) one by one, then print the table.

    Each finished cell writes its result file (per-task test outcomes, rollouts, tokens, wall time,
    load, command, version); a killed cell has none. The table: per arm mean ± sd over seeds,
    paired differences against the seed and best-of-k (sc) with a confidence interval. A killed
    comparison goes on with --resume (finished cells are kept)."""
    plan: Plan = load_plan(plan_file)
    selectors = list(cells or [])
    if html is not None:
        check_output_path(html, option="--html", kind="file")
    command = _command(plan_file, out, resume, selectors, max_hours, max_cost_usd)
    finished: list[str] = []

    def on_cell(done: CellDone) -> None:
        finished.append(done.result.cell_id)
        lines.print(_cell_line(done), markup=False)

    try:
        shown = progress_hooks(console=lines, unit="cell", whole="comparison", stage="compare")
        with stop_signals(), shown as hooks:
            comparison = run_comparison(
                plan,
                out,
                resume=resume,
                selectors=selectors,
                max_hours=max_hours,
                max_cost_usd=max_cost_usd,
                command=command,
                on_cell=on_cell,
                on_start=hooks.on_outer,
                log=hooks.log if verbose else lambda _m: None,
                progress=hooks.on_progress,
            )
    except KeyboardInterrupt:
        again = _command(plan_file, out, True, selectors, max_hours, max_cost_usd)
        lines.print(
            f"Interrupted; {len(finished)} cell(s) finished in this invocation and are kept, the cell "
            f"that was running has no result. Go on with: {again}",
            markup=False,
        )
        raise typer.Exit(EXIT_INTERRUPTED) from None
    if comparison.skipped:
        lines.print(f"{len(comparison.skipped)} cell(s) had finished before: kept", markup=False)
    if comparison.stopped:
        lines.print(
            f"stopped: {comparison.stopped}; {len(comparison.left)} cell(s) left. Go on with: "
            f"{_command(plan_file, out, True, selectors, max_hours, max_cost_usd)}",
            style="yellow",
            markup=False,
        )
    _print_table(
        [out], arm_order=[a.name for a in plan.arms], as_json=json_out, comparison=comparison, html=html
    )


@app.command("merge")
@handle_errors
def merge_command(
    folders: Annotated[
        list[Path], typer.Argument(metavar="DIR...", help="Output folders of `harnessevolve compare`.")
    ],
    html: Annotated[
        Path | None,
        typer.Option("--html", help="Also write the table and its plots as one self-contained HTML page."),
    ] = None,
    json_out: JsonOut = False,
) -> None:
    """Join the finished cells of several output folders into one table.

    Cells made on other machines or days join the same table; cells whose benchmark slice, agent
    model, scorer, seed harness or arm definition differ are refused (exit 2, with the reason)."""
    if html is not None:
        check_output_path(html, option="--html", kind="file")
    _print_table(list(folders), arm_order=[], as_json=json_out, comparison=None, html=html)
    if not json_out:
        lines.print(f"merged from {len(folders)} folder(s)", markup=False)
