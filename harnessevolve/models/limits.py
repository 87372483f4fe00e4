"""Per-model concurrency and rate limits, applied by :func:`harnessevolve.models.acomplete`.

Limits are registered for a model name or an fnmatch pattern (``openai/*``; ``*`` is the
default). The most specific registration wins: an exact name, then the longest matching pattern,
then ``*``. Each model name gets its own limits (two models matching ``openai/*`` each get
``max_concurrency`` slots).

* ``max_concurrency``: calls in flight at once, per model and per event loop (an
  :class:`asyncio.Semaphore` belongs to one loop, so each running loop gets its own).
* ``requests_per_minute``: calls started per minute, per model, across every loop and thread of
  the process: a small thread-safe token bucket that spaces calls ``60 / rpm`` seconds apart
  (bursts up to ``burst`` calls). Hand-written rather than ``aiolimiter``: that one binds its
  waiters to one event loop, this one must hold across the threads of the local pool and takes
  an injectable clock for tests; it is 30 lines.
* ``request_timeout_s``: passed to litellm as ``timeout``; a call past it raises a retried
  ``litellm.Timeout``.
"""

from __future__ import annotations

import asyncio
import fnmatch
import threading
import time
import weakref
from collections.abc import Awaitable, Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class ModelLimits:
    max_concurrency: int | None = None
    """Calls in flight at once for one model (per event loop); None: unlimited."""
    requests_per_minute: float | None = None
    """Calls started per minute for one model (whole process); None: unlimited."""
    request_timeout_s: float | None = None
    """Seconds before one request is abandoned (and retried); None: litellm's default."""
    burst: int = 1
    """Calls the rate limiter lets through back to back before spacing them."""

    def __post_init__(self) -> None:
        if self.max_concurrency is not None and self.max_concurrency < 1:
            raise ValueError(f"max_concurrency must be >= 1, got {self.max_concurrency}")
        if self.requests_per_minute is not None and self.requests_per_minute <= 0:
            raise ValueError(f"requests_per_minute must be > 0, got {self.requests_per_minute}")
        if self.request_timeout_s is not None and self.request_timeout_s <= 0:
            raise ValueError(f"request_timeout_s must be > 0, got {self.request_timeout_s}")
        if self.burst < 1:
            raise ValueError(f"burst must be >= 1, got {self.burst}")


UNLIMITED = ModelLimits()


class RateLimiter:
    """A token bucket: ``rate_per_s`` tokens a second, at most ``capacity`` saved up.

    Thread-safe; :meth:`acquire` reserves a token under a lock and sleeps (outside it) until the
    reservation is due, so it works from any event loop or thread."""

    def __init__(
        self,
        rate_per_s: float,
        capacity: int = 1,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.interval = 1.0 / rate_per_s
        self.capacity = capacity
        self._clock = clock
        self._sleep = sleep
        self._lock = threading.Lock()
        # GCRA: the theoretical arrival time of the next call; calls may run up to
        # (capacity - 1) intervals ahead of it.
        self._next_at = clock()

    def reserve(self) -> float:
        """Take a token; returns the seconds to wait before using it (0 when one was available)."""
        with self._lock:
            now = self._clock()
            due = max(self._next_at, now)
            self._next_at = due + self.interval
            return max(0.0, due - (self.capacity - 1) * self.interval - now)

    async def acquire(self) -> float:
        """Wait for a token; returns the seconds waited."""
        delay = self.reserve()
        if delay > 0:
            await self._sleep(delay)
        return delay


_lock = threading.Lock()
_registry: dict[str, ModelLimits] = {}
_limiters: dict[str, tuple[ModelLimits, RateLimiter]] = {}
_semaphores: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, tuple[int, asyncio.Semaphore]]]
_semaphores = weakref.WeakKeyDictionary()


def configure_limits(model_pattern: str, limits: ModelLimits) -> None:
    """Apply ``limits`` to models named ``model_pattern`` (an exact name or an fnmatch pattern)."""
    with _lock:
        _registry[model_pattern] = limits


def clear_limits() -> None:
    """Forget every registration (tests; a run that reconfigures from scratch)."""
    with _lock:
        _registry.clear()
        _limiters.clear()


def limits_for(model: str) -> ModelLimits:
    """The limits that apply to ``model``: exact name, then the longest matching pattern, then ``*``."""
    with _lock:
        if model in _registry:
            return _registry[model]
        matching = [p for p in _registry if p != "*" and fnmatch.fnmatchcase(model, p)]
        if matching:
            return _registry[max(matching, key=len)]
        return _registry.get("*", UNLIMITED)


def rate_limiter(model: str, limits: ModelLimits) -> RateLimiter | None:
    """The process-wide limiter of ``model`` (None when it has no rate limit)."""
    if limits.requests_per_minute is None:
        return None
    with _lock:
        known = _limiters.get(model)
        if known is None or known[0] != limits:
            known = (limits, RateLimiter(limits.requests_per_minute / 60.0, limits.burst))
            _limiters[model] = known
        return known[1]


def concurrency_slot(model: str, limits: ModelLimits) -> asyncio.Semaphore | None:
    """The semaphore of ``model`` in the running event loop (None when unlimited)."""
    if limits.max_concurrency is None:
        return None
    loop = asyncio.get_running_loop()
    with _lock:
        per_loop = _semaphores.setdefault(loop, {})
        known = per_loop.get(model)
        if known is None or known[0] != limits.max_concurrency:
            known = (limits.max_concurrency, asyncio.Semaphore(limits.max_concurrency))
            per_loop[model] = known
        return known[1]
