"""One generation's candidates: K proposals, each screened by the quality gate with up to T_rev
revisions, then judged by the performance and held-out gates -- all K at once.

A trial is one candidate's life within a generation. Proposals are drawn one after the other
(each later proposal is told the earlier ones' summaries, so deterministic proposers offer
something different), then the trials are judged concurrently. A quality-gate rejection
(invalid harness, bloat, leakage, failed smoke run) goes back to the proposer with its written
reason; the revision is screened again, at most ``max_revisions`` times.

A candidate whose harness -- the current files with its changes applied -- is one a gate already
rejected in this run is not judged again: it is a failed proposal naming the earlier rejection (a
revision that comes back to it ends the revisions). Judging it again would pay a validation pass to
learn nothing, or accept a rejected harness on a lucky batch. The rejections carry the harness's
digest in the ledger (``harness_state``), so a resumed run remembers them.
"""

from __future__ import annotations

import asyncio
import hashlib
import textwrap
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from harnessevolve.core.tasks import Task
from harnessevolve.harness.model import Harness
from harnessevolve.judging.judge import CandidateJudge, Judgement, scratch_harness
from harnessevolve.models.budget import spending
from harnessevolve.optimize.proposal import Candidate, ProposalContext, ProposalFailed, ProposerChain
from harnessevolve.runs.events import (
    CandidateProposed,
    CandidateRevised,
    RevisionFailed,
    RevisionLimit,
)
from harnessevolve.runs.events import ProposalFailed as ProposalFailedEvent
from harnessevolve.runs.ledger import Ledger

DUPLICATE = "duplicate:"
"""How a ``proposal_failed`` error for a candidate repeating a refused harness begins (resume reads it)."""


@dataclass
class Trial:
    index: int
    candidate: Candidate
    context: ProposalContext
    judgement: Judgement = field(default_factory=Judgement)
    revisions: int = 0
    history: list[dict[str, Any]] = field(default_factory=list)
    """Each screened version: summary, passed, the failing gate and its reason."""

    @property
    def label(self) -> str:
        return f"candidate {self.index + 1}"

    def record(self) -> dict[str, Any]:
        """What the ledger keeps of a trial that was not kept."""
        failed = self.judgement.failed
        return {
            "candidate": self.index + 1,
            **self.candidate.to_record(),
            "revisions": self.revisions,
            "passed": self.judgement.passed,
            "gate": failed.gate if failed else None,
            "reason": failed.reason if failed else "passed every gate; another candidate scored higher",
            "validation": round(self.judgement.validation_score, 4) if self.judgement.validation else None,
            "train_candidate": self.judgement.train_candidate,
            "verdicts": [v.to_dict() for v in self.judgement.verdicts],
        }


def harness_state(files: Mapping[str, str], changes: Mapping[str, str | None]) -> str:
    """A digest of the harness ``changes`` make of ``files`` (a change to None removes the file)."""
    merged = {**files, **changes}
    digest = hashlib.sha256()
    for path in sorted(p for p, text in merged.items() if text is not None):
        text = merged[path]
        assert text is not None
        for part in (path, text):
            data = part.encode("utf-8", errors="surrogatepass")
            digest.update(len(data).to_bytes(8, "big") + data)
    return digest.hexdigest()


def rejection_note(
    generation: int, candidate: int | None, summary: str, gate: str | None, reason: str
) -> str:
    """How a duplicate names the rejection it repeats."""
    which = (
        f"candidate {candidate} of generation {generation}"
        if candidate
        else f"generation {generation}'s candidate"
    )
    why = textwrap.shorten(reason, 160, placeholder=" …")  # at a word, not mid-word
    return f"{which} ({summary[:80]!r}), rejected by {gate or 'a gate'}: {why}"


def pick_winner(trials: list[Trial]) -> Trial | None:
    """The best trial that passed every gate: highest validation score, then train score, then the
    earliest proposal."""
    passed = [t for t in trials if t.judgement.passed]
    if not passed:
        return None
    return max(
        passed,
        key=lambda t: (t.judgement.validation_score, t.judgement.train_candidate or 0.0, -t.index),
    )


