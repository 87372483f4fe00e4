"""The sealed test split: scored only here (``harnessevolve report --final``), once per call, and
every evaluation is written to the run's ledger.

Beside the seed and the evolved harness it scores the **matched-budget control**: the seed's
best-of-k at the rollouts the run spent (``scoring/best_of_k.py``: k = round(B / test tasks),
B = the run's ``rollouts`` + ``cached_rollouts``), as the self-consistency pick (deployable) and
the pass@k oracle (labelled as such), each with a confidence interval. ``--variants N`` also
scores both harnesses on synthesized variants of the test tasks (``judging/heldout_variants.py``).
Rollouts that failed on the machine are scored 0 and counted apart (``infra``).
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path
from typing import Any

from harnessevolve.adapters import load_benchmark_spec
from harnessevolve.core.errors import HarnessEvolveError
from harnessevolve.gate.noise import mean_ci
from harnessevolve.gate.performance import mean
from harnessevolve.harness.git import HarnessRepo
from harnessevolve.harness.load import load_harness
from harnessevolve.judging.heldout_variants import make_test_variants, variant_drop
from harnessevolve.pipeline.state import RunHooks
from harnessevolve.runs.events import RunFinished, RunStarted, TestEvaluated
from harnessevolve.runs.ledger import Ledger
from harnessevolve.runs.run_config import RunConfig
from harnessevolve.runs.rundir import STATE_DIR, RunDir
from harnessevolve.runs.tempdirs import run_tempdir
from harnessevolve.scoring.best_of_k import BestOfK, matched_k, seed_control
from harnessevolve.scoring.build import build_scorer
from harnessevolve.scoring.references import load_references
from harnessevolve.scoring.rollout_cache import RolloutCache

CONFIDENCE = 0.95
"""Level of every interval ``report --final`` shows."""


def control_k(tasks: int, run_rollouts: int | None, given: int | None) -> tuple[int, int | None]:
    """(k, matched_to): ``given`` when set (not matched), else matched to the run's rollouts."""
    if given is not None:
        return given, None
    if run_rollouts is None:
        raise HarnessEvolveError(
            "the run records no rollout count to match the control to",
            field="--control-k",
            hint="give the samples per task by hand with --control-k K (the control is then not matched)",
        )
    return matched_k(run_rollouts, tasks), run_rollouts


def control_numbers(control: BestOfK, evolved: list[float]) -> dict[str, Any]:
    """The control's numbers, and evolved minus the control's pick (per task paired, with its CI)."""
    gain, gain_ci = control.gain_over_sc(evolved)
    return {
        **control.to_dict(),
        "evolved_minus_sc": gain,
        "evolved_minus_sc_ci": list(gain_ci) if gain_ci else None,
    }


def score_test_split(
    harness_dir: Path,
    run: RunDir,
    *,
    model: str | None,
    seed: int,
    hooks: RunHooks,
    control: bool = True,
    control_samples: int | None = None,
    control_temperature: float | None = None,
    variants: int = 0,
) -> dict[str, Any]:
    """Score the run's seed revision and its final revision on the test split, the matched-budget
    control beside them (``control``), and ``variants`` synthesized variants per test task; log
    it all in the ledger and return what was logged."""
    started, finished = run.first(RunStarted), run.last(RunFinished)
    if started is None or finished is None:
        raise HarnessEvolveError(
            "the run has not finished",
            file=str(run.ledger),
            hint="resume or wait for it first",
        )
    repo = HarnessRepo(harness_dir)
    config = RunConfig.from_json(started.options or {})  # what the run was asked to do, typed
    benchmark = load_benchmark_spec(config.benchmark or started.benchmark, config.adapters)
    tests = list(benchmark.split("test"))
    if not tests:
        raise HarnessEvolveError(
            f"benchmark {benchmark.name} has no test split",
            field="--final",
            hint="give tasks `split: test` to score a sealed test split",
        )
    k, matched_to = control_k(len(tests), run.rollouts, control_samples) if control else (0, None)
    revisions = {"seed": started.rev, "evolved": finished.rev}
    doc: dict[str, Any] = {}
    # every temp folder in one per-process folder: a killed report leaves nothing for long
    with run_tempdir(f"final-{run.root.name}"), tempfile.TemporaryDirectory(prefix="he-final-") as tmp:
        harnesses = {k_: load_harness(repo.export(rev, Path(tmp) / k_)) for k_, rev in revisions.items()}
        agent_model = model or config.scoring.model or harnesses["seed"].model
        # the run's own executor, sandbox, limits and concurrency (run_started.options)
        scorer = build_scorer(
            config.execution,
            benchmark=benchmark,
            model=agent_model,
            default_model=agent_model,
            seed=seed,
            references=load_references(benchmark),
            out_dir=run.root / "final",
            on_progress=hooks.on_progress,
            cache=RolloutCache(harness_dir / STATE_DIR / "cache" / "rollouts")
            if config.scoring.cache
            else None,
        )

        async def score_all() -> None:
            results = {
                name: await scorer.score(harness, tests, f"test split: {name} harness")
                for name, harness in harnesses.items()
            }
            per_task = {name: [r.score for r in rs] for name, rs in results.items()}
            doc["scores"] = {name: mean(v) for name, v in per_task.items()}
            doc["intervals"] = {name: list(mean_ci(v, CONFIDENCE) or ()) for name, v in per_task.items()}
            if k:
                best = await seed_control(
                    scorer,
                    harnesses["seed"],
                    tests,
                    results["seed"],
                    k=k,
                    matched_to=matched_to,
                    work_dir=Path(tmp),
                    temperature=control_temperature,
                )
                doc["control"] = control_numbers(best, per_task["evolved"])
            if variants:
                made = await make_test_variants(
                    benchmark,
                    variants,
                    seed=seed,
                    sandbox=scorer.executor.sandbox,
                    folder=run.root / "final" / "variants",
                )
                found: dict[str, Any] = {
                    "per_task": variants,
                    "variants": len(made.tasks),
                    "parents": len(set(made.parents.values())),
                    "makers": made.makers,
                    "skipped": made.skipped,
                }
                if made.tasks:
                    for name, harness in harnesses.items():
                        on_variants = await scorer.score(
                            harness, list(made.tasks), f"test variants: {name} harness"
                        )
                        found[name] = variant_drop(made, results[name], on_variants)
                doc["variants"] = found

        asyncio.run(score_all())
    ledger = Ledger(run.ledger)
    evaluated = TestEvaluated(
        split="test",
        tasks=len(tests),
        revisions=revisions,
        scores=doc["scores"],
        model=agent_model,
        control=doc.get("control"),
        intervals=doc["intervals"],
        variants=doc.get("variants"),
        infra=scorer.infra.to_dict() if scorer.infra.failures or scorer.infra.retried else None,
    )
    ledger.append(evaluated)
    ledger.close()
    return {"event": TestEvaluated.NAME, **evaluated.fields()}
