"""The generation loop: execute -> evaluate -> optimize -> gate, every event in the ledger.

Each generation samples a train minibatch, scores the current harness on it, clusters the
failures, asks the proposer for K candidate edits (``trials.py``: each screened by the quality
gate with up to T_rev revisions, all judged at once by the performance and held-out gates) and
commits the best one that passed every gate. With one candidate, a rejected edit is committed
and reverted so the history shows it; with several, the others are recorded in the ledger and
in ``candidates/``. The batch sampling, the pick among judged candidates, the stop and the
epoch's snapshot choice are the run's ``LoopPolicies`` (``policies.py``). The test split is never
touched here. A killed run resumes from its ledger
and git (``resume.py``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from harnessevolve.core.enums import Stage, StopReason
from harnessevolve.core.errors import ModelError
from harnessevolve.core.signals import Cause
from harnessevolve.core.tasks import Benchmark, Task
from harnessevolve.core.trailers import trailer_map
from harnessevolve.evaluate.clustering import cluster_signals
from harnessevolve.gate.config import GateConfig
from harnessevolve.gate.performance import accepted_on_tie, mean
from harnessevolve.harness.git import HarnessRepo
from harnessevolve.harness.load import load_harness
from harnessevolve.harness.model import Harness
from harnessevolve.judging.edit_firing import WATCH_FILE, FiringRecorder
from harnessevolve.judging.judge import CandidateJudge
from harnessevolve.judging.trials import TrialRunner
from harnessevolve.models.budget import BudgetGuard, spending
from harnessevolve.models.usage import UsageMeter
from harnessevolve.optimize.proposal import ProposalContext, ProposerChain
from harnessevolve.pipeline.epochs import EpochClock, Snapshot, SnapshotPool
from harnessevolve.pipeline.evolve_env import EnvironmentEvolver
from harnessevolve.pipeline.history import RunHistory
from harnessevolve.pipeline.policies import LoopPolicies, sample_batch
from harnessevolve.pipeline.preflight import smoke_seed
from harnessevolve.pipeline.resume import ResumePoint
from harnessevolve.pipeline.state import GenerationRow, RunState
from harnessevolve.proposing.context import build_context
from harnessevolve.runs.events import (
    AgentModelChanged,
    Baseline,
    BatchEvaluated,
    CandidateAccepted,
    ClusterSummary,
    EpochFinished,
    EpochRestoring,
    GateVerdictRecord,
    GenerationFinished,
    GenerationStarted,
    NoProposal,
)
from harnessevolve.runs.ledger import Ledger
from harnessevolve.runs.outcome import Outcome
from harnessevolve.runs.run_config import RunConfig
from harnessevolve.scoring.scorer import Scorer, TaskResult, mean_score

__all__ = ["GenerationLoop", "LoopParts", "refuse_if_model_unusable", "sample_batch"]

NOT_HARNESS = (Cause.MODEL_ERROR, Cause.SETUP_ERROR)


def refuse_if_model_unusable(results: list[TaskResult], model: str) -> None:
    """Every rollout failed in the model call (no key, unknown model, no network): stop with that
    error instead of evolving a harness against an outage."""
    if not results or any(r.trajectory.extra.get("stop_reason") != StopReason.MODEL_ERROR for r in results):
        return
    errors = [s.extra["error"] for s in results[0].trajectory.steps if s.extra.get("error")]
    raise ModelError(
        f"every rollout failed calling {model}: {errors[-1] if errors else 'model_error'}"[:400],
        field="--model",
        hint="check the model name and its API key (e.g. OPENAI_API_KEY) or use local/smollm2-135m",
    )


@dataclass(frozen=True)
class LoopParts:
    """What one run's loop works on and writes to."""

    harness_dir: Path
    repo: HarnessRepo
    benchmark: Benchmark
    scorer: Scorer
    proposer: ProposerChain
    gates: GateConfig
    ledger: Ledger
    run_dir: Path
    state: RunState


