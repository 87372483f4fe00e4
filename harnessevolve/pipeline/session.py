"""Driving a run's generations once it is set up (a new run or a resumed one, see ``run.py``):
the scorer, the budget guard, the generation loop, and the events that end the run."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harnessevolve.core import interrupts
from harnessevolve.core.atif import Trajectory
from harnessevolve.core.tasks import Benchmark
from harnessevolve.execute.executor import Executor
from harnessevolve.execute.runners.endpoint import budget_check
from harnessevolve.gate.config import GateConfig
from harnessevolve.harness.git import HarnessRepo
from harnessevolve.harness.model import Harness
from harnessevolve.models.budget import Budget, BudgetExhausted, BudgetGuard, metering
from harnessevolve.models.usage import UsageMeter
from harnessevolve.optimize.proposal import ProposerChain
from harnessevolve.pipeline.evolve_env import EnvironmentEvolver, EvolveSettings
from harnessevolve.pipeline.loop import GenerationLoop, LoopParts
from harnessevolve.pipeline.net_change import NetChange, net_change
from harnessevolve.pipeline.policies import LoopPolicies, PolicyInputs
from harnessevolve.pipeline.resume import ResumePoint
from harnessevolve.pipeline.state import RunHooks, RunState
from harnessevolve.proposing.agent_proposer import (
    AgentRun,
    bind_agent_proposer,
    close_agent_proposer,
)
from harnessevolve.report.infra_view import fold_infra
from harnessevolve.runs.counters import Counts, RunCounters
from harnessevolve.runs.events import BudgetExhausted as BudgetExhaustedEvent
from harnessevolve.runs.events import (
    Event,
    GenerationStarted,
    RunFailed,
    RunFinished,
    RunInterrupted,
    RunStarted,
)
from harnessevolve.runs.ledger import Ledger, read_ledger
from harnessevolve.runs.run_config import RunConfig
from harnessevolve.runs.rundir import STATE_DIR
from harnessevolve.runs.spend import SpendJournal, later_usage, read_spend
from harnessevolve.runs.tempdirs import run_tempdir
from harnessevolve.scoring.build import build_scorer
from harnessevolve.scoring.infra import InfraTally, ledger_infra_tally
from harnessevolve.scoring.refgen import load_regret
from harnessevolve.scoring.rollout_cache import RolloutCache
from harnessevolve.scoring.scorer import Scorer


@dataclass(frozen=True)
class CheckedRun:
    """A run's inputs, every one checked before anything is written (no lock, no folder, no commit)."""

    options: RunConfig
    harness_dir: Path
    seed_harness: Harness
    benchmark: Benchmark
    references: dict[str, Trajectory]
    gates: GateConfig
    proposer: ProposerChain
    executor: Executor
    priced: list[str]
    """Models without litellm price data charged at ``--price-per-mtok``."""


@dataclass(frozen=True)
class SessionOutcome:
    state: RunState
    stopped: dict[str, Any] | None
    usage: dict[str, Any]
    net: NetChange | None


def policies_for(options: RunConfig, benchmark: Benchmark) -> LoopPolicies:
    """The loop's policies the configuration names (``policies.py``; only sampling is an option yet)."""
    loop = options.loop
    inputs = PolicyInputs(
        seed=options.scoring.seed,
        batch_size=loop.batch_size,
        generations=loop.generations,
        regret=lambda: load_regret(benchmark.references_dir),
    )
    return LoopPolicies.by_name(inputs, sampling=loop.sampling)


