"""``harnessevolve run``: check inputs, take the lock, open the ledger, drive the generation loop;
``--resume RUN`` picks a killed run up from its ledger and git."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from harnessevolve.core import interrupts
from harnessevolve.core.errors import HarnessEvolveError, HarnessGitError
from harnessevolve.core.tasks import Benchmark
from harnessevolve.execute.executor import EXECUTORS
from harnessevolve.execute.runners.endpoint import budget_check
from harnessevolve.gate.config import load_gate_config
from harnessevolve.harness.git import HarnessRepo
from harnessevolve.harness.load import load_harness
from harnessevolve.models.pricing import check_cost_budget, parse_price
from harnessevolve.models.usage import UsageMeter
from harnessevolve.optimize.registry import make_proposer
from harnessevolve.pipeline import preflight
from harnessevolve.pipeline.budget import Budget, BudgetExhausted, BudgetGuard, metering
from harnessevolve.pipeline.evolve_env import EnvironmentEvolver, native_documents
from harnessevolve.pipeline.loop import GenerationLoop
from harnessevolve.pipeline.net_change import NetChange, net_change
from harnessevolve.pipeline.reference_coverage import missing_references_warning
from harnessevolve.pipeline.references import load_references
from harnessevolve.pipeline.refgen import load_regret
from harnessevolve.pipeline.resume import ResumePoint, load_run_for_resume, reconcile, resume_point
from harnessevolve.pipeline.rollout_cache import RolloutCache
from harnessevolve.pipeline.scorer_setup import ScorerSetup
from harnessevolve.pipeline.scoring import Scorer
from harnessevolve.pipeline.state import RunState
from harnessevolve.report.tracking import make_tracker
from harnessevolve.runs.events import BudgetExhausted as BudgetExhaustedEvent
from harnessevolve.runs.events import (
    RunFailed,
    RunFinished,
    RunInterrupted,
    RunResumed,
    RunStarted,
    StaleLockRemoved,
)
from harnessevolve.runs.ledger import Ledger, read_ledger
from harnessevolve.runs.rundir import STATE_DIR, HarnessLock, RunDir, new_run_id


@dataclass(frozen=True)
class RunOptions:
    harness_dir: Path
    benchmark: str
    generations: int = 3
    model: str | None = None
    """Agent model; ``None`` uses the harness's ``model``."""
    batch_size: int = 40
    concurrency: int | None = None
    """Rollouts at once; ``None``: 1 for the embedded model (one llama.cpp context, whose prompt
    cache works best on one conversation at a time), 4 otherwise."""
    seed: int = 0
    proposers: tuple[str, ...] = ("auto",)
    """Proposer names tried in order; ``auto``: ``llm`` (with an optimizer model), ``demo``, ``rules``."""
    optimizer_model: str | None = None
    """The proposer's model (any litellm name), separate from the agent's."""
    gates_file: Path | None = None
    allow_dirty: bool = False
    executor: str = "local"
    epoch_patience: int = 10
    """Straight generations without an accepted edit that end an epoch (then the best snapshot on
    validation becomes current; the run's end also ends an epoch)."""
    sampling: str = "uniform"
    """Minibatch sampling: ``uniform``, or ``regret`` (prefer tasks with a high pass-rate gap, from
    the benchmark's regret.json written by ``refs generate``)."""
    candidates: int = 1
    """K: candidates proposed and judged concurrently per generation; the best that passes is kept."""
    max_revisions: int = 3
    """T_rev: times a quality-gate rejection goes back to the proposer with its reason."""
    max_cost_usd: float | None = None
    max_tokens: int | None = None
    max_hours: float | None = None
    price_per_mtok: str | None = None
    """``IN,OUT`` USD per million tokens for models litellm has no price for (``--price-per-mtok``)."""
    cache: bool = True
    """Serve unchanged (harness, task, model, seed) rollouts from DIR/.harnessevolve/cache/."""
    sandbox: str = "bwrap"
    """Where agent commands run: bwrap (default), docker, or none (needs ``unsafe_no_sandbox``)."""
    unsafe_no_sandbox: bool = False
    sandbox_ro: tuple[str, ...] = ()
    """More host paths the sandbox shows read-only (``--sandbox-ro``)."""
    adapters: tuple[str, ...] = ()
    """``module:attr`` adapters to load the benchmark with (``--adapter``)."""
    sandbox_limits: str | None = None
    """Per-process limits for sandboxed commands (``SandboxLimits.parse`` text); None: defaults."""
    train_every: int = 0
    """Fine-tune the agent model every N generations on what the run collected (0: never)."""
    train_base_model: str | None = None
    """The weights to train when the agent model has none here (a checkpoint folder or alias)."""
    track: str | None = None
    """Mirror the ledger into a tracker: ``mlflow`` (needs harnessevolve[tracking])."""
    evolve_environments: bool = False
    """Make harder train tasks once the current ones are mastered (``pipeline/evolve_env.py``)."""

    def to_json(self) -> dict[str, Any]:
        return {k: str(v) if isinstance(v, Path) else v for k, v in asdict(self).items()}

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> RunOptions:
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in doc.items() if k in known}
        for key in ("harness_dir", "gates_file"):
            if values.get(key) is not None:
                values[key] = Path(values[key])
        values["proposers"] = tuple(values.get("proposers", ("auto",)))
        for key in ("sandbox_ro", "adapters"):
            values[key] = tuple(values.get(key, ()))
        return cls(**values)


