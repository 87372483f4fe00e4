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

import dataclasses
import re
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harnessevolve.core.errors import HarnessEvolveError, HarnessGitError
from harnessevolve.core.tasks import Benchmark, Task
from harnessevolve.core.trailers import trailer_map
from harnessevolve.harness.git import HarnessRepo
from harnessevolve.harness.load import load_harness
from harnessevolve.judging.trials import DUPLICATE, harness_state, rejection_note
from harnessevolve.pipeline.epochs import EpochClock, Snapshot
from harnessevolve.pipeline.recovery import (
    failed_verdict,
    gate_report,
    gate_verdicts,
    of_generation,
    on_tie,
    recovered_row,
    revert_message,
)
from harnessevolve.pipeline.state import GenerationRow
from harnessevolve.runs import events as ev
from harnessevolve.runs.events import (
    CandidateAccepted,
    CandidateCommitted,
    CandidateReverted,
    GenerationFinished,
)
from harnessevolve.runs.ledger import Ledger, malformed
from harnessevolve.runs.outcome import Outcome
from harnessevolve.runs.rundir import RunDir


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
    rejected_states: dict[str, str] = field(default_factory=dict)
    """harness_state -> its rejection, as ``TrialRunner.rejected`` holds them (``trials.py``)."""
    outcomes: list[tuple[str, bool]] = field(default_factory=list)
    """(proposer, accepted?) of each judged candidate, as ``RunHistory.outcomes`` holds them."""
    snapshots: list[Snapshot] = field(default_factory=list)
    epochs: EpochClock = field(default_factory=EpochClock)
    epoch_end_pending: int | None = None
    """The epoch whose end (snapshot restore) was interrupted; it is redone first."""
    recovered: list[str] = field(default_factory=list)


def reconcile(repo: HarnessRepo, ledger: Ledger, run_id: str, events: list[ev.Event]) -> list[str]:
    """Bring git and the ledger into agreement for the generation a crash cut short. ``events``
    must be read under the harness lock (a second resume cannot act on a stale ledger); every event
    written here first checks that the ledger does not hold it already."""
    done = repo.recover_interrupted()
    leftovers = [p for p in ledger.path.parent.rglob(".*.tmp") if p.is_file() and not p.is_symlink()]
    for path in leftovers:  # atomic writes into the run folder that a kill cut off before the rename
        path.unlink(missing_ok=True)
    if leftovers:
        done.append(f"removed {len(leftovers)} temp file(s) from the run folder")
    generation = open_generation(events)
    writing = {
        _top_relative(repo, p)
        for e in (of_generation(events, generation, ev.Committing) if generation is not None else [])
        for p in e.paths
    }
    dirty = repo.dirty_paths()
    temps = own_temp_files(dirty, writing)
    for temp in temps:
        (repo.top / temp).unlink(missing_ok=True)
    if temps:
        done.append(f"removed {len(temps)} temp file(s) of an interrupted write ({', '.join(temps[:3])})")
        dirty = [p for p in dirty if p not in temps]
    restoring = [e for e in open_events(events) if isinstance(e, ev.EpochRestoring)]
    if dirty and generation is None and restoring:  # a kill inside an epoch end's restore: redone
        repo.discard_changes()
        done.append(f"discarded the half-made restore of epoch {restoring[-1].epoch}")
        dirty = []
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
        ledger.replay(open_events(events))  # a step between generations (an epoch's end) is redone
        return done
    head = repo.message()
    tags = trailer_map(head)
    if tags.get("Run") != run_id or tags.get("Generation") != str(generation):
        ledger.replay(open_events(events))  # redone from the start: what it logs already is not repeated
        return done
    committed = {e.sha for e in of_generation(events, generation, CandidateCommitted)}
    sha = repo.head()
    run_dir = ledger.path.parent
    verdicts = gate_verdicts(events, generation, run_dir)
    staged = of_generation(events, generation, ev.Committing)
    staged_summary = staged[-1].summary if staged else ""
    if "Reverts" in tags:
        rejected_sha = tags["Reverts"]
        failed = failed_verdict(verdicts, tags.get("Gate"))
        if not of_generation(events, generation, CandidateReverted):
            why = "recorded on resume"
            fields = _reverted(generation, rejected_sha, sha, tags.get("Gate"), failed, why)
            ledger.append(CandidateReverted(**fields, harness_state=rejected_state(repo, rejected_sha)))
        row = recovered_row(events, generation, run_dir, sha=rejected_sha, accepted=False)
        refused = Outcome.refused(tags.get("Gate")).text()
        _finish(ledger, generation, refused, sha, summary=staged_summary, row=row)
        done.append(f"recorded the revert of generation {generation}")
        return done
    verdict = tags.get("Verdict", "")
    decided = Outcome.from_verdict(verdict)
    summary = head.splitlines()[0].removeprefix("harnessevolve: ")
    trial = _trial(events, generation, run_dir, staged_summary or summary)
    if sha not in committed:
        ledger.append(
            CandidateCommitted(**_committed(generation, sha, summary, tags.get("Proposer"), verdict, trial))
        )
    if decided is not None and decided.accepted:
        tie = on_tie(verdicts)
        if not of_generation(events, generation, CandidateAccepted):
            ledger.append(
                CandidateAccepted(
                    generation=generation,
                    sha=sha,
                    candidate=trial.candidate,
                    of=trial.of,
                    revisions=trial.revisions,
                    harness_hash=load_harness(repo.dir).content_hash(),
                    validation=staged[-1].validation if staged else None,
                    verdicts=verdicts or None,
                    recovered=True,
                    tie=tie or None,
                )
            )
        row = recovered_row(events, generation, run_dir, sha=sha, accepted=True)
        _finish(
            ledger, generation, Outcome.kept(tie=tie).text(), sha, summary=staged_summary or summary, row=row
        )
        done.append(f"recorded the accepted commit {sha[:8]} of generation {generation}")
    elif decided is not None:
        gate = decided.gate or ""
        failed = failed_verdict(verdicts, gate)
        state = rejected_state(repo, sha)
        revert_sha = repo.revert(sha, revert_message(sha, gate, failed, run_id, generation))
        if not of_generation(events, generation, CandidateReverted):
            why = "rejected before the crash; reverted on resume"
            fields = _reverted(generation, sha, revert_sha, gate, failed, why)
            ledger.append(CandidateReverted(**fields, harness_state=state))
        row = recovered_row(events, generation, run_dir, sha=sha, accepted=False)
        _finish(ledger, generation, decided.text(), revert_sha, summary=staged_summary or summary, row=row)
        done.append(f"reverted the rejected commit {sha[:8]} of generation {generation}")
    return done


