"""``--proposer agent``: the optimizer is a coding agent, run like any agent, whose diff is the candidate.

The optimizer is configured by an optimizer folder, itself a harness (``harnesses/optimizer-agent``:
mini-swe-agent by default; any ``agent.kind``; ``--optimizer-agent PATH`` for another). Each
proposal runs it once through the harness's ``AgentRunner`` in the run's sandbox, on a workspace
(``agent_workspace``) holding a writable copy of the harness, the generation's failed
train runs beside their references with their first-divergence signals and clusters, the run's
earlier candidates and a short task statement -- never a validation or test task. Its model calls go
through the runner's recording endpoint to ``--optimizer-model`` (or the optimizer folder's
``model``), are metered under the ``optimizer_agent`` stage and count against the proposer budget
(``--max-proposer-cost-usd``, ``--max-proposer-tokens``) as well as the run's.

Its output is the diff of the harness copy (``agent_diff``): all or nothing, editable paths
only, protected paths verified untouched; a stop for a hang, a loop, an output flood or a spent
budget refuses the proposal. A refusal is a ``ProposalFailed`` with the reason named: the run goes
on (with the next proposer of the chain, or without a candidate this generation). A quality-gate
rejection goes back to the same agent in the same workspace with the gate's reason (``revise``).
Every turn's trajectory is saved in the run folder (``proposer/``); the candidate's commit names it
in a ``Proposer-Trajectory`` trailer.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from harnessevolve.core import atif, paths, planted
from harnessevolve.core.atif import Trajectory
from harnessevolve.core.enums import StopReason
from harnessevolve.core.errors import HarnessEvolveError, TrajectoryError
from harnessevolve.core.tasks import Benchmark, Task
from harnessevolve.execute.runners import runner_for
from harnessevolve.execute.runners.endpoint import budget_check, repeat_limit
from harnessevolve.execute.workspace import create_workspace, remove_workspace
from harnessevolve.gate.config import GateConfig
from harnessevolve.harness.git import HarnessRepo
from harnessevolve.harness.load import load_harness
from harnessevolve.harness.model import Harness
from harnessevolve.models.budget import PROPOSER_STAGE, ProposerBudget, spending
from harnessevolve.models.usage import UsageMeter
from harnessevolve.optimize.proposal import Candidate, ProposalContext, ProposalFailed, ProposerChain
from harnessevolve.proposing.agent_diff import (
    EditRefused,
    check_protected,
    copied_example,
    harness_changes,
    snapshot,
)
from harnessevolve.proposing.agent_history import last_batch, past_candidates
from harnessevolve.proposing.agent_workspace import (
    FEEDBACK_FILE,
    HARNESS_DIR,
    Evidence,
    HeldOut,
    feedback_statement,
    short_instruction,
    workspace_files,
)
from harnessevolve.runs.rundir import RunDir
from harnessevolve.sandbox.base import Sandbox

NAME = "agent"
DEFAULT_OPTIMIZER = "optimizer-agent"
"""The optimizer folder under the built-in ``harnesses/`` used without ``--optimizer-agent``."""
TRAJECTORY_DIR = "proposer"
LOOP_REPEATS = 3
"""The same action this many times in a row is a loop: the endpoint ends the turn there (it used to
run on to the call limit, 25 calls of the same command) and the proposal is refused."""
REFUSED_STOPS: dict[str, str] = {
    StopReason.AGENT_TIMEOUT: "hang",
    StopReason.OUTPUT_FLOOD: "output flood",
    StopReason.BUDGET_EXHAUSTED: "budget",
    StopReason.SETUP_ERROR: "setup failed",
    StopReason.MODEL_ERROR: "model error",
    StopReason.MODEL_REFUSED: "model refused",
    StopReason.BAD_TRAJECTORY: "bad trajectory",
    StopReason.AGENT_CRASHED: "agent crashed",
}
"""Stops whose harness copy is not trusted: the proposal is refused with this name and the error."""
COPY_SEND_BACKS = 1
"""An edit that only adds the optimizer's own example text goes back to the agent this many times
(its harness copy restored first) before the proposal is refused as ``copied``."""


def load_optimizer(path: Path | None) -> Harness:
    """The optimizer folder (``--optimizer-agent``; default the built-in ``optimizer-agent``)."""
    folder = Path(path) if path is not None else paths.builtin_dir("harnesses") / DEFAULT_OPTIMIZER
    if not folder.is_dir():
        raise HarnessEvolveError(
            "no optimizer folder here",
            file=str(folder),
            field="--optimizer-agent",
            hint="pass a harness folder whose agent edits ./harness (see harnesses/optimizer-agent)",
        )
    return load_harness(folder.resolve())


@dataclass(frozen=True)
class AgentRun:
    """What the run lends the agent proposer once it has started (``bind_agent_proposer``)."""

    run_dir: Path
    benchmark: Benchmark
    references: Mapping[str, Trajectory]
    gates: GateConfig
    sandbox: Sandbox | None
    meter: UsageMeter | None
    repo: HarnessRepo | None = None
    run_budget: Callable[[], str | None] | None = None
    """The run's own ``BudgetGuard.exhausted`` (None: no run budget)."""
    seed: int = 0

    @cached_property
    def held_out(self) -> HeldOut:
        """What never reaches the workspace: the benchmark's validation and test tasks."""
        return HeldOut.of(self.benchmark.tasks)


