"""A run as plain data for reports and the terminal, read from its ledger, its run folder and git.

Tolerant by design: a run still in progress, interrupted or killed, a torn last ledger line, events
this version does not know, a harness repository that is gone (then diffs are missing, not fatal).
Both ledger shapes are read: one candidate per generation judged after its commit (gate verdicts
carry its sha), and K candidates judged before the winner is committed (verdicts carry the
candidate's number; losers are ``candidate_rejected`` with their changes saved in the run folder).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from harnessevolve.core.enums import Verdict as CandidateVerdict
from harnessevolve.core.errors import HarnessEvolveError
from harnessevolve.report.git_history import MAX_DIFF_CHARS, HarnessHistory, recorded_diff
from harnessevolve.report.run_model import (
    CandidateView,
    Cluster,
    GenerationView,
    LineageStep,
    RunView,
    TestScores,
    Verdict,
)
from harnessevolve.report.run_usage import fold_usage
from harnessevolve.report.runs import END_STATES, parse_ts, read_lock, run_state
from harnessevolve.runs import events as ev
from harnessevolve.runs.files import CANDIDATE_FILE_VERSION, read_json_file
from harnessevolve.runs.run_config import RunConfig
from harnessevolve.runs.rundir import RunDir

KNOWN_EVENTS = frozenset(ev.CATALOG)
"""Every event the report renders (each is counted in the event table; most are folded below)."""
DETAILS = ("summary", "proposer", "model", "targets", "target_tasks", "paths")


def _float(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _verdicts(raw: list[ev.GateVerdictRecord] | None) -> tuple[Verdict, ...]:
    return tuple(Verdict(v.gate, bool(v.passed), str(v.reason), dict(v.numbers)) for v in raw or [])


def _clusters(raw: list[ev.ClusterSummary]) -> tuple[Cluster, ...]:
    return tuple(
        Cluster(
            str(c.cause),
            int(c.size or 0),
            float(c.severity or 0.0),
            str(c.fix_direction),
            tuple(map(str, c.tasks)),
        )
        for c in raw
    )


def _details(e: ev.CandidateDetails) -> dict[str, Any]:
    out: dict[str, Any] = {k: getattr(e, k) for k in DETAILS if getattr(e, k) is not None}
    for key in ("targets", "target_tasks", "paths"):
        if key in out:
            out[key] = tuple(str(x) for x in out[key])
    return out


class _Fold:
    """Folds ledger events, in order, into generation rows and candidates (dispatch on the record's
    type: ``FOLDS``; an event without a fold only counts in the event table)."""

    def __init__(self) -> None:
        self.gens: dict[int, dict[str, Any]] = {}
        self.cands: dict[tuple[int, int], dict[str, Any]] = {}
        self.by_sha: dict[str, dict[str, Any]] = {}
        self.failed_proposals: list[ev.Event] = []
        self.tests: list[TestScores] = []
        self.accepted: list[ev.CandidateAccepted] = []
        self.lineage: list[ev.CandidateAccepted | ev.EpochFinished] = []
        self.baseline: float | None = None
        self.stopped: ev.BudgetExhausted | None = None
        self.training: list[ev.Event] = []
        self.environment: list[ev.EnvironmentStatus] = []
        self.generated: list[ev.TaskGenerated] = []
        self.head: str | None = None

    def slot(self, gen: int, index: int) -> dict[str, Any]:
        return self.cands.setdefault((gen, index), {"generation": gen, "index": index})

    def row(self, gen: int) -> dict[str, Any]:
        return self.gens.setdefault(gen, {"generation": gen})

    def add(self, e: ev.Event) -> None:
        rev, generation = getattr(e, "rev", None), getattr(e, "generation", None)
        if isinstance(rev, str):
            self.head = rev
        if isinstance(generation, int):
            self.row(generation)  # every generation an event names has a row
        fold = FOLDS.get(type(e))
        if fold is not None:
            fold(self, e)

    def baseline_(self, e: ev.Baseline) -> None:
        if self.baseline is None:
            self.baseline = _float(e.score)

    def generation_started(self, e: ev.GenerationStarted) -> None:
        self.row(e.generation)["rev"] = e.rev

    def batch_evaluated(self, e: ev.BatchEvaluated) -> None:
        self.row(e.generation).update(
            train_current=_float(e.score), failed=e.failed, tasks=len(e.tasks), clusters=_clusters(e.clusters)
        )

    def proposed(self, e: ev.CandidateProposed | ev.CandidateRevised) -> None:
        self.slot(e.generation, e.candidate).update(_details(e), revisions=int(e.revision or 0))

    def gate_verdicts(self, e: ev.GateVerdicts) -> None:
        row = self.row(e.generation)
        slot = self.by_sha[e.sha] if e.sha in self.by_sha else self.slot(e.generation, e.candidate or 1)
        slot["verdicts"] = _verdicts(e.verdicts)
        for v in slot["verdicts"]:
            if v.gate == "performance" and row.get("train_candidate") is None:
                row["train_candidate"] = _float(v.numbers.get("candidate"))
            if v.gate == "heldout":
                row["candidate_validation"] = _float(v.numbers.get("candidate"))

    def rejected(self, e: ev.CandidateRejected) -> None:
        self.slot(e.generation, e.candidate).update(
            _details(e),
            outcome=CandidateVerdict.REJECTED,
            rejected_by=e.gate,
            reason=str(e.reason or "passed every gate; another candidate was picked"),
            changes_file=e.file,
            verdicts=_verdicts(e.verdicts),
            revisions=int(e.revisions or 0),
        )

    def committed(self, e: ev.CandidateCommitted) -> None:
        row = self.row(e.generation)
        slot = self.slot(e.generation, e.candidate or 1)
        slot.update(_details(e), sha=e.sha)
        slot.setdefault("outcome", CandidateVerdict.PENDING)
        self.by_sha[e.sha] = slot
        row["candidate"] = e.sha

    def accepted_(self, e: ev.CandidateAccepted) -> None:
        row = self.row(e.generation)
        if e.sha not in self.by_sha:
            return
        self.by_sha[e.sha]["outcome"] = CandidateVerdict.ACCEPTED
        self.by_sha[e.sha]["tie"] = bool(e.tie)
        if e.verdicts:
            self.by_sha[e.sha]["verdicts"] = _verdicts(e.verdicts)
        if _float(e.validation) is not None:
            row["candidate_validation"] = _float(e.validation)
        self.lineage.append(e)

    def reverted(self, e: ev.CandidateReverted) -> None:
        self.row(e.generation)
        if e.sha in self.by_sha:
            self.by_sha[e.sha].update(
                outcome=CandidateVerdict.REVERTED,
                rejected_by=e.gate,
                reason=str(e.reason),
                revert_sha=e.revert_sha,
            )

    def generation_finished(self, e: ev.GenerationFinished) -> None:
        row = self.row(e.generation)
        row.update(outcome=str(e.outcome), validation=_float(e.validation))
        for key, value in (("train_current", e.train_current), ("train_candidate", e.train_candidate)):
            if _float(value) is not None:
                row[key] = _float(value)

    def failed_proposal(self, e: ev.ProposalFailed | ev.NoProposal | ev.RevisionFailed) -> None:
        self.failed_proposals.append(e)

    def epoch_finished(self, e: ev.EpochFinished) -> None:
        self.row(e.generation)
        if e.restored:
            self.lineage.append(e)

    def budget_exhausted(self, e: ev.BudgetExhausted) -> None:
        self.stopped = e

    def trained(self, e: ev.PolicyTrained | ev.PolicyTrainingSkipped | ev.AgentModelChanged) -> None:
        self.training.append(e)

    def environment_status(self, e: ev.EnvironmentStatus) -> None:
        self.environment.append(e)

    def task_generated(self, e: ev.TaskGenerated) -> None:
        self.generated.append(e)

    def test_evaluated(self, e: ev.TestEvaluated) -> None:
        scores = {k: float(v) for k, v in e.scores.items() if _float(v) is not None}
        revisions = {k: str(v) for k, v in e.revisions.items()}
        control = e.control if isinstance(e.control, dict) else None
        intervals = {
            k: [float(x) for x in v]
            for k, v in (e.intervals if isinstance(e.intervals, dict) else {}).items()
            if isinstance(v, list) and len(v) == 2 and all(_float(x) is not None for x in v)
        }
        self.tests.append(
            TestScores(int(e.tasks or 0), scores, revisions, e.model, str(e.ts or ""), control, intervals)
        )


FOLDS: dict[type[ev.Event], Callable[[_Fold, Any], None]] = {
    ev.Baseline: _Fold.baseline_,
    ev.GenerationStarted: _Fold.generation_started,
    ev.BatchEvaluated: _Fold.batch_evaluated,
    ev.CandidateProposed: _Fold.proposed,
    ev.CandidateRevised: _Fold.proposed,
    ev.GateVerdicts: _Fold.gate_verdicts,
    ev.CandidateRejected: _Fold.rejected,
    ev.CandidateCommitted: _Fold.committed,
    ev.CandidateAccepted: _Fold.accepted_,
    ev.CandidateReverted: _Fold.reverted,
    ev.GenerationFinished: _Fold.generation_finished,
    ev.ProposalFailed: _Fold.failed_proposal,
    ev.NoProposal: _Fold.failed_proposal,
    ev.RevisionFailed: _Fold.failed_proposal,
    ev.EpochFinished: _Fold.epoch_finished,
    ev.BudgetExhausted: _Fold.budget_exhausted,
    ev.PolicyTrained: _Fold.trained,
    ev.PolicyTrainingSkipped: _Fold.trained,
    ev.AgentModelChanged: _Fold.trained,
    ev.EnvironmentStatus: _Fold.environment_status,
    ev.TaskGenerated: _Fold.task_generated,
    ev.TestEvaluated: _Fold.test_evaluated,
}
"""What each event adds to the view; every other event only counts in the event table."""


def load_run_view(run_dir: Path, *, with_git: bool = True) -> RunView:
    """Everything a report shows about the run in ``run_dir``; ``with_git=False`` skips diffs."""
    run = RunDir(Path(run_dir))
    if not run.exists():
        raise HarnessEvolveError("no ledger.jsonl here", file=str(run.root), hint="pass a run folder or id")
    run_dir = run.root
    events = run.events()
    harness_dir = run.harness_dir(events)
    started = run.started(events)
    run_id = started.run_id if started is not None and started.run_id else run.id
    fold = _Fold()
    for e in events:
        fold.add(e)
    history = HarnessHistory(harness_dir) if with_git else None
    gen_rev = {g: row.get("rev") for g, row in fold.gens.items()}
    candidates = tuple(
        _candidate(c, history, run_dir, gen_rev.get(c["generation"])) for _, c in sorted(fold.cands.items())
    )
    usage = fold_usage(events)
    gens = tuple(
        GenerationView(**{**row, "usage": usage.by_generation.get(g, {})})
        for g, row in sorted(fold.gens.items())
    )
    finished = next((e for e in reversed(events) if isinstance(e, ev.RunFinished)), None)
    state = run_state(events, run_id, lock := read_lock(harness_dir))
    end = next((e for e in reversed(events) if e.event_name in END_STATES), None)
    restored = {e.restored for e in fold.lineage if isinstance(e, ev.EpochFinished) and e.restored}
    restore_info = {s: history.commit(s) for s in restored} if history else {}
    lineage = (
        [LineageStep(started.rev, "seed", "seed harness", 0, fold.baseline)]
        if started and started.rev
        else []
    )
    for step in fold.lineage:
        if isinstance(step, ev.CandidateAccepted):
            cand = fold.by_sha[step.sha]
            row = fold.gens.get(step.generation, {})
            validation = row.get("candidate_validation", row.get("validation"))
            lineage.append(
                LineageStep(step.sha, "accepted", str(cand.get("summary", "")), step.generation, validation)
            )
        elif step.restored:
            info = restore_info.get(step.restored)
            summary = info.summary if info else f"restore snapshot {step.best[:8]}"
            lineage.append(
                LineageStep(step.restored, "restored", summary, None, _float(step.best_validation))
            )
    options = dict(started.options) if started is not None else {}
    recorded = RunConfig.from_json(options).scoring.model  # the run's typed options
    model = None if recorded in (None, "None", "") else recorded
    model_source = "option"
    if model is None:
        model = recorded_model(run_dir)
        model_source = "trajectory" if model else "unknown"
    totals = (
        {k: v for k, v in finished.fields().items() if _float(v) is not None} if finished is not None else {}
    )
    return RunView(
        run_id=run_id,
        root=run_dir,
        harness_dir=harness_dir,
        state=state,
        events=tuple(events),
        benchmark=started.benchmark if started is not None else None,
        model=model,
        model_source=model_source,
        net_change=finished.net_change if finished is not None else None,
        options=options,
        started_at=parse_ts(events[0].ts) if events else None,
        ended_at=parse_ts(end.ts) if end and state in END_STATES.values() else None,
        seed_rev=started.rev if started is not None else None,
        head_rev=fold.head,
        baseline_validation=fold.baseline,
        generations=gens,
        candidates=candidates,
        failed_proposals=tuple(e.to_json() for e in fold.failed_proposals),
        lineage=tuple(lineage),
        tests=tuple(fold.tests),
        usage=usage.by_stage,
        usage_by_model=usage.by_model,
        totals=totals,
        unknown_events=tuple(sorted({e.event_name for e in events} - KNOWN_EVENTS)),
        stopped=fold.stopped.to_json() if fold.stopped is not None else None,
        training=tuple(e.to_json() for e in fold.training),
        environment=tuple(e.to_json() for e in fold.environment),
        generated=tuple(e.to_json() for e in fold.generated),
        lock_owner=lock if lock and lock.get("run_id") == run_id else None,
        git_error=history.error if history else None,
    )


def _candidate(
    c: dict[str, Any], history: HarnessHistory | None, run_dir: Path, base_rev: str | None
) -> CandidateView:
    fields_ = {k: v for k, v in c.items() if k in CandidateView.__dataclass_fields__}
    diff, source, message, trailers = "", "", "", {}
    info = history.commit(c["sha"]) if history and c.get("sha") else None
    if info is not None:
        diff, source, message, trailers = info.diff, "git", info.message, info.trailers
    elif history and c.get("changes_file"):
        path = run_dir / c["changes_file"]
        saved = read_json_file(path, CANDIDATE_FILE_VERSION, "candidate file") if path.is_file() else {}
        if isinstance(saved.get("changes"), dict):
            diff, source = recorded_diff(history, base_rev, saved["changes"]), "recorded changes"
    return CandidateView(
        **fields_,
        diff=diff[:MAX_DIFF_CHARS],
        diff_source=source,
        diff_truncated=len(diff) > MAX_DIFF_CHARS,
        message=message,
        trailers=trailers,
    )


def recorded_model(run_dir: Path) -> str | None:
    """The agent model a rollout of the run recorded (``agent.model_name`` of a trajectory)."""
    import json

    for path in sorted((run_dir / "trajectories").glob("*/*.json"))[:3]:
        try:
            agent = json.loads(path.read_text(encoding="utf-8")).get("agent") or {}
        except (OSError, ValueError, AttributeError):
            continue
        if isinstance(agent, dict) and agent.get("model_name"):
            return str(agent["model_name"])
    return None
