"""``gate``: pass or fail a candidate revision of a harness against a baseline, for CI."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from harnessevolve.cli._errors import EXIT_FAILED, handle_errors
from harnessevolve.cli.options import (
    AdapterOption,
    BatchSize,
    Concurrency,
    ControlK,
    GatesFile,
    HarnessDir,
    JsonOut,
    Model,
    Sandbox,
    SandboxLimitsOption,
    SandboxReadOnly,
    Seed,
    UnsafeNoSandbox,
    chosen_sandbox,
    read_only_paths,
)
from harnessevolve.cli.ui import console, mark, progress_hooks
from harnessevolve.core.containment import check_output_path
from harnessevolve.core.enums import SandboxName
from harnessevolve.core.errors import BenchmarkError
from harnessevolve.core.files import atomic_write_text
from harnessevolve.core.interrupts import stop_signals
from harnessevolve.gate.performance import accepted_on_tie
from harnessevolve.pipeline.judging.ci_gate import GateOptions, run_gate
from harnessevolve.report.gate_report import junit_xml, markdown_summary, verdict_headline
from harnessevolve.runs.run_config import ExecutionConfig


@handle_errors
def gate(
    harness: HarnessDir = Path("."),
    benchmark: Annotated[
        str | None,
        typer.Option(
            "--benchmark",
            "-b",
            help="A built-in benchmark's name, a folder, harbor:PATH, nl2bash[:N] or a fixed slice of one, "
            "subset:validation=N@SPEC "
            "(default: the benchmark of the harness's latest run).",
        ),
    ] = None,
    baseline: Annotated[str, typer.Option(help="Baseline git revision (e.g. origin/main).")] = "HEAD~1",
    candidate: Annotated[str, typer.Option(help="Candidate git revision.")] = "HEAD",
    split: Annotated[
        str, typer.Option(help="Held-out split: validation, or test (sealed; use sparingly).")
    ] = "validation",
    model: Model = None,
    batch_size: BatchSize = 40,
    concurrency: Concurrency = None,
    seed: Seed = 0,
    gates: GatesFile = None,
    junit: Annotated[Path | None, typer.Option(help="Write a JUnit XML report here.")] = None,
    markdown: Annotated[Path | None, typer.Option(help="Write a Markdown summary here.")] = None,
    sandbox: Sandbox = SandboxName.BWRAP,
    unsafe_no_sandbox: UnsafeNoSandbox = False,
    sandbox_limits: SandboxLimitsOption = None,
    sandbox_ro: SandboxReadOnly = None,
    adapter: AdapterOption = None,
    require_control: Annotated[
        bool,
        typer.Option(
            "--require-control",
            help="With --split test: fail (exit 1) unless the candidate beats the matched-budget control, "
            "the baseline's best-of-k (self-consistency pick) at the rollouts the candidate's run spent "
            "(k = round(run rollouts / test tasks)); also heldout.require_control in the gates file. "
            "Without it the control is still scored and reported.",
        ),
    ] = False,
    control_k: ControlK = None,
    as_json: JsonOut = False,
) -> None:
    """Evaluate two revisions of a harness; exit 0 when the candidate passes every gate, 1 when not.

    A pass on a tie (the candidate gained nothing on the batch: HarnessEvolve's min_gain 0 accepts
    it) is labelled as such; set performance.min_gain above 0, or mode: sequential, to refuse ties.
    With --split test the report also carries the matched-budget control (the baseline's best-of-k
    at the rollouts the candidate's run spent); --require-control makes beating it a gate.
    """
    if benchmark is None:
        benchmark = latest_benchmark(harness)
    if split not in ("validation", "test"):
        raise typer.BadParameter("must be validation or test", param_hint="--split")
    if (require_control or control_k is not None) and split != "test":
        raise typer.BadParameter(
            "the matched-budget control is scored on the sealed test split: add --split test",
            param_hint="--require-control/--control-k",
        )
    options = GateOptions(
        harness_dir=harness,
        baseline=baseline,
        candidate=candidate,
        benchmark=benchmark,
        split=split,
        model=model,
        batch_size=batch_size,
        seed=seed,
        gates_file=gates,
        execution=ExecutionConfig(
            sandbox=chosen_sandbox(sandbox, unsafe_no_sandbox),
            unsafe_no_sandbox=unsafe_no_sandbox,
            sandbox_limits=sandbox_limits,
            concurrency=concurrency,
            sandbox_ro=read_only_paths(sandbox_ro, harness=harness),
        ),
        adapters=tuple(adapter or ()),
        require_control=require_control,
        control_k=control_k,
    )
    for path, option in ((junit, "--junit"), (markdown, "--markdown")):
        if path is not None:
            check_output_path(path, option=option)
    with stop_signals(), progress_hooks(enabled=not as_json) as hooks:  # SIGTERM stops it like Ctrl-C
        report = run_gate(options, hooks)
    if junit:
        atomic_write_text(junit, junit_xml(report))
    if markdown:
        atomic_write_text(markdown, markdown_summary(report))
    tie = report.passed and accepted_on_tie(report.verdicts)
    if as_json:
        console.print_json(json.dumps({**report.to_dict(), "passed_on_tie": tie}))
    else:
        table = Table(
            "gate", "verdict", "reason", "numbers", title=f"{report.baseline[:8]} -> {report.candidate[:8]}"
        )
        for v in report.verdicts:
            table.add_row(v.gate, mark(v.passed), v.reason, verdict_headline(v))
        console.print(table)
        if tie:
            console.print(
                "[yellow]candidate passes on a tie[/]: it gained nothing on the batch (every pair tied or "
                "wins and losses cancel); min_gain 0 lets it through"
            )
        else:
            console.print("[green]candidate passes[/]" if report.passed else "[red]candidate fails[/]")
    if not report.passed:
        raise typer.Exit(EXIT_FAILED)


def latest_benchmark(harness: Path) -> str:
    """The ``--benchmark`` of the harness's latest run (what ``gate`` checks when given none)."""
    from harnessevolve.runs.rundir import RunDir

    for run in reversed(RunDir.of(harness)):
        spec = run.config().benchmark
        if spec:
            return str(spec)
    raise BenchmarkError(
        "no --benchmark given and this harness has no run to take it from",
        field="--benchmark",
        hint="pass --benchmark NAME or a folder (e.g. -b shell-basics)",
    )