@dataclass(frozen=True)
class RunResult:
    state: RunState
    run_dir: Path
    stopped: dict[str, Any] | None = None
    """Set when a budget stopped the run: which limit, what was spent, the cap."""
    usage: dict[str, Any] | None = None
    net: NetChange | None = None
    """Seed vs final harness (files changed, validation delta); None when unknown."""

    def __iter__(self):  # noqa: ANN204 - lets older callers unpack ``state, run_dir = start_run(...)``
        return iter((self.state, self.run_dir))


@dataclass(frozen=True)
class RunHooks:
    """How the caller watches a run: progress bars and log lines (the CLI passes rich ones)."""

    on_progress: Callable[[str, int], Callable[[], None]] | None = None
    log: Callable[[str], None] = lambda _m: None


def prepare_repo(options: RunOptions, run_id: str) -> HarnessRepo:
    repo = HarnessRepo(options.harness_dir)
    repo.head()
    dirty = repo.dirty_paths()
    if dirty and not options.allow_dirty:
        raise HarnessGitError(
            f"uncommitted changes in the harness ({', '.join(dirty[:3])}{', ...' if len(dirty) > 3 else ''})",
            file=str(options.harness_dir),
            hint="commit or stash them, or pass --allow-dirty to snapshot them in a commit first",
        )
    if dirty:
        repo.commit_all(f"harnessevolve: snapshot uncommitted changes before run {run_id}\n\nRun: {run_id}\n")
    return repo


def _check_options(options: RunOptions) -> None:
    if options.sampling not in ("uniform", "regret"):
        raise HarnessEvolveError(
            f"unknown sampling {options.sampling!r}", field="--sampling", hint="use uniform or regret"
        )
    if options.executor not in EXECUTORS:
        raise HarnessEvolveError(
            f"unknown executor {options.executor!r}",
            field="--executor",
            hint=f"choose from: {', '.join(EXECUTORS)}",
        )
    if options.train_every < 0:
        raise HarnessEvolveError("--train-every must be >= 0", field="--train-every", hint="e.g. 2")
    if options.candidates < 1 or options.max_revisions < 0:
        raise HarnessEvolveError(
            "--candidates must be >= 1 and --max-revisions >= 0", field="--candidates", hint="e.g. 3 and 3"
        )


def _load_benchmark(spec: str, adapters: tuple[str, ...] = ()) -> Benchmark:
    from harnessevolve.adapters import load_benchmark_spec

    return load_benchmark_spec(spec, adapters)


