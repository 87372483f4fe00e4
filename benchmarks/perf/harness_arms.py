"""Shared by the measurement scripts in benchmarks/perf/ that run arms themselves (vs_gepa.py,
component_ablation.py, local_pool_speed.py, evolve_env.py): make a harness from the
template, run harnessevolve on it while counting rollouts, and score any harness on a benchmark
split with the same agent loop and checkers the pipeline uses (``scoring.scorer.Scorer``).

Efficacy figures are made by ``harnessevolve compare`` (efficacy.py wraps it; issue 56). What
duplicated the package is the package's now: ``copy_harness`` is ``compare/gepa_cell.py``'s. The rest
stays here because compare has no counterpart these scripts could call: its cells take a whole plan
(``compare/arms.py``'s scorer is built from the plan's execution options, ``compare/evolve_cell.py``
runs an arm of a plan and reads back its cell's numbers), while these scripts score one harness on a
few tasks, time a model pool, or need a run's validation curve and rollouts-to-best
(``EvolveOutcome``), which compare's result files do not keep.

Not part of the package: a script imports it with ``sys.path`` pointing at this folder.
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harnessevolve.compare.gepa_cell import copy_harness as copy_harness  # re-exported: the package's
from harnessevolve.core.tasks import Benchmark, Task
from harnessevolve.harness.model import Harness
from harnessevolve.pipeline.run import start_run
from harnessevolve.pipeline.state import RunHooks
from harnessevolve.runs import events as ev
from harnessevolve.runs.run_config import ExecutionConfig, RunConfig
from harnessevolve.runs.rundir import RunDir
from harnessevolve.scoring.build import build_scorer
from harnessevolve.scoring.references import load_references
from harnessevolve.scoring.scorer import Scorer, TaskResult

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "harnessevolve.cli"]


def add_arm_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of the runs a measurement script makes, per arm: seeds, benchmark, generations,
    minibatch size and agent model."""
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--benchmark", default="shell-onecall")
    parser.add_argument("--generations", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument(
        "--model", default=None, help="agent model (default: the harness's, the embedded one)"
    )


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    """The options every harnessevolve arm of a measurement script takes."""
    add_arm_arguments(parser)
    parser.add_argument(
        "--gates", type=Path, default=None, help="gate thresholds YAML (default: gates/default.yaml)"
    )
    parser.add_argument(
        "--smoke",
        action="store_true",
        help=f"1 seed, 1 generation, minibatch 2, model {SMOKE_MODEL}: it runs, its figures mean nothing",
    )


SMOKE_MODEL = "scripted/policy:learner"
"""A shipped dry-run agent (``harnessevolve.models.policy``): no model file, no network."""


def smoke_arguments(args: argparse.Namespace) -> None:
    """``--smoke`` given: the smallest run of the options ``add_run_arguments`` added."""
    if args.smoke:
        args.seeds, args.generations, args.batch_size, args.model = 1, 1, 2, SMOKE_MODEL


def init_harness(dest: Path) -> Path:
    """``harnessevolve init DEST``: the seed harness (the template) in its own git repository."""
    subprocess.run([*CLI, "init", str(dest)], check=True, cwd=ROOT, capture_output=True)
    return dest


class ProgressLine:
    """An ``on_progress`` hook that prints one line every ``every`` rollouts (label, count, rate)."""

    def __init__(self, name: str, every: int = 25) -> None:
        self.name, self.every, self.done = name, every, 0
        self.started = time.monotonic()

    def __call__(self, label: str, _total: int) -> Callable[[], None]:
        def advance() -> None:
            self.done += 1
            if self.done % self.every == 0:
                elapsed = time.monotonic() - self.started
                print(
                    f"    {self.name}: {self.done} rollouts in {elapsed / 60:.1f} min "
                    f"({elapsed / self.done:.1f} s each; now {label})",
                    flush=True,
                )

        return advance


def set_local_threads(threads: int) -> None:
    """CPU threads of the embedded model (llama.cpp) in this process. The package fixes 2; on a
    busy machine 1 is far faster (2 threads spin-wait on each other when the cores are shared)."""
    from dataclasses import replace

    from harnessevolve.models.registry import litellm_module

    litellm = litellm_module()
    for entry in litellm.custom_provider_map:
        if entry.get("provider") == "local" and hasattr(entry["custom_handler"], "config"):
            handler = entry["custom_handler"]
            handler.config = replace(handler.config, n_threads=threads)


def make_scorer(
    benchmark: Benchmark,
    model: str,
    *,
    seed: int = 0,
    on_progress: Callable[[str, int], Callable[[], None]] | None = None,
    concurrency: int | None = None,
) -> Scorer:
    """The pipeline's scorer (execute + evaluate, memoised per harness content and task), with the
    executor and concurrency ``harnessevolve run`` would use for ``model`` (or ``concurrency``
    rollouts at once); saves nothing."""
    return build_scorer(
        ExecutionConfig(concurrency=concurrency),
        benchmark=benchmark,
        model=model,
        default_model=model,
        seed=seed,
        references=load_references(benchmark),
        on_progress=on_progress,
    )


def score_split(scorer: Scorer, harness: Harness, tasks: Sequence[Task], label: str) -> list[TaskResult]:
    return asyncio.run(scorer.score(harness, tasks, label))


class RolloutCounter:
    """``RunHooks`` that count every rollout a run makes (the scorer calls ``advance`` once per new
    rollout, never for memoised ones) and note the count when a candidate is accepted."""

    def __init__(
        self,
        log: Callable[[str], None] = lambda _m: None,
        progress: Callable[[str, int], Callable[[], None]] | None = None,
    ) -> None:
        self.progress = progress
        self.rollouts = 0
        self.at_acceptance: dict[int, int] = {}
        self._log = log

    def on_progress(self, label: str, total: int) -> Callable[[], None]:
        inner = self.progress(label, total) if self.progress else None

        def advance() -> None:
            self.rollouts += 1
            if inner is not None:
                inner()

        return advance

    def log(self, message: str) -> None:
        if message.startswith("gen ") and ": accepted " in message:
            self.at_acceptance[int(message[4:].split(":", 1)[0])] = self.rollouts
        self._log(message)

    def hooks(self) -> RunHooks:
        return RunHooks(on_progress=self.on_progress, log=self.log)


@dataclass(frozen=True)
class EvolveOutcome:
    """One ``harnessevolve run``, read back from its ledger."""

    run_id: str
    accepted: int
    rollouts: int
    """Every rollout of the run (baseline validation, batches, gates), from ``run_finished``."""
    tokens: int
    run_s: float
    seed_validation: float
    best_validation: float
    """The best snapshot on validation; the run ends with it as the current harness."""
    rollouts_to_best: int
    """Rollouts spent when the best snapshot's validation score was first reached (an earlier
    accepted snapshot with the same score counts)."""
    validation_curve: tuple[tuple[int, float], ...] = ()
    """(rollouts spent, validation score) of the seed and of each accepted candidate, in order."""


def evolve(
    harness_dir: Path,
    *,
    benchmark: str,
    generations: int,
    batch_size: int,
    seed: int,
    model: str | None = None,
    gates: Path | None = None,
    log: Callable[[str], None] = lambda _m: None,
    progress: Callable[[str, int], Callable[[], None]] | None = None,
    proposers: tuple[str, ...] = ("auto",),
    optimizer_model: str | None = None,
    max_proposer_tokens: int | None = None,
) -> EvolveOutcome:
    """``harnessevolve run`` with its defaults (proposers ``auto``: ablate, demo, rules offline)."""
    options = RunConfig.from_flat(
        {
            "harness_dir": harness_dir,
            "benchmark": benchmark,
            "generations": generations,
            "model": model,
            "batch_size": batch_size,
            "seed": seed,
            "gates_file": gates,
            "proposers": proposers,
            "optimizer_model": optimizer_model,
            "max_proposer_tokens": max_proposer_tokens,
            # Every arm pays for its rollouts: no persistent cache (a fresh harness has none anyway).
            "cache": False,
        }
    )
    counter = RolloutCounter(log, progress)
    started = time.monotonic()
    state, _ = start_run(options, counter.hooks())
    run_s = time.monotonic() - started
    run = RunDir.find(state.run_id, harness_dir).load()
    finished, baseline = run.last(ev.RunFinished), run.first(ev.Baseline)
    assert finished is not None and baseline is not None
    rollouts, tokens = int(finished.rollouts or 0), int(finished.tokens or 0)
    seed_validation = float(baseline.score)
    validation_tasks = int(baseline.tasks)
    accepted_val = {
        int(record.generation): float(record.validation)
        for record in run.all(ev.GenerationFinished)
        if record.outcome == "accepted" and record.validation is not None
    }
    by_sha = {record.sha: int(record.generation) for record in run.all(ev.CandidateAccepted)}
    epoch = run.last(ev.EpochFinished)
    best_generation = by_sha.get(epoch.best) if epoch else None
    best = (
        seed_validation
        if best_generation is None or epoch is None
        else accepted_val.get(best_generation, float(epoch.best_validation))
    )
    curve = ((validation_tasks, seed_validation),) + tuple(
        (counter.at_acceptance.get(g, rollouts), v) for g, v in sorted(accepted_val.items())
    )
    to_best = rollouts_to_reach(curve, best)
    return EvolveOutcome(
        run_id=state.run_id,
        accepted=len(state.accepted),
        rollouts=rollouts,
        tokens=tokens,
        run_s=run_s,
        seed_validation=seed_validation,
        best_validation=best,
        rollouts_to_best=to_best if to_best is not None else rollouts,
        validation_curve=curve,
    )


def evolve_arm(harness_dir: Path, args: argparse.Namespace, seed: int, **more: Any) -> EvolveOutcome:
    """``evolve`` with the options ``add_run_arguments`` parsed into ``args`` (``more``: its others)."""
    return evolve(
        harness_dir,
        benchmark=args.benchmark,
        generations=args.generations,
        batch_size=args.batch_size,
        seed=seed,
        model=args.model,
        gates=args.gates,
        **more,
    )


def unevolved_row(validation: float, test: float, started: float) -> dict[str, Any]:
    """The results-table row of a seed harness scored since ``started`` (``time.monotonic()``):
    nothing spent on evolving it."""
    return {
        "rollouts": 0,
        "tokens": 0,
        "wall_min": (time.monotonic() - started) / 60,
        "validation": validation,
        "test": test,
        "to_best": 0,
    }


def rollouts_to_reach(curve: Sequence[tuple[int, float]], target: float) -> int | None:
    """The rollouts spent when a (rollouts, score) curve first scored ``target`` or more; None if never."""
    return next((n for n, score in curve if score >= target - 1e-9), None)
