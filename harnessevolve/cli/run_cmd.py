"""``run``: the generation loop."""

from __future__ import annotations

import copy
import json
import typing
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table

from harnessevolve.cli import options as shared
from harnessevolve.cli._errors import EXIT_FAILED, handle_errors
from harnessevolve.cli.ui import console, mark, progress_hooks, score
from harnessevolve.core.enums import ExecutorName, Sampling, SandboxName, TrackerName
from harnessevolve.core.interrupts import stop_signals
from harnessevolve.pipeline.run import start_run
from harnessevolve.pipeline.state import GenerationRow
from harnessevolve.runs.events import (
    BatchEvaluated,
    CandidateAccepted,
    CandidateReverted,
    Event,
    GenerationFinished,
)
from harnessevolve.runs.run_config import RunConfig
from harnessevolve.runs.rundir import RunDir

INPUTS, LOOP, SCORING, PROPOSERS = "Harness and benchmark", "Generation loop", "Scoring", "Proposers"
BUDGET, EXECUTION, FLOOR = "Budgets", "Execution and sandbox", "Null-agent floor"
EVOLVE, TRAINING, OUTPUT = "Environment evolution", "Policy training", "Tracking, resume and output"
"""The ``--help`` panels; each option sits in the panel of its ``RunConfig`` section."""

CLI_NAMES = {"harness": "harness_dir", "proposer": "proposers", "gates": "gates_file", "adapter": "adapters"}
"""``run`` parameters recorded under another key of the run's options (``RunConfig.flat_keys``)."""


def on_panel(option: Any, panel: str) -> Any:
    """A shared ``Annotated`` option type shown in ``panel`` of this command's ``--help`` (a copy:
    the other commands using it keep theirs)."""
    base, *extras = typing.get_args(option)
    info = copy.copy(next(e for e in extras if isinstance(e, typer.models.ParameterInfo)))
    info.rich_help_panel = panel
    return Annotated[base, info]


if TYPE_CHECKING:  # the same types to a type checker; at run time each is shown in its --help panel
    _HarnessDir = shared.HarnessDir
    _Model = shared.Model
    _BatchSize = shared.BatchSize
    _Concurrency = shared.Concurrency
    _Seed = shared.Seed
    _GatesFile = shared.GatesFile
    _Sandbox = shared.Sandbox
    _UnsafeNoSandbox = shared.UnsafeNoSandbox
    _SandboxLimitsOption = shared.SandboxLimitsOption
    _SandboxReadOnly = shared.SandboxReadOnly
    _AdapterOption = shared.AdapterOption
    _JsonOut = shared.JsonOut
else:
    _HarnessDir = on_panel(shared.HarnessDir, INPUTS)
    _Model = on_panel(shared.Model, SCORING)
    _BatchSize = on_panel(shared.BatchSize, LOOP)
    _Concurrency = on_panel(shared.Concurrency, EXECUTION)
    _Seed = on_panel(shared.Seed, SCORING)
    _GatesFile = on_panel(shared.GatesFile, SCORING)
    _Sandbox = on_panel(shared.Sandbox, EXECUTION)
    _UnsafeNoSandbox = on_panel(shared.UnsafeNoSandbox, EXECUTION)
    _SandboxLimitsOption = on_panel(shared.SandboxLimitsOption, EXECUTION)
    _SandboxReadOnly = on_panel(shared.SandboxReadOnly, EXECUTION)
    _AdapterOption = on_panel(shared.AdapterOption, INPUTS)
    _JsonOut = on_panel(shared.JsonOut, OUTPUT)


