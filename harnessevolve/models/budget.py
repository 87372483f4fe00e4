"""Budgets (``--max-cost-usd``, ``--max-tokens``, ``--max-hours``) and who spent what.

Every model call is metered by ``harnessevolve.models.usage`` into the scope the pipeline marks
with ``spending(stage, proposer)``; cost comes from litellm's price data (local and scripted
models cost 0). The generation loop calls ``BudgetGuard.check`` at safe points -- before each
generation, before proposing, before judging -- so a run stops between stages with everything
saved; a stage already under way finishes first, so a run may overshoot by at most one stage.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from harnessevolve.models.usage import Usage, UsageMeter, usage_scope

_METER: ContextVar[UsageMeter | None] = ContextVar("harnessevolve_meter", default=None)


@contextlib.contextmanager
def metering(meter: UsageMeter) -> Iterator[UsageMeter]:
    """Make ``meter`` the run's meter for everything started inside (asyncio tasks included)."""
    token = _METER.set(meter)
    try:
        yield meter
    finally:
        _METER.reset(token)


@contextlib.contextmanager
def spending(stage: str, proposer: str | None = None) -> Iterator[None]:
    """Charge the model calls made inside to ``stage`` (and ``proposer``) of the run's meter."""
    meter = _METER.get()
    if meter is None:
        yield
        return
    with usage_scope(meter, stage=stage, proposer=proposer):
        yield


@dataclass(frozen=True)
class Budget:
    max_cost_usd: float | None = None
    """Stop once model calls have cost this much (litellm's price data; local models cost 0)."""
    max_tokens: int | None = None
    """Stop once model calls have used this many prompt + completion tokens."""
    max_hours: float | None = None
    """Stop once the run has been going this long (wall clock)."""

    @property
    def limited(self) -> bool:
        return any(v is not None for v in (self.max_cost_usd, self.max_tokens, self.max_hours))


class BudgetExhausted(Exception):
    """A budget was reached; the loop stops cleanly between stages."""

    def __init__(self, limit: str, spent: float, cap: float) -> None:
        super().__init__(f"{limit} budget reached: {spent:g} of {cap:g}")
        self.limit = limit
        self.spent = spent
        self.cap = cap

    def to_dict(self) -> dict[str, Any]:
        return {"limit": self.limit, "spent": self.spent, "cap": self.cap}


class BudgetGuard:
    def __init__(
        self,
        budget: Budget,
        meter: UsageMeter,
        *,
        clock: Callable[[], float] = time.monotonic,
        elapsed_s: float = 0.0,
    ) -> None:
        """``elapsed_s``: time the run had already been going (a resumed run counts from its start)."""
        self.budget = budget
        self.meter = meter
        self.clock = clock
        self.started = clock() - elapsed_s

    def hours(self) -> float:
        return (self.clock() - self.started) / 3600

    def exhausted(self) -> str | None:
        """Why the run may not spend any more (``tokens budget reached: 120 of 100``), or None;
        what the model endpoint of external agents asks before each call."""
        try:
            self.check()
        except BudgetExhausted as exc:
            return str(exc)
        return None

    def check(self) -> None:
        totals = self.meter.totals()
        budget = self.budget
        if budget.max_cost_usd is not None and totals.cost_usd >= budget.max_cost_usd:
            raise BudgetExhausted("cost_usd", round(totals.cost_usd, 6), budget.max_cost_usd)
        if budget.max_tokens is not None and totals.tokens >= budget.max_tokens:
            raise BudgetExhausted("tokens", totals.tokens, budget.max_tokens)
        if budget.max_hours is not None and self.hours() >= budget.max_hours:
            raise BudgetExhausted("hours", round(self.hours(), 4), budget.max_hours)


PROPOSER_STAGE = "optimizer_agent"
"""The stage the optimizer agent's model calls are metered under (``--proposer agent``): its spend
shows apart from the agent's (``execute``, ``gate``) and the other proposers' (``optimize``)."""


@dataclass(frozen=True)
class ProposerBudget:
    """``--max-proposer-cost-usd`` / ``--max-proposer-tokens``: what the optimizer agent may spend
    over the run, on top of (and counted within) the run's own budget."""

    max_cost_usd: float | None = None
    max_tokens: int | None = None

    @property
    def limited(self) -> bool:
        return self.max_cost_usd is not None or self.max_tokens is not None

    def spent(self, meter: UsageMeter) -> Usage:
        """What the optimizer agent has spent so far (its stage's rows of ``meter``)."""
        return sum((u for (stage, _p, _m), u in meter.rows().items() if stage == PROPOSER_STAGE), Usage())

    def exhausted(self, meter: UsageMeter) -> str | None:
        """Why the optimizer agent may not spend more (``proposer tokens budget reached: ...``), or None."""
        spent = self.spent(meter)
        if self.max_cost_usd is not None and spent.cost_usd >= self.max_cost_usd:
            return f"proposer cost_usd budget reached: {spent.cost_usd:g} of {self.max_cost_usd:g}"
        if self.max_tokens is not None and spent.tokens >= self.max_tokens:
            return f"proposer tokens budget reached: {spent.tokens} of {self.max_tokens}"
        return None


def spend_line(by_stage: dict[str, dict[str, float]]) -> str:
    """The run's spend in one line, the optimizer agent's share apart (what ``status`` shows)."""
    total_tokens = sum(int(row.get("tokens", 0)) for row in by_stage.values())
    total_cost = sum(float(row.get("cost_usd", 0.0)) for row in by_stage.values())
    line = f"{total_tokens} tokens, ${total_cost:.4f}"
    agent = by_stage.get(PROPOSER_STAGE)
    if agent:
        tokens, cost = int(agent.get("tokens", 0)), float(agent.get("cost_usd", 0.0))
        line += f"; optimizer agent {tokens} tokens, ${cost:.4f} in {int(agent.get('calls', 0))} call(s)"
    return line