def start_run(options: RunOptions, hooks: RunHooks, *, resume: str | None = None) -> RunResult:
    """Validate everything, then run (or resume ``resume``). Bad input raises before anything is written."""
    harness_dir = Path(options.harness_dir).resolve()
    run_dir = None
    if resume is not None:
        run_dir = _find_run(harness_dir, resume)
        events, started = load_run_for_resume(run_dir.root)
        preflight.check_resume_belongs(run_dir.root, started, harness_dir)
        options = RunOptions.from_json({**started["options"], "harness_dir": str(harness_dir)})
    options = RunOptions(**{**asdict(options), "harness_dir": harness_dir})
    seed_harness = load_harness(harness_dir)
    _check_options(options)
    benchmark = _load_benchmark(options.benchmark, options.adapters)
    references = load_references(benchmark)
    gates = load_gate_config(options.gates_file)
    proposer = make_proposer(options.proposers, options.optimizer_model)
    preflight.check_benchmark(benchmark, gates)
    preflight.check_prompt_cap(seed_harness, gates)
    preflight.check_models(options.model or seed_harness.model, options.optimizer_model, gates)
    priced = check_cost_budget(
        (options.model or seed_harness.model, options.optimizer_model, gates.leakage.judge_model),
        max_cost_usd=options.max_cost_usd,
        price=parse_price(options.price_per_mtok) if options.price_per_mtok else None,
    )
    preflight.check_tracker(options.track)
    if options.evolve_environments:
        native_documents(benchmark)  # refused before anything is written
    preflight.check_state_dir(harness_dir)
    if options.train_every:
        from harnessevolve.pipeline.training import base_model_for, check_training_available

        check_training_available()
        if options.train_base_model is None:
            base_model_for(options.model or seed_harness.model)
    setup = ScorerSetup.from_options(asdict(options))
    executor = setup.make_executor(benchmark, options.model or seed_harness.model)
    run_id = run_dir.root.name if run_dir else new_run_id()
    lock = HarnessLock(harness_dir)
    lock.acquire(run_id)
    state = RunState(run_id=run_id)
    meter, elapsed_s = UsageMeter(), 0.0
    tracker = None
    try:
        if run_dir is None:
            repo = prepare_repo(options, run_id)
            run_dir = RunDir.create(harness_dir, run_id)
            tracker = make_tracker(options.track, harness_dir, run_dir=run_dir.root)
            ledger = Ledger(run_dir.ledger, [tracker.on_event])
            point = None
        else:
            repo = HarnessRepo(harness_dir)
            tracker = make_tracker(options.track, harness_dir, run_dir=run_dir.root)
            ledger = Ledger(run_dir.ledger, [tracker.on_event])
            recovered = reconcile(repo, ledger, run_id, events)
            events = load_run_for_resume(run_dir.root)[0]
            point = resume_point(events, benchmark, run_id, options.epoch_patience, options.generations)
            meter, elapsed_s = spent_before(events)
            ledger.append(
                RunResumed(
                    run_id=run_id,
                    rev=repo.head(),
                    next_generation=point.next_generation,
                    recovered=recovered,
                    stale_lock=lock.stale_owner,
                )
            )
            for line in recovered:
                hooks.log(f"resume: {line}")
        if lock.stale_owner and point is None:
            ledger.append(StaleLockRemoved(owner=lock.stale_owner))
            hooks.log(f"removed a stale lock left by run {lock.stale_owner.get('run_id')}")
        for name in priced:
            hooks.log(
                f"no price data for {name}: charging --price-per-mtok {options.price_per_mtok} USD/Mtok"
            )
        if point is None:
            ledger.append(
                RunStarted(
                    run_id=run_id,
                    harness=str(harness_dir),
                    rev=repo.head(),
                    benchmark=benchmark.name,
                    options=options.to_json(),
                    gates=gates.source,
                    references=len(references),
                    sandbox=executor.sandbox.name if executor.sandbox else setup.sandbox,
                )
            )
            warning = missing_references_warning(benchmark, references)
            if warning:
                hooks.log(f"warning: {warning}")
        scorer = Scorer(
            executor,
            model=options.model,
            seed=options.seed,
            references=references,
            out_dir=run_dir.root,
            on_progress=hooks.on_progress,
            cache=RolloutCache(harness_dir / STATE_DIR / "cache" / "rollouts") if options.cache else None,
        )
        budget = Budget(options.max_cost_usd, options.max_tokens, options.max_hours)
        loop = GenerationLoop(
            harness_dir=harness_dir,
            repo=repo,
            benchmark=benchmark,
            scorer=scorer,
            proposer=proposer,
            gates=gates,
            ledger=ledger,
            run_dir=run_dir.root,
            state=state,
            batch_size=options.batch_size,
            epoch_patience=options.epoch_patience,
            weights=load_regret(benchmark.references_dir) if options.sampling == "regret" else None,
            candidates=options.candidates,
            max_revisions=options.max_revisions,
            guard=BudgetGuard(budget, meter, elapsed_s=elapsed_s) if budget.limited else None,
            meter=meter,
            train_every=options.train_every,
            train_base_model=options.train_base_model,
            seed=options.seed,
            log=hooks.log,
        )
        if options.evolve_environments:
            loop.evolver = EnvironmentEvolver(
                benchmark=benchmark,
                scorer=scorer,
                ledger=ledger,
                run_dir=run_dir.root,
                seed=options.seed,
                sandbox=executor.sandbox,
            )
            if point is not None:
                loop.evolver.restore(point.next_generation)
        stopped = _drive(loop, options, point, meter, ledger, repo, state)
        usage = meter.snapshot()
        net = net_change(read_ledger(ledger.path), repo)
        ledger.append(
            RunFinished(
                accepted=state.accepted,
                reverted=state.reverted,
                rev=repo.head(),
                rollouts=loop.judging.repeated.rollouts,
                cached_rollouts=sum(s.cached for s in loop.judging.repeated.scorers.values()),
                tokens=loop.judging.repeated.tokens,
                usage=usage,
                stopped=stopped,
                net_change=net.to_dict() if net else None,
            )
        )
        ledger.close()
    finally:
        if tracker is not None:
            tracker.close()
        lock.release()
    return RunResult(state, run_dir.root, stopped, usage, net)


