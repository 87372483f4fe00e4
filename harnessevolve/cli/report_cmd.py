"""``report``: a finished run's story from its ledger; ``--final`` scores the sealed test split."""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.table import Table

from harnessevolve.cli._errors import handle_errors
from harnessevolve.cli.options import HarnessDir, JsonOut, Model, Seed
from harnessevolve.cli.ui import console, progress_hooks
from harnessevolve.pipeline.final import find_run, score_test_split


@handle_errors
def report(
    harness: HarnessDir,
    run: Annotated[str | None, typer.Option("--run", help="Run id (default: the latest run).")] = None,
    final: Annotated[
        bool, typer.Option("--final", help="Score the seed and evolved harness on the sealed test split.")
    ] = False,
    model: Model = None,
    seed: Seed = 0,
    as_json: JsonOut = False,
) -> None:
    """Summarise a run from its ledger: accepted and reverted edits, scores per generation."""
    record = find_run(harness, run)
    accepted = {e["sha"]: e for e in record.all("candidate_accepted")}
    commits = record.all("candidate_committed")
    final_scores = None
    if final:
        with progress_hooks(enabled=not as_json) as hooks:
            final_scores = score_test_split(harness, record, model=model, seed=seed, hooks=hooks)
    if as_json:
        console.print_json(
            json.dumps(
                {"run_id": record.run_id, "accepted": list(accepted), "test": final_scores}, default=str
            )
        )
        return
    console.print(f"run {record.run_id}: {len(accepted)} of {len(commits)} candidate edits accepted")
    for c in commits:
        status = "[green]accepted[/]" if c["sha"] in accepted else "[red]reverted[/]"
        console.print(f"  {c['sha'][:8]} {status} gen {c['generation']}: {c['summary']}")
    if final_scores:
        table = Table(
            "harness", "revision", "test score", title=f"test split ({final_scores['tasks']} tasks)"
        )
        for name in ("seed", "evolved"):
            table.add_row(name, final_scores["revisions"][name][:8], f"{final_scores['scores'][name]:.3f}")
        console.print(table)
        gain = final_scores["scores"]["evolved"] - final_scores["scores"]["seed"]
        console.print(f"test-split gain: {gain * 100:+.1f} points")
