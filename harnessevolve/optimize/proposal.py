"""What a proposer reads and what it returns, and the Protocol every proposer follows."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from harnessevolve.core.errors import EditError
from harnessevolve.core.signals import Cluster
from harnessevolve.harness.components import (
    BUILTIN_STEP_LIMIT,
    may_edit_location,
    read_location,
    split_location,
    write_location,
)
from harnessevolve.harness.editable import may_edit, may_edit_section


@dataclass(frozen=True)
class ReferenceAction:
    """One tool call of a run and (the start of) its result: of a reference run, or of this batch's
    failed and passed runs (``ProposalContext.failed_runs`` / ``passed_runs``)."""

    tool: str
    arguments: dict[str, Any]
    observation: str


@dataclass(frozen=True)
class PromptLimits:
    """The quality gate's size caps, passed in so proposers stay clear of them without importing
    gate/. Defaults mirror ``gate.config.QualityConfig``; the pipeline passes the configured ones."""

    max_prompt_chars: int = 16000
    max_prompt_tokens: int = 4000
    max_new_examples: int = 5


@dataclass(frozen=True)
class ProposalContext:
    """Everything a proposer may use: plain data, no handles on the pipeline."""

    files: dict[str, str]
    """The current harness files, relative path -> text."""
    editable: tuple[str, ...]
    """Glob patterns of the files an edit may touch."""
    system_prompt_path: str
    """Where rules go: a harness file, or a key of a YAML file of it (``mini.yaml#agent.system_template``,
    a *location*: ``harness/components.py``); '' when the harness has none. Read and write it with
    ``text_at`` / ``changes_at``."""
    examples_path: str | None
    """Where demonstrations go (a location, like ``system_prompt_path``); None when nowhere."""
    clusters: tuple[Cluster, ...]
    """This batch's error clusters, largest and most severe first."""
    instructions: dict[str, str] = field(default_factory=dict)
    """task id -> instruction, for the failed tasks (and the passed ones, where known)."""
    references: dict[str, tuple[ReferenceAction, ...]] = field(default_factory=dict)
    """task id -> the reference trajectory's actions, for the failed tasks that have one."""
    rejected: tuple[str, ...] = ()
    """Summaries of this run's earlier candidates that a gate rejected (do not propose them again)."""
    failed_runs: dict[str, tuple[ReferenceAction, ...]] = field(default_factory=dict)
    """task id -> the actions of this batch's failed run of it (the ablation proposer looks for
    demonstrations copied into them); without it only each cluster signal's ``actual`` is known."""
    passed_runs: dict[str, tuple[ReferenceAction, ...]] = field(default_factory=dict)
    """task id -> the actions of this batch's passed run of it (evidence of what is used)."""
    limits: PromptLimits = field(default_factory=PromptLimits)
    prompt_chars: int | None = None
    """Size of the current harness's assembled prompt (``Harness.assembled_prompt()``), if measured."""
    prompt_tokens: int | None = None
    """The same in the agent model's tokens, if measured."""
    forecast_misses: dict[str, tuple[dict[str, Any], ...]] = field(default_factory=dict)
    """task id -> the world model's forecasts that did not match in this batch's run of it
    (``extra.world_model.records`` with ``match`` false: tools, expected, observed, share)."""
    splits: dict[str, str] = field(default_factory=dict)
    """task id -> split (train / validation / test) of this batch's tasks: the memory proposer
    reads only train runs."""
    strikes: dict[str, int] = field(default_factory=dict)
    """proposer name -> how many of its candidates a gate turned down in this run since its last
    accepted one (``ChainProposer`` asks the proposers with fewer first)."""
    step_limit_path: str = BUILTIN_STEP_LIMIT
    """The location of the agent's step limit: ``harness.yaml#loop.max_steps`` for the builtin loop and
    command agents, a key of an agent's own config otherwise (``mini.yaml#agent.step_limit``)."""
    templates: bool = False
    """The prompt locations are Jinja templates (mini-swe-agent's): text put in them goes through
    ``components.literal``."""
    task_tools: dict[str, dict[str, Any]] = field(default_factory=dict)
    """tool name -> ``{"description", "parameters"}`` of the tools this batch's tasks bring (a
    harness file ``tools/<name>.yaml`` with no implementation replaces them: ``harness/load.py``)."""
    train_calls: dict[str, tuple[tuple[str, dict[str, Any]], ...]] = field(default_factory=dict)
    """tool name -> (task id, arguments) of each call of it in the references of this batch's train
    tasks (passed and failed): example calls a proposer may show."""

    def editable_files(self, pattern: str) -> list[str]:
        """The harness's files that match the glob ``pattern`` and may change as a whole."""
        from fnmatch import fnmatch

        return [p for p in sorted(self.files) if fnmatch(p, pattern) and self.may_edit(p)]

    def may_edit_at(self, location: str | None) -> bool:
        """The location (a file, or a key of a YAML file) may change."""
        return bool(location) and may_edit_location(location or "", self.editable)

    def text_at(self, location: str | None) -> str:
        """The text at a location ('' when absent or not text)."""
        found = read_location(self.files, location) if location else None
        return found if isinstance(found, str) else ""

    def value_at(self, location: str) -> Any:
        """The value at a location (None when absent)."""
        return read_location(self.files, location)

    def changes_at(self, location: str, value: Any) -> dict[str, str | None] | None:
        """The whole-file change that puts ``value`` at ``location``. A key of a YAML file is written in
        place and the edited harness must still validate (no problem the current one lacks); None
        when it would not, or the location is not editable."""
        if not self.may_edit_at(location):
            return None
        path, keys = split_location(location)
        try:
            new = write_location(self.files, location, value)
        except ValueError:
            return None
        if new == self.files.get(path):
            return None
        if keys:
            from harnessevolve.optimize.edits import harness_problems

            known = {str(p) for p in harness_problems(self.files)}
            if any(str(p) not in known for p in harness_problems({**self.files, path: new})):
                return None
        return {path: new}

    def may_edit(self, path: str, section: str | None = None) -> bool:
        """``path`` may change as a whole, or (``section``) in that top-level YAML section."""
        if section is not None:
            return may_edit_section(path, section, self.editable)
        return may_edit(path, self.editable)

    def apply(self, edits: Sequence[Mapping[str, Any]]) -> dict[str, str | None]:
        """``edits.apply_edits`` on this context's files and editable paths (raises ``EditError``)."""
        from harnessevolve.optimize.edits import apply_edits

        return apply_edits(self.files, edits, self.editable)

    def fresh_changes(self, edits: Sequence[Mapping[str, Any]], summary: str) -> dict[str, str | None] | None:
        """``apply(edits)``, or None when a gate already rejected a candidate of this ``summary`` or
        the edits do not apply (a path not editable, or the harness would not validate)."""
        if summary in self.rejected:
            return None
        try:
            return self.apply(edits)
        except EditError:
            return None

    def targeted_cluster(self, candidate: Candidate) -> Cluster | None:
        """The first of this batch's clusters whose cause ``candidate`` targets; None when none is."""
        return next((c for c in self.clusters if c.cause.value in candidate.targets), None)


