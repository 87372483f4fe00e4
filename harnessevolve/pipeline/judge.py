"""Judging one committed candidate: the quality gate (with leakage and a smoke run), the
performance gate (fixed or sequential) and the held-out gate, in that order, stopping at the
first that fails."""

from __future__ import annotations

from pathlib import Path

from harnessevolve.core.tasks import Benchmark, Task
from harnessevolve.gate.config import GateConfig
from harnessevolve.gate.leakage import aleakage_gate
from harnessevolve.gate.performance import heldout_gate, mean, performance_gate, performance_verdict
from harnessevolve.gate.quality import quality_gate
from harnessevolve.gate.verdict import GateVerdict
from harnessevolve.harness.load import load_harness
from harnessevolve.harness.model import Harness
from harnessevolve.pipeline.ledger import Ledger
from harnessevolve.pipeline.scoring import Scorer, TaskResult
from harnessevolve.pipeline.sequential import RepeatedScorer, repetitions, sequential_decision
from harnessevolve.pipeline.state import GenerationRow


class CandidateJudge:
    def __init__(
        self,
        *,
        harness_dir: Path,
        benchmark: Benchmark,
        scorer: Scorer,
        gates: GateConfig,
        ledger: Ledger,
        seed: int,
    ) -> None:
        self.harness_dir = harness_dir
        self.benchmark = benchmark
        self.scorer = scorer
        self.repeated = RepeatedScorer(scorer)
        self.gates = gates
        self.ledger = ledger
        self.seed = seed

    async def judge(
        self, current: Harness, batch: list[Task], previous: list[list[Task]], row: GenerationRow, sha: str
    ) -> tuple[list[GateVerdict], Harness | None, list[TaskResult]]:
        quality = quality_gate(self.harness_dir, current.files, current.editable, self.gates.quality)
        verdicts = [quality]
        row.verdicts = {"quality": quality.passed, "performance": None, "heldout": None}
        if not quality.passed:
            return verdicts, None, []
        candidate = load_harness(self.harness_dir)
        leakage = await aleakage_gate(
            current.files, candidate.files, self.benchmark.tasks, self.gates.leakage
        )
        verdicts.append(leakage)
        row.verdicts["quality"] = leakage.passed  # the run table folds leakage into quality
        if not leakage.passed:
            return verdicts, None, []
        label = f"gen {row.generation}: run candidate {sha[:8]}"
        smoke = await self.smoke_run(candidate, batch[0], label)
        if not smoke.passed:
            verdicts.append(smoke)
            row.verdicts["quality"] = False
            return verdicts, None, []
        cand = await self.scorer.score(candidate, batch, label)
        row.train_candidate = mean([r.score for r in cand])
        recent = []
        for tasks in previous:
            cur_prev = await self.scorer.score(current, tasks, f"{label} (recent batch, current)")
            cand_prev = await self.scorer.score(candidate, tasks, f"{label} (recent batch)")
            recent.append(([r.score for r in cur_prev], [r.score for r in cand_prev]))
        config = self.gates.performance
        if config.mode == "sequential":
            perf = await self.sequential_performance(current, candidate, batch, recent, row, label)
        else:
            perf = performance_gate(
                [r.score for r in await self.scorer.score(current, batch, label)],
                [r.score for r in cand],
                recent,
                config,
                task_ids=[t.id for t in batch],
            )
        verdicts.append(perf)
        row.verdicts["performance"] = perf.passed
        if not perf.passed:
            return verdicts, None, []
        validation = self.benchmark.split("validation")
        val_current = await self.scorer.score(current, validation, f"{label} (validation, current)")
        val_candidate = await self.scorer.score(candidate, validation, f"{label} (validation)")
        held = heldout_gate(
            [r.score for r in val_current],
            [r.score for r in val_candidate],
            self.gates.heldout,
            confidence=config.confidence,
            task_ids=[t.id for t in validation],
        )
        verdicts.append(held)
        row.verdicts["heldout"] = held.passed
        return verdicts, candidate, val_candidate

    async def smoke_run(self, candidate: Harness, task: Task, label: str) -> GateVerdict:
        """Part of the quality gate: the candidate runs one task to the end without a provider or
        setup failure (a prompt too long for the model's context shows up here, before a whole batch)."""
        result = (await self.scorer.score(candidate, [task], f"{label} (smoke run)"))[0]
        stop = result.trajectory.extra.get("stop_reason")
        errors = [s.extra["error"] for s in result.trajectory.steps if s.extra.get("error")]
        numbers = {"task": task.id, "stop_reason": stop, "score": result.score}
        if stop in ("model_error", "setup_error"):
            return GateVerdict(
                "smoke", False, f"smoke run on {task.id} ended with {stop}: {errors[-1]}", numbers
            )
        return GateVerdict("smoke", True, f"smoke run on {task.id} ended with {stop}", numbers)

    async def sequential_performance(
        self,
        current: Harness,
        candidate: Harness,
        batch: list[Task],
        recent: list,
        row: GenerationRow,
        label: str,
    ) -> GateVerdict:
        """Noise-aware mode: paired rollouts fed to the SPRT until it decides. A sampling harness
        repeats the batch; a deterministic one (temperature 0) runs each train task once, batch first."""
        config = self.gates.performance
        if repetitions(current, candidate, config) > 1:
            pool = batch
        else:
            pool = batch + [t for t in self.benchmark.split("train") if t not in batch]
        generation = row.generation
        decision = await sequential_decision(
            self.repeated,
            current,
            candidate,
            pool,
            config,
            seed=self.seed * 100_003 + generation,
            label=label,
            on_increment=lambda d: self.ledger.append(
                "performance_increment", generation=generation, **d.numbers
            ),
        )
        row.train_candidate = decision.numbers.get("candidate", row.train_candidate)
        return performance_verdict(decision, recent, config)
