"""The comparison table: per arm, the test score as mean ± sd over seeds with each seed's value;
the paired difference against the ``seed`` arm and against best-of-k's self-consistent pick, with
a confidence interval from a paired bootstrap over tasks (each task resampled with its pairs of
every seed: ``gate.noise.paired_gain_ci``); wins and losses (pairs where the arm scored above or
below); the rollouts that made the arm's harness. Losses are shown as they are.

A best-of-k arm gives two rows: ``(sc)``, the deployable self-consistent pick, and ``(pass@k
oracle)``, a bound that needs the checker at pick time. Scores and differences are in points
(percent of test tasks). Rollouts and cost are means over seeds; cost is what the cell's model
calls cost, making and scoring (``$0`` for local and scripted models).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from harnessevolve.compare.results import CellResult
from harnessevolve.gate.noise import Pair, paired_gain_ci

CONFIDENCE = 0.95
TABLE_VERSION = 1
KIND_ORDER = ("seed", "evolve", "gepa", "best-of-k", "harness")


@dataclass(frozen=True)
class Gain:
    """A row minus a baseline row, paired per (seed, task)."""

    against: str
    points: float
    ci: tuple[float, float] | None
    pairs: int
    wins: int
    losses: int

    def to_json(self) -> dict[str, Any]:
        return {
            "against": self.against,
            "points": round(self.points, 2),
            "ci": [round(self.ci[0], 2), round(self.ci[1], 2)] if self.ci else None,
            "pairs": self.pairs,
            "wins": self.wins,
            "losses": self.losses,
        }


@dataclass(frozen=True)
class Row:
    label: str
    arm: str
    kind: str
    per_seed: dict[int, dict[str, float]]
    """seed -> task id -> score."""
    rollouts: dict[int, int]
    tokens: dict[int, int]
    details: dict[str, Any] = field(default_factory=dict)
    cost_usd: dict[int, float] = field(default_factory=dict)
    """seed -> what the cell's model calls cost (making and scoring)."""
    vs_seed: Gain | None = None
    vs_sc: Gain | None = None

    def scores(self) -> dict[int, float]:
        return {s: statistics.fmean(t.values()) * 100 for s, t in sorted(self.per_seed.items()) if t}

    @property
    def mean(self) -> float:
        values = list(self.scores().values())
        return statistics.fmean(values) if values else 0.0

    @property
    def sd(self) -> float | None:
        values = list(self.scores().values())
        return statistics.stdev(values) if len(values) > 1 else None

    @property
    def cost_mean(self) -> float:
        return statistics.fmean(self.cost_usd.values()) if self.cost_usd else 0.0

    @property
    def rollouts_mean(self) -> float:
        return statistics.fmean(self.rollouts.values()) if self.rollouts else 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "arm": self.arm,
            "kind": self.kind,
            "mean": round(self.mean, 2),
            "sd": round(self.sd, 2) if self.sd is not None else None,
            "per_seed": {str(s): round(v, 2) for s, v in self.scores().items()},
            "rollouts": {str(s): n for s, n in sorted(self.rollouts.items())},
            "rollouts_mean": round(statistics.fmean(self.rollouts.values()), 1) if self.rollouts else 0,
            "tokens_mean": round(statistics.fmean(self.tokens.values()), 1) if self.tokens else 0,
            "cost_usd_mean": round(self.cost_mean, 6),
            "vs_seed": self.vs_seed.to_json() if self.vs_seed else None,
            "vs_best_of_k_sc": self.vs_sc.to_json() if self.vs_sc else None,
            "details": self.details,
        }


@dataclass(frozen=True)
class Table:
    rows: tuple[Row, ...]
    benchmark: dict[str, Any]
    model: dict[str, Any]
    scorer: dict[str, Any]
    seeds: tuple[int, ...]
    cells: int

    def to_json(self) -> dict[str, Any]:
        return {
            "version": TABLE_VERSION,
            "benchmark": self.benchmark,
            "model": self.model,
            "scorer": self.scorer,
            "seeds": list(self.seeds),
            "cells": self.cells,
            "confidence": CONFIDENCE,
            "units": "points (percent of test tasks)",
            "rows": [r.to_json() for r in self.rows],
        }


def paired_gain(row: Row, base: Row) -> Gain | None:
    """``row`` minus ``base`` over the (seed, task) pairs both have; None when they share none."""
    pairs = [
        Pair(task, base.per_seed[seed][task], scores[task])
        for seed, scores in sorted(row.per_seed.items())
        if seed in base.per_seed
        for task in sorted(scores)
        if task in base.per_seed[seed]
    ]
    if not pairs:
        return None
    ci = paired_gain_ci(pairs, CONFIDENCE)
    return Gain(
        against=base.label,
        points=statistics.fmean(p.candidate - p.current for p in pairs) * 100,
        ci=(ci[0] * 100, ci[1] * 100) if ci else None,
        pairs=len(pairs),
        wins=sum(1 for p in pairs if p.sign > 0),
        losses=sum(1 for p in pairs if p.sign < 0),
    )


