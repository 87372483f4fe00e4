"""Judging one candidate: the quality gate (with leakage and a smoke run), the performance gate
(fixed or sequential) and the held-out gate, in that order, stopping at the first that fails.

Candidates are judged before anything is committed, in a scratch copy of the harness folder
(``scratch_harness``), so several can be judged at once and a crash mid-judgement leaves the
harness repository untouched."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

from harnessevolve.core.enums import BROKEN_AGENT_STOPS, StopReason
from harnessevolve.core.files import atomic_write_text
from harnessevolve.core.tasks import Benchmark, Task
from harnessevolve.gate.config import GateConfig
from harnessevolve.gate.leakage import aleakage_gate
from harnessevolve.gate.noise import Decision, Pair, decide_pooled, pooled_hopeless
from harnessevolve.gate.performance import (
    heldout_gate,
    mean,
    performance_gate,
    performance_verdict,
    refuse_tie,
)
from harnessevolve.gate.quality import code_gate, quality_gate
from harnessevolve.gate.verdict import GateVerdict
from harnessevolve.harness.load import load_harness
from harnessevolve.harness.model import Harness
from harnessevolve.judging.code_smoke import SandboxedCodeSmoke
from harnessevolve.runs.events import PerformanceIncrement
from harnessevolve.runs.ledger import Ledger
from harnessevolve.scoring.scorer import Scorer, TaskResult
from harnessevolve.scoring.sequential import RepeatedScorer, repetitions, sequential_decision


@contextlib.contextmanager
def scratch_harness(files: dict[str, str], changes: dict[str, str | None]) -> Iterator[Path]:
    """A temporary harness folder holding ``files`` with ``changes`` applied; removed afterwards."""
    root = Path(tempfile.mkdtemp(prefix="he-candidate-"))
    try:
        for rel, text in {**files, **changes}.items():
            if text is None:
                continue
            path = root / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_text(path, text)
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


@dataclass
class Judgement:
    """One candidate's verdicts so far and the numbers the run table shows."""

    verdicts: list[GateVerdict] = field(default_factory=list)
    harness: Harness | None = None
    """The candidate as loaded (set once it passed the quality gate)."""
    validation: list[TaskResult] = field(default_factory=list)
    train_candidate: float | None = None
    table: dict[str, bool | None] = field(default_factory=dict)
    """quality / performance / heldout -> passed (None: not reached), for the run table."""

    @property
    def passed(self) -> bool:
        return all(v.passed for v in self.verdicts) and dict.get(self.table, "heldout") is True

    @property
    def screened(self) -> bool:
        """Passed the quality gate, leakage and the smoke run."""
        return self.harness is not None

    @property
    def failed(self) -> GateVerdict | None:
        return next((v for v in self.verdicts if not v.passed), None)

    @property
    def validation_score(self) -> float:
        return mean([r.score for r in self.validation]) if self.validation else 0.0