@dataclass
class _Session:
    """One proposal's workspace, kept for its revisions."""

    workspace: Path
    generation: int
    index: int
    turns: int = 0
    candidate: Candidate | None = None
    sent_back: list[str] = field(default_factory=list)
    """The copied lines of the turns sent back for copying the instructions' example."""


@dataclass
class AgentProposer:
    """The ``Proposer`` contract (``optimize.proposal``) with a coding agent behind it."""

    optimizer: Harness
    model: str
    budget: ProposerBudget = field(default_factory=ProposerBudget)
    name: str = NAME
    run: AgentRun | None = None
    sessions: list[_Session] = field(default_factory=list)

    def bind(self, run: AgentRun) -> None:
        self.run = run

    # -- the Proposer protocol ----------------------------------------------------------------
    async def propose(self, context: ProposalContext) -> Candidate | None:
        run = self._bound()
        self._refuse_if_spent(run)
        batch = last_batch(RunDir(run.run_dir).ledger)
        generation = batch.generation if batch is not None else 0
        await self._close_older(generation)
        evidence = self._evidence(run, context, batch.harness_hash if batch else None)
        index = 1 + sum(s.generation == generation for s in self.sessions)
        task = Task(
            id=f"optimizer-gen{generation:03d}-{index}",
            instruction="",
            split="train",
            checks=(),
            setup_files=workspace_files(context, evidence),
        )
        instruction = short_instruction(context, task.setup_files)
        try:
            workspace = await create_workspace(task, sandbox=run.sandbox)
        except Exception as exc:  # noqa: BLE001 - the run goes on without this proposal
            raise ProposalFailed(self.name, [f"setup failed: workspace: {exc}"]) from None
        session = _Session(workspace, generation, index)
        self.sessions.append(session)
        candidate = await self._turn(run, session, context, instruction)
        session.candidate = candidate
        return candidate

    async def revise(self, context: ProposalContext, candidate: Candidate, reason: str) -> Candidate:
        run = self._bound()
        session = next((s for s in self.sessions if s.candidate is candidate), None)
        if session is None:
            raise ProposalFailed(self.name, ["cannot revise: its workspace is gone"])
        self._refuse_if_spent(run)
        revision = candidate.revision + 1
        try:  # renamed into place: a link the agent planted there is replaced, never written through
            planted.write_text(
                session.workspace, FEEDBACK_FILE, run.held_out.scrub(feedback_statement(reason, revision))
            )
        except (planted.PlantedFileError, OSError) as exc:
            raise ProposalFailed(
                self.name, [f"cannot write {FEEDBACK_FILE} in its workspace: {exc}"]
            ) from None
        instruction = (
            f"Your edit of ./harness was rejected: {run.held_out.scrub(reason)[:600]}\n"
            f"Read ./{FEEDBACK_FILE} and ./TASK.md, fix the files under ./harness, then update "
            "./SUMMARY.txt and finish."
        )
        new = await self._turn(run, session, context, instruction)
        revised = candidate.revised(new, reason)
        session.candidate = revised
        return revised

    # -- one agent turn -----------------------------------------------------------------------
    async def _turn(
        self, run: AgentRun, session: _Session, context: ProposalContext, instruction: str
    ) -> Candidate:
        workspace = session.workspace
        session.turns += 1
        before = snapshot(workspace)
        task = Task(
            id=f"optimizer-gen{session.generation:03d}-{session.index}",
            instruction=instruction,
            split="train",
            checks=(),
        )
        runner = runner_for(self.optimizer)

        def exhausted() -> str | None:
            spent = self.budget.exhausted(run.meter) if run.meter is not None else None
            return spent or (run.run_budget() if run.run_budget is not None else None)

        with spending(PROPOSER_STAGE, self.name), budget_check(exhausted), repeat_limit(LOOP_REPEATS):
            trajectory = await runner.run(
                self.optimizer,
                task,
                workspace,
                model=self.model,
                seed=run.seed + 1000 * session.generation + session.index,
                sandbox=run.sandbox,
            )
        saved = self._save(run, session, trajectory)
        stop = str(trajectory.extra.get("stop_reason", ""))
        error = str(trajectory.extra.get("error") or stop)
        try:
            if stop in REFUSED_STOPS:
                raise EditRefused(f"{REFUSED_STOPS[stop]}: {error[:300]}")
            if stop == StopReason.REPEATED:
                raise EditRefused(f"loop: {error[:300]}")
            if stop == StopReason.STEP_LIMIT and repeats(trajectory) >= LOOP_REPEATS:
                raise EditRefused(
                    f"loop: the same action {repeats(trajectory)} times in a row, then {error[:200]}"
                )
            check_protected(workspace, before)
            changes = harness_changes(workspace, context.files, context.editable)
            copied = copied_example(changes, context.files, self.optimizer.files)
            if copied is not None:
                if len(session.sent_back) < COPY_SEND_BACKS:
                    session.sent_back.append(copied)
                    try:
                        _restore(workspace, context.files, changes)
                    except (OSError, planted.PlantedFileError) as exc:
                        raise EditRefused(f"copied: the harness copy could not be restored: {exc}") from None
                    return await self._turn(run, session, context, _copy_instruction(copied))
                raise EditRefused(
                    f"copied: every line the edit adds is the instructions' example ({copied[:120]!r}), "
                    f"{len(session.sent_back)} send-back(s) included"
                )
        except EditRefused as refused:
            raise ProposalFailed(self.name, [f"{refused.reason} (trajectory: {saved})"]) from None
        if not changes:
            raise ProposalFailed(
                self.name, [f"no edit: ./harness is unchanged ({stop}; trajectory: {saved})"]
            )
        calls = len(trajectory.extra.get("model_calls") or [])
        return Candidate(
            changes=changes,
            summary=_summary(workspace, changes),
            rationale=(
                f"The optimizer agent ({self.optimizer.name}, {self.model}) edited the harness copy "
                f"after reading the failed runs beside their references; it stopped with {stop} "
                f"after {calls} model call(s)."
                + (
                    f" Its edit of an earlier turn only copied its instructions' example "
                    f"({session.sent_back[0][:80]!r}) and was sent back."
                    if session.sent_back
                    else ""
                )
            ),
            targets=tuple(str(c.cause) for c in context.clusters[:3]),
            target_tasks=tuple(t for c in context.clusters[:3] for t in c.task_ids)[:10],
            proposer=self.name,
            model=self.model,
            evidence=(f"optimizer trajectory: {saved}",),
            trajectory=saved,
        )

    # -- helpers ------------------------------------------------------------------------------
    def _bound(self) -> AgentRun:
        if self.run is None:
            raise ProposalFailed(self.name, ["the agent proposer runs only inside a run (not bound)"])
        return self.run

    def _refuse_if_spent(self, run: AgentRun) -> None:
        spent = self.budget.exhausted(run.meter) if run.meter is not None else None
        if spent:
            raise ProposalFailed(self.name, [f"budget: {spent}"])

    def _evidence(self, run: AgentRun, context: ProposalContext, harness_hash: str | None) -> Evidence:
        held_out = run.held_out
        failed_ids = [s.task_id for c in context.clusters for s in c.signals if s.task_id not in held_out.ids]
        failed: dict[str, Trajectory] = {}
        for task_id in failed_ids:
            path = run.run_dir / "trajectories" / str(harness_hash) / f"{task_id}.json"
            if harness_hash and path.is_file():
                with contextlib.suppress(TrajectoryError, OSError, ValueError):
                    failed[task_id] = atif.load(path)
        gates = run.gates
        return Evidence(
            failed=failed,
            references={t: run.references[t] for t in failed_ids if t in run.references},
            history=past_candidates(RunDir(run.run_dir).ledger, run.repo, context.files),
            gates=(
                "quality: the harness must load and validate, change only editable paths, not embed "
                f"a held-out task (leakage threshold {gates.leakage.threshold}), and pass a smoke run",
                f"performance: the edited harness must score at least {gates.performance.min_gain:+g} "
                f"better on this batch, and drop at most {gates.performance.max_recent_drop} on the "
                f"{gates.performance.recent_batches} batch(es) before",
                f"held-out: at most {gates.heldout.max_drop} drop on tasks you never see",
            ),
            held_out=held_out,
        )

    def _save(self, run: AgentRun, session: _Session, trajectory: Trajectory) -> str:
        rel = f"{TRAJECTORY_DIR}/gen-{session.generation:03d}-{session.index}-turn-{session.turns}.json"
        atif.save(trajectory, run.run_dir / rel)
        return rel

    async def _close_older(self, generation: int) -> None:
        """A new generation: the workspaces of earlier ones are not revised any more."""
        self.close(before=generation)

    def close(self, before: int | None = None) -> None:
        """Remove the workspaces (of the generations before ``before``; None: all of them)."""
        keep = []
        for session in self.sessions:
            if before is None or session.generation < before:
                remove_workspace(session.workspace)
            else:
                keep.append(session)
        self.sessions = keep


