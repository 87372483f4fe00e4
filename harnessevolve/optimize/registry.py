"""Proposers by name (``--proposer demo,rules``); a list is tried in order, first proposal wins.

``auto`` is ``llm`` (when an optimizer model is given), then ``ablate``, ``behaviour``, ``tools``,
``loop``, ``memory``, ``world_model``, ``demo``, ``rules``. The ablation proposer only speaks on
evidence that a component hurts (a demonstration copied into other tasks' failed runs, a prompt near
the size cap, a skill no passed run uses), so removing a harmful part comes before adding anything.
Then the edits that change behaviour, chosen from the diagnosis: ``behaviour`` (offline operators
for failure patterns read from the trajectories: a repeated call, no submit, the wrong thing
submitted, an unknown tool, malformed calls; they patch agent code, set loop settings or sharpen
tool definitions), ``tools`` (missing_argument / wrong_tool clusters), ``loop`` (step_limit
clusters), ``memory`` (experience-memory entries from the batch's train runs, only where the harness
turns memory on) and ``world_model`` (the world-model text from the largest forecast mismatches).
Each returns None when its evidence is absent or the harness does not let it edit what it needs
(agent code, ``harness.yaml``, ``tools/*.yaml``), so the prompt proposers ``demo`` and ``rules``
come last -- until gates turn down the earlier ones' candidates: a proposer with more refused
candidates since its last accepted one is asked after those with fewer (``ChainProposer``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from harnessevolve.core.errors import HarnessEvolveError
from harnessevolve.optimize.ablation import AblationProposer
from harnessevolve.optimize.behaviour_proposer import BehaviourProposer
from harnessevolve.optimize.llm_proposer import LLMProposer
from harnessevolve.optimize.memory_proposer import MemoryProposer
from harnessevolve.optimize.patch_proposer import PatchProposer
from harnessevolve.optimize.proposal import Candidate, ProposalContext, ProposalFailed, Proposer
from harnessevolve.optimize.reference_diff import DemoProposer, RuleProposer
from harnessevolve.optimize.rule_proposer import SmallModelRuleProposer
from harnessevolve.optimize.settings_proposers import LoopSettingsProposer, ToolSpecProposer
from harnessevolve.optimize.world_model_proposer import WorldModelProposer

PROPOSERS: dict[str, Callable[[], Proposer]] = {
    "ablate": AblationProposer,
    "behaviour": BehaviourProposer,
    "demo": DemoProposer,
    "rules": RuleProposer,
    "tools": ToolSpecProposer,
    "loop": LoopSettingsProposer,
    "memory": MemoryProposer,
    "world_model": WorldModelProposer,
}
DEFAULT_PROPOSERS = ("ablate", "behaviour", "tools", "loop", "memory", "world_model", "demo", "rules")
MODEL_PROPOSERS: dict[str, Callable[[str], Proposer]] = {
    "llm": LLMProposer,
    "llm-rule": SmallModelRuleProposer,
    "llm-patch": PatchProposer,
}
"""Proposers that need ``--optimizer-model``: ``llm`` (edit operations, a capable model),
``llm-rule`` (one general rule per failed run, a small model such as local/qwen2.5-coder-1.5b) and
``llm-patch`` (one small unified diff per cluster on one editable file -- agent code first -- a
small model too; malformed diffs go back to it with the error)."""


class ChainProposer:
    """Asks each proposer in turn; the first that has something new wins. The turn order is the
    chain's, except that a proposer whose candidates gates turned down in this run goes behind those
    with fewer such strikes since their last accepted candidate (``ProposalContext.strikes``), so a
    failing operator cannot take every generation while the others are never heard: adaptive
    operator selection, the order kept among equals."""

    def __init__(self, proposers: Sequence[Proposer]) -> None:
        self.proposers = list(proposers)
        self.name = "+".join(p.name for p in self.proposers)
        self.failures: list[ProposalFailed] = []
        """The failed attempts of the last ``propose`` or ``revise`` call."""

    async def propose(self, context: ProposalContext) -> Candidate | None:
        self.failures = []
        for proposer in self.in_turn(context.strikes):
            try:
                candidate = await proposer.propose(context)
            except ProposalFailed as failed:
                self.failures.append(failed)
                continue
            if candidate is not None:
                return candidate
        return None

    def in_turn(self, strikes: Mapping[str, int]) -> list[Proposer]:
        """The proposers in the order they are asked: fewest strikes first, the chain's order kept
        among equals."""
        return sorted(self.proposers, key=lambda p: strikes.get(p.name, 0))

    async def revise(self, context: ProposalContext, candidate: Candidate, reason: str) -> Candidate:
        """The proposer that made ``candidate`` revises it; its failure is also kept in ``failures``."""
        self.failures = []
        owner = next((p for p in self.proposers if p.name == candidate.proposer), None)
        try:
            if owner is None:
                raise ProposalFailed(
                    candidate.proposer,
                    [f"cannot revise: {candidate.proposer!r} is not in the chain"],
                )
            return await owner.revise(context, candidate, reason)
        except ProposalFailed as failed:
            self.failures.append(failed)
            raise


def resolved_names(names: Sequence[str], optimizer_model: str | None = None) -> list[str]:
    """The proposer chain ``names`` means: ``auto`` (or nothing) is ``llm`` when an optimizer model
    is given, then the deterministic ones."""
    if list(names) in ([], ["auto"]):
        return (["llm"] if optimizer_model else []) + list(DEFAULT_PROPOSERS)
    return list(names)


def make_proposer(
    names: Sequence[str],
    optimizer_model: str | None = None,
    extra: Mapping[str, Callable[[], Proposer]] | None = None,
) -> ChainProposer:
    """``auto`` means ``llm`` first when an optimizer model is given, then the deterministic ones.
    ``extra``: proposers the pipeline makes (``agent``, the optimizer agent, which runs through
    execute/ and so cannot live here), by name; each factory is called only when named."""
    extra = extra or {}
    names = resolved_names(names, optimizer_model)
    unknown = [n for n in names if n not in PROPOSERS and n not in MODEL_PROPOSERS and n not in extra]
    if unknown:
        raise HarnessEvolveError(
            f"unknown proposer {unknown[0]!r}",
            field="--proposer",
            hint=f"choose from: auto, {', '.join([*MODEL_PROPOSERS, *extra, *PROPOSERS])}",
        )
    needs_model = next((n for n in names if n in MODEL_PROPOSERS), None)
    if needs_model and not optimizer_model:
        raise HarnessEvolveError(
            f"the {needs_model} proposer needs a model",
            field="--proposer",
            hint="pass --optimizer-model (any litellm model)",
        )
    chain: list[Proposer] = [
        extra[n]()
        if n in extra
        else MODEL_PROPOSERS[n](optimizer_model)
        if n in MODEL_PROPOSERS and optimizer_model
        else PROPOSERS[n]()
        for n in names
    ]
    return ChainProposer(chain)
