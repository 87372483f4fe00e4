"""``harnessevolve run``: check inputs, take the lock, open the ledger, drive the generation loop."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from harnessevolve.core.errors import HarnessEvolveError, HarnessGitError
from harnessevolve.core.tasks import load_benchmark
from harnessevolve.execute.executor import EXECUTORS
from harnessevolve.gate.config import load_gate_config
from harnessevolve.harness.git import HarnessRepo
from harnessevolve.harness.load import load_harness
from harnessevolve.optimize.registry import make_proposer
from harnessevolve.pipeline.ledger import Ledger
from harnessevolve.pipeline.loop import GenerationLoop
from harnessevolve.pipeline.references import load_references
from harnessevolve.pipeline.refgen import load_regret
from harnessevolve.pipeline.rundir import HarnessLock, RunDir, new_run_id
from harnessevolve.pipeline.scoring import Scorer
from harnessevolve.pipeline.state import RunState


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


@dataclass(frozen=True)
class RunHooks:
    """How the caller watches a run: progress bars and log lines (the CLI passes rich ones)."""

    on_progress: Callable[[str, int], Callable[[], None]] | None = None
    log: Callable[[str], None] = lambda _m: None


def default_concurrency(requested: int | None, model: str) -> int:
    if requested is not None:
        return requested
    return 1 if model.startswith("local/") else 4


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


def start_run(options: RunOptions, hooks: RunHooks) -> tuple[RunState, Path]:
    """Validate everything, then run. Bad input raises before anything is written."""
    harness_dir = Path(options.harness_dir).resolve()
    options = RunOptions(**{**asdict(options), "harness_dir": harness_dir})
    seed_harness = load_harness(harness_dir)
    if options.sampling not in ("uniform", "regret"):
        raise HarnessEvolveError(
            f"unknown sampling {options.sampling!r}", field="--sampling", hint="use uniform or regret"
        )
    benchmark = load_benchmark(options.benchmark)
    references = load_references(benchmark)
    gates = load_gate_config(options.gates_file)
    proposer = make_proposer(options.proposers, options.optimizer_model)
    executor = EXECUTORS[options.executor](
        default_concurrency(options.concurrency, options.model or seed_harness.model)
    )
    run_id = new_run_id()
    lock = HarnessLock(harness_dir)
    lock.acquire(run_id)
    state = RunState(run_id=run_id)
    run_dir = None
    try:
        repo = prepare_repo(options, run_id)
        run_dir = RunDir.create(harness_dir, run_id)
        ledger = Ledger(run_dir.ledger)
        if lock.stale_owner:
            ledger.append("stale_lock_removed", owner=lock.stale_owner)
            hooks.log(f"removed a stale lock left by run {lock.stale_owner.get('run_id')}")
        ledger.append(
            "run_started",
            run_id=run_id,
            harness=str(harness_dir),
            rev=repo.head(),
            benchmark=benchmark.name,
            options={k: str(v) for k, v in asdict(options).items()},
            gates=gates.source,
            references=len(references),
        )
        scorer = Scorer(
            executor,
            model=options.model,
            seed=options.seed,
            references=references,
            out_dir=run_dir.root,
            on_progress=hooks.on_progress,
        )
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
            seed=options.seed,
            log=hooks.log,
        )
        try:
            asyncio.run(loop.run(options.generations))
        except BaseException as exc:
            loop.abandon_pending(f"run stopped ({type(exc).__name__}) before the gates decided")
            ledger.append(
                "run_interrupted" if isinstance(exc, KeyboardInterrupt) else "run_failed",
                generation=state.generation,
                stage=state.stage,
                error=repr(exc)[:500],
                rev=repo.head(),
            )
            raise
        ledger.append(
            "run_finished",
            accepted=state.accepted,
            reverted=state.reverted,
            rev=repo.head(),
            rollouts=loop.judging.repeated.rollouts,
            tokens=loop.judging.repeated.tokens,
        )
        ledger.close()
    finally:
        lock.release()
    return state, run_dir.root