def repeats(trajectory: Trajectory) -> int:
    """The longest run of one identical action (tool and arguments) in a row."""
    best = count = 0
    last = None
    for step in trajectory.agent_steps:
        for call in step.tool_calls:
            key = (call.function_name, json.dumps(call.arguments, sort_keys=True, default=str))
            count = count + 1 if key == last else 1
            last = key
            best = max(best, count)
    return best


def _copy_instruction(copied: str) -> str:
    """The send-back message for an edit that only copied the instructions' example."""
    return (
        f"Your edit only added the example from your instructions ({copied[:160]!r}). That example "
        "shows the form of a command, it is not a fix: ./harness is restored as it was. Read a "
        "failed run's signal.md under ./evidence/failed/ (what the agent did and what the reference "
        "did instead), write a rule or change of your own that would have avoided that failure, "
        "update ./SUMMARY.txt and finish."
    )


def _restore(workspace: Path, original: Mapping[str, str], changes: Mapping[str, str | None]) -> None:
    """Put the harness copy back as it was before the agent's edit (its ``changes`` undone)."""
    root = workspace / HARNESS_DIR
    for rel in changes:  # each write renamed into place; a planted link is replaced, never followed
        if rel in original:
            planted.write_text(root, rel, original[rel])
        else:
            planted.remove(root, rel)


