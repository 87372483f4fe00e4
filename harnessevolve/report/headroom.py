"""Headroom: what a run's evidence says about whether anything could have helped, for a run that
ended with no net change or a small one (``run``'s summary, ``report``, their JSON).

Read from the ledger alone:

- **room for sampling**: the seed's pass@k oracle against its own score, where ``report --final``
  measured the control (``test_evaluated.control``); else "not measured";
- **failures within reach**: the failed runs of the batches, by cause (each batch's clusters; a task
  counts once per cause, in its newest batch), and how many of them had a reference trajectory to
  diverge from (a first divergence was found: a proposer can show the reference's action);
- **levers tried**: every candidate (proposer, what it changed) and its fate (kept, or the gate and
  the reason it was refused), and the proposers that had nothing to offer or failed;
- **what to try next**: one line per finding (sampling has room; failures have no reference; every
  edit was refused as a tie; only offline proposers ran; the agent fails almost everything).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from harnessevolve.runs import events as ev

SMALL_CHANGE = 0.05
"""A validation change at most this (score units) counts as small: headroom is shown for it too."""


@dataclass(frozen=True)
class Cause:
    cause: str
    failed: int
    with_reference: int
    fix_direction: str = ""


@dataclass(frozen=True)
class Lever:
    generation: int
    proposer: str
    summary: str
    fate: str
    """``kept``, ``kept on a tie``, or ``refused by GATE: reason``."""


@dataclass(frozen=True)
class Headroom:
    seed_validation: float | None
    final_validation: float | None
    oracle: dict[str, Any] | None
    """``{k, seed, sc, oracle}`` of the seed's control on test (``report --final``), if measured."""
    causes: tuple[Cause, ...]
    batch_runs: int
    failed_runs: int
    levers: tuple[Lever, ...]
    idle_proposers: dict[str, int] = field(default_factory=dict)
    """Proposer -> generations it had nothing new (or failed)."""
    model_proposers: bool | None = None
    """Whether the run could write edits with a model (``--optimizer-model`` or ``--proposer
    agent``), from its ``run_started.options``; None when they cannot be read."""
    advice: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "seed_validation": self.seed_validation,
            "final_validation": self.final_validation,
            "oracle": self.oracle,
            "batch_runs": self.batch_runs,
            "failed_runs": self.failed_runs,
            "causes": [c.__dict__ for c in self.causes],
            "levers": [lever.__dict__ for lever in self.levers],
            "idle_proposers": self.idle_proposers,
            "model_proposers": self.model_proposers,
            "advice": list(self.advice),
        }


def wanted(events: Sequence[ev.Event]) -> bool:
    """Whether a run's headroom is worth showing: it finished with no net change, or a small one."""
    finished = next((e for e in reversed(events) if isinstance(e, ev.RunFinished)), None)
    if finished is None:
        return False
    net = finished.net_change or {}
    if not net.get("changed"):
        return True
    delta = net.get("delta")
    return isinstance(delta, (int, float)) and abs(delta) <= SMALL_CHANGE


def headroom(events: Sequence[ev.Event]) -> Headroom:
    baseline = next((e for e in events if isinstance(e, ev.Baseline)), None)
    finished = next((e for e in reversed(events) if isinstance(e, ev.RunFinished)), None)
    net = (finished.net_change or {}) if finished is not None else {}
    causes, batch_runs, failed_runs = _causes(events)
    levers, idle = _levers(events)
    oracle = _oracle(events)
    started = next((e for e in events if isinstance(e, ev.RunStarted)), None)
    head = Headroom(
        seed_validation=baseline.score if baseline is not None else None,
        final_validation=net.get("validation_final"),
        oracle=oracle,
        causes=causes,
        batch_runs=batch_runs,
        failed_runs=failed_runs,
        levers=levers,
        idle_proposers=idle,
        model_proposers=_model_proposers(started),
    )
    return replace(head, advice=tuple(_advice(head)))


def _model_proposers(started: ev.RunStarted | None) -> bool | None:
    from harnessevolve.core.errors import HarnessEvolveError
    from harnessevolve.runs.run_config import RunConfig

    if started is None:
        return None
    try:
        flat = RunConfig.from_json(started.options).flat()
    except (HarnessEvolveError, TypeError, ValueError):
        return None
    return flat.get("optimizer_model") is not None or "agent" in (flat.get("proposers") or ())


def _causes(events: Sequence[ev.Event]) -> tuple[tuple[Cause, ...], int, int]:
    newest: dict[tuple[str, str], tuple[bool, str]] = {}
    runs = failed = 0
    for batch in (e for e in events if isinstance(e, ev.BatchEvaluated)):
        runs += len(batch.tasks)
        failed += batch.failed
        for cluster in batch.clusters:
            reached = {str(d.get("task")) for d in cluster.divergences if d.get("reference_step") is not None}
            for task in cluster.tasks:
                newest[(cluster.cause, task)] = (task in reached, cluster.fix_direction)
    by_cause: dict[str, list[tuple[bool, str]]] = {}
    for (cause, _task), value in newest.items():
        by_cause.setdefault(cause, []).append(value)
    causes = sorted(
        (
            Cause(cause, len(rows), sum(1 for r in rows if r[0]), rows[-1][1])
            for cause, rows in by_cause.items()
        ),
        key=lambda c: (-c.failed, c.cause),
    )
    return tuple(causes), runs, failed