class GenerationLoop:
    """The generations of one run: ``parts`` are what it works on, ``config`` what it was asked
    to do (the loop, training and evolve sections are read here), ``policies`` the seams for batch
    sampling, acceptance, stopping and the epoch's snapshot choice (``policies.py``)."""

    def __init__(
        self,
        parts: LoopParts,
        config: RunConfig,
        policies: LoopPolicies,
        *,
        guard: BudgetGuard | None = None,
        meter: UsageMeter | None = None,
        log: Callable[[str], None] = lambda _m: None,
    ) -> None:
        self.harness_dir = parts.harness_dir
        self.repo = parts.repo
        self.benchmark = parts.benchmark
        self.scorer = parts.scorer
        self.proposer = parts.proposer
        self.gates = parts.gates
        self.ledger = parts.ledger
        self.run_dir = parts.run_dir
        self.state = parts.state
        self.config = config
        self.policies = policies
        self.seed = config.scoring.seed
        self.judging = CandidateJudge(
            benchmark=self.benchmark, scorer=self.scorer, gates=self.gates, ledger=self.ledger, seed=self.seed
        )
        self.trials = TrialRunner(
            judge=self.judging,
            proposer=self.proposer,
            ledger=self.ledger,
            candidates=config.loop.candidates,
            max_revisions=config.loop.max_revisions,
            log=log,
            on_duplicate=lambda proposer: self.history.outcome(proposer, False),
        )
        self.guard = guard
        self.meter = meter
        self.epochs = EpochClock(config.loop.epoch_patience)
        self.log = log
        self.batches: list[list[Task]] = []
        self.evolver: EnvironmentEvolver | None = None
        """Set by ``run --evolve-environments``: harder train tasks once the current ones are mastered."""
        self.history = RunHistory(
            harness_dir=self.harness_dir,
            repo=self.repo,
            ledger=self.ledger,
            run_dir=self.run_dir,
            state=self.state,
        )
        self.firing = FiringRecorder(self.ledger, self.repo, self.run_dir / WATCH_FILE)
        """Whether each accepted edit shows in later trajectories (``edit_fired`` events, commit notes)."""

    async def run(self, resume: ResumePoint | None = None) -> RunState:
        """Every generation until the stop condition holds (from ``resume``'s point when given)."""
        current = load_harness(self.harness_dir)
        validation = self.benchmark.split("validation")
        self.state.stage = Stage.BASELINE
        with spending(Stage.BASELINE):
            if resume is None:
                await smoke_seed(self.scorer, current, validation)  # a broken seed is named as such
            val_current = await self.scorer.score(current, validation, "validation: seed harness")
        if resume is None or not resume.baseline_done:
            refuse_if_model_unusable(val_current, self.scorer.model_for(current))
            self.ledger.append(
                Baseline(
                    split="validation",
                    rev=self.repo.head(),
                    harness_hash=current.content_hash(),
                    score=round(mean([r.score for r in val_current]), 4),
                    tasks=len(validation),
                )
            )
            pool = SnapshotPool(
                [Snapshot(self.repo.head(), current.content_hash(), mean_score(val_current), 0)]
            )
            first = 1
        else:
            pool = SnapshotPool(list(resume.snapshots))
            self.state.rows = list(resume.rows)
            self.state.accepted = list(resume.accepted)
            self.state.reverted = list(resume.reverted)
            self.batches = [list(b) for b in resume.batches]
            if self.evolver is not None:  # batches that held generated tasks, whole again
                self.batches = self.evolver.rebuild_batches(self.benchmark.tasks, len(self.batches))
            self.history.rejected = list(resume.rejected)
            self.history.outcomes = list(resume.outcomes)
            self.trials.rejected = dict(resume.rejected_states)
            self.firing.keep(self.state.accepted)
            self.epochs = resume.epochs
            first = resume.next_generation
            self.state.generation = first - 1  # an epoch end redone here belongs to that generation
            if resume.epoch_end_pending is not None:
                current, val_current = await self.end_epoch(
                    pool, current, val_current, validation, resume.epoch_end_pending
                )
        generation = first - 1
        while not self.policies.stop.done(generation):
            generation += 1
            self.check_budget()
            self.state.generation = generation
            accepted_before = len(self.state.accepted)
            current, val_current = await self.generation(generation, current, val_current)
            accepted = len(self.state.accepted) > accepted_before
            if accepted:
                pool.add(
                    Snapshot(self.repo.head(), current.content_hash(), mean_score(val_current), generation)
                )
            ended_epoch = self.epochs.epoch
            last = self.policies.stop.done(generation)
            if self.epochs.tick(accepted) or last:
                current, val_current = await self.end_epoch(
                    pool, current, val_current, validation, ended_epoch
                )
            train_every = self.config.training.train_every
            if train_every and generation % train_every == 0 and not last:
                val_current, pool = await self.train_policy(current, val_current, validation, pool)
        self.firing.finished()
        self.state.stage = Stage.FINISHED
        return self.state

    async def train_policy(
        self,
        current: Harness,
        val_current: list[TaskResult],
        validation: tuple[Task, ...],
        pool: SnapshotPool,
    ) -> tuple[list[TaskResult], SnapshotPool]:
        """The trainer stage: fine-tune the agent model on the run so far; a new checkpoint becomes
        the agent model, so the current harness is scored again and the snapshot pool restarts from
        it (scores under different models do not compare)."""
        from harnessevolve.pipeline.training import train_generation

        self.check_budget()
        outcome = await asyncio.to_thread(
            train_generation,
            self.run_dir,
            self.state,
            agent_model=self.scorer.model_for(current),
            ledger=self.ledger,
            base_model=self.config.training.train_base_model,
        )
        if not outcome.trained:
            return val_current, pool
        self.judging.repeated.set_model(outcome.model)
        with spending(Stage.TRAIN_EVAL):
            val_current = await self.scorer.score(current, validation, "validation: trained model")
        self.ledger.append(
            AgentModelChanged(
                generation=self.state.generation,
                model=outcome.model,
                validation=round(mean_score(val_current), 4),
            )
        )
        self.log(f"gen {self.state.generation}: agent model is now {outcome.model}")
        snapshot = Snapshot(
            self.repo.head(), current.content_hash(), mean_score(val_current), self.state.generation
        )
        return val_current, SnapshotPool([snapshot])

    async def end_epoch(
        self,
        pool: SnapshotPool,
        current: Harness,
        val_current: list[TaskResult],
        validation: tuple[Task, ...],
        epoch: int,
    ) -> tuple[Harness, list[TaskResult]]:
        """The best snapshot on validation becomes current (a restoring commit when it is not)."""
        self.state.stage = Stage.EPOCH_END
        best = self.policies.selector.select(pool)
        restored = self.restored_at_head(best.sha, epoch)  # a resumed epoch end whose restore was made
        if restored is not None:
            current = load_harness(self.harness_dir)
            with spending(Stage.EPOCH_END):
                val_current = await self.scorer.score(current, validation, "validation: restored snapshot")
        elif best.harness_hash != current.content_hash() and best.validation > mean_score(val_current):
            self.ledger.append(
                EpochRestoring(
                    epoch=epoch, generation=self.state.generation, best=best.sha, rev=self.repo.head()
                )
            )
            restored = self.repo.restore(
                best.sha,
                f"harnessevolve: restore snapshot {best.sha[:8]} at the end of epoch {epoch}\n\n"
                f"Its validation score {best.validation:.3f} beats the current "
                f"{mean_score(val_current):.3f}.\n\n"
                f"Restores: {best.sha}\nRun: {self.state.run_id}\nEpoch: {epoch}\n",
            )
            current = load_harness(self.harness_dir)
            with spending(Stage.EPOCH_END):
                val_current = await self.scorer.score(current, validation, "validation: restored snapshot")
        self.ledger.append(
            EpochFinished(
                epoch=epoch,
                generation=self.state.generation,
                best=best.sha,
                best_validation=round(best.validation, 4),
                snapshots=len(pool.snapshots),
                restored=restored,
                rev=self.repo.head(),
            )
        )
        return current, val_current

    def restored_at_head(self, best: str, epoch: int) -> str | None:
        """HEAD, when it is this run's restoring commit of ``best`` at the end of ``epoch`` (a kill
        came between the commit and ``epoch_finished``: the resumed epoch end finishes it)."""
        tags = trailer_map(self.repo.message())
        if (tags.get("Restores"), tags.get("Run"), tags.get("Epoch")) == (
            best,
            self.state.run_id,
            str(epoch),
        ):
            return self.repo.head()
        return None

    async def generation(
        self, generation: int, current: Harness, val_current: list[TaskResult]
    ) -> tuple[Harness, list[TaskResult]]:
        row = GenerationRow(generation, validation=mean([r.score for r in val_current]))
        self.state.rows.append(row)
        self.ledger.append(GenerationStarted(generation=generation, rev=self.repo.head()))
        batch = self.policies.sampler.sample(
            self.benchmark.split("train"), self.config.loop.batch_size, generation
        )
        if self.evolver is not None:
            batch = self.evolver.compose(batch, generation)
        self.state.stage = Stage.EXECUTE
        with spending(Stage.EXECUTE):
            results = await self.scorer.score(current, batch, f"gen {generation}: run current harness")
        row.train_current = mean([r.score for r in results])
        self.firing.observed(generation, results)
        # Provider and setup failures say nothing about the harness: no edit is aimed at them.
        failed = [
            r for r in results if not r.passed and r.signal is not None and r.signal.cause not in NOT_HARNESS
        ]
        self.state.stage = Stage.EVALUATE
        clusters = cluster_signals(r.signal for r in failed if r.signal is not None)
        self.ledger.append(
            BatchEvaluated(
                generation=generation,
                harness_hash=current.content_hash(),
                tasks=[t.id for t in batch],
                score=round(row.train_current, 4),
                failed=len(failed),
                clusters=[ClusterSummary.from_json(c.to_dict()) for c in clusters],
            )
        )
        if self.evolver is not None:
            with spending(Stage.EVOLVE):
                await self.evolver.observe(generation, current, batch, results)
        previous = (
            self.batches[-self.gates.performance.recent_batches :][::-1]
            if self.gates.performance.recent_batches
            else []
        )
        self.batches.append(batch)
        if not clusters:
            return self.finish_generation(row, "no failures to learn from", current, val_current)
        self.check_budget()
        self.state.stage = Stage.OPTIMIZE
        trials = await self.trials.propose(
            generation, lambda avoid: self.context(current, clusters, batch, results, avoid)
        )
        if not trials:
            self.ledger.append(NoProposal(generation=generation, proposer=self.proposer.name))
            return self.finish_generation(row, "proposer had nothing new", current, val_current)
        self.check_budget()
        self.state.stage = Stage.GATE
        await self.trials.judge_all(generation, current, trials, batch, previous)
        winner = self.policies.acceptance.pick(trials)
        shown = winner or max(trials, key=lambda t: (len(t.judgement.verdicts), -t.index))
        row.summary = shown.candidate.summary
        row.verdicts = dict(shown.judgement.table)
        row.train_candidate = shown.judgement.train_candidate
        states = {t.index: self.trials.remember_rejected(generation, t) for t in trials if t is not winner}
        for trial in trials:
            if trial is not winner and (len(trials) > 1 or trial.revisions):
                self.history.record_rejected(generation, trial, len(trials), states[trial.index])
        if winner is not None:
            c = winner.candidate
            self.firing.pending(generation, current, c.changes, c.summary, c.target_tasks, results)
            tie = accepted_on_tie(winner.judgement.verdicts)
            outcome = Outcome.kept(tie=tie, of=len(trials))
            sha = self.history.commit(winner, generation, len(trials), outcome)
            self.state.accepted.append(sha)
            self.history.outcome(c.proposer, True)
            self.firing.accepted(generation, sha)
            row.candidate, row.outcome = sha[:8], outcome.text()
            self.ledger.append(
                CandidateAccepted(
                    generation=generation,
                    sha=sha,
                    candidate=winner.index + 1,
                    of=len(trials),
                    revisions=winner.revisions,
                    harness_hash=winner.judgement.harness.content_hash()
                    if winner.judgement.harness
                    else None,
                    validation=round(winner.judgement.validation_score, 4),
                    verdicts=[GateVerdictRecord.from_json(v.to_dict()) for v in winner.judgement.verdicts],
                    tie=tie or None,
                )
            )
            self.log(
                f"gen {generation}: accepted {sha[:8]}{' on a tie' if tie else ''} {winner.candidate.summary}"
            )
            assert winner.judgement.harness is not None
            current, val_current = winner.judgement.harness, winner.judgement.validation
        else:
            failed_gate = shown.judgement.failed
            assert failed_gate is not None
            refused = Outcome.refused(failed_gate.gate, of=len(trials))
            row.outcome = refused.text()
            if len(trials) == 1:
                # History keeps the rejected edit: its commit, then a revert naming the gate.
                sha = self.history.commit(shown, generation, 1, refused)
                row.candidate = sha[:8]
                self.history.revert(sha, generation, failed_gate, shown.candidate, states[shown.index])
            self.log(
                f"gen {generation}: rejected {shown.candidate.summary!r} "
                f"({failed_gate.gate}: {failed_gate.reason})"
            )
        return self.finish_generation(row, row.outcome, current, val_current)

    def finish_generation(
        self, row: GenerationRow, outcome: str, current: Harness, val_current: list[TaskResult]
    ) -> tuple[Harness, list[TaskResult]]:
        row.outcome = outcome
        row.validation = mean([r.score for r in val_current])
        self.ledger.append(
            GenerationFinished(
                generation=row.generation,
                outcome=outcome,
                rev=self.repo.head(),
                validation=round(row.validation, 4),
                summary=row.summary,
                candidate=row.candidate,
                verdicts=row.verdicts,
                train_current=row.train_current,
                train_candidate=row.train_candidate,
                usage=self.meter.snapshot() if self.meter is not None else None,
            )
        )
        return current, val_current

    def check_budget(self) -> None:
        if self.guard is not None:
            self.guard.check()

    def context(
        self,
        current: Harness,
        clusters: list,
        batch: list[Task],
        results: list[TaskResult],
        avoid: tuple[str, ...] = (),
    ) -> ProposalContext:
        return build_context(
            current,
            clusters,
            batch,
            results,
            references=self.scorer.references,
            rejected=tuple(self.history.rejected) + avoid,
            strikes=self.history.strikes(),
            quality=self.gates.quality,
            model=self.scorer.model_for(current),
        )

    def abandon_pending(self, why: str) -> None:
        self.history.abandon_pending(why)
