"""``harnessevolve run``: check inputs, take the lock, open the ledger, drive the generation loop;
``--resume RUN`` picks a killed run up from its ledger and git."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harnessevolve.core.errors import FloorTooHighError, HarnessEvolveError, HarnessGitError
from harnessevolve.core.tasks import Benchmark
from harnessevolve.gate.config import load_gate_config
from harnessevolve.harness.git import HarnessRepo
from harnessevolve.harness.load import load_harness
from harnessevolve.judging.floor import check_floor_at_start
from harnessevolve.models.budget import ProposerBudget
from harnessevolve.models.pricing import check_cost_budget, parse_price
from harnessevolve.optimize.registry import make_proposer
from harnessevolve.pipeline import preflight
from harnessevolve.pipeline.evolve_env import native_documents
from harnessevolve.pipeline.net_change import NetChange
from harnessevolve.pipeline.resume import load_run_for_resume, reconcile, resume_point
from harnessevolve.pipeline.session import CheckedRun, run_generations, spent_before
from harnessevolve.pipeline.state import RunHooks, RunState
from harnessevolve.proposing.agent_proposer import agent_proposers
from harnessevolve.report.tracking import make_tracker
from harnessevolve.runs.events import (
    Event,
    FloorChecked,
    RunResumed,
    RunStarted,
    StaleLockRemoved,
)
from harnessevolve.runs.ledger import Ledger
from harnessevolve.runs.run_config import RunConfig
from harnessevolve.runs.rundir import HarnessLock, RunDir, new_run_id
from harnessevolve.scoring.build import make_executor
from harnessevolve.scoring.reference_coverage import missing_references_warning
from harnessevolve.scoring.references import load_references

RunOptions = RunConfig
"""The run's options are its composed configuration (``runs/run_config.py``: one section per
concern; a new option is a field of the section it belongs to and a parameter of ``run``)."""


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


def prepare_repo(options: RunConfig, run_id: str) -> HarnessRepo:
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


def _check_options(options: RunConfig) -> None:
    """What the option types cannot say (closed choices are enums, refused where they are parsed)."""
    shares = {
        "max_infra_share": options.budget.max_infra_share,
        "max_floor_share": options.floor.max_floor_share,
    }
    for name, value in shares.items():
        if not 0.0 <= value <= 1.0:  # NaN too
            flag = "--" + name.replace("_", "-")
            raise HarnessEvolveError(f"{flag} must be in [0, 1], not {value}", field=flag, hint="e.g. 0.5")
    if options.training.train_every < 0:
        raise HarnessEvolveError("--train-every must be >= 0", field="--train-every", hint="e.g. 2")
    if options.loop.candidates < 1 or options.loop.max_revisions < 0:
        raise HarnessEvolveError(
            "--candidates must be >= 1 and --max-revisions >= 0", field="--candidates", hint="e.g. 3 and 3"
        )


def _load_benchmark(spec: str, adapters: tuple[str, ...] = ()) -> Benchmark:
    from harnessevolve.adapters import load_benchmark_spec

    return load_benchmark_spec(spec, adapters)


def check_run(options: RunConfig) -> CheckedRun:
    """Load and check everything ``options`` name; bad input raises a HarnessEvolveError."""
    harness_dir = Path(options.harness_dir).resolve()
    options = options.replace(harness_dir=harness_dir)
    seed_harness = load_harness(harness_dir)
    _check_options(options)
    benchmark = _load_benchmark(options.benchmark, options.adapters)
    references = load_references(benchmark)
    scoring, optimize, budget, evolve = options.scoring, options.optimize, options.budget, options.evolve
    agent_model = scoring.model or seed_harness.model
    gates = load_gate_config(scoring.gates_file)
    proposer = make_proposer(
        optimize.proposers,
        optimize.optimizer_model,
        extra=agent_proposers(
            Path(optimize.optimizer_agent) if optimize.optimizer_agent else None,
            optimize.optimizer_model,
            ProposerBudget(optimize.max_proposer_cost_usd, optimize.max_proposer_tokens),
        ),
    )
    preflight.check_benchmark(benchmark, gates)
    preflight.check_prompt_cap(seed_harness, gates)
    preflight.check_proposers_reach(seed_harness, proposer)
    preflight.check_seed_leakage(seed_harness, benchmark, gates)
    preflight.check_models(agent_model, optimize.optimizer_model, gates)
    preflight.check_context_window(seed_harness, benchmark, agent_model)
    priced = check_cost_budget(
        (agent_model, optimize.optimizer_model, gates.leakage.judge_model),
        max_cost_usd=budget.max_cost_usd,
        price=parse_price(budget.price_per_mtok) if budget.price_per_mtok else None,
    )
    preflight.check_tracker(options.track)
    if evolve.evolve_environments:
        native_documents(benchmark)  # refused before anything is written
        if not 0.0 <= evolve.evolve_threshold <= 1.0:  # NaN too
            raise HarnessEvolveError(
                f"--evolve-threshold must be in [0, 1], not {evolve.evolve_threshold}",
                field="--evolve-threshold",
                hint="e.g. 0.75",
            )
    preflight.check_state_dir(harness_dir)
    if options.training.train_every:
        from harnessevolve.pipeline.training import base_model_for, check_training_available

        check_training_available()
        if options.training.train_base_model is None:
            base_model_for(agent_model)
    executor = make_executor(options.execution, benchmark, agent_model)
    return CheckedRun(
        options, harness_dir, seed_harness, benchmark, references, gates, proposer, executor, priced
    )


def start_run(options: RunConfig, hooks: RunHooks, *, resume: str | None = None) -> RunResult:
    """Validate everything, then run (or resume ``resume``: its own recorded options are used).
    Bad input raises before anything is written."""
    if resume is not None:
        return resume_run(Path(options.harness_dir), resume, hooks)
    return new_run(options, hooks)


def new_run(options: RunConfig, hooks: RunHooks) -> RunResult:
    """A new run: its lock, its folder, the harness snapshot, ``run_started``, then the generations."""
    checked = check_run(options)
    options, harness_dir = checked.options, checked.harness_dir
    run_id = new_run_id()
    lock = HarnessLock(harness_dir)
    lock.acquire(run_id)
    tracker = None
    try:
        repo = prepare_repo(options, run_id)
        run_dir = RunDir.create(harness_dir, run_id)
        tracker = make_tracker(options.track, harness_dir, run_dir=run_dir.root)
        ledger = Ledger(run_dir.ledger, [tracker.on_event])
        if lock.stale_owner:
            ledger.append(StaleLockRemoved(owner=lock.stale_owner))
            hooks.log(f"removed a stale lock left by run {lock.stale_owner.get('run_id')}")
        _log_prices(checked, hooks)
        executor = checked.executor
        ledger.append(
            RunStarted(
                run_id=run_id,
                harness=str(harness_dir),
                rev=repo.head(),
                benchmark=checked.benchmark.name,
                options=options.to_json(),
                gates=checked.gates.source,
                references=len(checked.references),
                sandbox=executor.sandbox.name if executor.sandbox else options.execution.sandbox,
            )
        )
        check_floor(checked, ledger, hooks)
        warning = missing_references_warning(checked.benchmark, checked.references)
        if warning:
            hooks.log(f"warning: {warning}")
        outcome = run_generations(checked, run_id, run_dir.root, repo, ledger, hooks)
    finally:
        if tracker is not None:
            tracker.close()
        lock.release()
    return RunResult(outcome.state, run_dir.root, outcome.stopped, outcome.usage, outcome.net)


def check_floor(checked: CheckedRun, ledger: Ledger, hooks: RunHooks) -> None:
    """The null-agent floor before the first generation (``floor_checked``; refused: exit 2)."""
    floor = checked.options.floor
    check_floor_at_start(
        checked.benchmark,
        checked.executor.sandbox,
        sample=floor.floor_sample,
        max_share=floor.max_floor_share,
        accepted=floor.accept_floor,
        seed=checked.options.scoring.seed,
        ledger=ledger,
        log=hooks.log,
    )


def floor_on_resume(events: list[Event], checked: CheckedRun, ledger: Ledger | None, hooks: RunHooks) -> None:
    """The floor verdict of a resumed run: a recorded refusal stands (raised before anything is
    written: ``ledger`` None); a check a kill cut off before it was recorded is redone (``ledger``
    given), so a benchmark a fresh run refuses is refused on resume too."""
    recorded = next((e for e in reversed(events) if isinstance(e, FloorChecked)), None)
    if recorded is not None and recorded.refused and not checked.options.floor.accept_floor:
        raise FloorTooHighError(
            f"the run was refused at its start: null agents pass {recorded.share:.0%} of "
            f"{recorded.tasks} sampled tasks (max {recorded.max_share:.0%})",
            field="floor_checked",
        )
    if recorded is None and ledger is not None:
        hooks.log("resume: the null-agent floor was never recorded; checking it now")
        check_floor(checked, ledger, hooks)


def resume_run(harness_dir: Path, run: str, hooks: RunHooks) -> RunResult:
    """Pick the killed run ``run`` up: its recorded options, what git holds of its last generation
    reconciled with its ledger (``resume.reconcile``), ``run_resumed``, then the rest of its generations."""
    harness_dir = harness_dir.resolve()
    run_dir = RunDir.find(run, harness_dir, field="--resume")
    run_dir = RunDir(run_dir.root.resolve())
    _events, started = load_run_for_resume(run_dir.root)
    preflight.check_resume_belongs(run_dir.root, started.to_json(), harness_dir)
    recorded = {**started.options, "harness_dir": str(harness_dir)}
    checked = check_run(RunConfig.from_json(recorded, where=f"{run_dir.ledger}: run_started.options"))
    floor_on_resume(_events, checked, None, hooks)
    options, run_id = checked.options, run_dir.root.name
    lock = HarnessLock(harness_dir)
    lock.acquire(run_id)
    tracker = None
    try:
        events = load_run_for_resume(run_dir.root)[0]  # again, under the lock: a run another resume
        # finished meanwhile is refused, and reconcile never acts on a ledger read before the lock
        repo = HarnessRepo(harness_dir)
        tracker = make_tracker(options.track, harness_dir, run_dir=run_dir.root)
        ledger = Ledger(run_dir.ledger, [tracker.on_event])
        recovered = reconcile(repo, ledger, run_id, events)
        events = load_run_for_resume(run_dir.root)[0]
        point = resume_point(
            events, checked.benchmark, run_id, options.loop.epoch_patience, options.loop.generations
        )
        meter, elapsed_s = spent_before(events, run_dir.root)
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
        floor_on_resume(events, checked, ledger, hooks)
        _log_prices(checked, hooks)
        outcome = run_generations(
            checked, run_id, run_dir.root, repo, ledger, hooks, point=point, meter=meter, elapsed_s=elapsed_s
        )
    finally:
        if tracker is not None:
            tracker.close()
        lock.release()
    return RunResult(outcome.state, run_dir.root, outcome.stopped, outcome.usage, outcome.net)


def _log_prices(checked: CheckedRun, hooks: RunHooks) -> None:
    for name in checked.priced:
        hooks.log(
            f"no price data for {name}: charging --price-per-mtok "
            f"{checked.options.budget.price_per_mtok} USD/Mtok"
        )
