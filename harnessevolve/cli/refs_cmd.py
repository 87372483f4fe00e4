"""``refs``: reference trajectories for a benchmark."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from harnessevolve.adapters import AdaptedBenchmark, load_benchmark_spec
from harnessevolve.cli._errors import handle_errors
from harnessevolve.cli.options import (
    AdapterOption,
    Benchmark,
    Model,
    Sandbox,
    SandboxLimitsOption,
    SandboxReadOnly,
    Seed,
    UnsafeNoSandbox,
    chosen_sandbox,
    read_only_paths,
)
from harnessevolve.cli.progress import progress_hooks
from harnessevolve.cli.ui import console
from harnessevolve.core import paths
from harnessevolve.core.atif import Trajectory
from harnessevolve.core.containment import check_output_path
from harnessevolve.core.enums import SandboxName
from harnessevolve.core.errors import BenchmarkError
from harnessevolve.core.tasks import Benchmark as BenchmarkSuite
from harnessevolve.execute.tool_server import benchmark_sandbox
from harnessevolve.harness.load import load_harness
from harnessevolve.sandbox.base import make_sandbox
from harnessevolve.scoring.build import parse_limits
from harnessevolve.scoring.references import (
    import_atif,
    replay_gold,
    save_reference,
    user_references_dir,
)
from harnessevolve.scoring.refgen import Generated, generate_reference, write_regret

OUT_HELP = (
    "Folder to write <task-id>.json into (default: the suite's trajectories/ folder, next to its tasks; "
    "where run reads them)."
)


def reference_output_dir(bench: BenchmarkSuite, out: Path | None) -> Path:
    """Where references are written: ``--out``, else next to the suite (``<suite>/trajectories``).

    Never into the installed package: a built-in suite (or adapter) of an installed package writes
    to the user's reference folder (``scoring.references.user_references_dir``), which ``run``
    reads too; a built-in suite of the checkout keeps its references in the checkout's
    ``trajectories/<name>`` (that is how they are maintained)."""
    if out is not None:
        check_output_path(out, option="--out", kind="folder")
        if paths.inside_package(out):
            raise BenchmarkError(
                "refusing to write into the installed harnessevolve package",
                file=str(out),
                field="--out",
                hint="pass a folder of your own",
            )
        return out
    default = bench.references_dir
    if paths.inside_package(default):
        return user_references_dir(bench)  # the installed package is read-only; run reads this one too
    if isinstance(bench, AdaptedBenchmark) and bench.references is not None:
        return default  # the adapter chose it (nl2bash, bfcl: the checkout's trajectories/<name>)
    if not paths.is_builtin(default):
        return default
    if not paths.is_builtin(bench.root):
        return bench.root / "trajectories"
    return default


app = typer.Typer(
    help="Reference trajectories: genuine successful runs the evaluator aligns failures against.",
    no_args_is_help=True,
)


@app.command("import")
@handle_errors
def import_gold(
    benchmark: Benchmark,
    harness: Annotated[
        Path | None,
        typer.Option(
            "--harness",
            "-H",
            help="Harness whose tools replay the gold calls (default: the shell-agent template).",
        ),
    ] = None,
    split: Annotated[
        str, typer.Option(help="Which split's tasks: train (default), validation, test or all.")
    ] = "train",
    out: Annotated[Path | None, typer.Option(help=OUT_HELP)] = None,
    from_atif: Annotated[
        list[Path] | None,
        typer.Option(
            "--from-atif",
            help="Import these ATIF files (each naming its task in extra.task_id) instead of replaying gold.",
        ),
    ] = None,
    sandbox: Sandbox = SandboxName.BWRAP,
    unsafe_no_sandbox: UnsafeNoSandbox = False,
    sandbox_limits: SandboxLimitsOption = None,
    sandbox_ro: SandboxReadOnly = None,
    adapter: AdapterOption = None,
) -> None:
    """Build references by replaying each task's gold tool calls (so every observation is real), or
    import ATIF files with ``--from-atif``. Every file is checked before any is written."""
    bench = load_benchmark_spec(benchmark, tuple(adapter or ()))
    if from_atif:
        imported = import_atif(bench, from_atif)
        folder = reference_output_dir(bench, out)
        for task_id, trajectory in imported:
            save_reference(trajectory, folder, task_id)
        console.print(f"imported {len(imported)} reference trajectories into {folder}")
        return
    agent = load_harness(harness or paths.builtin_dir("harnesses") / "shell-agent")
    tasks = bench.tasks if split == "all" else bench.split(split)  # type: ignore[arg-type]
    folder = reference_output_dir(bench, out)

    box = benchmark_sandbox(
        make_sandbox(
            chosen_sandbox(sandbox, unsafe_no_sandbox),
            limits=parse_limits(sandbox_limits),
            unsafe=unsafe_no_sandbox,
        ),
        bench,
        read_only_paths(sandbox_ro),
    )

    gold = [t for t in tasks if t.gold]

    async def build(advance: Callable[[], None]) -> list[tuple[str, Trajectory]]:
        built: list[tuple[str, Trajectory]] = []
        for task in gold:
            built.append((task.id, await replay_gold(agent, task, sandbox=box)))
            advance()
        return built

    with progress_hooks(stage="refs import") as hooks:
        started = (
            hooks.on_progress("refs import: replay gold solutions", len(gold)) if hooks.on_progress else None
        )
        built = asyncio.run(build(started or (lambda: None)))
    for task_id, trajectory in built:
        save_reference(trajectory, folder, task_id)
    console.print(f"wrote {len(built)} reference trajectories to {folder}")
    unjudged = [task_id for task_id, trajectory in built if trajectory.extra.get("unjudged")]
    if unjudged:
        shown = ", ".join(unjudged[:10]) + (
            f", ... ({len(unjudged) - 10} more)" if len(unjudged) > 10 else ""
        )
        console.print(
            f"note: judge checks not run for {len(unjudged)} task(s): {shown}: a gold replay has no "
            "conversation to judge (only the gold calls); their other checks, if any, passed; each "
            "reference records the skipped checks in extra.unjudged",
            markup=False,
        )
    skipped = [t.id for t in tasks if not t.gold]
    if skipped:
        shown = ", ".join(skipped[:10]) + (f", ... ({len(skipped) - 10} more)" if len(skipped) > 10 else "")
        console.print(
            f"skipped {len(skipped)} task(s) with no gold solution to replay: {shown}\n"
            "  build theirs with `harnessevolve refs generate` (the agent, hinted with the answer) "
            "or import ATIF runs with --from-atif"
        )


@app.command("generate")
@handle_errors
def generate(
    benchmark: Benchmark,
    harness: Annotated[
        Path | None,
        typer.Option("--harness", "-H", help="The agent's harness (default: the shell-agent template)."),
    ] = None,
    model: Model = None,
    attempts: Annotated[int, typer.Option(min=1, max=100, help="Hinted attempts per task (T_att).")] = 5,
    probes: Annotated[
        int, typer.Option(min=0, max=100, help="Unhinted runs per task, for the pass rate without hint.")
    ] = 2,
    task: Annotated[
        list[str] | None, typer.Option("--task", help="Only these task ids (repeatable).")
    ] = None,
    out: Annotated[Path | None, typer.Option(help=OUT_HELP)] = None,
    seed: Seed = 0,
    adapter: AdapterOption = None,
) -> None:
    """Let the agent build references with the answer as a privileged hint; keep only genuine runs
    (the answer came from tool observations). Writes each task's pass rates and regret to regret.json."""
    bench = load_benchmark_spec(benchmark, tuple(adapter or ()))
    agent = load_harness(harness or paths.builtin_dir("harnesses") / "shell-agent")
    tasks = [bench.task(t) for t in task] if task else list(bench.split("train"))
    folder = reference_output_dir(bench, out)
    agent_model = model or agent.model

    async def build(advance: Callable[[], None]) -> list[Generated]:
        results: list[Generated] = []
        for t in tasks:  # each kept reference is written at once: a stop keeps the finished ones
            r = await generate_reference(
                agent, t, model=agent_model, attempts=attempts, probes=probes, seed=seed
            )
            if r.reference is not None:
                save_reference(r.reference, folder, r.task_id)
            results.append(r)
            advance()
        return results

    with progress_hooks(stage="refs generate") as hooks:
        started = (
            hooks.on_progress("refs generate: hinted and unhinted runs", len(tasks))
            if hooks.on_progress
            else None
        )
        results = asyncio.run(build(started or (lambda: None)))
    table = Table(
        "task", "kept", "pass w/o hint", "pass with hint", "regret", "why", title=f"refs for {bench.name}"
    )
    for r in results:
        table.add_row(
            r.task_id,
            "yes" if r.reference else "no",
            f"{r.pass_without:.2f}",
            f"{r.pass_with:.2f}",
            f"{r.regret:+.2f}",
            r.reason,
        )
    console.print(table)
    console.print(
        f"{sum(r.reference is not None for r in results)} of {len(results)} kept; "
        f"pass rates in {write_regret(folder, results)}"
    )