@handle_errors
def run(
    harness: _HarnessDir = Path("."),
    benchmark: Annotated[
        str | None,
        typer.Option(
            "--benchmark",
            "-b",
            help="A built-in benchmark's name (e.g. shell-onecall), a folder, harbor:PATH, nl2bash[:N], or a "
            "fixed slice of one: subset:validation=N,test=N@SPEC.",
            rich_help_panel=INPUTS,
        ),
    ] = None,
    generations: Annotated[
        int, typer.Option("--generations", "-n", min=1, help="Generations to run.", rich_help_panel=LOOP)
    ] = 3,
    model: _Model = None,
    batch_size: _BatchSize = 40,
    concurrency: _Concurrency = None,
    seed: _Seed = 0,
    proposer: Annotated[
        str,
        typer.Option(
            help="Proposers tried in order: llm, llm-rule, llm-patch, agent, ablate, behaviour, tools, loop, "
            "memory, world_model, demo, rules. auto: llm (with --optimizer-model), then ablate, behaviour, "
            "tools, loop, memory, world_model, demo, rules. agent: the agent proposer, a coding "
            "agent (--optimizer-agent) that edits a copy of the harness in the sandbox; its diff is the "
            "candidate. A proposer whose candidates gates refused is asked after those with fewer "
            "refusals since their last accepted one.",
            rich_help_panel=PROPOSERS,
        ),
    ] = "auto",
    optimizer_model: Annotated[
        str | None,
        typer.Option(
            "--optimizer-model",
            help="Model for the llm, llm-rule and agent proposers (a litellm name; agent: default the "
            "optimizer folder's model).",
            rich_help_panel=PROPOSERS,
        ),
    ] = None,
    optimizer_agent: Annotated[
        str | None,
        typer.Option(
            "--optimizer-agent",
            help="With --proposer agent: the optimizer folder, a harness whose agent edits ./harness "
            "(default: the built-in harnesses/optimizer-agent, mini-swe-agent).",
            rich_help_panel=PROPOSERS,
        ),
    ] = None,
    max_proposer_cost_usd: Annotated[
        float | None,
        typer.Option(
            min=0,
            help="The agent proposer's own budget: its model calls may cost this much over the run (USD); "
            "past it its proposals are refused and the run goes on.",
            rich_help_panel=PROPOSERS,
        ),
    ] = None,
    max_proposer_tokens: Annotated[
        int | None,
        typer.Option(
            min=1, help="The agent proposer's own budget in tokens over the run.", rich_help_panel=PROPOSERS
        ),
    ] = None,
    gates: _GatesFile = None,
    allow_dirty: Annotated[
        bool,
        typer.Option(help="Snapshot uncommitted harness changes in a commit first.", rich_help_panel=INPUTS),
    ] = False,
    sampling: Annotated[
        Sampling,
        typer.Option(
            help="Minibatch sampling: uniform, or regret (prefer tasks solvable but not yet solved).",
            rich_help_panel=LOOP,
        ),
    ] = Sampling.UNIFORM,
    candidates: Annotated[
        int,
        typer.Option(
            "--candidates",
            "-k",
            min=1,
            help="Candidates proposed and judged at once per generation.",
            rich_help_panel=LOOP,
        ),
    ] = 1,
    max_revisions: Annotated[
        int,
        typer.Option(
            min=0,
            help="Times a quality-gate rejection goes back to the proposer with its reason.",
            rich_help_panel=LOOP,
        ),
    ] = 3,
    max_cost_usd: Annotated[
        float | None,
        typer.Option(
            min=0, help="Stop cleanly once model calls cost this much (USD).", rich_help_panel=BUDGET
        ),
    ] = None,
    max_tokens: Annotated[
        int | None,
        typer.Option(
            min=1, help="Stop cleanly once model calls used this many tokens.", rich_help_panel=BUDGET
        ),
    ] = None,
    max_hours: Annotated[
        float | None, typer.Option(min=0, help="Stop cleanly after this many hours.", rich_help_panel=BUDGET)
    ] = None,
    price_per_mtok: Annotated[
        str | None,
        typer.Option(
            help="IN,OUT: USD per million input and output tokens for models litellm has no price for "
            "(without it --max-cost-usd refuses such a model: it would cost 0).",
            rich_help_panel=BUDGET,
        ),
    ] = None,
    cache: Annotated[
        bool,
        typer.Option(
            help="Reuse rollouts of unchanged (harness, task, model, seed) from earlier runs.",
            rich_help_panel=SCORING,
        ),
    ] = True,
    executor: Annotated[
        ExecutorName,
        typer.Option(
            help="local (async pool in this process), processes (an async pool per CPU, each in a "
            "worker process: many concurrent rollouts on a remote model) or ray (needs the ray extra, "
            "harnessevolve\\[ray]).",
            rich_help_panel=EXECUTION,
        ),
    ] = ExecutorName.LOCAL,
    sandbox: _Sandbox = SandboxName.BWRAP,
    unsafe_no_sandbox: _UnsafeNoSandbox = False,
    sandbox_limits: _SandboxLimitsOption = None,
    sandbox_ro: _SandboxReadOnly = None,
    adapter: _AdapterOption = None,
    train_every: Annotated[
        int,
        typer.Option(
            min=0,
            help="Fine-tune the agent model every N generations on the run's trajectories (0: never; "
            "local/ models; needs the train extra). The checkpoint becomes the agent model.",
            rich_help_panel=TRAINING,
        ),
    ] = 0,
    train_base_model: Annotated[
        str | None,
        typer.Option(
            help="Weights to fine-tune when the agent model has none here (a checkpoint folder).",
            rich_help_panel=TRAINING,
        ),
    ] = None,
    track: Annotated[
        TrackerName | None,
        typer.Option(
            help="Mirror the run into a tracker: mlflow (needs the tracking extra; local store).",
            rich_help_panel=OUTPUT,
        ),
    ] = None,
    evolve_environments: Annotated[
        bool,
        typer.Option(
            "--evolve-environments",
            help="Once the harness passes a task family's train tasks, make harder variants (chained "
            "steps; one more bug for synthesized SWE tasks), keep those whose gold passes and the harness "
            "fails, and draw a quarter of later minibatches from them. Validation and test never change.",
            rich_help_panel=EVOLVE,
        ),
    ] = False,
    evolve_threshold: Annotated[
        float,
        typer.Option(
            "--evolve-threshold",
            min=0.0,
            max=1.0,
            help="With --evolve-environments: the pass rate of a task family (current harness, at least "
            "2 of its train tasks run) at which its tasks get harder variants.",
            rich_help_panel=EVOLVE,
        ),
    ] = 0.75,
    max_infra_share: Annotated[
        float,
        typer.Option(
            min=0.0,
            max=1.0,
            help="Stop the run with exit code 3 when more than this share of its rollouts failed on the "
            "machine (sandbox start, tool server crash, endpoint 5xx after retries, killed by a limit it "
            "did not cause); such rollouts are scored 0 and counted apart from agent failures.",
            rich_help_panel=BUDGET,
        ),
    ] = 0.5,
    floor_sample: Annotated[
        int,
        typer.Option(
            min=0,
            help="Tasks the null-agent floor checks before the run (do-nothing, empty answer, echoed "
            "instruction; 0: skip). `validate SUITE --floor` checks every task.",
            rich_help_panel=FLOOR,
        ),
    ] = 8,
    max_floor_share: Annotated[
        float,
        typer.Option(
            min=0.0,
            max=1.0,
            help="Refuse the run (exit 2) when the null agents pass more than this share of the sample "
            "(a sample of fewer than 4 tasks only warns).",
            rich_help_panel=FLOOR,
        ),
    ] = 0.25,
    accept_floor: Annotated[
        bool,
        typer.Option(
            "--accept-floor",
            help="The benchmark means its high floor (e.g. gold that leaves the state unchanged): "
            "record the floor and run anyway.",
            rich_help_panel=FLOOR,
        ),
    ] = False,
    resume: Annotated[
        str | None,
        typer.Option(
            help="Finish a killed run (its id or folder) from its ledger and git; its own options are used.",
            rich_help_panel=OUTPUT,
        ),
    ] = None,
    as_json: _JsonOut = False,
) -> None:
    """Evolve the harness: each generation runs a minibatch, proposes edits, keeps the best that passes.

    Accepted edits stay as commits in the harness's git history; rejected ones are reverted by a commit
    that names the gate and its numbers. Everything is logged to DIR/.harnessevolve/runs/<run-id>/.
    With --candidates K, K edits are proposed and judged at once and the best that passes every gate
    is kept; the others are recorded in the ledger. A budget (--max-cost-usd, --max-tokens, --max-hours)
    stops the run cleanly between stages. The summary ends with the net change since the seed (files,
    validation delta). Exit 0 when the final harness differs from the seed; 1 when it does not (nothing
    accepted, or accepted edits that cancel out: "no net change"), and also 1 when every accepted edit
    was a tie and validation did not rise ("no net gain"); 130 when interrupted.
    """
    if benchmark is None and resume is None:
        raise typer.BadParameter("--benchmark is required (unless --resume)", param_hint="--benchmark")
    # Every parameter above is recorded under its own name in the run's options (CLI_NAMES renames
    # a few); only the values the CLI converts are named here. The configuration is built once.
    params = {k: v for k, v in locals().items() if k not in ("resume", "as_json")}
    converted = {
        "benchmark": benchmark or "",
        "proposer": tuple(p.strip() for p in proposer.split(",") if p.strip()),
        "sandbox": shared.chosen_sandbox(sandbox, unsafe_no_sandbox),
        "sandbox_ro": shared.read_only_paths(sandbox_ro, harness=harness),
        "adapter": tuple(adapter or ()),
    }
    options = RunConfig.from_flat({CLI_NAMES.get(k, k): v for k, v in {**params, **converted}.items()})
    with stop_signals(), progress_hooks(enabled=not as_json) as hooks:
        result = start_run(options, hooks, resume=resume)
    state, run_dir = result.state, result.run_dir
    rows = generation_rows(RunDir(run_dir).events(), state.rows)
    net = result.net
    ties = sum(1 for r in rows if r.outcome.startswith("accepted (tie)"))
    kept = sum(1 for r in rows if r.outcome.startswith("accepted"))
    # Changed, but only by edits that gained nothing on their batch and nothing on validation:
    no_gain = bool(net and net.changed and kept and ties == kept and (net.delta or 0.0) <= 0)
    if as_json:
        console.print_json(
            json.dumps(
                {
                    "run_id": state.run_id,
                    "run_dir": str(run_dir),
                    "accepted": state.accepted,
                    "accepted_on_ties": ties,
                    "reverted": state.reverted,
                    "generations": [r.__dict__ for r in rows],
                    "stopped": result.stopped,
                    "usage": result.usage,
                    "net_change": net.to_dict() if net else None,
                    "no_net_gain": no_gain,
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
        for r in rows:
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
                f"[yellow]{r.outcome}[/]" if r.outcome == "accepted (tie)" else r.outcome,
            )
        console.print(table)
        for r in rows:
            if r.summary:
                console.print(f"  {r.candidate} ({r.outcome}): {r.summary}", markup=False)
        print_usage(result.usage)
        infra_line = infra_summary(run_dir)
        if infra_line:
            console.print(infra_line, style="yellow", markup=False)
        if result.stopped:
            console.print(
                f"[yellow]stopped: {result.stopped['limit']} budget reached "
                f"({result.stopped['spent']:g} of {result.stopped['cap']:g}); everything is saved[/]"
            )
        on_ties = f" ({ties} on ties: no gain on their batch)" if ties else ""
        console.print(
            f"{len(state.accepted)} accepted{on_ties}, {len(state.reverted)} reverted; "
            f"ledger: {run_dir}/ledger.jsonl",
            markup=False,
        )
        if net is not None:
            console.print(net.summary(), style="yellow" if not net.changed else None, markup=False)
        if no_gain:
            console.print(
                "no net gain: every accepted edit was a tie and validation did not rise; exit 1",
                style="yellow",
                markup=False,
            )
    if (net is not None and not net.changed) or not state.accepted or no_gain:
        raise typer.Exit(EXIT_FAILED)


def generation_rows(events: list[Event], fallback: list[GenerationRow]) -> list[GenerationRow]:
    """One row per generation of the whole run from its ledger (a resumed run included: the
    generations before the crash, and a recovered one filled in from its candidate's events)."""
    rows: dict[int, GenerationRow] = {}
    accepted = {e.generation: e for e in events if isinstance(e, CandidateAccepted)}
    reverted = {e.generation: e for e in events if isinstance(e, CandidateReverted)}
    train = {e.generation: e.score for e in events if isinstance(e, BatchEvaluated)}
    for e in events:
        if not isinstance(e, GenerationFinished):
            continue
        g = e.generation
        verdicts = dict(e.verdicts or {})
        won, lost = accepted.get(g), reverted.get(g)
        if not verdicts and won is not None:
            gates = {v.gate: v.passed for v in won.verdicts or []}
            verdicts = {
                "quality": True,
                "performance": gates.get("performance"),
                "heldout": gates.get("heldout"),
            }
        if not verdicts and lost is not None:
            verdicts = {str(lost.gate): False}
        outcome = str(e.outcome or "")
        if outcome == "accepted" and won is not None and won.tie:
            outcome = "accepted (tie)"
        decided = won.sha if won is not None else lost.sha if lost is not None else ""
        rows[g] = GenerationRow(
            generation=g,
            candidate=e.candidate or decided[:8] or "-",
            summary=str(e.summary or ""),
            verdicts=verdicts,
            train_current=e.train_current if e.train_current is not None else train.get(g),
            train_candidate=e.train_candidate,
            validation=e.validation if e.validation is not None else (won.validation if won else None),
            outcome=outcome + (" (recovered)" if e.recovered else ""),
        )
    return [rows[g] for g in sorted(rows)] if rows else list(fallback)


def infra_summary(run_dir: Path) -> str:
    """The run's machine failures, counted apart from agent failures (empty when none)."""
    from harnessevolve.report.infra_view import infra_counts

    counts = infra_counts(run_dir / "ledger.jsonl")
    return counts.line() if counts.failures or counts.retried else ""


def print_usage(spent: dict | None) -> None:
    """Spend per stage, then per proposer (tokens, cost, calls). A proposer's row is a part of the
    stages above it (``optimize``, or ``optimizer_agent`` for the agent proposer), not more spend."""
    if not spent or not spent.get("by_stage"):
        return
    table = Table("stage", "calls", "tokens", "cost (USD)", "failures", "retries", title="model usage")
    for stage, row in spent["by_stage"].items():
        table.add_row(
            stage,
            str(row.get("calls", 0)),
            str(row.get("tokens", 0)),
            f"{row.get('cost_usd', 0.0):.4f}",
            str(row.get("failures", 0)),
            str(row.get("retries", 0)),
        )
    for proposer, row in (spent.get("by_proposer") or {}).items():
        table.add_row(
            f"  of which proposer {proposer}",
            str(row.get("calls", 0)),
            str(row.get("tokens", 0)),
            f"{row.get('cost_usd', 0.0):.4f}",
            str(row.get("failures", 0)),
            str(row.get("retries", 0)),
        )
    console.print(table)