def _levers(events: Sequence[ev.Event]) -> tuple[tuple[Lever, ...], dict[str, int]]:
    proposed: dict[tuple[int, int], ev.CandidateProposed] = {}
    levers: list[Lever] = []
    idle: dict[str, int] = {}
    committed: dict[str, ev.CandidateCommitted] = {}
    for e in events:
        if isinstance(e, ev.CandidateProposed):
            proposed[(e.generation, e.candidate)] = e
        elif isinstance(e, ev.CandidateCommitted):
            committed[e.sha] = e
        elif isinstance(e, (ev.NoProposal, ev.ProposalFailed)):
            idle[e.proposer] = idle.get(e.proposer, 0) + 1
        elif isinstance(e, ev.CandidateAccepted):
            source = proposed.get((e.generation, e.candidate or 1))
            fate = "kept on a tie" if e.tie else "kept"
            levers.append(_lever(e.generation, source, fate))
        elif isinstance(e, ev.CandidateReverted):
            made = committed.get(e.sha)
            source = proposed.get((e.generation, (made.candidate if made else None) or 1))
            levers.append(_lever(e.generation, source, f"refused by {e.gate or 'a gate'}: {e.reason}"))
        elif isinstance(e, ev.CandidateRejected):
            source = proposed.get((e.generation, e.candidate))
            levers.append(_lever(e.generation, source, f"refused by {e.gate or 'a gate'}: {e.reason or '?'}"))
    return tuple(levers), idle


def _lever(generation: int, source: ev.CandidateProposed | None, fate: str) -> Lever:
    proposer = (source.proposer if source is not None else None) or "?"
    summary = (source.summary if source is not None else None) or "?"
    return Lever(generation, proposer, summary, fate)


def _oracle(events: Sequence[ev.Event]) -> dict[str, Any] | None:
    for e in reversed(events):
        if isinstance(e, ev.TestEvaluated) and e.control:
            seed = (e.scores or {}).get("seed")
            control = e.control
            return {
                "k": control.get("k"),
                "seed": seed,
                "sc": control.get("sc"),
                "oracle": control.get("oracle"),
            }
    return None


def _advice(head: Headroom) -> list[str]:
    advice = []
    control = head.oracle or {}
    best, seed = control.get("oracle"), control.get("seed")
    if isinstance(best, (int, float)) and isinstance(seed, (int, float)):
        if best > seed:
            advice.append(
                f"sampling has room: the seed passes {best:.0%} of test tasks in one of "
                f"{control['k']} tries against {seed:.0%} in one; levers that make the agent "
                "check and retry (a verify step, answer checks) can reach some of it"
            )
        else:
            advice.append(
                f"no room for sampling: {control['k']} tries of the seed pass no more test tasks than one; "
                "the agent model, not the harness, likely bounds this benchmark"
            )
    if head.failed_runs and not any(c.with_reference for c in head.causes):
        advice.append(
            "no failure had a reference to diverge from: import or generate references "
            "(`harnessevolve refs import` / `refs generate`) so proposers can show a correct action"
        )
    if head.levers and all(lever.fate.startswith("refused") and "tie" in lever.fate for lever in head.levers):
        advice.append(
            "every edit was refused as a tie: the agent did not change what it did; "
            "edits to the loop (operators) move small models more than prompt text"
        )
    if head.model_proposers is False:
        advice.append(
            "only offline proposers ran: an optimizer model (--optimizer-model MODEL) or "
            "--proposer agent can write edits the fixed operators cannot"
        )
    if head.batch_runs and head.failed_runs >= 0.95 * head.batch_runs:
        advice.append(
            f"the agent failed {head.failed_runs} of {head.batch_runs} batch runs: "
            "a stronger agent model, or an easier slice, gives the proposers something to build on"
        )
    if not head.levers and head.idle_proposers:
        advice.append("no proposer offered an edit: widen --proposer (see `harnessevolve run --help`)")
    return advice


def headroom_lines(head: Headroom) -> list[str]:
    """The section as plain lines (the terminal prints them under a heading)."""
    lines = []
    if head.oracle:
        o = head.oracle
        lines.append(
            f"room for sampling (report --final's control, test): seed {_pct(o.get('seed'))}, "
            f"best-of-{o.get('k')} self-consistent {_pct(o.get('sc'))}, "
            f"pass@{o.get('k')} oracle {_pct(o.get('oracle'))}"
        )
    else:
        lines.append(
            "room for sampling: not measured (`harnessevolve report --final` measures the seed's pass@k)"
        )
    lines.append(f"failures: {head.failed_runs} of {head.batch_runs} batch runs failed")
    for c in head.causes:
        lines.append(
            f"  {c.cause}: {c.failed} task(s), {c.with_reference} with a reference to diverge from"
            + (f" (fix direction: {c.fix_direction})" if c.fix_direction else "")
        )
    if head.levers:
        lines.append("levers tried:")
        for lever in head.levers:
            lines.append(f"  gen {lever.generation} {lever.proposer}: {lever.summary} -> {lever.fate}")
    else:
        lines.append("levers tried: none (no proposer offered an edit)")
    if head.idle_proposers:
        shown = ", ".join(f"{p} ({n} generation(s))" for p, n in sorted(head.idle_proposers.items()))
        lines.append(f"proposers with nothing to offer: {shown}")
    for item in head.advice:
        lines.append(f"next: {item}")
    return lines


def _pct(value: Any) -> str:
    return f"{value:.1%}" if isinstance(value, (int, float)) else "-"