@dataclass(frozen=True)
class Candidate:
    """One proposed edit: whole-file replacements, plus the credit assignment behind it."""

    changes: dict[str, str | None]
    """path -> new content (``None`` deletes the file); relative to ``ProposalContext.files``."""
    summary: str
    rationale: str
    targets: tuple[str, ...]
    """The causes (cluster ids) of the clusters it targets."""
    target_tasks: tuple[str, ...]
    proposer: str
    model: str | None = None
    edits: tuple[dict[str, Any], ...] = ()
    """The edit operations (``schemas/edits.schema.json``) that produced ``changes``; empty for a
    proposer that writes whole files."""
    evidence: tuple[str, ...] = ()
    """Observations the edit rests on (one line each), e.g. a demonstration copied into a failed run."""
    revision: int = 0
    """0 for a first proposal; n after n quality-gate rejections answered by ``Proposer.revise``."""
    feedback: tuple[str, ...] = ()
    """The gate reasons the revisions answered, oldest first (``len(feedback) == revision``)."""
    trajectory: str | None = None
    """Where the proposer's own trajectory is saved, relative to the run folder (the optimizer
    agent's, ``--proposer agent``); a ``Proposer-Trajectory`` trailer of the commit names it."""

    def commit_message(self, *, run_id: str, generation: int) -> str:
        trailers = [
            f"Targets: {', '.join(self.targets)}",
            f"Target-Tasks: {', '.join(self.target_tasks)}",
            f"Proposer: {self.proposer}",
            f"Proposer-Model: {self.model or 'none'}",
            f"Run: {run_id}",
            f"Generation: {generation}",
        ]
        if self.edits:
            trailers.append(f"Edit-Ops: {', '.join(e['op'] for e in self.edits)}")
        trailers += [f"Evidence: {' '.join(line.split())}" for line in self.evidence]
        if self.trajectory:
            trailers.append(f"Proposer-Trajectory: {self.trajectory}")
        if self.revision:
            trailers.append(f"Revision: {self.revision}")
            trailers += [f"Revision-Reason: {' '.join(reason.split())}" for reason in self.feedback]
        return f"harnessevolve: {self.summary}\n\n{self.rationale}\n\n" + "\n".join(trailers) + "\n"

    def to_record(self) -> dict[str, Any]:
        """The candidate as a ledger entry's fields (everything but the file contents)."""
        from harnessevolve.optimize.edits import EDITS_VERSION

        return {
            "summary": self.summary,
            "rationale": self.rationale,
            "proposer": self.proposer,
            "model": self.model,
            "targets": list(self.targets),
            "target_tasks": list(self.target_tasks),
            "paths": sorted(self.changes),
            "edits": {"version": EDITS_VERSION, "ops": list(self.edits)} if self.edits else None,
            "evidence": list(self.evidence),
            "revision": self.revision,
            "feedback": list(self.feedback),
        }

    def revised(self, new: Candidate, reason: str) -> Candidate:
        """``new`` as the revision of this candidate that answers ``reason``."""
        return replace(new, revision=self.revision + 1, feedback=(*self.feedback, reason))


