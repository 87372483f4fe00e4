"""Cost and tokens per stage from the ledger's ``usage`` fields, whichever shape they have.

Two shapes are read: a plain ``{stage: {tokens, cost_usd, ...}}`` (what that event spent), and a
usage meter's cumulative snapshot ``{by_stage: {...}, by_model: {...}, totals: {...}}`` (what the
run spent so far; a generation's share is the difference from the snapshot before it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from harnessevolve.runs import events as ev

UsageTable = dict[str, dict[str, float]]


@dataclass(frozen=True)
class RunUsage:
    by_stage: UsageTable = field(default_factory=dict)
    by_model: UsageTable = field(default_factory=dict)
    by_generation: dict[int, UsageTable] = field(default_factory=dict)


def _table(raw: Any) -> UsageTable:
    if not isinstance(raw, dict):
        return {}
    out: UsageTable = {}
    for name, numbers in raw.items():
        if isinstance(numbers, dict):
            values = {
                k: float(v)
                for k, v in numbers.items()
                if isinstance(v, int | float) and not isinstance(v, bool)
            }
            if values:
                out[str(name)] = values
    return out


def add(a: UsageTable, b: UsageTable, sign: float = 1.0) -> UsageTable:
    out = {k: dict(v) for k, v in a.items()}
    for name, numbers in b.items():
        slot = out.setdefault(name, {})
        for key, value in numbers.items():
            slot[key] = slot.get(key, 0.0) + sign * value
    return out


def _nonzero(table: UsageTable) -> UsageTable:
    return {k: v for k, v in table.items() if any(abs(x) > 1e-12 for x in v.values())}


def fold_usage(events: list[ev.Event]) -> RunUsage:
    by_generation: dict[int, UsageTable] = {}
    cumulative: UsageTable | None = None
    by_model: UsageTable = {}
    summed: UsageTable = {}
    final: UsageTable | None = None
    for e in events:
        raw = getattr(e, "usage", None)
        if not isinstance(raw, dict):
            continue
        generation = getattr(e, "generation", None)
        gen = generation if isinstance(generation, int) else None
        if "by_stage" in raw:
            snapshot = _table(raw["by_stage"])
            share = add(snapshot, cumulative or {}, -1.0)
            cumulative, by_model = snapshot, _table(raw.get("by_model")) or by_model
        else:
            share = _table(raw)
            summed = add(summed, share)
        if isinstance(e, ev.RunFinished):
            final = snapshot if "by_stage" in raw else share
        elif gen is not None:
            by_generation[gen] = _nonzero(add(by_generation.get(gen, {}), share))
    by_stage = final if final is not None else (cumulative if cumulative is not None else summed)
    return RunUsage(by_stage=by_stage, by_model=by_model, by_generation=by_generation)
