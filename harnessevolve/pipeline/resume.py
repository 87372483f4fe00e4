"""Resuming a run after a crash or ``kill -9``: reconcile git with the ledger, then rebuild the
loop's state so the run goes on from the first unfinished generation.

What makes this safe:
* candidates are committed only after their gates decided, with the verdict in a ``Verdict:``
  trailer, and the ledger logs ``committing`` before the commit -- so any commit of the
  unfinished generation says what it was meant to be;
* an accepted commit found in git but missing from the ledger is recorded (``recovered``), never
  redone; a rejected commit whose revert never happened is reverted now; nothing is committed
  twice;
* uncommitted files are thrown away only when they are exactly the paths the ledger says the run
  was writing; anything else in the tree stops the resume (it may be the user's work);
* rollouts are served by the persistent cache, so redoing a half-finished generation costs no
  model calls for what was already run.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harnessevolve.core.enums import Verdict
from harnessevolve.core.errors import HarnessEvolveError, HarnessGitError
from harnessevolve.core.tasks import Benchmark, Task
from harnessevolve.core.trailers import trailer_map
from harnessevolve.harness.git import HarnessRepo
from harnessevolve.harness.load import load_harness
from harnessevolve.pipeline.epochs import EpochClock, Snapshot
from harnessevolve.pipeline.recovery import failed_verdict, gate_verdicts, recovered_row, revert_message
from harnessevolve.pipeline.state import GenerationRow
from harnessevolve.runs import events as ev
from harnessevolve.runs.events import (
    CandidateAccepted,
    CandidateCommitted,
    CandidateReverted,
    GenerationFinished,
)
from harnessevolve.runs.ledger import Ledger, read_ledger


@dataclass
class ResumePoint:
    run_id: str
    baseline_done: bool
    next_generation: int
    rows: list[GenerationRow] = field(default_factory=list)
    accepted: list[str] = field(default_factory=list)
    reverted: list[str] = field(default_factory=list)
    batches: list[list[Task]] = field(default_factory=list)
    rejected: list[str] = field(default_factory=list)
    snapshots: list[Snapshot] = field(default_factory=list)
    epochs: EpochClock = field(default_factory=EpochClock)
    epoch_end_pending: int | None = None
    """The epoch whose end (snapshot restore) was interrupted; it is redone first."""
    recovered: list[str] = field(default_factory=list)


def of_generation(events: Sequence[dict[str, Any]], generation: int, name: str) -> list[dict[str, Any]]:
    return [e for e in events if e.get("event") == name and e.get("generation") == generation]


def reconcile(repo: HarnessRepo, ledger: Ledger, run_id: str, events: list[dict[str, Any]]) -> list[str]:
    """Bring git and the ledger into agreement for the generation a crash cut short."""
    done = repo.recover_interrupted()
    leftovers = [p for p in ledger.path.parent.rglob(".*.tmp") if p.is_file() and not p.is_symlink()]
    for path in leftovers:  # atomic writes into the run folder that a kill cut off before the rename
        path.unlink(missing_ok=True)
    if leftovers:
        done.append(f"removed {len(leftovers)} temp file(s) from the run folder")
    started = [e["generation"] for e in events if e.get("event") == ev.GenerationStarted.NAME]
    finished = {e["generation"] for e in events if e.get("event") == GenerationFinished.NAME}
    open_gens = [g for g in started if g not in finished]
    generation = open_gens[-1] if open_gens else None
    writing = {
        _top_relative(repo, p)
        for e in events
        if e.get("event") == ev.Committing.NAME and e.get("generation") == generation
        for p in e.get("paths", [])
    }
    dirty = repo.dirty_paths()
    temps = own_temp_files(dirty, writing)
    for temp in temps:
        (repo.top / temp).unlink(missing_ok=True)
    if temps:
        done.append(f"removed {len(temps)} temp file(s) of an interrupted write ({', '.join(temps[:3])})")
        dirty = [p for p in dirty if p not in temps]
    if dirty:
        if generation is None or not set(dirty) <= writing:
            raise HarnessGitError(
                f"uncommitted changes in the harness that the run did not make ({', '.join(dirty[:3])})",
                file=str(repo.dir),
                hint="commit or stash them, then resume again",
            )
        repo.discard_changes()
        done.append(f"discarded the half-written candidate of generation {generation}")
    if generation is None:
        return done
    head = repo.message()
    tags = trailer_map(head)
    if tags.get("Run") != run_id or tags.get("Generation") != str(generation):
        return done  # nothing of this generation reached git: it is redone from the start
    committed = {e.get("sha") for e in of_generation(events, generation, ev.CandidateCommitted.NAME)}
    sha = repo.head()
    run_dir = ledger.path.parent
    verdicts = gate_verdicts(events, generation, run_dir)
    staged = of_generation(events, generation, ev.Committing.NAME)
    staged_summary = str(staged[-1].get("summary") or "") if staged else ""
    if "Reverts" in tags:
        rejected_sha = tags["Reverts"]
        failed = failed_verdict(verdicts, tags.get("Gate"))
        if not of_generation(events, generation, ev.CandidateReverted.NAME):
            ledger.append(
                CandidateReverted(
                    generation=generation,
                    sha=rejected_sha,
                    revert_sha=sha,
                    gate=tags.get("Gate"),
                    reason=str(failed.get("reason")) if failed else "recorded on resume",
                    numbers=failed.get("numbers") if failed else None,
                    recovered=True,
                )
            )
        row = recovered_row(events, generation, run_dir, sha=rejected_sha, accepted=False)
        _finish(ledger, generation, f"reverted by {tags.get('Gate')}", sha, summary=staged_summary, row=row)
        done.append(f"recorded the revert of generation {generation}")
        return done
    verdict = tags.get("Verdict", "")
    summary = head.splitlines()[0].removeprefix("harnessevolve: ")
    if sha not in committed:
        ledger.append(
            CandidateCommitted(
                generation=generation,
                sha=sha,
                summary=summary,
                proposer=tags.get("Proposer"),
                verdict=verdict,
                recovered=True,
            )
        )
    if verdict == Verdict.ACCEPTED:
        ledger.append(
            CandidateAccepted(
                generation=generation,
                sha=sha,
                harness_hash=load_harness(repo.dir).content_hash(),
                validation=staged[-1].get("validation") if staged else None,
                recovered=True,
            )
        )
        row = recovered_row(events, generation, run_dir, sha=sha, accepted=True)
        _finish(ledger, generation, "accepted", sha, summary=staged_summary or summary, row=row)
        done.append(f"recorded the accepted commit {sha[:8]} of generation {generation}")
    elif verdict.startswith("rejected by "):
        gate = verdict.removeprefix("rejected by ")
        failed = failed_verdict(verdicts, gate)
        revert_sha = repo.revert(sha, revert_message(sha, gate, failed, run_id, generation))
        ledger.append(
            CandidateReverted(
                generation=generation,
                sha=sha,
                revert_sha=revert_sha,
                gate=gate,
                reason=str(failed.get("reason"))
                if failed
                else "rejected before the crash; reverted on resume",
                numbers=failed.get("numbers") if failed else None,
                recovered=True,
            )
        )
        row = recovered_row(events, generation, run_dir, sha=sha, accepted=False)
        _finish(
            ledger, generation, f"reverted by {gate}", revert_sha, summary=staged_summary or summary, row=row
        )
        done.append(f"reverted the rejected commit {sha[:8]} of generation {generation}")
    return done


TEMP_FILE = re.compile(r"^(?P<folder>(?:[^/]*/)*)\.(?P<name>[^/]+)\.[A-Za-z0-9_]+\.tmp$")
"""``core.files.atomic_write_text``'s temp file: ``.NAME.XXXXXXXX.tmp`` beside ``NAME``."""


