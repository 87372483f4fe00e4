"""Who spent what: tokens, cost, calls, failures and retries per (stage, proposer, model).

A caller marks who is spending with :func:`usage_scope`; every :func:`~harnessevolve.models.acomplete`
inside it (including inside asyncio tasks created there: contextvars are copied into them, and
into ``loop.run_in_executor`` calls made through ``contextvars.copy_context``) is recorded into
that scope's :class:`UsageMeter`::

    meter = UsageMeter()
    with usage_scope(meter, stage="execute"):
        await run_rollouts(...)
    meter.totals().cost_usd        # budgets
    meter.snapshot()               # JSON for the ledger and the summary

Calls made outside any scope are not metered.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, fields
from typing import Any


@dataclass(frozen=True)
class Usage:
    tokens: int = 0
    cost_usd: float = 0.0
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    failures: int = 0
    """Calls that raised (after their retries)."""
    retries: int = 0
    """Attempts beyond the first, over all calls."""

    def __add__(self, other: Usage) -> Usage:
        return Usage(**{f.name: getattr(self, f.name) + getattr(other, f.name) for f in fields(Usage)})

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["cost_usd"] = round(self.cost_usd, 8)
        return data


@dataclass(frozen=True)
class UsageScope:
    meter: UsageMeter
    stage: str
    proposer: str | None = None


_current: contextvars.ContextVar[UsageScope | None] = contextvars.ContextVar("usage_scope", default=None)
_Key = tuple[str, str | None, str]


class UsageMeter:
    """Sums of :class:`Usage` per (stage, proposer, model); safe from threads and tasks alike
    (recording takes a lock and never awaits)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._rows: dict[_Key, Usage] = {}
        self.listeners: list[Callable[[], None]] = []
        """Called after each recorded call (outside the lock), e.g. to persist the spend."""

    def record(
        self,
        *,
        stage: str,
        proposer: str | None,
        model: str,
        prompt_tokens: int = 0,
        completion_tokens: int = 0,
        cost_usd: float = 0.0,
        failed: bool = False,
        retries: int = 0,
    ) -> None:
        """Count one model call (successful or, with ``failed``, one that raised)."""
        usage = Usage(
            tokens=prompt_tokens + completion_tokens,
            cost_usd=cost_usd,
            calls=1,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            failures=int(failed),
            retries=retries,
        )
        key = (stage, proposer, model)
        with self._lock:
            self._rows[key] = self._rows.get(key, Usage()) + usage
        for listener in self.listeners:
            listener()

    def totals(self) -> Usage:
        with self._lock:
            rows = list(self._rows.values())
        return sum(rows, Usage())

    def rows(self) -> dict[_Key, Usage]:
        with self._lock:
            return dict(self._rows)

    def snapshot(self) -> dict[str, Any]:
        """JSON-friendly sums: ``by_stage``, ``by_proposer``, ``by_model``, ``totals``, and the raw
        ``rows`` (which :meth:`from_snapshot` reads back, e.g. when a run resumes)."""
        rows = self.rows()

        def group(index: int) -> dict[str, Any]:
            sums: dict[str, Usage] = {}
            for key, usage in rows.items():
                name = key[index]
                if name is not None:
                    sums[name] = sums.get(name, Usage()) + usage
            return {name: usage.to_dict() for name, usage in sorted(sums.items())}

        return {
            "by_stage": group(0),
            "by_proposer": group(1),
            "by_model": group(2),
            "totals": sum(rows.values(), Usage()).to_dict(),
            "rows": [
                {"stage": stage, "proposer": proposer, "model": model, **usage.to_dict()}
                for (stage, proposer, model), usage in sorted(rows.items(), key=lambda item: str(item[0]))
            ],
        }

    @classmethod
    def from_snapshot(cls, snapshot: dict[str, Any]) -> UsageMeter:
        """A meter holding the sums of an earlier :meth:`snapshot`."""
        meter = cls()
        names = {f.name for f in fields(Usage)}
        for row in snapshot.get("rows", []):
            key = (row["stage"], row.get("proposer"), row["model"])
            meter._rows[key] = Usage(**{name: row[name] for name in names if name in row})
        return meter


@contextmanager
def usage_scope(meter: UsageMeter, *, stage: str, proposer: str | None = None) -> Iterator[UsageScope]:
    """Record the model calls made inside (this task and the tasks it starts) as ``stage``'s."""
    scope = UsageScope(meter, stage, proposer)
    token = _current.set(scope)
    try:
        yield scope
    finally:
        _current.reset(token)


def current_scope() -> UsageScope | None:
    """The scope model calls are recorded into now (None: not metered)."""
    return _current.get()
