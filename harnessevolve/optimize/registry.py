"""Proposers by name (``--proposer demo,rules``); a list is tried in order, first proposal wins."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from harnessevolve.core.errors import HarnessEvolveError
from harnessevolve.optimize.proposal import Candidate, ProposalContext, Proposer
from harnessevolve.optimize.reference_diff import DemoProposer, RuleProposer

PROPOSERS: dict[str, Callable[[], Proposer]] = {"demo": DemoProposer, "rules": RuleProposer}
DEFAULT_PROPOSERS = ("demo", "rules")


class ChainProposer:
    """Asks each proposer in turn; the first that has something new wins."""

    def __init__(self, proposers: Sequence[Proposer]) -> None:
        self.proposers = list(proposers)
        self.name = "+".join(p.name for p in self.proposers)

    def propose(self, context: ProposalContext) -> Candidate | None:
        for proposer in self.proposers:
            candidate = proposer.propose(context)
            if candidate is not None:
                return candidate
        return None


def make_proposer(names: Sequence[str]) -> ChainProposer:
    unknown = [n for n in names if n not in PROPOSERS]
    if unknown:
        raise HarnessEvolveError(
            f"unknown proposer {unknown[0]!r}",
            field="--proposer",
            hint=f"choose from: {', '.join(PROPOSERS)}",
        )
    return ChainProposer([PROPOSERS[n]() for n in names])