class CandidateJudge:
    def __init__(
        self,
        *,
        benchmark: Benchmark,
        scorer: Scorer,
        gates: GateConfig,
        ledger: Ledger | None,
        seed: int,
        heldout_split: str = "validation",
        keep_going: bool = False,
        refuse_ties: bool = True,
    ) -> None:
        """``ledger``: where sequential increments are logged (None: nowhere). ``heldout_split``:
        the held-out gate's tasks (``gate --split test`` looks at the sealed split; a run never
        does). ``keep_going``: after a failed performance gate, still run the held-out gate, so a
        CI report shows every number (a run stops at the first failure and saves the rollouts).
        ``refuse_ties``: a candidate with no gain on its batch and none on the held-out split fails
        the performance gate (``gate.performance.refuse_tie``; ``accept_ties`` in the gates file
        turns it off); ``harnessevolve gate`` passes False (there a neutral change is no regression)."""
        self.benchmark = benchmark
        self.scorer = scorer
        self.repeated = RepeatedScorer(scorer)
        self.gates = gates
        self.ledger = ledger
        self.seed = seed
        self.heldout_split = heldout_split
        self.keep_going = keep_going
        self.refuse_ties = refuse_ties

    async def screen(self, current: Harness, candidate_dir: Path, smoke_task: Task, label: str) -> Judgement:
        """The quality gate: schemas, editable paths, size; then leakage; then a one-task smoke run."""
        judgement = Judgement()
        quality = quality_gate(
            candidate_dir,
            current.files,
            current.editable,
            self.gates.quality,
            model=self.scorer.model_for(current),  # the run's agent model (--model), not the harness's
            tasks=self.benchmark.tasks,
        )
        judgement.verdicts.append(quality)
        judgement.table = {"quality": quality.passed, "performance": None, "heldout": None}
        if not quality.passed:
            return judgement
        code_smoke = SandboxedCodeSmoke(self.scorer.executor.sandbox)
        code = await asyncio.to_thread(code_gate, candidate_dir, current.files, code_smoke)
        if code.numbers["python"]:  # only code edits show this verdict
            judgement.verdicts.append(code)
            judgement.table["quality"] = code.passed
            if not code.passed:
                return judgement
        candidate = load_harness(candidate_dir)
        leakage = await aleakage_gate(
            current.files, candidate.files, self.benchmark.tasks, self.gates.leakage
        )
        judgement.verdicts.append(leakage)
        judgement.table["quality"] = leakage.passed  # the run table folds leakage into quality
        if not leakage.passed:
            return judgement
        smoke = await self.smoke_run(candidate, smoke_task, label)
        judgement.verdicts.append(smoke)
        if not smoke.passed:
            judgement.table["quality"] = False
            return judgement
        judgement.harness = candidate
        return judgement

    async def evaluate(
        self,
        current: Harness,
        judgement: Judgement,
        batch: list[Task],
        previous: list[list[Task]],
        generation: int,
        label: str,
    ) -> Judgement:
        """The performance gate on the batch (and recent batches), then the held-out gate."""
        candidate = judgement.harness
        assert candidate is not None, "evaluate() needs a screened candidate"
        cand = await self.scorer.score(candidate, batch, label)
        judgement.train_candidate = mean([r.score for r in cand])
        recent = []
        for tasks in previous:
            cur_prev = await self.scorer.score(current, tasks, f"{label} (recent batch, current)")
            cand_prev = await self.scorer.score(candidate, tasks, f"{label} (recent batch)")
            recent.append(([r.score for r in cur_prev], [r.score for r in cand_prev]))
        config = self.gates.performance
        if config.mode == "pooled":
            pairs = {
                "recent": [
                    Pair(t.id, a, b)
                    for tasks, (cur, can) in zip(previous, recent, strict=True)
                    for t, a, b in zip(tasks, cur, can, strict=True)
                ]
            }
            return await self.pooled(current, judgement, batch, cand, pairs, label)
        if config.mode == "sequential":
            perf = await self.sequential_performance(
                current, candidate, batch, recent, judgement, generation, label
            )
        else:
            perf = performance_gate(
                [r.score for r in await self.scorer.score(current, batch, label)],
                [r.score for r in cand],
                recent,
                config,
                task_ids=[t.id for t in batch],
            )
        judgement.verdicts.append(perf)
        judgement.table["performance"] = perf.passed
        if not perf.passed and not self.keep_going:
            return judgement
        validation = self.benchmark.split(self.heldout_split)  # type: ignore[arg-type]
        split = self.heldout_split
        val_current = await self.scorer.score(current, validation, f"{label} ({split}, current)")
        val_candidate = await self.scorer.score(candidate, validation, f"{label} ({split})")
        held = heldout_gate(
            [r.score for r in val_current],
            [r.score for r in val_candidate],
            replace(self.gates.heldout, split=split),
            confidence=config.confidence,
            task_ids=[t.id for t in validation],
        )
        judgement.verdicts.append(held)
        judgement.table["heldout"] = held.passed
        if self.refuse_ties:
            refused = refuse_tie(perf, held, config)
            if refused is not perf:
                judgement.verdicts[judgement.verdicts.index(perf)] = refused
                judgement.table["performance"] = False
        judgement.validation = val_candidate
        return judgement

    async def pooled(
        self,
        current: Harness,
        judgement: Judgement,
        batch: list[Task],
        cand: list[TaskResult],
        evidence: dict[str, list[Pair]],
        label: str,
    ) -> Judgement:
        """``performance.mode: pooled``: one sign test over the batch, the recent batches and
        validation (``noise.decide_pooled``). Validation is scored unless no outcome of it could get
        the candidate accepted (then the decision is made without spending its rollouts); the
        held-out verdict reports validation as part of that one decision, not a veto of its own."""
        candidate = judgement.harness
        assert candidate is not None
        config = self.gates.performance
        cur = await self.scorer.score(current, batch, label)
        evidence["batch"] = [Pair(t.id, a.score, b.score) for t, a, b in zip(batch, cur, cand, strict=True)]
        validation = list(self.benchmark.split(self.heldout_split))  # type: ignore[arg-type]
        seen = [p for ps in evidence.values() for p in ps]
        wins, losses = sum(p.sign > 0 for p in seen), sum(p.sign < 0 for p in seen)
        hopeless = pooled_hopeless(wins, losses, len(validation), config)
        split = self.heldout_split
        val_current: list[TaskResult] = []
        val_candidate: list[TaskResult] = []
        stopped = 0
        if validation and (not hopeless or self.keep_going):
            # in slices as wide as the executor runs at once, stopping once no outcome of the rest
            # could get the candidate accepted (the current harness's side is usually memoised)
            width = max(1, int(getattr(self.scorer.executor, "concurrency", 4)))
            pairs: list[Pair] = []
            while len(pairs) < len(validation):
                part = validation[len(pairs) : len(pairs) + width]
                val_current += await self.scorer.score(current, part, f"{label} ({split}, current)")
                val_candidate += await self.scorer.score(candidate, part, f"{label} ({split})")
                scored = zip(validation[: len(val_candidate)], val_current, val_candidate, strict=True)
                pairs = [Pair(t.id, a.score, b.score) for t, a, b in scored]
                wins += sum(p.sign > 0 for p in pairs[-len(part) :])
                losses += sum(p.sign < 0 for p in pairs[-len(part) :])
                unseen = len(validation) - len(pairs)
                if unseen and not self.keep_going and pooled_hopeless(wins, losses, unseen, config):
                    stopped = unseen
                    break
            evidence["validation"] = pairs
        decision = decide_pooled(evidence, config)
        if hopeless and "validation" not in evidence:
            decision = Decision(
                decision.outcome,
                f"{decision.reason}; {split} not scored: no outcome of its {len(validation)} tasks "
                f"could get it accepted",
                {**decision.numbers, "validation_skipped": True},
            )
        elif stopped:
            decision = Decision(
                decision.outcome,
                f"{decision.reason}; {split} stopped after {len(val_candidate)} of {len(validation)} "
                f"tasks: no outcome of the other {stopped} could get it accepted",
                {**decision.numbers, "validation_stopped": {"scored": len(val_candidate), "unseen": stopped}},
            )
            val_candidate = []  # a partial validation score is no validation score (reports, history)
        perf = GateVerdict("performance", decision.accepted, decision.reason, decision.numbers)
        judgement.verdicts.append(perf)
        judgement.table["performance"] = perf.passed
        if val_candidate:
            before = mean([r.score for r in val_current])
            after = mean([r.score for r in val_candidate])
            judgement.verdicts.append(
                GateVerdict(
                    "heldout",
                    decision.accepted,
                    f"{split} {before:.3f} -> {after:.3f} (weighed in the pooled decision)",
                    {
                        "split": split,
                        "current": round(before, 4),
                        "candidate": round(after, 4),
                        "pooled": True,
                    },
                )
            )
            judgement.table["heldout"] = decision.accepted
            judgement.validation = val_candidate
        return judgement

    async def smoke_run(self, candidate: Harness, task: Task, label: str) -> GateVerdict:
        """Part of the quality gate: the candidate runs one task to the end without a provider or
        setup failure (a prompt too long for the model's context shows up here, before a whole batch)."""
        result = (await self.scorer.score(candidate, [task], f"{label} (smoke run)"))[0]
        stop = result.trajectory.extra.get("stop_reason")
        errors = [s.extra["error"] for s in result.trajectory.steps if s.extra.get("error")]
        numbers = {"task": task.id, "stop_reason": stop, "score": result.score}
        if stop in (StopReason.MODEL_ERROR, StopReason.SETUP_ERROR) or stop in BROKEN_AGENT_STOPS:
            why = result.trajectory.extra.get("error") or (errors[-1] if errors else stop)
            return GateVerdict("smoke", False, f"smoke run on {task.id} ended with {stop}: {why}", numbers)
        return GateVerdict("smoke", True, f"smoke run on {task.id} ended with {stop}", numbers)

    async def sequential_performance(
        self,
        current: Harness,
        candidate: Harness,
        batch: list[Task],
        recent: list[tuple[list[float], list[float]]],
        judgement: Judgement,
        generation: int,
        label: str,
    ) -> GateVerdict:
        """Noise-aware mode: paired rollouts fed to the SPRT until it decides. A sampling harness
        repeats the batch; a deterministic one (temperature 0) runs each train task once, batch first."""
        config = self.gates.performance
        if repetitions(current, candidate, config) > 1:
            pool = batch
        else:
            pool = batch + [t for t in self.benchmark.split("train") if t not in batch]
        ledger = self.ledger

        def log_increment(decision: Decision) -> None:
            if ledger is not None:
                ledger.append(PerformanceIncrement(generation=generation, **decision.numbers))

        decision = await sequential_decision(
            self.repeated,
            current,
            candidate,
            pool,
            config,
            seed=self.seed * 100_003 + generation,
            label=label,
            on_increment=log_increment,
        )
        judgement.train_candidate = decision.numbers.get("candidate", judgement.train_candidate)
        return performance_verdict(decision, recent, config)