def open_generation(events: list[ev.Event]) -> int | None:
    """The last generation that started and did not finish (what a crash cut short), or None."""
    finished = {e.generation for e in events if isinstance(e, GenerationFinished)}
    started = [
        e.generation for e in events if isinstance(e, ev.GenerationStarted) and e.generation not in finished
    ]
    return started[-1] if started else None


REPLAYED_AFTER = (ev.GenerationFinished, ev.EpochFinished, ev.Baseline, ev.AgentModelChanged, ev.RunStarted)
"""The events after the last of these are the unfinished step a resume redoes."""


def open_events(events: list[ev.Event]) -> list[ev.Event]:
    """The events of the step a crash cut short (after the last finished step), in order."""
    last = max((i for i, e in enumerate(events) if isinstance(e, REPLAYED_AFTER)), default=-1)
    return [e for e in events[last + 1 :] if not isinstance(e, ev.PROCESS_EVENTS)]


@dataclass(frozen=True)
class _Trial:
    """What the ledger says of the committed candidate: its proposal's details and its number."""

    details: dict[str, Any]
    candidate: int | None
    of: int | None
    revisions: int | None


def _trial(events: list[ev.Event], generation: int, run_dir: Path, summary: str) -> _Trial:
    """The committed candidate of ``generation`` as its proposal recorded it: the gate report names
    its number and revisions; its details are those of its last proposal or revision."""
    doc = gate_report(run_dir, generation) or {}
    proposed = of_generation(events, generation, ev.CandidateProposed)
    number = doc.get("candidate") if isinstance(doc.get("candidate"), int) else None
    answers: list[ev.CandidateProposed | ev.CandidateRevised] = [
        e
        for e in events
        if isinstance(e, ev.CandidateProposed | ev.CandidateRevised)
        and e.generation == generation
        and (e.candidate == number if number is not None else e.summary == summary)
    ]
    source = answers[-1] if answers else None
    if number is None and source is not None:
        number = source.candidate
    names = [f.name for f in dataclasses.fields(ev.CandidateDetails) if f.name not in ev.ENVELOPE]
    details = {k: getattr(source, k) for k in names} if source is not None else {}
    revisions = doc.get("revisions") if isinstance(doc.get("revisions"), int) else None
    return _Trial(details, number, len(proposed) or None, revisions)


def _committed(
    generation: int, sha: str, summary: str, proposer: str | None, verdict: str, trial: _Trial
) -> dict[str, Any]:
    """The fields of the ``candidate_committed`` the crash cut off: its proposal's details too."""
    details = {k: v for k, v in trial.details.items() if v is not None}
    details.setdefault("summary", summary)
    details.setdefault("proposer", proposer)
    return {
        "generation": generation,
        "sha": sha,
        **details,
        "candidate": trial.candidate,
        "of": trial.of,
        "revisions": trial.revisions,
        "verdict": verdict,
        "recovered": True,
    }


def rejected_state(repo: HarnessRepo, sha: str) -> str | None:
    """The ``harness_state`` of a rejected commit's harness (what a gate refused), or None when
    that tree cannot be read back."""
    with tempfile.TemporaryDirectory(prefix="he-rejected-") as scratch:
        try:
            return harness_state(load_harness(repo.export(sha, Path(scratch))).files, {})
        except (HarnessEvolveError, OSError):
            return None


