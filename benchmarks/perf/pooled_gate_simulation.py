"""The default gate (gates/default.yaml: pooled, with the unopposed rule) beside the sign test alone
(gates/pooled.yaml) and HarnessEvolve's per-batch rule (gates/fixed.yaml, the default until
2026-12-07) at the sizes small-model runs use: a batch of 8, 2 recent batches of 8, validation 8
or 16 tasks.

Each decision draws its tasks from a pool of 200 with heterogeneous success rates (U-shaped, as in
gate_simulation.py; the "fails most tasks" rows shift them down by 0.3). Stochastic scenarios draw
every rollout as an independent Bernoulli, so the truth is known: the candidate 10 points better on
every task, no better, 10 points worse. Temperature-0 scenarios are deterministic: each task's
outcome is fixed and the edit flips a share of tasks (drawn afresh for each decision, so the share
is exact on average): "fixes 1 task in 10" (or 20) is a good edit, "flips 1 in 20 each way" and
"fixes 1 in 10, breaks 1 in 10" are no better, "fixes 1 in 20, breaks 1 in 10" is worse. Every rule
is the package's own functions: the fixed rule is ``decide_fixed`` + ``performance_verdict`` (the
recent-batch drop) + ``heldout_gate`` + ``refuse_tie``; the pooled ones ``decide_pooled``. Prints
the accept rates side by side and writes them as JSON.

    .venv/bin/python benchmarks/perf/pooled_gate_simulation.py \
        --json benchmarks/perf/results/pooled_gate_simulation.json
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from harnessevolve.gate.config import GateConfig, load_gate_config
from harnessevolve.gate.noise import Pair, decide_fixed, decide_pooled
from harnessevolve.gate.performance import heldout_gate, performance_verdict, refuse_tie

POOL = 200
BATCH = 8
RECENT = 2
Draw = Callable[[random.Random, int], float]
"""A scenario's candidate rate for a task of current rate p (stochastic), given the task index."""


def pool(low: bool) -> list[float]:
    rng = random.Random("pool")
    shift = -0.3 if low else 0.0
    return [min(0.98, max(0.02, 0.10 + 0.78 * rng.betavariate(0.7, 0.7) + shift)) for _ in range(POOL)]


def stochastic(delta: float) -> Callable[[random.Random, float, int], tuple[float, float]]:
    def pair(rng: random.Random, p: float, _task: int) -> tuple[float, float]:
        q = min(1.0, max(0.0, p + delta))
        return float(rng.random() < p), float(rng.random() < q)

    return pair


def deterministic(helps: float, hurts: float) -> Callable[[random.Random, float, int], tuple[float, float]]:
    """Temperature 0: the current harness's outcome is one draw at the task's rate; the edit turns a
    failure into a pass on a share ``helps`` of tasks and a pass into a failure on a share ``hurts``
    (for each decision afresh), and changes nothing elsewhere."""

    def pair(rng: random.Random, p: float, _task: int) -> tuple[float, float]:
        fate, before = rng.random(), float(rng.random() < p)
        if fate < helps:
            return 0.0, 1.0
        if fate < helps + hurts:
            return 1.0, 0.0
        return before, before

    return pair


SCENARIOS: dict[str, tuple[Callable[[random.Random, float, int], tuple[float, float]], bool]] = {
    "+10 points on every task": (stochastic(0.10), True),
    "no better": (stochastic(0.0), False),
    "-10 points on every task": (stochastic(-0.10), False),
    "temperature 0: fixes 1 task in 10": (deterministic(0.10, 0.0), True),
    "temperature 0: fixes 1 task in 20": (deterministic(0.05, 0.0), True),
    "temperature 0: flips 1 in 20 each way": (deterministic(0.05, 0.05), False),
    "temperature 0: fixes 1 in 10, breaks 1 in 10": (deterministic(0.10, 0.10), False),
    "temperature 0: fixes 1 in 20, breaks 1 in 10": (deterministic(0.05, 0.10), False),
}
RULES = ("fixed", "default", "sign test")
"""gates/fixed.yaml, gates/default.yaml (pooled with the unopposed rule), gates/pooled.yaml."""


def draw(rng: random.Random, rates: Sequence[float], scenario: Any, tasks: Sequence[int]) -> list[Pair]:
    return [Pair(f"t{t}", *scenario(rng, rates[t], t)) for t in tasks]


