"""Performance gate (HarnessEvolve's rule): gain on this batch >= delta, and on each of the previous
R batches the candidate drops by at most epsilon. In ``mode: sequential`` the gain part is decided
by ``noise.SequentialGate`` instead (see ``performance_verdict``); the recent-batch check stays.
Every verdict carries a confidence interval of the gain (``gain_ci``)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from harnessevolve.gate.config import HeldoutConfig, PerformanceConfig
from harnessevolve.gate.noise import CI_RESAMPLES, TOLERANCE, Decision, Pair, decide_fixed, paired_gain_ci
from harnessevolve.gate.verdict import GateVerdict

__all__ = [
    "TOLERANCE",
    "accepted_on_tie",
    "refuse_tie",
    "heldout_gate",
    "is_tie",
    "mean",
    "performance_gate",
    "performance_verdict",
]


def mean(values: Sequence[float]) -> float:
    return math.fsum(values) / len(values) if values else 0.0


def performance_gate(
    current: Sequence[float],
    candidate: Sequence[float],
    recent: Sequence[tuple[Sequence[float], Sequence[float]]],
    config: PerformanceConfig,
    task_ids: Sequence[str] | None = None,
) -> GateVerdict:
    """Fixed mode. ``current``/``candidate``: per-task scores on this batch, same task order;
    ``recent``: the same pairs for the previous batches, newest first."""
    return performance_verdict(decide_fixed(current, candidate, config, task_ids), recent, config)


def performance_verdict(
    decision: Decision,
    recent: Sequence[tuple[Sequence[float], Sequence[float]]],
    config: PerformanceConfig,
) -> GateVerdict:
    """The performance verdict from a final gain decision (``decide_fixed`` or a finished
    ``SequentialGate``) plus HarnessEvolve's check of the previous ``recent_batches`` batches."""
    if not decision.final:
        raise ValueError("the performance decision is not final yet")
    drops = [mean(cur) - mean(cand) for cur, cand in recent[: config.recent_batches]]
    worst = max(drops, default=0.0)
    numbers = {
        **decision.numbers,
        "recent_drops": [round(d, 4) for d in drops],
        "max_recent_drop": config.max_recent_drop,
    }
    if not decision.accepted:
        return GateVerdict("performance", False, decision.reason, numbers)
    if worst > config.max_recent_drop + TOLERANCE:
        return GateVerdict(
            "performance",
            False,
            f"drop {worst:.3f} on a previous batch > {config.max_recent_drop:.3f}",
            numbers,
        )
    gain = f"batch gain {numbers['gain']:+.3f}" if numbers["mode"] == "fixed" else decision.reason
    if is_tie(numbers):
        numbers["tie"] = True
        gain = (
            f"tie: batch gain {numbers['gain']:+.3f} ({numbers.get('wins', 0)} wins, "
            f"{numbers.get('losses', 0)} losses, {numbers.get('ties', 0)} ties), passed only because "
            f"min_gain is {numbers.get('min_gain', 0.0):+.3f}"
        )
    return GateVerdict("performance", True, f"{gain}, worst recent drop {worst:.3f}", numbers)


def is_tie(numbers: dict[str, Any]) -> bool:
    """A fixed-mode decision on a batch where the candidate gained nothing: every task tied, or its
    wins and losses cancel out (HarnessEvolve's ``gain >= 0`` accepts it; it is no evidence)."""
    return numbers.get("mode") == "fixed" and abs(float(numbers.get("gain", 1.0))) <= TOLERANCE


def accepted_on_tie(verdicts: Sequence[GateVerdict]) -> bool:
    """Whether a candidate passed the performance gate on a tie (see ``is_tie``)."""
    return any(v.gate == "performance" and v.passed and v.numbers.get("tie") for v in verdicts)


def refuse_tie(performance: GateVerdict, heldout: GateVerdict, config: PerformanceConfig) -> GateVerdict:
    """Ties are not gains: a performance pass on a tie (``is_tie``) whose held-out gate shows no
    gain either (candidate <= current on validation) becomes a failed performance verdict, unless
    ``config.accept_ties`` (HarnessEvolve's ``gain >= 0``, shipped as ``gates/paper.yaml``).
    Any other verdict is returned unchanged."""
    if config.accept_ties or not (performance.passed and performance.numbers.get("tie")):
        return performance
    before, after = heldout.numbers.get("current"), heldout.numbers.get("candidate")
    if before is None or after is None or float(after) > float(before) + TOLERANCE:
        return performance  # a validation gain: the tie on the batch is not the whole evidence
    numbers = {**performance.numbers, "tie_refused": True}
    reason = (
        f"refused as a tie: no gain on its batch ({numbers.get('gain', 0.0):+.3f}: {numbers.get('wins', 0)} "
        f"wins, {numbers.get('losses', 0)} losses, {numbers.get('ties', 0)} ties) and none on "
        f"{heldout.numbers.get('split', 'validation')} ({float(before):.3f} -> {float(after):.3f}); "
        "ties are not gains by default (performance.accept_ties: true, as in gates/paper.yaml, would keep it)"
    )
    return GateVerdict("performance", False, reason, numbers)


def heldout_gate(
    current: Sequence[float],
    candidate: Sequence[float],
    config: HeldoutConfig,
    *,
    confidence: float = PerformanceConfig.confidence,
    task_ids: Sequence[str] | None = None,
    ci_resamples: int = CI_RESAMPLES,
) -> GateVerdict:
    """The validation drop against ``max_drop`` (``ci_resamples`` 0: no interval, for simulations)."""
    drop = mean(current) - mean(candidate)
    ids = list(task_ids) if task_ids is not None else [str(i) for i in range(len(current))]
    pairs = [Pair(t, a, b) for t, a, b in zip(ids, current, candidate, strict=True)]
    ci = paired_gain_ci(pairs, confidence, resamples=ci_resamples) if ci_resamples else None
    numbers = {
        "split": config.split,
        "current": round(mean(current), 4),
        "candidate": round(mean(candidate), 4),
        "drop": round(drop, 4),
        "drop_ci": [round(-ci[1], 4) + 0.0, round(-ci[0], 4) + 0.0] if ci else None,
        "confidence": confidence,
        "max_drop": config.max_drop,
        "tasks": len(current),
    }
    if drop > config.max_drop + TOLERANCE:
        return GateVerdict(
            "heldout", False, f"{config.split} drop {drop:.3f} > {config.max_drop:.3f}", numbers
        )
    return GateVerdict(
        "heldout", True, f"{config.split} {mean(current):.3f} -> {mean(candidate):.3f}", numbers
    )
