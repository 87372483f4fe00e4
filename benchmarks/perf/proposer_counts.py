"""What one proposer did in a ``harnessevolve run``, counted from the run's ledger."""

from __future__ import annotations

from pathlib import Path

from harnessevolve.pipeline.final import find_run


def proposer_counts(harness_dir: Path, run_id: str, proposer: str) -> dict[str, int]:
    """What ``proposer`` did in a run, from its ledger: candidates it made, how the gates judged
    them (accepted; rejected by quality, of which for leakage; by performance/held-out), and
    replies it refused itself (``proposal_failed`` errors: task-specific, malformed, duplicate)."""
    run = find_run(harness_dir, run_id)
    counts = dict.fromkeys(
        ("candidates", "accepted", "rejected_quality", "rejected_leakage", "rejected_other")
        + ("refused_task_specific", "refused_format", "refused_other", "failed_proposals"),
        0,
    )
    accepted = {e.get("sha") for e in run.all("candidate_accepted")}
    for event in run.all("candidate_committed"):
        if event.get("proposer") == proposer:
            counts["candidates"] += 1
            counts["accepted"] += event.get("sha") in accepted
    for event in run.all("candidate_rejected"):
        if event.get("proposer") != proposer:
            continue
        gate, reason = str(event.get("gate") or ""), str(event.get("reason") or "")
        screened = [h for h in event.get("history") or [] if not h.get("passed", True)]
        leaked = "leak" in reason.lower() or any("leak" in str(h.get("reason", "")).lower() for h in screened)
        counts["candidates"] += 1
        counts["rejected_leakage"] += leaked
        counts["rejected_quality" if gate in ("quality", "leakage", "smoke") else "rejected_other"] += 1
    for event in run.all("candidate_reverted"):
        if event.get("proposer") == proposer:
            counts["rejected_other"] += 1
    for event in run.all("proposal_failed"):
        if event.get("proposer") != proposer:
            continue
        counts["failed_proposals"] += 1
        for error in event.get("errors") or []:
            key = (
                "refused_task_specific"
                if "task-specific" in error
                else "refused_format"
                if "RULE:" in error or "word" in error
                else "refused_other"
            )
            counts[key] += 1
    return counts
