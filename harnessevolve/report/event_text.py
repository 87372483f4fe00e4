"""One line of plain text per ledger event (``harnessevolve log``, ``status``'s last event).

Dispatch is on the event's record type (``describe.register``); an event without its own line
(an :class:`UnknownEvent` too) lists its scalar fields."""

from __future__ import annotations

from functools import singledispatch
from typing import Any

from harnessevolve.runs import events as ev


def _s(value: Any) -> str:
    if value is None:
        return "-"
    return f"{value:.3f}" if isinstance(value, float) else str(value)


def _sha(value: Any) -> str:
    return str(value or "?")[:8]


@singledispatch
def describe(event: ev.Event) -> str:
    """One line of plain text for ``event``."""
    return " ".join(f"{k}={_s(v)}" for k, v in event.fields().items() if not isinstance(v, dict | list))


@describe.register
def _(e: ev.RunStarted) -> str:
    model = e.options.get("model") or "of the harness"  # no --model: harness.yaml's
    return (
        f"run {e.run_id} on {e.benchmark}, model {model}, "
        f"{e.options.get('generations', '?')} generations, from {_sha(e.rev)}"
    )


@describe.register
def _(e: ev.Baseline) -> str:
    return f"seed harness: {e.split} {_s(e.score)} on {e.tasks} tasks"


@describe.register
def _(e: ev.GenerationStarted) -> str:
    return f"gen {e.generation} starts at {_sha(e.rev)}"


@describe.register
def _(e: ev.BatchEvaluated) -> str:
    clusters = ", ".join(f"{c.cause} x{c.size}" for c in e.clusters)
    return f"gen {e.generation}: train {_s(e.score)}, {e.failed}/{len(e.tasks)} failed" + (
        f"; clusters {clusters}" if clusters else ""
    )


@describe.register
def _(e: ev.CandidateCommitted) -> str:
    targets = ", ".join(e.targets or [])
    return f"gen {e.generation}: {_sha(e.sha)} by {e.proposer}: {e.summary} [{targets}]"


@describe.register
def _(e: ev.GateVerdicts) -> str:
    marks = ", ".join(f"{v.gate} {'pass' if v.passed else 'FAIL'}" for v in e.verdicts)
    which = _sha(e.sha) if e.sha else f"candidate {e.candidate or 1}"
    return f"gen {e.generation}: {which}: {marks}"


@describe.register(ev.CandidateProposed)
@describe.register(ev.CandidateRevised)
def _(e: ev.CandidateProposed | ev.CandidateRevised) -> str:
    which = f"candidate {e.candidate}" + (f" rev {e.revision}" if e.revision else "")
    return f"gen {e.generation}: {which} by {e.proposer or 'proposer'}: {e.summary}"


@describe.register
def _(e: ev.CandidateRejected) -> str:
    why = f"{e.gate} gate: {e.reason}" if e.gate else "passed, another was picked"
    return f"gen {e.generation}: candidate {e.candidate} not kept ({why})"


@describe.register
def _(e: ev.Committing) -> str:
    return f"gen {e.generation}: committing {e.verdict} candidate: {e.summary}"


@describe.register
def _(e: ev.CandidateAccepted) -> str:
    tie = " on a tie (no gain on its batch)" if e.tie else ""
    return f"gen {e.generation}: accepted {_sha(e.sha)}{tie}"


@describe.register
def _(e: ev.CandidateReverted) -> str:
    return f"gen {e.generation}: reverted {_sha(e.sha)} by the {e.gate} gate: {e.reason}"


@describe.register
def _(e: ev.GenerationFinished) -> str:
    validation = f", validation {_s(e.validation)}" if e.validation is not None else ""
    return f"gen {e.generation}: {e.outcome}{validation}"


@describe.register
def _(e: ev.EpochRestoring) -> str:
    return f"epoch {e.epoch}: restoring snapshot {_sha(e.best)} on top of {_sha(e.rev)}"


@describe.register
def _(e: ev.EpochFinished) -> str:
    restored = f", restored as {_sha(e.restored)}" if e.restored else ""
    return f"epoch {e.epoch}: best {_sha(e.best)} validation {_s(e.best_validation)}{restored}"


@describe.register(ev.ProposalFailed)
@describe.register(ev.RevisionFailed)
def _(e: ev.ProposalFailed | ev.RevisionFailed) -> str:
    return f"gen {e.generation}: proposer {e.proposer} failed: {e.errors[0] if e.errors else '?'}"


@describe.register
def _(e: ev.RunFinished) -> str:
    net = e.net_change or {}
    change = ""
    if net:
        change = (
            f"; {len(net.get('files') or [])} file(s) changed since the seed, validation "
            f"{_s(net.get('validation_seed'))} -> {_s(net.get('validation_final'))}"
            if net.get("changed")
            else "; no net change (the final harness equals the seed)"
        )
    return f"{len(e.accepted)} accepted, {len(e.reverted)} reverted; head {_sha(e.rev)}{change}"


@describe.register(ev.RunInterrupted)
@describe.register(ev.RunFailed)
def _(e: ev.RunInterrupted | ev.RunFailed) -> str:
    by = f" by {e.signal}" if isinstance(e, ev.RunInterrupted) and e.signal else ""
    return f"stopped{by} in gen {e.generation} at stage {e.stage}: {e.error}"


@describe.register
def _(e: ev.TestEvaluated) -> str:
    pair = f"seed {_s(e.scores.get('seed'))} -> evolved {_s(e.scores.get('evolved'))}"
    return f"test split ({e.tasks} tasks): {pair}"