def _rows_of(arm: str, cells: Sequence[CellResult]) -> list[Row]:
    kind = cells[0].kind
    rollouts = {c.seed: c.rollouts for c in cells}
    tokens = {c.seed: c.tokens for c in cells}
    cost = {c.seed: c.cost_usd for c in cells}
    if kind != "best-of-k":
        return [Row(arm, arm, kind, {c.seed: c.tasks for c in cells}, rollouts, tokens, cost_usd=cost)]
    ks = sorted({int(c.details.get("k", 0)) for c in cells})
    details = {"k": ks[0] if len(ks) == 1 else ks, "matched_to": cells[0].details.get("matched_to")}
    sc = Row(f"{arm} (sc)", arm, kind, {c.seed: c.tasks for c in cells}, rollouts, tokens, details, cost)
    oracle = Row(
        f"{arm} (pass@k oracle)",
        arm,
        kind,
        {c.seed: c.oracle or {} for c in cells},
        rollouts,
        tokens,
        details,
        cost,
    )
    return [sc, oracle]


def build_table(results: Sequence[CellResult], arm_order: Sequence[str] = ()) -> Table:
    """The table of ``results`` (cells that share a benchmark, model and scorer: ``merge``
    checks that). Arms in ``arm_order`` first, in that order; the rest by kind, then name."""
    by_arm: dict[str, list[CellResult]] = {}
    for result in sorted(results, key=lambda r: (r.arm, r.seed)):
        by_arm.setdefault(result.arm, []).append(result)
    rest = sorted(
        (a for a in by_arm if a not in arm_order), key=lambda a: (KIND_ORDER.index(by_arm[a][0].kind), a)
    )
    order = [a for a in arm_order if a in by_arm] + rest
    rows = [row for arm in order for row in _rows_of(arm, by_arm[arm])]
    seed = next((r for r in rows if r.kind == "seed"), None)
    sc_rows = [r for r in rows if r.kind == "best-of-k" and r.label.endswith("(sc)")]
    done: list[Row] = []
    for row in rows:
        sc = _control_for(row, sc_rows)
        done.append(
            Row(
                row.label,
                row.arm,
                row.kind,
                row.per_seed,
                row.rollouts,
                row.tokens,
                row.details,
                row.cost_usd,
                vs_seed=paired_gain(row, seed) if seed is not None and row is not seed else None,
                vs_sc=paired_gain(row, sc) if sc is not None and row.arm != sc.arm else None,
            )
        )
    first = results[0] if results else None
    return Table(
        tuple(done),
        dict(first.benchmark) if first else {},
        dict(first.model) if first else {},
        dict(first.scorer) if first else {},
        tuple(sorted({r.seed for r in results})),
        len(results),
    )


def _control_for(row: Row, sc_rows: Sequence[Row]) -> Row | None:
    """The best-of-k (sc) row a row is held against: the one matched to its arm, else the first."""
    matched = next((r for r in sc_rows if r.details.get("matched_to") == row.arm), None)
    return matched or (sc_rows[0] if sc_rows else None)


def gain_text(gain: Gain | None) -> str:
    if gain is None:
        return "—"
    ci = f" [{gain.ci[0]:+.1f}, {gain.ci[1]:+.1f}]" if gain.ci else ""
    return f"{gain.points:+.1f}{ci} ({gain.wins}W/{gain.losses}L)"


def row_cells(row: Row) -> list[str]:
    """A row's cells as the Markdown table and the HTML page show them."""
    sd = f" ± {row.sd:.1f}" if row.sd is not None else ""
    label = row.label + (f" k={row.details['k']}" if row.label.endswith("(sc)") else "")
    return [
        label,
        f"{row.mean:.1f}{sd}",
        ", ".join(f"{v:.1f}" for v in row.scores().values()),
        gain_text(row.vs_seed),
        gain_text(row.vs_sc),
        f"{row.rollouts_mean:.0f}",
        cost_text(row.cost_mean),
    ]


def cost_text(usd: float) -> str:
    """``$0`` (local and scripted models), else dollars to the cent, or below a cent."""
    if usd <= 0:
        return "$0"
    return f"${usd:.2f}" if usd >= 0.01 else "<$0.01"


def markdown(table: Table) -> str:
    """The table as Markdown (what README and docs paste), with the line that says what it is."""
    bench = table.benchmark
    head = (
        f"{bench.get('name', '?')} ({bench.get('test_tasks', '?')} test tasks, "
        f"sha {bench.get('test_sha', '?')}); "
        f"agent model {table.model.get('name', '?')}; seeds {', '.join(map(str, table.seeds))}; "
        f"{table.cells} cells. Test score in points, mean ± sd over seeds; differences paired per "
        f"(seed, task) with a {CONFIDENCE:.0%} bootstrap interval over tasks; W/L: pairs won/lost."
    )
    lines = [
        head,
        "",
        "| arm | test (mean ± sd) | per seed | vs seed | vs best-of-k (sc) | rollouts | cost |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in table.rows:
        lines.append("| " + " | ".join(row_cells(row)) + " |")
    return "\n".join(lines)