def own_temp_files(dirty: Sequence[str], writing: set[str]) -> list[str]:
    """The dirty paths that are atomic-write temp files of paths the run was writing (a kill
    between the temp file's creation and its rename leaves one); anything else is not ours."""
    out = []
    for path in dirty:
        found = TEMP_FILE.match(path)
        if found and f"{found['folder']}{found['name']}" in writing:
            out.append(path)
    return out


def _top_relative(repo: HarnessRepo, path: str) -> str:
    return path if repo.rel == "." else f"{repo.rel}/{path}"


def _finish(
    ledger: Ledger,
    generation: int,
    outcome: str,
    rev: str,
    summary: str = "",
    row: dict[str, Any] | None = None,
) -> None:
    """``generation_finished`` for a generation resume completed, with the row rebuilt from disk."""
    ledger.append(
        GenerationFinished(
            generation=generation, outcome=outcome, rev=rev, summary=summary, recovered=True, **(row or {})
        )
    )


def resume_point(
    events: list[dict[str, Any]], benchmark: Benchmark, run_id: str, patience: int, generations: int
) -> ResumePoint:
    """The loop's state after the last finished generation, rebuilt from the ledger."""
    tasks = {t.id: t for t in benchmark.tasks}
    baseline = next((e for e in events if e.get("event") == ev.Baseline.NAME), None)
    point = ResumePoint(run_id=run_id, baseline_done=baseline is not None, next_generation=1)
    if baseline is None:
        return point
    point.snapshots.append(Snapshot(baseline["rev"], baseline["harness_hash"], float(baseline["score"]), 0))
    point.epochs = EpochClock(patience)
    finished = {e["generation"]: e for e in events if e.get("event") == GenerationFinished.NAME}
    summaries = {
        e.get("sha"): e.get("summary", "") for e in events if e.get("event") == ev.CandidateCommitted.NAME
    }
    last = 0
    for generation in sorted(finished):
        row_event = finished[generation]
        batch = of_generation(events, generation, ev.BatchEvaluated.NAME)
        if batch:
            point.batches.append([tasks[t] for t in batch[-1]["tasks"] if t in tasks])
        accepted = of_generation(events, generation, ev.CandidateAccepted.NAME)
        for event in accepted:
            point.accepted.append(event["sha"])
            point.snapshots.append(
                Snapshot(
                    event["sha"],
                    event.get("harness_hash") or "",
                    float(event.get("validation") or 0.0),
                    generation,
                )
            )
        for event in of_generation(events, generation, ev.CandidateReverted.NAME):
            point.reverted.append(event["sha"])
            point.rejected.append(summaries.get(event["sha"], ""))
        point.rejected += [
            e.get("summary", "") for e in of_generation(events, generation, ev.CandidateRejected.NAME)
        ]
        point.rows.append(
            GenerationRow(
                generation,
                candidate=row_event.get("candidate") or "-",
                summary=row_event.get("summary") or "",
                verdicts=row_event.get("verdicts") or {},
                train_current=row_event.get("train_current"),
                train_candidate=row_event.get("train_candidate"),
                validation=row_event.get("validation"),
                outcome=row_event.get("outcome", ""),
            )
        )
        ended = point.epochs.epoch
        if point.epochs.tick(bool(accepted)) or generation == generations:
            logged = any(
                e.get("event") == ev.EpochFinished.NAME and e.get("generation") == generation for e in events
            )
            point.epoch_end_pending = None if logged else ended
        last = generation
    point.next_generation = last + 1
    return point


def load_run_for_resume(run_dir: Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The ledger's events and the ``run_started`` record; refuses a finished or unreadable run."""
    ledger = run_dir / "ledger.jsonl"
    if not ledger.is_file():
        raise HarnessEvolveError(
            "no ledger in the run folder", file=str(ledger), hint="pass a run id from `harnessevolve status`"
        )
    events = read_ledger(ledger)
    started = next((e for e in events if e.get("event") == ev.RunStarted.NAME), None)
    if started is None or not isinstance(started.get("options"), dict):
        raise HarnessEvolveError(
            "the ledger has no resumable run_started record",
            file=str(ledger),
            field="run_started.options",
            hint="only runs started by this version can be resumed",
        )
    if any(e.get("event") == ev.RunFinished.NAME for e in events):
        raise HarnessEvolveError(
            "the run already finished", file=str(ledger), hint="start a new run instead of --resume"
        )
    return events, started