def fixed_accepts(config: GateConfig, batch: list[Pair], recent: list[list[Pair]], val: list[Pair]) -> bool:
    perf_config = config.performance
    decision = decide_fixed(
        [p.current for p in batch], [p.candidate for p in batch], perf_config, ci_resamples=0
    )
    recent_scores = [([p.current for p in r], [p.candidate for p in r]) for r in recent]
    perf = performance_verdict(decision, recent_scores, perf_config)
    if not perf.passed:
        return False
    held = heldout_gate([p.current for p in val], [p.candidate for p in val], config.heldout, ci_resamples=0)
    return held.passed and refuse_tie(perf, held, perf_config).passed


def simulate(
    decisions: int, validation: int, low: bool, seed: int, alpha: float | None = None
) -> dict[str, dict[str, float]]:
    fixed, default, sign = (
        load_gate_config(Path("fixed")),
        load_gate_config(),
        load_gate_config(Path("pooled")),
    )
    if alpha is not None:
        default, sign = (
            replace(g, performance=replace(g.performance, pooled_alpha=alpha)) for g in (default, sign)
        )
    rates = pool(low)
    out: dict[str, dict[str, float]] = {}
    for name, (scenario, _better) in SCENARIOS.items():
        rng = random.Random(f"{seed}:{name}:{validation}:{low}")
        counts = dict.fromkeys(RULES, 0)
        for _ in range(decisions):
            tasks = rng.sample(range(POOL), BATCH * (1 + RECENT) + validation)
            batch = draw(rng, rates, scenario, tasks[:BATCH])
            recent = [
                draw(rng, rates, scenario, tasks[BATCH * (1 + i) : BATCH * (2 + i)]) for i in range(RECENT)
            ]
            val = draw(rng, rates, scenario, tasks[BATCH * (1 + RECENT) :])
            counts["fixed"] += fixed_accepts(fixed, batch, recent, val)
            evidence = {"batch": batch, "recent": [p for r in recent for p in r], "validation": val}
            counts["default"] += decide_pooled(evidence, default.performance, ci_resamples=0).accepted
            counts["sign test"] += decide_pooled(evidence, sign.performance, ci_resamples=0).accepted
        out[name] = {rule: round(n / decisions, 4) for rule, n in counts.items()}
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--decisions", type=int, default=4000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--alpha", type=float, default=None, help="pooled_alpha (default: gates/pooled.yaml's)"
    )
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--smoke", action="store_true", help="50 decisions: a check that it runs")
    args = parser.parse_args(argv)
    if args.smoke:
        args.decisions = 50
    started = time.monotonic()
    alpha = args.alpha if args.alpha is not None else load_gate_config().performance.pooled_alpha
    results: dict[str, Any] = {}
    print(
        f"batch {BATCH}, {RECENT} recent batches of {BATCH}; pooled_alpha {alpha}; "
        f"{args.decisions} decisions each"
    )
    print(
        "| agent | validation | scenario | should accept | fixed rule (gates/fixed.yaml) | "
        "default (pooled + unopposed) | sign test alone (gates/pooled.yaml) |"
    )
    print("|---|---|---|---|---|---|---|")
    for low in (False, True):
        for validation in (8, 16):
            table = simulate(args.decisions, validation, low, args.seed, alpha)
            key = f"{'low' if low else 'mid'}-val{validation}"
            results[key] = table
            for name, rates in table.items():
                better = SCENARIOS[name][1]
                print(
                    f"| {'fails most tasks' if low else 'mid rates'} | {validation} | {name} | "
                    f"{'yes' if better else 'no'} | {rates['fixed']:.1%} | {rates['default']:.1%} | "
                    f"{rates['sign test']:.1%} |"
                )
    print(f"({time.monotonic() - started:.1f} s)")
    if args.json is not None:
        doc = {
            "command": " ".join([Path(sys.executable).name, *sys.argv]),
            "decisions": args.decisions,
            "seed": args.seed,
            "batch": BATCH,
            "recent_batches": RECENT,
            "pooled_alpha": alpha,
            "load_average": list(os.getloadavg()),
            "accept_rates": results,
        }
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(doc, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
