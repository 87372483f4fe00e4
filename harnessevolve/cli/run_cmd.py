"""``run``: the generation loop."""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.table import Table

from harnessevolve.cli._errors import EXIT_FAILED, handle_errors
from harnessevolve.cli.options import (
    BatchSize,
    Benchmark,
    Concurrency,
    GatesFile,
    HarnessDir,
    JsonOut,
    Model,
    Seed,
)
from harnessevolve.cli.ui import console, mark, progress_hooks, score
from harnessevolve.pipeline.run import RunOptions, start_run


@handle_errors
def run(
    harness: HarnessDir,
    benchmark: Benchmark,
    generations: Annotated[int, typer.Option("--generations", "-n", min=1, help="Generations to run.")] = 3,
    model: Model = None,
    batch_size: BatchSize = 40,
    concurrency: Concurrency = None,
    seed: Seed = 0,
    proposer: Annotated[
        str,
        typer.Option(
            help="Proposers tried in order (llm, demo, rules); auto: llm if --optimizer-model is set, "
            "then demo, rules."
        ),
    ] = "auto",
    optimizer_model: Annotated[
        str | None, typer.Option("--optimizer-model", help="Model for the llm proposer (any litellm name).")
    ] = None,
    gates: GatesFile = None,
    allow_dirty: Annotated[
        bool, typer.Option(help="Snapshot uncommitted harness changes in a commit first.")
    ] = False,
    sampling: Annotated[
        str,
        typer.Option(
            help="Minibatch sampling: uniform, or regret (prefer tasks solvable but not yet solved)."
        ),
    ] = "uniform",
    as_json: JsonOut = False,
) -> None:
    """Evolve the harness: each generation runs a train minibatch, proposes one edit, and gates it.

    Accepted edits stay as commits in the harness's git history; rejected ones are reverted by a commit
    that names the gate and its numbers. Everything is logged to DIR/.harnessevolve/runs/<run-id>/.
    Exit 0 when at least one edit was accepted, 1 when none was.
    """
    options = RunOptions(
        harness_dir=harness,
        benchmark=benchmark,
        generations=generations,
        model=model,
        batch_size=batch_size,
        concurrency=concurrency,
        seed=seed,
        proposers=tuple(p.strip() for p in proposer.split(",") if p.strip()),
        gates_file=gates,
        allow_dirty=allow_dirty,
        optimizer_model=optimizer_model,
        sampling=sampling,
    )
    with progress_hooks(enabled=not as_json) as hooks:
        state, run_dir = start_run(options, hooks)
    if as_json:
        console.print_json(
            json.dumps(
                {
                    "run_id": state.run_id,
                    "run_dir": str(run_dir),
                    "accepted": state.accepted,
                    "reverted": state.reverted,
                    "generations": [r.__dict__ for r in state.rows],
                }
            )
        )
    else:
        table = Table(
            "gen",
            "commit",
            "quality",
            "perf",
            "held-out",
            "train",
            "valid",
            "outcome",
            title=f"run {state.run_id}",
        )
        for r in state.rows:
            train = score(r.train_current) + (
                f"->{score(r.train_candidate)}" if r.train_candidate is not None else ""
            )
            table.add_row(
                str(r.generation),
                r.candidate,
                mark(r.verdicts.get("quality")),
                mark(r.verdicts.get("performance")),
                mark(r.verdicts.get("heldout")),
                train,
                score(r.validation),
                r.outcome,
            )
        console.print(table)
        for r in state.rows:
            if r.summary:
                console.print(f"  {r.candidate} ({r.outcome}): {r.summary}")
        console.print(
            f"{len(state.accepted)} accepted, {len(state.reverted)} reverted; ledger: {run_dir}/ledger.jsonl"
        )
    if not state.accepted:
        raise typer.Exit(EXIT_FAILED)
