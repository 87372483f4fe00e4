"""The sealed test split: scored only here (``harnessevolve report --final``), once per call, and
every evaluation is written to the run's ledger."""

from __future__ import annotations

import asyncio
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harnessevolve.adapters import load_benchmark_spec
from harnessevolve.core.errors import HarnessEvolveError
from harnessevolve.gate.performance import mean
from harnessevolve.harness.git import HarnessRepo
from harnessevolve.harness.load import load_harness
from harnessevolve.pipeline.references import load_references
from harnessevolve.pipeline.rollout_cache import RolloutCache
from harnessevolve.pipeline.run import RunHooks
from harnessevolve.pipeline.scorer_setup import ScorerSetup
from harnessevolve.runs import events as ev
from harnessevolve.runs.events import TestEvaluated
from harnessevolve.runs.ledger import Ledger, read_ledger
from harnessevolve.runs.rundir import STATE_DIR
from harnessevolve.runs.tempdirs import run_tempdir


@dataclass(frozen=True)
class RunRecord:
    run_id: str
    root: Path
    events: list[dict[str, Any]]

    def first(self, event: str) -> dict[str, Any] | None:
        return next((e for e in self.events if e["event"] == event), None)

    def last(self, event: str) -> dict[str, Any] | None:
        return next((e for e in reversed(self.events) if e["event"] == event), None)

    def all(self, event: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e["event"] == event]


def find_run(harness_dir: Path, run_id: str | None) -> RunRecord:
    runs = harness_dir / STATE_DIR / "runs"
    candidates = sorted(p for p in runs.glob("*") if (p / "ledger.jsonl").is_file()) if runs.is_dir() else []
    if run_id:  # an id, or a unique prefix of one
        candidates = [p for p in candidates if p.name == run_id] or [
            p for p in candidates if p.name.startswith(run_id)
        ]
        if len(candidates) > 1:
            raise HarnessEvolveError(
                f"run id prefix {run_id!r} matches {len(candidates)} runs",
                file=str(runs),
                field="--run",
                hint="give more of the id: " + ", ".join(p.name for p in candidates[:4]),
            )
    if not candidates:
        raise HarnessEvolveError(
            f"no run {run_id!r}" if run_id else "this harness has no runs yet",
            file=str(runs),
            field="--run",
            hint="start one with `harnessevolve run`",
        )
    root = candidates[-1]
    return RunRecord(root.name, root, read_ledger(root / "ledger.jsonl"))


def score_test_split(
    harness_dir: Path, run: RunRecord, *, model: str | None, seed: int, hooks: RunHooks
) -> dict:
    """Score the run's seed revision and its final revision on the test split; log it in the ledger."""
    started, finished = run.first(ev.RunStarted.NAME), run.last(ev.RunFinished.NAME)
    if started is None or finished is None:
        raise HarnessEvolveError(
            "the run has not finished",
            file=str(run.root / "ledger.jsonl"),
            hint="resume or wait for it first",
        )
    repo = HarnessRepo(harness_dir)
    options = started.get("options", {})
    benchmark = load_benchmark_spec(
        options.get("benchmark") or started["benchmark"], tuple(options.get("adapters", ()))
    )
    tests = benchmark.split("test")
    revisions = {"seed": started["rev"], "evolved": finished["rev"]}
    scores: dict[str, float] = {}
    # every temp folder in one per-process folder: a killed report leaves nothing for long
    with run_tempdir(f"final-{run.root.name}"), tempfile.TemporaryDirectory(prefix="he-final-") as tmp:
        harnesses = {k: load_harness(repo.export(rev, Path(tmp) / k)) for k, rev in revisions.items()}
        agent_model = model or options.get("model") or harnesses["seed"].model
        # the run's own executor, sandbox, limits and concurrency (run_started.options)
        scorer = ScorerSetup.from_options(options).build(
            benchmark=benchmark,
            model=agent_model,
            default_model=agent_model,
            seed=seed,
            references=load_references(benchmark),
            out_dir=run.root / "final",
            on_progress=hooks.on_progress,
            cache=RolloutCache(harness_dir / STATE_DIR / "cache" / "rollouts")
            if options.get("cache", True)
            else None,
        )

        async def score_both() -> None:
            for name, harness in harnesses.items():
                results = await scorer.score(harness, tests, f"test split: {name} harness")
                scores[name] = mean([r.score for r in results])

        asyncio.run(score_both())
    ledger = Ledger(run.root / "ledger.jsonl")
    record = ledger.append(
        TestEvaluated(split="test", tasks=len(tests), revisions=revisions, scores=scores, model=agent_model)
    )
    ledger.close()
    return record