def retry_turns(reply: str, request: str) -> list[dict[str, str]]:
    """The two chat turns that show a model its refused ``reply`` and ask again (``request``)."""
    return [{"role": "assistant", "content": reply}, {"role": "user", "content": request}]


class ProposalFailed(Exception):
    """A proposer tried and could not produce a valid edit; ``errors`` says why, attempt by attempt."""

    def __init__(self, proposer: str, errors: list[str]) -> None:
        super().__init__(f"{proposer}: {'; '.join(errors) or 'no valid edit'}")
        self.proposer = proposer
        self.errors = errors


class Proposer(Protocol):
    """Turns a batch's error clusters into at most one candidate edit, and revises it on request.

    ``propose`` returns ``None`` when it has nothing new to offer (for example every fix it knows
    for these clusters was already tried and rejected). It only changes paths for which
    ``context.may_edit`` is true. It raises ``ProposalFailed`` (never anything else) when it
    tried and failed, so the failure is recorded and the next proposer gets its turn.

    ``revise`` answers a quality-gate rejection of ``candidate`` (which this proposer made from the
    same ``context``) whose written reason is ``reason``. It returns a replacement candidate (its
    ``changes`` are relative to ``context.files``, not applied on top of ``candidate``) made with
    ``candidate.revised(new, reason)`` so that ``revision`` and ``feedback`` record the history;
    or raises ``ProposalFailed`` when it cannot answer that reason (never returns None). The
    pipeline calls it at most T_rev times in a row for one generation.

    Optionally, ``reaches(context) -> bool`` says whether the harness lets it edit anything at all
    (asked once, before any rollout, with a context without evidence: see ``reaches`` below) and
    ``parts`` names what it edits; ``run`` refuses a harness that none of its proposers reaches.
    """

    name: str

    async def propose(self, context: ProposalContext) -> Candidate | None: ...

    async def revise(self, context: ProposalContext, candidate: Candidate, reason: str) -> Candidate: ...


class ProposerChain(Proposer, Protocol):
    """What the pipeline drives (``registry.make_proposer``): proposers asked in turn. ``failures``
    holds the ``ProposalFailed`` of the last ``propose`` or ``revise`` call, for the ledger; the
    pipeline clears it once recorded."""

    failures: list[ProposalFailed]
    proposers: list[Proposer]
    """The proposers, in the chain's order (asked fewest refusals first, see ``ChainProposer``)."""


def component_settings(context: ProposalContext, key: str) -> dict[str, Any] | None:
    """The harness's ``key`` section of ``harness.yaml`` (a runtime component, docs/runtime.md)
    when it is present and not turned off; None otherwise, or when harness.yaml does not parse
    (that is the quality gate's to refuse)."""
    from harnessevolve.core.documents import bounded_yaml

    try:
        doc = bounded_yaml(context.files.get("harness.yaml", ""))
    except Exception:  # noqa: BLE001 - an unreadable harness.yaml is the quality gate's to refuse
        return None
    section = doc.get(key) if isinstance(doc, dict) else None
    if not isinstance(section, dict) or section.get("enabled") is False:
        return None
    return section


def anything_editable(context: ProposalContext) -> bool:
    """The harness lets an edit change something: an existing file, or a section of one."""
    return any(context.may_edit(path) for path in context.files) or any(
        "#" in entry and entry.split("#", 1)[0] in context.files for entry in context.editable
    )


def reaches(proposer: Proposer, context: ProposalContext) -> bool:
    """Whether ``proposer`` could edit anything in the harness of ``context`` (a context without
    evidence will do: only its files, ``editable`` and locations are read). A proposer says so with a
    ``reaches(context) -> bool`` method; one that has none (the model proposers, the optimizer
    agent) edits any editable file, so it reaches the harness when anything is editable."""
    check = getattr(proposer, "reaches", None)
    return anything_editable(context) if check is None else bool(check(context))


def reach_parts(proposer: Proposer) -> str:
    """What ``proposer`` edits, in words (its ``parts``; any editable file when it does not say)."""
    return str(getattr(proposer, "parts", "any editable file"))