class TrialRunner:
    def __init__(
        self,
        *,
        judge: CandidateJudge,
        proposer: ProposerChain,
        ledger: Ledger,
        candidates: int = 1,
        max_revisions: int = 3,
        log: Callable[[str], None] = lambda _m: None,
        on_duplicate: Callable[[str], None] = lambda _p: None,
    ) -> None:
        self.judge = judge
        self.on_duplicate = on_duplicate
        """Called with the proposer's name when its candidate is a harness a gate already refused
        (the loop counts it as a refusal of that proposer: ``ChainProposer`` asks it after others)."""
        self.proposer = proposer
        self.ledger = ledger
        self.candidates = max(1, candidates)
        self.max_revisions = max(0, max_revisions)
        self.log = log
        self.rejected: dict[str, str] = {}
        """harness_state -> which candidate a gate rejected with it, and why (see the module doc)."""

    def remember_rejected(self, generation: int, trial: Trial) -> str | None:
        """A judged trial a gate refused: the same harness is not judged again in this run. Its
        ``harness_state`` (for the ledger, so a resumed run remembers it too), else None."""
        failed = trial.judgement.failed
        if failed is None:
            return None
        key = harness_state(trial.context.files, trial.candidate.changes)
        note = rejection_note(
            generation, trial.index + 1, trial.candidate.summary, failed.gate, failed.reason
        )
        self.rejected.setdefault(key, note)
        return key

    def already_rejected(self, context: ProposalContext, candidate: Candidate) -> str | None:
        """Why ``candidate`` needs no judging (its harness was rejected before), else None."""
        earlier = self.rejected.get(harness_state(context.files, candidate.changes))
        return f"{DUPLICATE} the same harness as {earlier}; not judged again" if earlier else None

    async def propose(
        self, generation: int, context_for: Callable[[tuple[str, ...]], ProposalContext]
    ) -> list[Trial]:
        trials: list[Trial] = []
        avoid: tuple[str, ...] = ()
        # a duplicate is a refusal of its proposer: the chain then asks the others first, so another
        # proposer may still speak in this generation (once per other proposer at most)
        duplicates_left = len(self.proposer.proposers) - 1
        while len(trials) < self.candidates:
            context = context_for(avoid)
            with spending("optimize", self.proposer.name):
                candidate = await self.proposer.propose(context)
            self._log_failures(generation)
            if candidate is None or any(candidate.changes == t.candidate.changes for t in trials):
                break
            duplicate = self.already_rejected(context, candidate)
            if duplicate is not None:
                proposer = candidate.proposer or self.proposer.name
                self.ledger.append(
                    ProposalFailedEvent(generation=generation, proposer=proposer, errors=[duplicate])
                )
                self.log(f"gen {generation}: {duplicate[:120]}")
                self.on_duplicate(proposer)
                avoid += (candidate.summary,)
                duplicates_left -= 1
                if duplicates_left < 0:
                    break
                continue
            index = len(trials)
            trials.append(Trial(index, candidate, context))
            avoid += (candidate.summary,)
            self.ledger.append(
                CandidateProposed(generation=generation, candidate=index + 1, **candidate.to_record())
            )
        return trials

    async def judge_all(
        self,
        generation: int,
        current: Harness,
        trials: list[Trial],
        batch: list[Task],
        previous: list[list[Task]],
    ) -> None:
        await asyncio.gather(*(self.judge_one(generation, current, t, batch, previous) for t in trials))

    async def judge_one(
        self,
        generation: int,
        current: Harness,
        trial: Trial,
        batch: list[Task],
        previous: list[list[Task]],
    ) -> None:
        label = f"gen {generation}: {trial.label}"
        with spending("gate"):
            while True:
                with scratch_harness(current.files, trial.candidate.changes) as folder:
                    trial.judgement = await self.judge.screen(current, folder, batch[0], label)
                failed = trial.judgement.failed
                trial.history.append(
                    {
                        "summary": trial.candidate.summary,
                        "passed": failed is None,
                        "gate": failed.gate if failed else None,
                        "reason": failed.reason if failed else None,
                    }
                )
                if failed is None or not await self.revise(
                    generation, trial, f"{failed.gate}: {failed.reason}"
                ):
                    break
            if trial.judgement.screened:
                await self.judge.evaluate(current, trial.judgement, batch, previous, generation, label)

    async def revise(self, generation: int, trial: Trial, reason: str) -> bool:
        """Ask the proposer to fix a screened-out candidate; False when there is no revision."""
        if trial.revisions >= self.max_revisions:
            self.ledger.append(
                RevisionLimit(generation=generation, candidate=trial.index + 1, revisions=trial.revisions)
            )
            return False
        try:
            with spending("optimize", self.proposer.name):
                revised = await self.proposer.revise(trial.context, trial.candidate, reason)
        except ProposalFailed as exc:
            self.ledger.append(
                RevisionFailed(
                    generation=generation, candidate=trial.index + 1, proposer=exc.proposer, errors=exc.errors
                )
            )
            return False
        if revised.changes == trial.candidate.changes:
            return False
        duplicate = self.already_rejected(trial.context, revised)
        if duplicate is not None:
            self.ledger.append(
                RevisionFailed(
                    generation=generation,
                    candidate=trial.index + 1,
                    proposer=revised.proposer or self.proposer.name,
                    errors=[duplicate],
                )
            )
            return False
        trial.revisions += 1
        self.ledger.append(
            CandidateRevised(
                generation=generation,
                candidate=trial.index + 1,
                revision=trial.revisions,
                reason=reason,
                rejected_summary=trial.candidate.summary,
                **{k: v for k, v in revised.to_record().items() if k != "revision"},
            )
        )
        self.log(f"gen {generation}: revised {trial.label} after '{reason[:80]}'")
        trial.candidate = revised
        return True

    def _log_failures(self, generation: int) -> None:
        for failed in self.proposer.failures:
            self.ledger.append(
                ProposalFailedEvent(generation=generation, proposer=failed.proposer, errors=failed.errors)
            )
        self.proposer.failures.clear()