def _drive(
    loop: GenerationLoop,
    options: RunOptions,
    point: ResumePoint | None,
    meter: UsageMeter,
    ledger: Ledger,
    repo: HarnessRepo,
    state: RunState,
) -> dict[str, Any] | None:
    """Run the loop; a budget stop is a clean finish, anything else is logged and re-raised."""
    try:
        with metering(meter), budget_check(loop.guard.exhausted if loop.guard else None):
            interrupts.run_async(loop.run(options.generations, point))
    except BudgetExhausted as exc:
        loop.abandon_pending(f"budget reached ({exc})")
        ledger.append(BudgetExhaustedEvent(generation=state.generation, stage=state.stage, **exc.to_dict()))
        return exc.to_dict()
    except BaseException as exc:
        interrupted = isinstance(exc, KeyboardInterrupt)
        generation, stage = state.generation, state.stage
        with interrupts.saving():  # a second Ctrl-C must not cut this short
            loop.abandon_pending(f"run stopped ({type(exc).__name__}) before the gates decided")
            if interrupted:
                ledger.append(
                    RunInterrupted(
                        generation=generation,
                        stage=stage,
                        error=repr(exc)[:500],
                        rev=repo.head(),
                        usage=meter.snapshot(),
                        signal=interrupts.signal_name(),
                    )
                )
            else:
                ledger.append(
                    RunFailed(
                        generation=generation,
                        stage=stage,
                        error=repr(exc)[:500],
                        rev=repo.head(),
                        usage=meter.snapshot(),
                    )
                )
        if interrupted:
            point = interrupts.StopPoint(
                state.run_id, ledger.path.parent, loop.harness_dir, generation, stage
            )
            raise interrupts.Interrupted(point, interrupts.signal_name()) from exc
        raise
    return None


def spent_before(events: list[dict[str, Any]]) -> tuple[UsageMeter, float]:
    """What a killed run had spent: the last usage snapshot in its ledger, and the wall time since
    it started (budgets count across resumes)."""
    from datetime import UTC, datetime

    usage = next((e["usage"] for e in reversed(events) if isinstance(e.get("usage"), dict)), None)
    started = next(e["ts"] for e in events if e.get("event") == RunStarted.NAME)
    elapsed = (datetime.now(UTC) - datetime.fromisoformat(started)).total_seconds()
    return (UsageMeter.from_snapshot(usage) if usage else UsageMeter()), max(0.0, elapsed)


def _find_run(harness_dir: Path, run: str) -> RunDir:
    """The run ``--resume`` names: its folder, its id, or a unique prefix of its id."""
    from harnessevolve.report.runs import resolve_run

    try:
        return RunDir(resolve_run(run, harness_dir).resolve())
    except HarnessEvolveError as exc:
        runs = sorted((harness_dir / STATE_DIR / "runs").glob("*"))
        raise HarnessEvolveError(
            exc.message if "prefix" in exc.message else f"no run {run!r} for this harness",
            file=str(harness_dir / STATE_DIR / "runs"),
            field="--resume",
            hint=exc.hint
            if "prefix" in exc.message
            else f"known runs: {', '.join(r.name for r in runs[-3:]) or 'none'}",
        ) from None