def _summary(workspace: Path, changes: Mapping[str, str | None]) -> str:
    """The first line of the agent's ``SUMMARY.txt``, else the paths it changed."""
    text = ""
    try:
        lines = (
            planted.read_head(workspace, "SUMMARY.txt", 2000).decode(errors="replace").strip().splitlines()
        )
    except planted.PlantedFileError:
        lines = []  # none, or not a plain file: the paths stand in for it
    text = " ".join(lines[0].split())[:150] if lines else ""
    return text or f"optimizer agent edit of {', '.join(sorted(changes))}"[:150]


def bind_agent_proposer(proposers: ProposerChain, run: AgentRun) -> None:
    """Give every agent proposer of the chain the run it works for (a no-op without one)."""
    for proposer in proposers.proposers:
        if isinstance(proposer, AgentProposer):
            proposer.bind(run)


def close_agent_proposer(proposers: ProposerChain) -> None:
    """The run is over: remove every agent proposer's workspaces (a no-op without one)."""
    for proposer in proposers.proposers:
        if isinstance(proposer, AgentProposer):
            proposer.close()


def agent_proposers(
    optimizer_agent: Path | None, optimizer_model: str | None, budget: ProposerBudget
) -> dict[str, Any]:
    """The ``agent`` entry for ``optimize.registry.make_proposer``'s ``extra`` (built only when named)."""
    return {NAME: lambda: make_agent_proposer(optimizer_agent, optimizer_model, budget)}


def make_agent_proposer(
    optimizer_agent: Path | None, optimizer_model: str | None, budget: ProposerBudget
) -> AgentProposer:
    """The ``agent`` proposer, its optimizer folder loaded and checked (bad input raises here,
    before anything is written)."""
    optimizer = load_optimizer(optimizer_agent)
    return AgentProposer(optimizer, optimizer_model or optimizer.model, budget)
