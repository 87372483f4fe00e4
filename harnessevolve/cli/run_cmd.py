"""``run``: the generation loop."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from harnessevolve.cli._errors import EXIT_FAILED, handle_errors
from harnessevolve.cli.config_options import OUTPUT_PANEL, config_command, own_option
from harnessevolve.cli.headroom_view import print_headroom, run_headroom
from harnessevolve.cli.progress import progress_hooks
from harnessevolve.cli.ui import console, mark, score
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
from harnessevolve.runs.outcome import Outcome
from harnessevolve.runs.run_config import RunConfig, declarations
from harnessevolve.runs.rundir import RunDir

RUN_OPTIONS = [d.key for d in declarations()]
"""``run`` offers every declared run option (``runs/run_config.py``), each in its section's panel."""


def run(options: RunConfig, *, resume: str | None = None, as_json: bool = False) -> None:
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
    with stop_signals(), progress_hooks(enabled=not as_json) as hooks:
        result = start_run(options, hooks, resume=resume)
    state, run_dir = result.state, result.run_dir
    events = RunDir(run_dir).events()
    rows = generation_rows(events, state.rows)
    room = run_headroom(events)
    net = result.net
    outcomes = [Outcome.parse(r.outcome) for r in rows]
    ties = sum(1 for o in outcomes if o is not None and o.accepted and o.tie)
    kept = sum(1 for o in outcomes if o is not None and o.accepted)
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
                    "headroom": room.to_json() if room is not None else None,
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
                f"[yellow]{r.outcome}[/]" if r.outcome == Outcome.kept(tie=True).text() else r.outcome,
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
        if room is not None:
            print_headroom(room)
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
        if outcome == Outcome.kept().text() and won is not None and won.tie:
            outcome = Outcome.kept(tie=True).text()
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


def run_from_cli(values: dict[str, Any], *, resume: str | None, as_json: bool) -> None:
    """``run``'s command line: the declared options' values by flat key, then the command's own."""
    if not values.get("benchmark") and resume is None:
        raise typer.BadParameter("--benchmark is required (unless --resume)", param_hint="--benchmark")
    options = RunConfig.from_flat({**values, "benchmark": values.get("benchmark") or ""})
    run(options, resume=resume, as_json=as_json)


run_command = handle_errors(
    config_command(
        run_from_cli,
        RUN_OPTIONS,
        own=[
            own_option(
                "resume",
                str | None,
                None,
                help="Finish a killed run (its id or folder) from its ledger and git; its own options are "
                "used.",
                panel=OUTPUT_PANEL,
            ),
            own_option(
                "as_json",
                bool,
                False,
                "--json",
                help="Print machine-readable JSON instead of tables.",
                panel=OUTPUT_PANEL,
            ),
        ],
    )
)
run_command.__doc__ = run.__doc__
run_command.__name__ = "run"
