"""The generation loop: execute -> evaluate -> optimize -> gate, every event in the ledger.

Each generation samples a train minibatch, scores the current harness on it, clusters the
failures, asks the proposer for one edit, commits it, and lets the quality, performance and
held-out gates keep or revert that commit. The test split is never touched here.
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harnessevolve.core.atif import Trajectory
from harnessevolve.core.errors import HarnessGitError, ModelError
from harnessevolve.core.files import atomic_write_json, atomic_write_text
from harnessevolve.core.signals import Cause
from harnessevolve.core.tasks import Benchmark, Task
from harnessevolve.evaluate.clustering import cluster_signals
from harnessevolve.gate.config import GateConfig
from harnessevolve.gate.performance import mean
from harnessevolve.gate.verdict import GateVerdict
from harnessevolve.harness.git import HarnessRepo
from harnessevolve.harness.load import load_harness
from harnessevolve.harness.model import Harness
from harnessevolve.optimize.proposal import Candidate, ProposalContext, Proposer, ReferenceAction
from harnessevolve.pipeline.epochs import EpochClock, Snapshot, SnapshotPool
from harnessevolve.pipeline.judge import CandidateJudge
from harnessevolve.pipeline.ledger import Ledger
from harnessevolve.pipeline.scoring import Scorer, TaskResult, mean_score
from harnessevolve.pipeline.state import GenerationRow, RunState

NOT_HARNESS = (Cause.MODEL_ERROR, Cause.SETUP_ERROR)


def refuse_if_model_unusable(results: list[TaskResult], model: str) -> None:
    """Every rollout failed in the model call (no key, unknown model, no network): stop with that
    error instead of evolving a harness against an outage."""
    if not results or any(r.trajectory.extra.get("stop_reason") != "model_error" for r in results):
        return
    errors = [s.extra["error"] for s in results[0].trajectory.steps if s.extra.get("error")]
    raise ModelError(
        f"every rollout failed calling {model}: {errors[-1] if errors else 'model_error'}"[:400],
        field="--model",
        hint="check the model name and its API key (e.g. OPENAI_API_KEY) or use local/smollm2-135m",
    )


def sample_batch(
    train: tuple[Task, ...], size: int, seed: int, generation: int, weights: dict[str, float] | None = None
) -> list[Task]:
    """A seeded minibatch; with ``weights`` (task id -> regret), tasks that are solvable but not yet
    solved are drawn more often (weighted sampling without replacement, every task keeps a floor)."""
    rng = random.Random(f"{seed}:{generation}")
    if not weights:
        return rng.sample(list(train), min(size, len(train)))
    keyed = sorted(train, key=lambda t: rng.random() ** (1.0 / (0.1 + max(0.0, weights.get(t.id, 0.0)))))
    return keyed[::-1][: min(size, len(train))]


def reference_actions(reference: Trajectory) -> tuple[ReferenceAction, ...]:
    out = []
    for step in reference.agent_steps:
        observations = {o.source_call_id: o.content for o in step.observations}
        out += [
            ReferenceAction(c.function_name, dict(c.arguments), observations.get(c.tool_call_id, ""))
            for c in step.tool_calls
        ]
    return tuple(out)


def write_candidate(harness_dir: Path, candidate: Candidate) -> None:
    for rel, content in candidate.changes.items():
        path = harness_dir / rel
        if content is None:
            path.unlink(missing_ok=True)
        else:
            atomic_write_text(path, content)


class GenerationLoop:
    def __init__(
        self,
        *,
        harness_dir: Path,
        repo: HarnessRepo,
        benchmark: Benchmark,
        scorer: Scorer,
        proposer: Proposer,
        gates: GateConfig,
        ledger: Ledger,
        run_dir: Path,
        state: RunState,
        batch_size: int,
        weights: dict[str, float] | None = None,
        epoch_patience: int = 10,
        seed: int,
        log: Callable[[str], None] = lambda _m: None,
    ) -> None:
        self.harness_dir = harness_dir
        self.repo = repo
        self.benchmark = benchmark
        self.scorer = scorer
        self.proposer = proposer
        self.gates = gates
        self.ledger = ledger
        self.run_dir = run_dir
        self.state = state
        self.batch_size = batch_size
        self.weights = weights
        self.judging = CandidateJudge(
            harness_dir=harness_dir, benchmark=benchmark, scorer=scorer, gates=gates, ledger=ledger, seed=seed
        )
        self.epochs = EpochClock(epoch_patience)
        self.seed = seed
        self.log = log
        self.batches: list[list[Task]] = []
        self.rejected: list[str] = []

    async def run(self, generations: int) -> RunState:
        current = load_harness(self.harness_dir)
        validation = self.benchmark.split("validation")
        self.state.stage = "baseline"
        val_current = await self.scorer.score(current, validation, "validation: seed harness")
        refuse_if_model_unusable(val_current, self.scorer.model_for(current))
        self.ledger.append(
            "baseline",
            split="validation",
            rev=self.repo.head(),
            harness_hash=current.content_hash(),
            score=round(mean([r.score for r in val_current]), 4),
            tasks=len(validation),
        )
        pool = SnapshotPool([Snapshot(self.repo.head(), current.content_hash(), mean_score(val_current), 0)])
        for generation in range(1, generations + 1):
            self.state.generation = generation
            accepted_before = len(self.state.accepted)
            current, val_current = await self.generation(generation, current, val_current)
            accepted = len(self.state.accepted) > accepted_before
            if accepted:
                pool.add(
                    Snapshot(self.repo.head(), current.content_hash(), mean_score(val_current), generation)
                )
            ended_epoch = self.epochs.epoch
            if self.epochs.tick(accepted) or generation == generations:
                current, val_current = await self.end_epoch(
                    pool, current, val_current, validation, ended_epoch
                )
        self.state.stage = "finished"
        return self.state

    async def end_epoch(
        self,
        pool: SnapshotPool,
        current: Harness,
        val_current: list[TaskResult],
        validation: tuple[Task, ...],
        epoch: int,
    ) -> tuple[Harness, list[TaskResult]]:
        """The best snapshot on validation becomes current (a restoring commit when it is not)."""
        self.state.stage = "epoch_end"
        best = pool.best()
        restored = None
        if best.harness_hash != current.content_hash() and best.validation > mean_score(val_current):
            restored = self.repo.restore(
                best.sha,
                f"harnessevolve: restore snapshot {best.sha[:8]} at the end of epoch {epoch}\n\n"
                f"Its validation score {best.validation:.3f} beats the current "
                f"{mean_score(val_current):.3f}.\n\n"
                f"Restores: {best.sha}\nRun: {self.state.run_id}\n",
            )
            current = load_harness(self.harness_dir)
            val_current = await self.scorer.score(current, validation, "validation: restored snapshot")
        self.ledger.append(
            "epoch_finished",
            epoch=self.epochs.epoch,
            best=best.sha,
            best_validation=round(best.validation, 4),
            snapshots=len(pool.snapshots),
            restored=restored,
            rev=self.repo.head(),
        )
        return current, val_current

    async def generation(
        self, generation: int, current: Harness, val_current: list[TaskResult]
    ) -> tuple[Harness, list[TaskResult]]:
        row = GenerationRow(generation, validation=mean([r.score for r in val_current]))
        self.state.rows.append(row)
        self.ledger.append("generation_started", generation=generation, rev=self.repo.head())
        batch = sample_batch(
            self.benchmark.split("train"), self.batch_size, self.seed, generation, self.weights
        )
        self.state.stage = "execute"
        results = await self.scorer.score(current, batch, f"gen {generation}: run current harness")
        row.train_current = mean([r.score for r in results])
        # Provider and setup failures say nothing about the harness: no edit is aimed at them.
        failed = [
            r for r in results if not r.passed and r.signal is not None and r.signal.cause not in NOT_HARNESS
        ]
        self.state.stage = "evaluate"
        clusters = cluster_signals(r.signal for r in failed)
        self.ledger.append(
            "batch_evaluated",
            generation=generation,
            harness_hash=current.content_hash(),
            tasks=[t.id for t in batch],
            score=round(row.train_current, 4),
            failed=len(failed),
            clusters=[c.to_dict() for c in clusters],
        )
        previous = (
            self.batches[-self.gates.performance.recent_batches :][::-1]
            if self.gates.performance.recent_batches
            else []
        )
        self.batches.append(batch)
        if not clusters:
            row.outcome = "no failures to learn from"
            self.ledger.append("generation_finished", generation=generation, outcome=row.outcome)
            return current, val_current
        self.state.stage = "optimize"
        context = self.context(current, clusters, batch)
        candidate = await self.proposer.propose(context)
        for failed in getattr(self.proposer, "failures", []):
            self.ledger.append(
                "proposal_failed", generation=generation, proposer=failed.proposer, errors=failed.errors
            )
        if candidate is None:
            row.outcome = "proposer had nothing new"
            self.ledger.append("no_proposal", generation=generation, proposer=self.proposer.name)
            self.ledger.append("generation_finished", generation=generation, outcome=row.outcome)
            return current, val_current
        sha = self.commit(candidate, generation)
        row.candidate, row.summary = sha[:8], candidate.summary
        self.state.stage = "gate"
        verdicts, cand_harness, val_candidate = await self.judging.judge(current, batch, previous, row, sha)
        self.write_gate_report(generation, sha, verdicts)
        if all(v.passed for v in verdicts):
            self.state.accepted.append(sha)
            self.state.pending_sha = None
            row.outcome = "accepted"
            self.ledger.append(
                "candidate_accepted", generation=generation, sha=sha, verdicts=[v.to_dict() for v in verdicts]
            )
            self.log(f"gen {generation}: accepted {sha[:8]} {candidate.summary}")
            current, val_current = cand_harness, val_candidate
        else:
            failed_gate = next(v for v in verdicts if not v.passed)
            self.revert(sha, generation, failed_gate, candidate)
            row.outcome = f"reverted by {failed_gate.gate}"
            self.log(f"gen {generation}: reverted {sha[:8]} ({failed_gate.gate}: {failed_gate.reason})")
        row.validation = mean([r.score for r in val_current])
        self.ledger.append(
            "generation_finished",
            generation=generation,
            outcome=row.outcome,
            rev=self.repo.head(),
            validation=round(row.validation, 4),
        )
        return current, val_current

    def context(self, current: Harness, clusters: list, batch: list[Task]) -> ProposalContext:
        failed_ids = {s.task_id for c in clusters for s in c.signals}
        tasks = {t.id: t for t in batch}
        refs = {
            tid: reference_actions(self.scorer.references[tid])
            for tid in failed_ids
            if tid in self.scorer.references
        }
        doc_examples = "prompts/examples.md" if "prompts/examples.md" in current.files else None
        return ProposalContext(
            files=dict(current.files),
            editable=current.editable,
            system_prompt_path=self._system_prompt_path(current),
            examples_path=self._examples_path(current) or doc_examples,
            clusters=tuple(clusters),
            instructions={tid: tasks[tid].instruction for tid in failed_ids},
            references=refs,
            rejected=tuple(self.rejected),
        )

    def _system_prompt_path(self, harness: Harness) -> str:
        import yaml

        return yaml.safe_load(harness.files["harness.yaml"])["system_prompt"]

    def _examples_path(self, harness: Harness) -> str | None:
        import yaml

        return yaml.safe_load(harness.files["harness.yaml"]).get("examples")

    def commit(self, candidate: Candidate, generation: int) -> str:
        self.state.stage = "commit"
        try:
            write_candidate(self.harness_dir, candidate)
            sha = self.repo.commit_all(
                candidate.commit_message(run_id=self.state.run_id, generation=generation)
            )
        except BaseException:
            self.repo.discard_changes()
            raise
        self.state.pending_sha = sha
        self.ledger.append(
            "candidate_committed",
            generation=generation,
            sha=sha,
            summary=candidate.summary,
            proposer=candidate.proposer,
            model=candidate.model,
            targets=list(candidate.targets),
            target_tasks=list(candidate.target_tasks),
            paths=sorted(candidate.changes),
        )
        return sha

    def revert(self, sha: str, generation: int, verdict: GateVerdict, candidate: Candidate | None) -> str:
        numbers = ", ".join(f"{k}={v}" for k, v in verdict.numbers.items() if not isinstance(v, list | dict))
        message = (
            f"harnessevolve: revert {sha[:8]}: rejected by the {verdict.gate} gate\n\n{verdict.reason}\n"
            f"({numbers})\n\nReverts: {sha}\nGate: {verdict.gate}\nRun: {self.state.run_id}\n"
            f"Generation: {generation}\n"
        )
        revert_sha = self.repo.revert(sha, message)
        self.state.reverted.append(sha)
        self.state.pending_sha = None
        if candidate is not None:
            self.rejected.append(candidate.summary)
        self.ledger.append(
            "candidate_reverted",
            generation=generation,
            sha=sha,
            revert_sha=revert_sha,
            gate=verdict.gate,
            reason=verdict.reason,
            numbers=verdict.numbers,
        )
        return revert_sha

    def abandon_pending(self, why: str) -> None:
        """Revert a committed candidate that never got its verdict (interrupt, crash in a gate)."""
        if self.state.pending_sha is None:
            return
        with contextlib.suppress(HarnessGitError):
            self.revert(
                self.state.pending_sha, self.state.generation, GateVerdict("interrupted", False, why), None
            )

    def write_gate_report(self, generation: int, sha: str, verdicts: list[GateVerdict]) -> None:
        report: dict[str, Any] = {
            "generation": generation,
            "sha": sha,
            "verdicts": [v.to_dict() for v in verdicts],
        }
        atomic_write_json(self.run_dir / "gates" / f"gen-{generation:03d}.json", report)
        self.ledger.append(
            "gate_verdicts", generation=generation, sha=sha, verdicts=[v.to_dict() for v in verdicts]
        )
