"""A run as plain data for reports and the terminal, read from its ledger, its run folder and git.

Tolerant by design: a run still in progress, interrupted or killed, a torn last ledger line, events
this version does not know, a harness repository that is gone (then diffs are missing, not fatal).
Both ledger shapes are read: one candidate per generation judged after its commit (gate verdicts
carry its sha), and K candidates judged before the winner is committed (verdicts carry the
candidate's number; losers are ``candidate_rejected`` with their changes saved in the run folder).
"""

from __future__ import annotations

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
from harnessevolve.report.runs import END_STATES, harness_of, parse_ts, read_lock, run_state
from harnessevolve.runs import events as ev
from harnessevolve.runs.files import CANDIDATE_FILE_VERSION, read_json_file
from harnessevolve.runs.ledger import read_ledger

KNOWN_EVENTS = frozenset(ev.CATALOG)
"""Every event the report renders (each is counted in the event table; most are folded below)."""
DETAILS = ("summary", "proposer", "model", "targets", "target_tasks", "paths")


def _float(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _verdicts(raw: Any) -> tuple[Verdict, ...]:
    return tuple(
        Verdict(
            str(v.get("gate", "?")),
            bool(v.get("passed")),
            str(v.get("reason", "")),
            v["numbers"] if isinstance(v.get("numbers"), dict) else {},
        )
        for v in raw or []
        if isinstance(v, dict)
    )


def _clusters(raw: Any) -> tuple[Cluster, ...]:
    return tuple(
        Cluster(
            str(c.get("cause", "?")),
            int(c.get("size", 0) or 0),
            float(c.get("severity", 0.0) or 0.0),
            str(c.get("fix_direction", "")),
            tuple(str(t) for t in c.get("tasks", []) or []),
        )
        for c in raw or []
        if isinstance(c, dict)
    )


def _details(e: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {k: e[k] for k in DETAILS if e.get(k) is not None}
    for key in ("targets", "target_tasks", "paths"):
        if key in out:
            out[key] = tuple(str(x) for x in out[key])
    return out


class _Fold:
    """Folds ledger events, in order, into generation rows and candidates."""

    def __init__(self) -> None:
        self.gens: dict[int, dict[str, Any]] = {}
        self.cands: dict[tuple[int, int], dict[str, Any]] = {}
        self.by_sha: dict[str, dict[str, Any]] = {}
        self.failed_proposals: list[dict[str, Any]] = []
        self.tests: list[TestScores] = []
        self.lineage: list[tuple[str, dict[str, Any]]] = []
        self.baseline: float | None = None
        self.stopped: dict[str, Any] | None = None
        self.training: list[dict[str, Any]] = []
        self.environment: list[dict[str, Any]] = []
        self.generated: list[dict[str, Any]] = []
        self.head: str | None = None

    def slot(self, gen: int, index: int) -> dict[str, Any]:
        return self.cands.setdefault((gen, index), {"generation": gen, "index": index})

    def add(self, e: dict[str, Any]) -> None:
        name, gen = e.get("event"), e.get("generation")
        gen = gen if isinstance(gen, int) else None
        row = self.gens.setdefault(gen, {"generation": gen}) if gen is not None else {}
        index = e["candidate"] if isinstance(e.get("candidate"), int) else 1
        if isinstance(e.get("rev"), str):
            self.head = e["rev"]
        sha = e.get("sha") if isinstance(e.get("sha"), str) else None
        if name == ev.Baseline.NAME and self.baseline is None:
            self.baseline = _float(e.get("score"))
        elif name == ev.GenerationStarted.NAME:
            row["rev"] = e.get("rev")
        elif name == ev.BatchEvaluated.NAME:
            row.update(
                train_current=_float(e.get("score")),
                failed=e.get("failed"),
                tasks=len(e.get("tasks") or []),
                clusters=_clusters(e.get("clusters")),
            )
        elif name in (ev.CandidateProposed.NAME, ev.CandidateRevised.NAME) and gen is not None:
            self.slot(gen, index).update(_details(e), revisions=int(e.get("revision", 0) or 0))
        elif name == ev.GateVerdicts.NAME and (sha in self.by_sha or gen is not None):
            slot = self.by_sha[sha] if sha in self.by_sha else self.slot(gen, index)  # type: ignore[arg-type]
            slot["verdicts"] = _verdicts(e.get("verdicts"))
            for v in slot["verdicts"]:
                if v.gate == "performance" and row.get("train_candidate") is None:
                    row["train_candidate"] = _float(v.numbers.get("candidate"))
                if v.gate == "heldout":
                    row["candidate_validation"] = _float(v.numbers.get("candidate"))
        elif name == ev.CandidateRejected.NAME and gen is not None:
            self.slot(gen, index).update(
                _details(e),
                outcome=CandidateVerdict.REJECTED,
                rejected_by=e.get("gate"),
                reason=str(e.get("reason") or "passed every gate; another candidate was picked"),
                changes_file=e.get("file"),
                verdicts=_verdicts(e.get("verdicts")),
                revisions=int(e.get("revisions", 0) or 0),
            )
        elif name == ev.CandidateCommitted.NAME and sha and gen is not None:
            slot = self.slot(gen, index)
            slot.update(_details(e), sha=sha)
            slot.setdefault("outcome", CandidateVerdict.PENDING)
            self.by_sha[sha] = slot
            row["candidate"] = sha
        elif name == ev.CandidateAccepted.NAME and sha in self.by_sha:
            self.by_sha[sha]["outcome"] = CandidateVerdict.ACCEPTED
            self.by_sha[sha]["tie"] = bool(e.get("tie"))
            if e.get("verdicts"):
                self.by_sha[sha]["verdicts"] = _verdicts(e["verdicts"])
            if _float(e.get("validation")) is not None and gen is not None:
                row["candidate_validation"] = _float(e.get("validation"))
            self.lineage.append(("accepted", e))
        elif name == ev.CandidateReverted.NAME and sha in self.by_sha:
            self.by_sha[sha].update(
                outcome=CandidateVerdict.REVERTED,
                rejected_by=e.get("gate"),
                reason=str(e.get("reason", "")),
                revert_sha=e.get("revert_sha"),
            )
        elif name == ev.GenerationFinished.NAME:
            row.update(outcome=str(e.get("outcome", "")), validation=_float(e.get("validation")))
            for key in ("train_current", "train_candidate"):
                if _float(e.get(key)) is not None:
                    row[key] = _float(e.get(key))
        elif name in (ev.ProposalFailed.NAME, ev.NoProposal.NAME, ev.RevisionFailed.NAME):
            self.failed_proposals.append(e)
        elif name == ev.EpochFinished.NAME and isinstance(e.get("restored"), str):
            self.lineage.append(("restored", e))
        elif name == ev.BudgetExhausted.NAME:
            self.stopped = e
        elif name in (ev.PolicyTrained.NAME, ev.PolicyTrainingSkipped.NAME, ev.AgentModelChanged.NAME):
            self.training.append(e)
        elif name == ev.EnvironmentStatus.NAME:
            self.environment.append(e)
        elif name == ev.TaskGenerated.NAME:
            self.generated.append(e)
        elif name == ev.TestEvaluated.NAME:
            self.tests.append(
                TestScores(
                    int(e.get("tasks", 0) or 0),
                    {k: float(v) for k, v in (e.get("scores") or {}).items() if _float(v) is not None},
                    {k: str(v) for k, v in (e.get("revisions") or {}).items()},
                    e.get("model"),
                    str(e.get("ts", "")),
                )
            )


def load_run_view(run_dir: Path, *, with_git: bool = True) -> RunView:
    """Everything a report shows about the run in ``run_dir``; ``with_git=False`` skips diffs."""
    run_dir = Path(run_dir)
    if not (run_dir / "ledger.jsonl").is_file():
        raise HarnessEvolveError("no ledger.jsonl here", file=str(run_dir), hint="pass a run folder or id")
    events = [e for e in read_ledger(run_dir / "ledger.jsonl") if isinstance(e, dict)]
    harness_dir = harness_of(run_dir, events)
    started = next((e for e in events if e.get("event") == ev.RunStarted.NAME), {})
    run_id = str(started.get("run_id") or run_dir.name)
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
    finished = next((e for e in reversed(events) if e.get("event") == ev.RunFinished.NAME), None)
    state = run_state(events, run_id, lock := read_lock(harness_dir))
    end = next((e for e in reversed(events) if e.get("event") in END_STATES), None)
    restored = {s for k, e in fold.lineage if k == "restored" and (s := e["restored"])}
    restore_info = {s: history.commit(s) for s in restored} if history else {}
    lineage = (
        [LineageStep(started["rev"], "seed", "seed harness", 0, fold.baseline)] if started.get("rev") else []
    )
    for kind, e in fold.lineage:
        if kind == "accepted":
            cand = fold.by_sha[e["sha"]]
            row = fold.gens.get(e["generation"], {}) if isinstance(e.get("generation"), int) else {}
            validation = row.get("candidate_validation", row.get("validation"))
            lineage.append(
                LineageStep(e["sha"], kind, str(cand.get("summary", "")), e.get("generation"), validation)
            )
        else:
            info = restore_info.get(e["restored"])
            summary = info.summary if info else f"restore snapshot {str(e.get('best', ''))[:8]}"
            lineage.append(LineageStep(e["restored"], kind, summary, None, _float(e.get("best_validation"))))
    options = started.get("options") or {}
    model = None if options.get("model") in (None, "None", "") else str(options["model"])
    model_source = "option"
    if model is None:
        model = recorded_model(run_dir)
        model_source = "trajectory" if model else "unknown"
    return RunView(
        run_id=run_id,
        root=run_dir,
        harness_dir=harness_dir,
        state=state,
        events=tuple(events),
        benchmark=started.get("benchmark"),
        model=model,
        model_source=model_source,
        net_change=(finished or {}).get("net_change")
        if isinstance((finished or {}).get("net_change"), dict)
        else None,
        options=dict(options),
        started_at=parse_ts(events[0].get("ts")) if events else None,
        ended_at=parse_ts(end.get("ts")) if end and state in END_STATES.values() else None,
        seed_rev=started.get("rev"),
        head_rev=fold.head,
        baseline_validation=fold.baseline,
        generations=gens,
        candidates=candidates,
        failed_proposals=tuple(fold.failed_proposals),
        lineage=tuple(lineage),
        tests=tuple(fold.tests),
        usage=usage.by_stage,
        usage_by_model=usage.by_model,
        totals={k: v for k, v in (finished or {}).items() if _float(v) is not None and k != "v"}
        if finished
        else {},
        unknown_events=tuple(sorted({str(e.get("event")) for e in events} - KNOWN_EVENTS)),
        stopped=fold.stopped,
        training=tuple(fold.training),
        environment=tuple(fold.environment),
        generated=tuple(fold.generated),
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
