"""Proposers by name (``--proposer demo,rules``); a list is tried in order, first proposal wins."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from harnessevolve.core.errors import HarnessEvolveError
from harnessevolve.optimize.llm_proposer import LLMProposer
from harnessevolve.optimize.proposal import Candidate, ProposalContext, ProposalFailed, Proposer
from harnessevolve.optimize.reference_diff import DemoProposer, RuleProposer

PROPOSERS: dict[str, Callable[[], Proposer]] = {"demo": DemoProposer, "rules": RuleProposer}
DEFAULT_PROPOSERS = ("demo", "rules")


class ChainProposer:
    """Asks each proposer in turn; the first that has something new wins."""

    def __init__(self, proposers: Sequence[Proposer]) -> None:
        self.proposers = list(proposers)
        self.name = "+".join(p.name for p in self.proposers)
        self.failures: list[ProposalFailed] = []
        """The failed attempts of the last ``propose`` call."""

    async def propose(self, context: ProposalContext) -> Candidate | None:
        self.failures = []
        for proposer in self.proposers:
            try:
                candidate = await proposer.propose(context)
            except ProposalFailed as failed:
                self.failures.append(failed)
                continue
            if candidate is not None:
                return candidate
        return None


def make_proposer(names: Sequence[str], optimizer_model: str | None = None) -> ChainProposer:
    """``auto`` means ``llm`` first when an optimizer model is given, then the deterministic ones."""
    if list(names) in ([], ["auto"]):
        names = (["llm"] if optimizer_model else []) + list(DEFAULT_PROPOSERS)
    unknown = [n for n in names if n not in PROPOSERS and n != "llm"]
    if unknown:
        raise HarnessEvolveError(
            f"unknown proposer {unknown[0]!r}",
            field="--proposer",
            hint=f"choose from: auto, llm, {', '.join(PROPOSERS)}",
        )
    if "llm" in names and not optimizer_model:
        raise HarnessEvolveError(
            "the llm proposer needs a model",
            field="--proposer",
            hint="pass --optimizer-model (any litellm model)",
        )
    chain: list[Proposer] = [LLMProposer(optimizer_model) if n == "llm" else PROPOSERS[n]() for n in names]
    return ChainProposer(chain)
