"""What one proposer did in a ``harnessevolve run``, counted from the run's ledger."""

from __future__ import annotations

from pathlib import Path

from harnessevolve.runs import events as ev
from harnessevolve.runs.rundir import RunDir


def proposer_counts(harness_dir: Path, run_id: str, proposer: str) -> dict[str, int]:
    """What ``proposer`` did in a run, from its ledger: candidates it made, how the gates judged
    them (accepted; rejected by quality, of which for leakage; by performance/held-out), and
    replies it refused itself (``proposal_failed`` errors: task-specific, malformed, duplicate)."""
    run = RunDir.find(run_id, harness_dir).load()
    counts = dict.fromkeys(
        ("candidates", "accepted", "rejected_quality", "rejected_leakage", "rejected_other")
        + ("refused_task_specific", "refused_format", "refused_other", "failed_proposals"),
        0,
    )
    accepted = {record.sha for record in run.all(ev.CandidateAccepted)}
    committed_by = {record.sha: record.proposer for record in run.all(ev.CandidateCommitted)}
    for record in run.all(ev.CandidateCommitted):
        if record.proposer == proposer:
            counts["candidates"] += 1
            counts["accepted"] += record.sha in accepted
    for rejected in run.all(ev.CandidateRejected):
        if rejected.proposer != proposer:
            continue
        gate, reason = str(rejected.gate or ""), str(rejected.reason or "")
        failing = [v for v in rejected.verdicts or [] if not v.passed]
        leaked = "leak" in reason.lower() or any("leak" in str(v.reason).lower() for v in failing)
        counts["candidates"] += 1
        counts["rejected_leakage"] += leaked
        screened = gate in ("quality", "leakage", "smoke", "code")
        counts["rejected_quality" if screened else "rejected_other"] += 1
    for reverted in run.all(ev.CandidateReverted):
        if committed_by.get(reverted.sha) == proposer:
            counts["rejected_other"] += 1
    for failed in run.all(ev.ProposalFailed):
        if failed.proposer != proposer:
            continue
        counts["failed_proposals"] += 1
        for error in failed.errors or []:
            key = (
                "refused_task_specific"
                if "task-specific" in error
                else "refused_format"
                if "RULE:" in error or "word" in error
                else "refused_other"
            )
            counts[key] += 1
    return counts
