"""What a proposer reads and what it returns, and the Protocol every proposer follows."""

from __future__ import annotations

from dataclasses import dataclass, field
from fnmatch import fnmatch
from typing import Any, Protocol

from harnessevolve.core.signals import Cluster


@dataclass(frozen=True)
class ReferenceAction:
    tool: str
    arguments: dict[str, Any]
    observation: str


@dataclass(frozen=True)
class ProposalContext:
    """Everything a proposer may use: plain data, no handles on the pipeline."""

    files: dict[str, str]
    """The current harness files, relative path -> text."""
    editable: tuple[str, ...]
    """Glob patterns of the files an edit may touch."""
    system_prompt_path: str
    examples_path: str | None
    clusters: tuple[Cluster, ...]
    """This batch's error clusters, largest and most severe first."""
    instructions: dict[str, str] = field(default_factory=dict)
    """task id -> instruction, for the failed tasks."""
    references: dict[str, tuple[ReferenceAction, ...]] = field(default_factory=dict)
    """task id -> the reference trajectory's actions, for the failed tasks that have one."""
    rejected: tuple[str, ...] = ()
    """Summaries of this run's earlier candidates that a gate rejected (do not propose them again)."""

    def may_edit(self, path: str) -> bool:
        return any(fnmatch(path, pattern) for pattern in self.editable)


@dataclass(frozen=True)
class Candidate:
    """One proposed edit: whole-file replacements, plus the credit assignment behind it."""

    changes: dict[str, str | None]
    """path -> new content (``None`` deletes the file)."""
    summary: str
    rationale: str
    targets: tuple[str, ...]
    """The causes of the clusters it targets."""
    target_tasks: tuple[str, ...]
    proposer: str
    model: str | None = None

    def commit_message(self, *, run_id: str, generation: int) -> str:
        trailers = [
            f"Targets: {', '.join(self.targets)}",
            f"Target-Tasks: {', '.join(self.target_tasks)}",
            f"Proposer: {self.proposer}",
            f"Proposer-Model: {self.model or 'none'}",
            f"Run: {run_id}",
            f"Generation: {generation}",
        ]
        return f"harnessevolve: {self.summary}\n\n{self.rationale}\n\n" + "\n".join(trailers) + "\n"


class ProposalFailed(Exception):
    """A proposer tried and could not produce a valid edit; ``errors`` says why, attempt by attempt."""

    def __init__(self, proposer: str, errors: list[str]) -> None:
        super().__init__(f"{proposer}: {'; '.join(errors) or 'no valid edit'}")
        self.proposer = proposer
        self.errors = errors


class Proposer(Protocol):
    """Turns a batch's error clusters into at most one candidate edit.

    ``propose`` returns ``None`` when it has nothing new to offer (for example every fix it knows
    for these clusters was already tried and rejected). It only changes paths for which
    ``context.may_edit`` is true. It raises ``ProposalFailed`` (never anything else) when it
    tried and failed, so the failure is recorded and the next proposer gets its turn.
    """

    name: str

    async def propose(self, context: ProposalContext) -> Candidate | None: ...
