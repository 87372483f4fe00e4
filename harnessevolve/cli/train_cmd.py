"""``train``: fine-tune the agent model on a run's trajectories (or a folder of ATIF files)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from harnessevolve.cli._errors import handle_errors
from harnessevolve.cli.options import JsonOut
from harnessevolve.cli.progress import progress_bars
from harnessevolve.cli.ui import console
from harnessevolve.core.errors import HarnessEvolveError
from harnessevolve.train.config import MODES, TrainConfig
from harnessevolve.train.errors import require_train_stack


def _run_dir(run: str, harness: Path | None) -> Path:
    from harnessevolve.runs.rundir import RunDir

    if run != "latest" and RunDir(Path(run)).exists():
        return Path(run)
    from harnessevolve.runs.rundir import RunDir

    return RunDir.find(None if run == "latest" else run, harness or Path("."), field="--run").root


@handle_errors
def train(
    run: Annotated[
        str | None,
        typer.Option("--run", help="A run folder, or a run id with --harness ('latest' = the latest run)."),
    ] = None,
    trajectories: Annotated[
        Path | None,
        typer.Option("--trajectories", help="A folder of ATIF trajectories (searched recursively)."),
    ] = None,
    harness: Annotated[
        Path | None,
        typer.Option(
            "--harness",
            "-H",
            help="The harness (default: '.'): resolves run ids or unique prefixes; its tools render "
            "--trajectories.",
        ),
    ] = None,
    mode: Annotated[str, typer.Option(help=f"Training mode: {' or '.join(MODES)}.")] = "rft",
    steps: Annotated[
        int | None, typer.Option(min=1, max=1_000_000, help="Optimizer steps (default: 20).")
    ] = None,
    lr: Annotated[float | None, typer.Option(min=0.0, max=1.0, help="Learning rate (default: 1e-5).")] = None,
    batch_size: Annotated[
        int | None, typer.Option("--batch-size", min=1, max=4096, help="Sequences per step.")
    ] = None,
    max_len: Annotated[
        int | None, typer.Option("--max-len", min=16, max=1_048_576, help="Longest sequence in tokens.")
    ] = None,
    lora: Annotated[bool, typer.Option("--lora", help="Train LoRA adapters (merged on save).")] = False,
    device: Annotated[str | None, typer.Option(help="auto, cpu or cuda (default: auto).")] = None,
    seed: Annotated[int | None, typer.Option(help="Seed for torch and the sample order.")] = None,
    base_model: Annotated[
        str,
        typer.Option(
            "--base-model", help="Model to fine-tune: an alias (smollm2-135m), a .gguf or a checkpoint."
        ),
    ] = "smollm2-135m",
    out: Annotated[Path | None, typer.Option("--out", help="Checkpoint folder to write.")] = None,
    as_json: JsonOut = False,
) -> None:
    """Fine-tune the agent model (torch; a GPU when present) and save a checkpoint that
    `--model local/torch:<checkpoint>` serves. Needs the train extra."""
    if (run is None) == (trajectories is None):
        raise HarnessEvolveError("give exactly one of --run and --trajectories", field="--run")
    require_train_stack(lora=lora)
    config = TrainConfig().with_(
        mode=mode, steps=steps, lr=lr, batch_size=batch_size, max_len=max_len, device=device, seed=seed
    )
    config = config.with_(lora=True, lr=lr or 2e-4) if lora else config
    from harnessevolve.train.session import train_from_run, train_from_trajectories

    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    run_dir = _run_dir(run, harness) if run is not None else None
    target = out or (run_dir / "checkpoints" if run_dir else Path("checkpoints")) / f"{config.mode}-{stamp}"
    with progress_bars(disable=as_json) as progress:
        task = progress.add_task(f"{config.mode}: loading {base_model}", total=config.steps)

        def on_step(step: int, loss: float) -> None:
            progress.update(task, completed=step, description=f"{config.mode}: loss {loss:.4f}")

        if run_dir is not None:
            result = train_from_run(run_dir, config, base_model=base_model, out_dir=target, on_step=on_step)
        else:
            assert trajectories is not None
            result = train_from_trajectories(
                trajectories,
                config,
                base_model=base_model,
                out_dir=target,
                harness_dir=harness,
                on_step=on_step,
            )
    if as_json:
        console.print_json(json.dumps(result.to_dict(), default=str))
        return
    table = Table("checkpoint", "samples", "trained tokens", "loss", "tokens/s", "train s", title=result.mode)
    table.add_row(
        str(result.checkpoint),
        str(result.samples),
        str(result.trained_tokens),
        f"{result.loss_before:.4f} -> {result.loss_after:.4f}",
        f"{result.tokens_per_s:.0f}",
        f"{result.seconds:.1f}",
    )
    console.print(table)
    console.print(f"serve it with --model {result.model}")
