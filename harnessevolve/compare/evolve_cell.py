"""An evolve cell: ``harnessevolve run`` on the cell's own copy of the seed harness (or of the
arm's ``start`` harness).

The copy is its own git repository under the cell's work folder (never a folder of a repository
around the output folder). A cell whose run was killed is picked up where it stopped: a started,
unfinished run is resumed from its ledger (``run --resume``: git reconciled, the rollout cache
serving every rollout that already ran); a finished run (the kill came while scoring the test
split) is read back as it is; a copy whose run never started is made again.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harnessevolve.compare.arm_spec import Arm
from harnessevolve.compare.plan import Plan
from harnessevolve.harness.git import HarnessRepo, ensure_run_state_ignored
from harnessevolve.harness.load import IGNORED_PARTS
from harnessevolve.pipeline.run import start_run
from harnessevolve.pipeline.state import RunHooks
from harnessevolve.runs import events as ev
from harnessevolve.runs.run_config import RunConfig
from harnessevolve.runs.rundir import RunDir

HARNESS_DIR = "harness"


def run_config(plan: Plan, arm: Arm, seed: int, harness_dir: Path) -> RunConfig:
    """The run an evolve cell makes: the arm's options, the plan's model, benchmark and execution."""
    execution = {
        "executor": plan.execution.executor,
        "sandbox": plan.execution.sandbox,
        "sandbox_limits": plan.execution.sandbox_limits,
        "unsafe_no_sandbox": plan.execution.unsafe_no_sandbox,
        "concurrency": plan.execution.concurrency,
        "sandbox_ro": plan.execution.sandbox_ro,
    }
    return RunConfig.from_flat(
        {
            **arm.run_options,
            **execution,
            "harness_dir": harness_dir,
            "benchmark": plan.benchmark,
            "model": plan.model,
            "seed": seed,
            "cache": True,
        }
    )


def copy_seed(source: Path, dest: Path) -> Path:
    """``source``'s files in ``dest``, committed in a new repository of their own."""
    import git

    shutil.copytree(source, dest, ignore=shutil.ignore_patterns(*IGNORED_PARTS))
    ensure_run_state_ignored(dest)
    git.Repo.init(dest, initial_branch="main")
    HarnessRepo(dest).commit_all("harnessevolve compare: the seed harness\n")
    return dest


def started_run(harness_dir: Path) -> RunDir | None:
    """The run started on this cell's copy (a ledger holding ``run_started``), if any."""
    if not (harness_dir / "harness.yaml").is_file():
        return None
    runs = [r.load() for r in RunDir.of(harness_dir)]
    started = [r for r in runs if r.first(ev.RunStarted) is not None]
    return started[-1] if started else None


def spent(finished: ev.RunFinished, *, resumed: bool) -> int:
    """The rollouts a run used to make its harness (what best-of-k is matched to): those it ran,
    plus those its cache served (``report --final``'s count). A cell's run starts with an empty
    cache, so what a resumed run's cache serves are rollouts its killed attempt ran and counted
    already (the run's counters are kept across kills): they count once, as run."""
    ran, cached = int(finished.rollouts or 0), int(finished.cached_rollouts or 0)
    return ran if resumed else ran + cached


def evolve(
    plan: Plan,
    arm: Arm,
    seed: int,
    work: Path,
    *,
    log: Callable[[str], None],
    progress: Callable[[str, int], Callable[[], None]] | None,
) -> tuple[Path, dict[str, Any]]:
    """Run (or finish) the cell's run; its harness folder and numbers: ``rollouts`` (``spent``:
    what best-of-k is matched to), ``tokens``, ``run_cost_usd`` (the run's model calls, its
    optimizer's included), ``run_id``, ``accepted``, ``resumed`` and the validation scores."""
    harness_dir = work / HARNESS_DIR
    hooks = RunHooks(on_progress=progress, log=log)
    run = started_run(harness_dir)
    resumed = False
    if run is None:
        shutil.rmtree(harness_dir, ignore_errors=True)
        copy_seed(arm.path or plan.harness.path, harness_dir)  # an arm's own start, else the seed
        start_run(run_config(plan, arm, seed, harness_dir), hooks)
    elif run.last(ev.RunFinished) is None:
        log(f"resuming run {run.id} of {arm.name} seed {seed}")
        start_run(run_config(plan, arm, seed, harness_dir), hooks, resume=run.id)
        resumed = True
    run = started_run(harness_dir)
    assert run is not None
    finished = run.last(ev.RunFinished)
    if finished is None:
        raise RuntimeError(f"run {run.id} of cell {arm.name}/seed-{seed} ended without run_finished")
    net = finished.net_change or {}
    resumed = resumed or run.first(ev.RunResumed) is not None
    return harness_dir, {
        "rollouts": spent(finished, resumed=resumed),
        "tokens": int(finished.tokens or 0),
        "run_cost_usd": float(((finished.usage or {}).get("totals") or {}).get("cost_usd") or 0.0),
        "cached_rollouts": int(finished.cached_rollouts or 0),
        "run_id": run.id,
        "accepted": len(finished.accepted),
        "reverted": len(finished.reverted),
        "generations": len(run.all(ev.GenerationFinished)),
        "resumed": resumed,
        "validation_seed": net.get("validation_seed"),
        "validation_final": net.get("validation_final"),
        "stopped": finished.stopped,
    }
