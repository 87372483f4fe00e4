"""``harnessevolve run``: check inputs, take the lock, open the ledger, drive the generation loop;
``--resume RUN`` picks a killed run up from its ledger and git."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from harnessevolve.core.errors import HarnessEvolveError, HarnessGitError
from harnessevolve.core.tasks import Benchmark
from harnessevolve.execute.executor import EXECUTORS
from harnessevolve.gate.config import load_gate_config
from harnessevolve.harness.git import HarnessRepo
from harnessevolve.harness.load import load_harness
from harnessevolve.models.pricing import check_cost_budget, parse_price
from harnessevolve.optimize.registry import make_proposer
from harnessevolve.pipeline import preflight
from harnessevolve.pipeline.evolve_env import native_documents
from harnessevolve.pipeline.net_change import NetChange
from harnessevolve.pipeline.floor import check_floor_at_start
from harnessevolve.pipeline.reference_coverage import missing_references_warning
from harnessevolve.pipeline.references import load_references
from harnessevolve.pipeline.resume import load_run_for_resume, reconcile, resume_point
from harnessevolve.pipeline.scorer_setup import ScorerSetup
from harnessevolve.pipeline.session import CheckedRun, run_generations, spent_before
from harnessevolve.pipeline.state import RunState
from harnessevolve.report.tracking import make_tracker
from harnessevolve.runs.events import (
    RunResumed,
    RunStarted,
    StaleLockRemoved,
)
from harnessevolve.runs.ledger import Ledger
from harnessevolve.runs.rundir import STATE_DIR, HarnessLock, RunDir, new_run_id

CLI_NAMES = {"harness": "harness_dir", "proposer": "proposers", "gates": "gates_file", "adapter": "adapters"}
"""``run`` parameters whose RunOptions field has another name."""


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
    evolve_threshold: float = 0.75
    """The family pass rate (current harness) at which ``evolve_environments`` makes harder variants."""

    @classmethod
    def from_cli(cls, params: dict[str, Any], **converted: Any) -> RunOptions:
        """The options from the ``run`` command's parameters, which carry the fields' names (or the
        names in ``CLI_NAMES``); ``converted`` replaces the values the CLI turns into another type. A
        parameter that is no field raises TypeError, so the options are listed once, in the CLI."""
        values = {CLI_NAMES.get(k, k): v for k, v in {**params, **converted}.items()}
        return cls(**values)

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


def _check_options(options: RunConfig) -> None:
    """What the option types cannot say (closed choices are enums, refused where they are parsed)."""
    shares = {"max_infra_share": options.budget.max_infra_share, "max_floor_share": options.floor.max_floor_share}
    for name, value in shares.items():
        if not 0.0 <= value <= 1.0:  # NaN too
            flag = "--" + name.replace("_", "-")
            raise HarnessEvolveError(f"{flag} must be in [0, 1], not {value}", field=flag, hint="e.g. 0.5")
    if options.training.train_every < 0:
        raise HarnessEvolveError("--train-every must be >= 0", field="--train-every", hint="e.g. 2")
    if options.candidates < 1 or options.max_revisions < 0:
        raise HarnessEvolveError(
            "--candidates must be >= 1 and --max-revisions >= 0", field="--candidates", hint="e.g. 3 and 3"
        )


def _load_benchmark(spec: str, adapters: tuple[str, ...] = ()) -> Benchmark:
    from harnessevolve.adapters import load_benchmark_spec

    return load_benchmark_spec(spec, adapters)


def check_run(options: RunOptions) -> CheckedRun:
    """Load and check everything ``options`` name; bad input raises a HarnessEvolveError."""
    harness_dir = Path(options.harness_dir).resolve()
    options = RunOptions(**{**asdict(options), "harness_dir": harness_dir})
    seed_harness = load_harness(harness_dir)
    _check_options(options)
    benchmark = _load_benchmark(options.benchmark, options.adapters)
    references = load_references(benchmark)
    gates = load_gate_config(options.gates_file)
    proposer = make_proposer(options.proposers, options.optimizer_model)
    preflight.check_benchmark(benchmark, gates)
    preflight.check_prompt_cap(seed_harness, gates)
        check_floor_at_start(
            checked.benchmark,
            executor.sandbox,
            sample=options.floor.floor_sample,
            max_share=options.floor.max_floor_share,
            accepted=options.floor.accept_floor,
            seed=options.scoring.seed,
            ledger=ledger,
            log=hooks.log,
        )
    preflight.check_models(options.model or seed_harness.model, options.optimizer_model, gates)
    priced = check_cost_budget(
        (options.model or seed_harness.model, options.optimizer_model, gates.leakage.judge_model),
        max_cost_usd=options.max_cost_usd,
        price=parse_price(options.price_per_mtok) if options.price_per_mtok else None,
    )
    preflight.check_tracker(options.track)
    if options.evolve_environments:
        native_documents(benchmark)  # refused before anything is written
        if not 0.0 <= options.evolve_threshold <= 1.0:  # NaN too
            raise HarnessEvolveError(
                f"--evolve-threshold must be in [0, 1], not {options.evolve_threshold}",
                field="--evolve-threshold",
                hint="e.g. 0.75",
            )
    preflight.check_state_dir(harness_dir)
    if options.train_every:
        from harnessevolve.pipeline.training import base_model_for, check_training_available

        check_training_available()
        if options.train_base_model is None:
            base_model_for(options.model or seed_harness.model)
    setup = ScorerSetup.from_options(asdict(options))
    executor = setup.make_executor(benchmark, options.model or seed_harness.model)
    return CheckedRun(
        options, harness_dir, seed_harness, benchmark, references, gates, proposer, setup, executor, priced
    )


def start_run(options: RunOptions, hooks: RunHooks, *, resume: str | None = None) -> RunResult:
    """Validate everything, then run (or resume ``resume``: its own recorded options are used).
    Bad input raises before anything is written."""
    if resume is not None:
        return resume_run(Path(options.harness_dir), resume, hooks)
    return new_run(options, hooks)


def new_run(options: RunOptions, hooks: RunHooks) -> RunResult:
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
                sandbox=executor.sandbox.name if executor.sandbox else checked.setup.sandbox,
            )
        )
        warning = missing_references_warning(checked.benchmark, checked.references)
        if warning:
            hooks.log(f"warning: {warning}")
        outcome = run_generations(checked, run_id, run_dir.root, repo, ledger, hooks)
    finally:
        if tracker is not None:
            tracker.close()
        lock.release()
    return RunResult(outcome.state, run_dir.root, outcome.stopped, outcome.usage, outcome.net)


def resume_run(harness_dir: Path, run: str, hooks: RunHooks) -> RunResult:
    """Pick the killed run ``run`` up: its recorded options, what git holds of its last generation
    reconciled with its ledger (``resume.reconcile``), ``run_resumed``, then the rest of its generations."""
    harness_dir = harness_dir.resolve()
    run_dir = _find_run(harness_dir, run)
    events, started = load_run_for_resume(run_dir.root)
    preflight.check_resume_belongs(run_dir.root, started, harness_dir)
    checked = check_run(RunOptions.from_json({**started["options"], "harness_dir": str(harness_dir)}))
    options, run_id = checked.options, run_dir.root.name
    lock = HarnessLock(harness_dir)
    lock.acquire(run_id)
    tracker = None
    try:
        repo = HarnessRepo(harness_dir)
        tracker = make_tracker(options.track, harness_dir, run_dir=run_dir.root)
        ledger = Ledger(run_dir.ledger, [tracker.on_event])
        recovered = reconcile(repo, ledger, run_id, events)
        events = load_run_for_resume(run_dir.root)[0]
        point = resume_point(events, checked.benchmark, run_id, options.epoch_patience, options.generations)
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
            f"no price data for {name}: charging --price-per-mtok {checked.options.price_per_mtok} USD/Mtok"
        )


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
