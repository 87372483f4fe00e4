"""What a run leaves behind for each candidate: commits (and reverts) in the harness repository,
events in the ledger, gate reports and rejected candidates in the run folder.

The order of writes is what makes a crash at any moment recoverable (see ``resume.py``): gate
report and ``gate_verdicts``, then ``committing`` (the paths about to change), then the files and
the commit carrying a ``Verdict:`` trailer, then ``candidate_committed``.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

from harnessevolve.core.errors import HarnessGitError
from harnessevolve.core.files import atomic_write_json
from harnessevolve.core.redact import redact_obj
from harnessevolve.gate.verdict import GateVerdict
from harnessevolve.harness.git import HarnessRepo
from harnessevolve.judging.trials import Trial
from harnessevolve.optimize.edits import write_changes
from harnessevolve.optimize.proposal import Candidate
from harnessevolve.pipeline.state import RunState
from harnessevolve.runs.events import (
    CandidateCommitted,
    CandidateRejected,
    CandidateReverted,
    Committing,
    GateVerdictRecord,
    GateVerdicts,
)
from harnessevolve.runs.files import CANDIDATE_FILE_VERSION, GATE_REPORT_VERSION, versioned
from harnessevolve.runs.ledger import Ledger
from harnessevolve.runs.outcome import Outcome


def proposer_strikes(outcomes: list[tuple[str, bool]]) -> dict[str, int]:
    """proposer -> how many of its candidates were turned down after its last accepted one."""
    strikes: dict[str, int] = {}
    for proposer, accepted in outcomes:
        strikes[proposer] = 0 if accepted else strikes.get(proposer, 0) + 1
    return {name: n for name, n in strikes.items() if n}


def write_candidate(harness_dir: Path, candidate: Candidate) -> None:
    """The candidate's files into the harness; paths leaving it are refused before any write."""
    write_changes(harness_dir, candidate.changes)


class RunHistory:
    def __init__(
        self, *, harness_dir: Path, repo: HarnessRepo, ledger: Ledger, run_dir: Path, state: RunState
    ) -> None:
        self.harness_dir = harness_dir
        self.repo = repo
        self.ledger = ledger
        self.run_dir = run_dir
        self.state = state
        self.rejected: list[str] = []
        """Summaries of candidates a gate turned down (proposers are told not to offer them again)."""
        self.outcomes: list[tuple[str, bool]] = []
        """(proposer, accepted?) of each judged candidate kept or turned down, in order."""

    def outcome(self, proposer: str, accepted: bool) -> None:
        """One judged candidate of ``proposer`` kept (True) or refused by a gate (False)."""
        self.outcomes.append((proposer, accepted))

    def strikes(self) -> dict[str, int]:
        """proposer -> its candidates turned down since its last accepted one (see ``ChainProposer``)."""
        return proposer_strikes(self.outcomes)

    def record_rejected(
        self, generation: int, trial: Trial, of: int, harness_state: str | None = None
    ) -> None:
        """A candidate that was not kept: its record in the ledger, its files in the run folder."""
        path = self.run_dir / "candidates" / f"gen-{generation:03d}-{trial.index + 1}.json"
        atomic_write_json(
            path,
            redact_obj(
                versioned(
                    CANDIDATE_FILE_VERSION,
                    {**trial.record(), "history": trial.history, "changes": trial.candidate.changes},
                )
            ),
        )
        self.rejected.append(trial.candidate.summary)
        if trial.judgement.failed is not None:  # outscored after passing every gate is no refusal
            self.outcome(trial.candidate.proposer, False)
        self.ledger.append(
            CandidateRejected(
                generation=generation,
                of=of,
                file=str(path.relative_to(self.run_dir)),
                harness_state=harness_state,
                **trial.record(),
            )
        )

    def commit(self, trial: Trial, generation: int, of: int, outcome: Outcome) -> str:
        """Commit a judged candidate. The verdict is already known and rides in a trailer, so a run
        resumed after a crash between this commit and the ledger can finish what it started."""
        verdict = outcome.verdict()
        candidate = trial.candidate
        self.state.stage = "commit"
        revisions = f"Revision: {trial.revisions}\n" if trial.revisions != candidate.revision else ""
        message = candidate.commit_message(run_id=self.state.run_id, generation=generation) + (
            f"{revisions}Candidate: {trial.index + 1} of {of}\nVerdict: {verdict}\n"
        )
        self.write_gate_report(generation, trial)
        judged = trial.judgement
        self.ledger.append(
            Committing(
                generation=generation,
                paths=sorted(candidate.changes),
                verdict=verdict,
                summary=candidate.summary,
                harness_hash=judged.harness.content_hash() if judged.harness else None,
                validation=round(judged.validation_score, 4) if judged.validation else None,
            )
        )
        try:
            write_candidate(self.harness_dir, candidate)
            sha = self.repo.commit_all(message)
        except BaseException:
            self.repo.discard_changes()
            raise
        self.state.pending_sha = sha if not outcome.accepted else None
        self.ledger.append(
            CandidateCommitted(
                generation=generation,
                sha=sha,
                **candidate.to_record(),
                candidate=trial.index + 1,
                of=of,
                revisions=trial.revisions,
                verdict=verdict,
            )
        )
        return sha

    def revert(
        self,
        sha: str,
        generation: int,
        verdict: GateVerdict,
        candidate: Candidate | None,
        harness_state: str | None = None,
    ) -> str:
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
            self.outcome(candidate.proposer, False)
        self.ledger.append(
            CandidateReverted(
                generation=generation,
                sha=sha,
                revert_sha=revert_sha,
                gate=verdict.gate,
                reason=verdict.reason,
                numbers=verdict.numbers,
                harness_state=harness_state,
            )
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

    def write_gate_report(self, generation: int, trial: Trial) -> None:
        verdicts = [v.to_dict() for v in trial.judgement.verdicts]
        report: dict[str, Any] = {
            "version": GATE_REPORT_VERSION,
            "generation": generation,
            "candidate": trial.index + 1,
            "summary": trial.candidate.summary,
            "revisions": trial.revisions,
            "history": trial.history,
            "verdicts": verdicts,
        }
        atomic_write_json(self.run_dir / "gates" / f"gen-{generation:03d}.json", redact_obj(report))
        self.ledger.append(
            GateVerdicts(
                generation=generation,
                candidate=trial.index + 1,
                summary=trial.candidate.summary,
                verdicts=[GateVerdictRecord.from_json(v) for v in verdicts],
            )
        )
