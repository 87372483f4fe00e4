"""``gate``: pass or fail a candidate revision of a harness against a baseline, for CI."""

from __future__ import annotations

import inspect
import json
from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from harnessevolve.cli._errors import EXIT_FAILED, handle_errors
from harnessevolve.cli.config_options import config_command, own_option
from harnessevolve.cli.options import ControlK, JsonOut
from harnessevolve.cli.progress import progress_hooks
from harnessevolve.cli.ui import console, mark
from harnessevolve.core.containment import check_output_path
from harnessevolve.core.errors import BenchmarkError
from harnessevolve.core.files import atomic_write_text
from harnessevolve.core.interrupts import stop_signals
from harnessevolve.gate.performance import accepted_on_tie
from harnessevolve.pipeline.ci_gate import GateOptions, run_gate
from harnessevolve.report.gate_report import junit_xml, markdown_summary, verdict_headline
from harnessevolve.runs.run_config import ExecutionConfig

GATE_OPTIONS = [
    "harness_dir", "benchmark", "model", "batch_size", "concurrency", "seed", "gates_file", "sandbox",
    "unsafe_no_sandbox", "sandbox_limits", "sandbox_ro", "adapters",
]  # fmt: skip
"""The run options ``gate`` shares with ``run``: the same declarations (``runs/run_config.py``)."""


def gate_from_cli(
    values: dict[str, Any],
    *,
    baseline: str,
    candidate: str,
    split: str,
    junit: Path | None,
    markdown: Path | None,
    require_control: bool,
    control_k: int | None,
    as_json: bool,
) -> None:
    """``gate``'s command line: the shared run options by flat key, then its own."""
    harness = values["harness_dir"]
    benchmark = values["benchmark"] or latest_benchmark(harness)
    if split not in ("validation", "test"):
        raise typer.BadParameter("must be validation or test", param_hint="--split")
    if (require_control or control_k is not None) and split != "test":
        raise typer.BadParameter(
            "the matched-budget control is scored on the sealed test split: add --split test",
            param_hint="--require-control/--control-k",
        )
    if require_control and control_k == 0:
        raise typer.BadParameter(
            "--require-control needs a control to beat; --control-k 0 leaves it out (give k >= 1, or "
            "drop --control-k to match it to the run's rollouts)",
            param_hint="--control-k",
        )
    options = GateOptions(
        harness_dir=harness,
        baseline=baseline,
        candidate=candidate,
        benchmark=benchmark,
        split=split,
        model=values["model"],
        batch_size=values["batch_size"],
        seed=values["seed"],
        gates_file=values["gates_file"],
        execution=ExecutionConfig(
            sandbox=values["sandbox"],
            unsafe_no_sandbox=values["unsafe_no_sandbox"],
            sandbox_limits=values["sandbox_limits"],
            concurrency=values["concurrency"],
            sandbox_ro=values["sandbox_ro"],
        ),
        adapters=values["adapters"],
        require_control=require_control,
        control_k=control_k,
    )
    gate(options, junit=junit, markdown=markdown, as_json=as_json)


def gate(
    options: GateOptions, *, junit: Path | None = None, markdown: Path | None = None, as_json: bool = False
) -> None:
    """Evaluate two revisions of a harness; exit 0 when the candidate passes every gate, 1 when not.

    A pass on a tie (the candidate gained nothing on the batch: HarnessEvolve's min_gain 0 accepts
    it) is labelled as such; set performance.min_gain above 0, or mode: sequential, to refuse ties.
    With --split test the report also carries the matched-budget control (the baseline's best-of-k
    at the rollouts the candidate's run spent); --require-control makes beating it a gate.
    """
    for path, option in ((junit, "--junit"), (markdown, "--markdown")):
        if path is not None:
            check_output_path(path, option=option)
    # SIGTERM stops it like Ctrl-C
    with stop_signals(), progress_hooks(enabled=not as_json, stage="gate") as hooks:
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
        if "kept" in report.extra:
            console.print(f"per-task outcomes and trajectories kept in {report.extra['kept']}", markup=False)
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


gate_command = handle_errors(
    config_command(
        gate_from_cli,
        GATE_OPTIONS,
        panels=False,
        help_extra={"benchmark": " Default: the benchmark of the harness's latest run."},
        own=[
            own_option("baseline", str, "HEAD~1", help="Baseline git revision (e.g. origin/main)."),
            own_option("candidate", str, "HEAD", help="Candidate git revision."),
            own_option(
                "split",
                str,
                "validation",
                help="Held-out split: validation, or test (sealed; use sparingly).",
            ),
            own_option("junit", Path | None, None, help="Write a JUnit XML report here."),
            own_option("markdown", Path | None, None, help="Write a Markdown summary here."),
            own_option(
                "require_control",
                bool,
                False,
                "--require-control",
                help="With --split test: fail (exit 1) unless the candidate beats the matched-budget "
                "control, "
                "the baseline's best-of-k (self-consistency pick) at the rollouts the candidate's run spent "
                "(k = round(run rollouts / test tasks)); also heldout.require_control in the gates file. "
                "Without it the control is still scored and reported.",
            ),
            inspect.Parameter("control_k", inspect.Parameter.KEYWORD_ONLY, default=None, annotation=ControlK),
            inspect.Parameter("as_json", inspect.Parameter.KEYWORD_ONLY, default=False, annotation=JsonOut),
        ],
    )
)
gate_command.__doc__ = gate.__doc__
gate_command.__name__ = "gate"