def _reverted(
    generation: int,
    sha: str,
    revert_sha: str,
    gate: str | None,
    failed: ev.GateVerdictRecord | None,
    why: str,
) -> dict[str, Any]:
    """The fields of a recovered ``candidate_reverted``: the failed gate's reason and numbers."""
    return {
        "generation": generation,
        "sha": sha,
        "revert_sha": revert_sha,
        "gate": gate,
        "reason": str(failed.reason) if failed is not None else why,
        "numbers": dict(failed.numbers) if failed is not None else None,
        "recovered": True,
    }


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
    events: list[ev.Event], benchmark: Benchmark, run_id: str, patience: int, generations: int
) -> ResumePoint:
    """The loop's state after the last finished generation, rebuilt from the ledger."""
    tasks = {t.id: t for t in benchmark.tasks}
    baseline = next((e for e in events if isinstance(e, ev.Baseline)), None)
    point = ResumePoint(run_id=run_id, baseline_done=baseline is not None, next_generation=1)
    if baseline is None:
        return point
    point.snapshots.append(Snapshot(baseline.rev, baseline.harness_hash, float(baseline.score), 0))
    point.epochs = EpochClock(patience)
    finished = {e.generation: e for e in events if isinstance(e, GenerationFinished)}
    summaries = {e.sha: e.summary or "" for e in events if isinstance(e, CandidateCommitted)}
    numbers = {e.sha: e.candidate for e in events if isinstance(e, CandidateCommitted)}
    proposers = {e.sha: e.proposer or "" for e in events if isinstance(e, CandidateCommitted)}
    last = 0
    for generation in sorted(finished):
        row_event = finished[generation]
        batch = of_generation(events, generation, ev.BatchEvaluated)
        if batch:
            point.batches.append([tasks[t] for t in batch[-1].tasks if t in tasks])
        accepted = of_generation(events, generation, CandidateAccepted)
        for record in accepted[:1]:  # one per generation (an older run may hold a duplicate)
            point.accepted.append(record.sha)
            point.snapshots.append(
                Snapshot(record.sha, record.harness_hash or "", float(record.validation or 0.0), generation)
            )
        for reverted in of_generation(events, generation, CandidateReverted):
            point.reverted.append(reverted.sha)
            point.rejected.append(summaries.get(reverted.sha, ""))
            if reverted.harness_state:
                point.rejected_states.setdefault(
                    reverted.harness_state,
                    rejection_note(
                        generation,
                        numbers.get(reverted.sha),
                        summaries.get(reverted.sha, ""),
                        reverted.gate,
                        reverted.reason,
                    ),
                )
        for rejected in of_generation(events, generation, ev.CandidateRejected):
            point.rejected.append(rejected.summary or "")
            if rejected.harness_state:
                point.rejected_states.setdefault(
                    rejected.harness_state,
                    rejection_note(
                        generation,
                        rejected.candidate,
                        rejected.summary or "",
                        rejected.gate,
                        rejected.reason or "",
                    ),
                )
        point.outcomes += [
            (e.proposer, False)
            for e in of_generation(events, generation, ev.ProposalFailed)
            if e.errors and e.errors[0].startswith(DUPLICATE)
        ]
        point.outcomes += [
            (r.proposer or "", False)
            for r in of_generation(events, generation, ev.CandidateRejected)
            if r.gate is not None
        ]
        point.outcomes += [
            (proposers.get(r.sha, ""), False) for r in of_generation(events, generation, CandidateReverted)
        ]
        point.outcomes += [(proposers.get(r.sha, ""), True) for r in accepted[:1]]
        point.rows.append(
            GenerationRow(
                generation,
                candidate=row_event.candidate or "-",
                summary=row_event.summary or "",
                verdicts=row_event.verdicts or {},
                train_current=row_event.train_current,
                train_candidate=row_event.train_candidate,
                validation=row_event.validation,
                outcome=row_event.outcome,
            )
        )
        ended = point.epochs.epoch
        if point.epochs.tick(bool(accepted)) or generation == generations:
            logged = any(isinstance(e, ev.EpochFinished) and e.generation == generation for e in events)
            point.epoch_end_pending = None if logged else ended
        last = generation
    point.next_generation = last + 1
    return point


def load_run_for_resume(run_dir: Path) -> tuple[list[ev.Event], ev.RunStarted]:
    """The ledger's events and the ``run_started`` record; refuses a finished or unreadable run."""
    run = RunDir(run_dir)
    if not run.exists():
        raise HarnessEvolveError(
            "no ledger in the run folder",
            file=str(run.ledger),
            hint="pass a run id from `harnessevolve status`",
        )
    events = run.events()
    started = run.started(events)
    if started is None:
        raise HarnessEvolveError(
            "the ledger has no resumable run_started record",
            file=str(run.ledger),
            field="run_started.options",
            hint="only runs started by this version can be resumed",
        )
    if any(isinstance(e, ev.RunFinished) for e in events):
        raise HarnessEvolveError(
            "the run already finished", file=str(run.ledger), hint="start a new run instead of --resume"
        )
    bad = malformed(events)
    if bad:  # resuming on a ledger read without them could redo or skip work
        raise HarnessEvolveError(
            f"line {bad[0].line}: {bad[0].reason}",
            file=str(run.ledger),
            field=bad[0].name,
            hint="the ledger was changed by hand or by another program; restore it, or start a new run",
        )
    return events, started
