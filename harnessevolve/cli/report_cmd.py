"""``report``: a run's story from its ledger; ``--final`` scores the sealed test split; ``--html``
writes the whole run as one self-contained HTML file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from harnessevolve.cli._errors import handle_errors
from harnessevolve.cli.final_view import print_final
from harnessevolve.cli.headroom_view import print_headroom, run_headroom
from harnessevolve.cli.options import ControlK, HarnessDir, JsonOut, Model, Seed
from harnessevolve.cli.progress import progress_hooks
from harnessevolve.cli.ui import console, note_malformed, score
from harnessevolve.core.containment import check_output_path
from harnessevolve.pipeline.final import score_test_split
from harnessevolve.report.components import ComponentRow, component_rows
from harnessevolve.report.html import write_html_report
from harnessevolve.report.infra_view import infra_counts
from harnessevolve.report.run_view import load_run_view
from harnessevolve.report.runs import resolve_run
from harnessevolve.report.tracking import MlflowTracker, make_tracker, mirror_run
from harnessevolve.runs.rundir import RunDir

RunRef = Annotated[
    str | None,
    typer.Argument(
        metavar="[RUN]",
        help="A run id (or a unique prefix of one) or a run folder; default: the harness's latest run.",
        show_default=False,
    ),
]


@handle_errors
def report(
    run_ref: RunRef = None,
    harness: HarnessDir = Path("."),
    run: Annotated[str | None, typer.Option("--run", help="Run id, as RUN (kept for older scripts).")] = None,
    final: Annotated[
        bool,
        typer.Option(
            "--final",
            help="Score the seed and evolved harness on the sealed test split, beside the matched-budget "
            "control: the seed's best-of-k at the rollouts the run spent (k = round(run rollouts / test "
            "tasks); self-consistency pick, and the pass@k oracle marked as such), with 95% intervals.",
        ),
    ] = False,
    control_k: ControlK = None,
    control_temperature: Annotated[
        float | None,
        typer.Option(
            "--control-temperature",
            min=0.0,
            max=2.0,
            help="With --final: the control's sampling temperature (default: the seed's own when it "
            "samples, else 0.7).",
        ),
    ] = None,
    variants: Annotated[
        int,
        typer.Option(
            "--variants",
            min=0,
            max=20,
            help="With --final: also score seed and evolved on up to N synthesized variants of each test "
            "task (chained test tasks; one more bug for synthesized SWE tasks; only variants whose gold "
            "passes), and report the drop from original to variant for both.",
        ),
    ] = 0,
    html: Annotated[
        Path | None,
        typer.Option(
            "--html",
            help="Also write the run as one self-contained HTML file (plots, every candidate's diff, gate "
            "numbers, lineage, clusters, cost) to this path; an existing folder gets report.html.",
        ),
    ] = None,
    track: Annotated[
        str | None,
        typer.Option(
            "--track",
            help="Mirror the run into a tracker after the fact: mlflow (MLFLOW_TRACKING_URI, else a local "
            "store in DIR/.harnessevolve/); needs the tracking extra.",
        ),
    ] = None,
    model: Model = None,
    seed: Seed = 0,
    as_json: JsonOut = False,
) -> None:
    """Summarise a run from its ledger: accepted and reverted edits, scores per generation; with
    --final, the sealed test split beside the matched-budget control (the seed's best-of-k at the
    run's own rollout count). docs/reading-results.md says what each number controls for.

    Examples: [cyan]harnessevolve report -H DIR[/] (latest run), [cyan]harnessevolve report RUN-ID -H DIR
    --html report.html[/], [cyan]harnessevolve report DIR/.harnessevolve/runs/RUN-ID --html .[/]
    """
    if html is not None:
        check_output_path(html / "report.html" if html.is_dir() else html, option="--html")
    run_dir = resolve_run(run_ref or run, harness)
    harness_dir = RunDir(run_dir).harness_dir()
    note_malformed(RunDir(run_dir).ledger)
    final_scores = None
    if (control_k is not None or variants or control_temperature is not None) and not final:
        raise typer.BadParameter("needs --final", param_hint="--control-k/--variants/--control-temperature")
    if final:
        with progress_hooks(enabled=not as_json, stage="test split") as hooks:
            final_scores = score_test_split(
                harness_dir,
                RunDir(run_dir).load(),
                model=model,
                seed=seed,
                hooks=hooks,
                control=control_k != 0,
                control_samples=control_k or None,
                control_temperature=control_temperature,
                variants=variants,
            )
    view = load_run_view(run_dir)
    room = run_headroom(view.events)
    components = component_rows(run_dir)
    html_path = write_html_report(view, html) if html is not None else None
    tracker = make_tracker(track, harness_dir, run_dir=run_dir)
    mirror_run(tracker, list(view.events))
    if as_json:
        document = {
            "run_id": view.run_id,
            "state": view.state,
            "accepted": [c.sha for c in view.accepted],
            "accepted_on_ties": [c.sha for c in view.accepted if c.tie],
            "net_change": view.net_change,
            "headroom": room.to_json() if room is not None else None,
            "test": final_scores,
            "components": [row.to_json() for row in components],
            "html": str(html_path) if html_path else None,
        }
        console.print_json(json.dumps(document, default=str))
        return
    console.print(
        f"run {view.run_id}: {len(view.accepted)} of {len(view.candidates)} candidate edits accepted"
        + ("" if view.state == "finished" else f" ({view.state})")
    )
    if view.generations:
        scores = Table(
            "gen", "train (current -> candidate)", "validation", "outcome", title="scores per generation"
        )
        if view.baseline_validation is not None:
            scores.add_row("0", "-", score(view.baseline_validation), "seed")
        for g in view.generations:
            train = score(g.train_current) + (
                f" -> {score(g.train_candidate)}" if g.train_candidate is not None else ""
            )
            scores.add_row(str(g.generation), train, score(g.validation), escape(g.outcome or "in progress"))
        console.print(scores)
    for c in view.candidates:
        status = {"accepted": "[green]accepted[/]", "reverted": "[red]reverted[/]"}.get(
            c.outcome, f"[yellow]{c.outcome}[/]"
        )
        tie = " [yellow](tie)[/]" if c.tie else ""
        console.print(f"  {c.short} {status}{tie} gen {c.generation}: {escape(c.summary)}")
    net = view.net_change
    if net is not None and not net.get("changed"):
        console.print("[yellow]no net change: the final harness equals the seed[/]")
    if room is not None:
        print_headroom(room)
    if components:
        print_components(components)
    if final_scores:
        print_final(final_scores)
    infra = infra_counts(RunDir(run_dir).ledger)
    if infra.failures or infra.retried:
        console.print(infra.line(), style="yellow", markup=False)
    if html_path:
        console.print(f"HTML report: {html_path}")
    if isinstance(tracker, MlflowTracker):
        console.print(f"MLflow: experiment {tracker.experiment_name!r} at {tracker.tracking_uri}")


def print_components(rows: list[ComponentRow]) -> None:
    """The runtime components per harness revision (docs/runtime.md)."""
    table = Table(
        "harness",
        "rollouts",
        "memory used",
        "recovery fired",
        "component errors",
        "forecast accuracy",
        title="runtime components",
    )
    for row in rows:
        accuracy = row.forecast_accuracy
        shown = "-" if accuracy is None else f"{accuracy:.3f} ({row.matches}/{row.forecasts})"
        table.add_row(
            row.harness_hash[:8],
            str(row.rollouts),
            str(row.memory_used),
            str(row.recovery_fired),
            str(row.component_errors),
            shown,
        )
    console.print(table)
