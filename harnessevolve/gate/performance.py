"""Performance gate (HarnessEvolve's rule): gain on this batch >= delta, and on each of the previous
R batches the candidate drops by at most epsilon."""

from __future__ import annotations

import math
from collections.abc import Sequence

from harnessevolve.gate.config import HeldoutConfig, PerformanceConfig
from harnessevolve.gate.verdict import GateVerdict

# Scores are fractions (1/3, 2/3 ...): compare with a tolerance so float noise never decides a gate.
TOLERANCE = 1e-9


def mean(values: Sequence[float]) -> float:
    return math.fsum(values) / len(values) if values else 0.0


def performance_gate(
    current: Sequence[float],
    candidate: Sequence[float],
    recent: Sequence[tuple[Sequence[float], Sequence[float]]],
    config: PerformanceConfig,
) -> GateVerdict:
    """``current``/``candidate``: per-task scores on this batch, same task order; ``recent``: the
    same pairs for the previous batches, newest first."""
    gain = mean(candidate) - mean(current)
    drops = [mean(cur) - mean(cand) for cur, cand in recent[: config.recent_batches]]
    worst = max(drops, default=0.0)
    numbers = {
        "current": round(mean(current), 4),
        "candidate": round(mean(candidate), 4),
        "gain": round(gain, 4),
        "min_gain": config.min_gain,
        "recent_drops": [round(d, 4) for d in drops],
        "max_recent_drop": config.max_recent_drop,
        "tasks": len(current),
    }
    if gain < config.min_gain - TOLERANCE:
        return GateVerdict("performance", False, f"batch gain {gain:+.3f} < {config.min_gain:+.3f}", numbers)
    if worst > config.max_recent_drop + TOLERANCE:
        return GateVerdict(
            "performance",
            False,
            f"drop {worst:.3f} on a previous batch > {config.max_recent_drop:.3f}",
            numbers,
        )
    return GateVerdict("performance", True, f"batch gain {gain:+.3f}, worst recent drop {worst:.3f}", numbers)


def heldout_gate(current: Sequence[float], candidate: Sequence[float], config: HeldoutConfig) -> GateVerdict:
    drop = mean(current) - mean(candidate)
    numbers = {
        "split": config.split,
        "current": round(mean(current), 4),
        "candidate": round(mean(candidate), 4),
        "drop": round(drop, 4),
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