def run_generations(
    checked: CheckedRun,
    run_id: str,
    run_dir: Path,
    repo: HarnessRepo,
    ledger: Ledger,
    hooks: RunHooks,
    *,
    point: ResumePoint | None = None,
    meter: UsageMeter | None = None,
    elapsed_s: float = 0.0,
) -> SessionOutcome:
    """The generations from ``point`` (None: the start), then ``run_finished``; the ledger is closed
    at the end. ``meter`` and ``elapsed_s``: what a resumed run had spent (budgets count across)."""
    options, state = checked.options, RunState(run_id=run_id)
    scoring, seed = options.scoring, options.scoring.seed
    meter = meter or UsageMeter()
    scorer = build_scorer(
        options.execution,
        executor=checked.executor,
        benchmark=checked.benchmark,
        default_model=checked.seed_harness.model,
        model=scoring.model,
        seed=seed,
        references=checked.references,
        out_dir=run_dir,
        on_progress=hooks.on_progress,
        cache=RolloutCache(checked.harness_dir / STATE_DIR / "cache" / "rollouts") if scoring.cache else None,
        infra=ledger_infra_tally(ledger, options.budget.max_infra_share),
    )
    limits = options.budget
    budget = Budget(limits.max_cost_usd, limits.max_tokens, limits.max_hours)
    parts = LoopParts(
        checked.harness_dir,
        repo,
        checked.benchmark,
        scorer,
        checked.proposer,
        checked.gates,
        ledger,
        run_dir,
        state,
    )
    loop = GenerationLoop(
        parts,
        options,
        policies_for(options, checked.benchmark),
        guard=BudgetGuard(budget, meter, elapsed_s=elapsed_s) if budget.limited else None,
        meter=meter,
        log=hooks.log,
    )
    bind_agent_proposer(
        checked.proposer,
        AgentRun(
            run_dir=run_dir,
            benchmark=checked.benchmark,
            references=checked.references,
            gates=checked.gates,
            sandbox=checked.executor.sandbox,
            meter=meter,
            repo=repo,
            run_budget=loop.guard.exhausted if loop.guard else None,
            seed=seed,
        ),
    )
    if options.evolve.evolve_environments:
        loop.evolver = EnvironmentEvolver(
            benchmark=checked.benchmark,
            scorer=scorer,
            ledger=ledger,
            run_dir=run_dir,
            seed=seed,
            settings=EvolveSettings(threshold=options.evolve.evolve_threshold),
            sandbox=checked.executor.sandbox,
        )
        if point is not None:
            loop.evolver.restore(point.next_generation)
    journal = SpendJournal(run_dir, meter)  # spend on disk as it happens: budgets hold across kills
    counters = RunCounters(run_dir)  # this process's rollout counts, kept beside a killed one's
    ledger.listeners.append(lambda _event: counters.record(_counts(loop, scorer)))
    ledger.listeners.append(
        lambda event: (
            hooks.on_outer(event.generation, options.loop.generations)
            if isinstance(event, GenerationStarted)
            else None
        )
    )
    scorer.on_rollout = lambda: counters.record(_counts(loop, scorer), durable=False)  # per rollout
    try:
        with run_tempdir(run_id) as (_folder, swept):
            if swept.removed:
                hooks.log(f"removed {len(swept.removed)} temp folder(s) left by killed runs")
            for path, reason in swept.left:
                hooks.log(f"could not remove {path} (left by a killed run): {reason}")
            try:
                stopped = _drive(loop, point, meter, ledger, repo, state)
            finally:
                close_agent_proposer(checked.proposer)
    finally:
        journal.close()
    usage = meter.snapshot()
    events = read_ledger(ledger.path)
    net = net_change(events, repo)
    totals = counters.total(_counts(loop, scorer))  # every process of the run, resumed ones included
    ledger.append(
        RunFinished(
            accepted=state.accepted,
            reverted=state.reverted,
            rev=repo.head(),
            rollouts=totals.rollouts,
            cached_rollouts=totals.cached_rollouts,
            tokens=totals.tokens,
            usage=usage,
            stopped=stopped,
            net_change=net.to_dict() if net else None,
            infra=run_infra(scorer.infra, events, totals.infra_rollouts),
        )
    )
    ledger.close()
    return SessionOutcome(state, stopped, usage, net)


def _drive(
    loop: GenerationLoop,
    point: ResumePoint | None,
    meter: UsageMeter,
    ledger: Ledger,
    repo: HarnessRepo,
    state: RunState,
) -> dict[str, Any] | None:
    """Run the loop; a budget stop is a clean finish, anything else is logged and re-raised."""
    try:
        with metering(meter), budget_check(loop.guard.exhausted if loop.guard else None):
            interrupts.run_async(loop.run(point))
    except BudgetExhausted as exc:
        loop.abandon_pending(f"budget reached ({exc})")
        ledger.append(BudgetExhaustedEvent(generation=state.generation, stage=state.stage, **exc.to_dict()))
        return exc.to_dict()
    except BaseException as exc:
        interrupted = isinstance(exc, KeyboardInterrupt)
        generation, stage = state.generation, state.stage
        with interrupts.saving():  # a second Ctrl-C must not cut this short
            loop.abandon_pending(f"run stopped ({type(exc).__name__}) before the gates decided")
            where: dict[str, Any] = {
                "generation": generation,
                "stage": stage,
                "error": repr(exc)[:500],
                "rev": repo.head(),
                "usage": meter.snapshot(),
            }
            if interrupted:
                ledger.append(RunInterrupted(**where, signal=interrupts.signal_name()))
            else:
                ledger.append(RunFailed(**where))
        if interrupted:
            stopped_at = interrupts.StopPoint(
                state.run_id, ledger.path.parent, loop.harness_dir, generation, stage
            )
            raise interrupts.Interrupted(stopped_at, interrupts.signal_name()) from exc
        raise
    return None


def _counts(loop: GenerationLoop, scorer: Scorer) -> Counts:
    repeated = loop.judging.repeated
    cached = sum(s.cached for s in repeated.scorers.values())
    return Counts(repeated.rollouts, cached, repeated.tokens, scorer.infra.rollouts)


def run_infra(tally: InfraTally, events: list[Event], rollouts: int) -> dict[str, Any]:
    """``run_finished.infra`` for the whole run: the machine failures of every process (each one is
    an ``infra_failure`` event) over the rollouts every process counted (``counters.json``)."""
    counts = fold_infra(events)
    return {
        "rollouts": rollouts,
        "failures": counts.failures,
        "share": round(counts.failures / rollouts, 4) if rollouts else 0.0,
        "reasons": counts.reasons,
        "retried": counts.retried,
        "max_share": tally.max_share,
    }


def spent_before(events: list[Event], run_dir: Path | None = None) -> tuple[UsageMeter, float]:
    """What a killed run had spent: the last usage snapshot in its ledger, and the wall time since
    it started (budgets count across resumes)."""
    from datetime import UTC, datetime

    usage = next(
        (spent for e in reversed(events) if isinstance(spent := getattr(e, "usage", None), dict)), None
    )
    if run_dir is not None:  # spend.json is written as calls happen, the ledger at generation ends
        usage = later_usage(usage, read_spend(run_dir))
    started = next(e.ts for e in events if isinstance(e, RunStarted))
    elapsed = (datetime.now(UTC) - datetime.fromisoformat(started or "")).total_seconds()
    return (UsageMeter.from_snapshot(usage) if usage else UsageMeter()), max(0.0, elapsed)
