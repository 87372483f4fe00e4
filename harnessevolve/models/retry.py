"""Retrying model calls through transient faults: exponential backoff with full jitter (tenacity).

Retried: rate limits (429), server errors (5xx), timeouts and lost connections — litellm's
``RateLimitError``, ``Timeout``, ``APIConnectionError``, ``InternalServerError``,
``ServiceUnavailableError``, ``BadGatewayError``, any other ``litellm.APIError`` with status 408,
429 or 5xx, and Python's own ``TimeoutError`` / ``ConnectionError``. Never retried: bad keys,
bad requests, unknown models, refused content (401, 400, 404, 403, 422...), and errors our own
providers raise on purpose (a :class:`HarnessEvolveError` anywhere in the cause chain: litellm
wraps whatever a custom provider raises as ``APIConnectionError``). A ``Retry-After`` header on
the error sets the wait, capped at ``max_wait_s``.
"""

from __future__ import annotations

import asyncio
import email.utils
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt
from tenacity.wait import wait_random_exponential

from harnessevolve.core.errors import HarnessEvolveError
from harnessevolve.core.redact import redact

T = TypeVar("T")

_RETRYABLE_NAMES = (
    "RateLimitError",
    "Timeout",
    "APIConnectionError",
    "InternalServerError",
    "ServiceUnavailableError",
    "BadGatewayError",
)
_FINAL_NAMES = (
    "AuthenticationError",
    "BadRequestError",  # includes ContextWindowExceededError, ContentPolicyViolationError
    "NotFoundError",
    "PermissionDeniedError",
    "UnprocessableEntityError",
    "BudgetExceededError",
)
# Programming errors a custom provider may raise; litellm wraps them as APIConnectionError.
_BUG_TYPES = (
    TypeError,
    ValueError,
    KeyError,
    AttributeError,
    IndexError,
    NotImplementedError,
    AssertionError,
)


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int = 4
    """Attempts in all, the first included (1: never retry)."""
    initial_s: float = 1.0
    """Upper bound of the first wait; doubles each retry (the wait is uniform in [0, bound])."""
    max_wait_s: float = 30.0
    """Cap on any one wait, a server's Retry-After included."""
    sleep: Callable[[float], Awaitable[None]] = field(default=asyncio.sleep, compare=False, repr=False)
    """How to wait (tests pass a fake that records the waits)."""

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError(f"max_attempts must be >= 1, got {self.max_attempts}")
        if self.initial_s < 0 or self.max_wait_s < 0:
            raise ValueError("initial_s and max_wait_s must be >= 0")


_default_policy = RetryPolicy()


def retry_policy() -> RetryPolicy:
    """The policy :func:`~harnessevolve.models.acomplete` uses when not given one."""
    return _default_policy


def set_retry_policy(policy: RetryPolicy) -> None:
    global _default_policy
    _default_policy = policy


def _causes(exc: BaseException) -> list[BaseException]:
    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in chain and len(chain) < 16:
        chain.append(current)
        current = current.__cause__ or current.__context__
    return chain


def is_retryable(exc: BaseException) -> bool:
    """Whether ``exc`` is a transient fault worth another attempt."""
    if not isinstance(exc, Exception):
        return False  # cancellation, KeyboardInterrupt
    chain = _causes(exc)
    if any(isinstance(cause, HarnessEvolveError) for cause in chain):
        return False
    mro = {klass.__name__ for klass in type(exc).__mro__ if klass.__module__.startswith("litellm")}
    if mro & set(_FINAL_NAMES):
        return False
    if mro & set(_RETRYABLE_NAMES):
        if "Timeout" not in mro and "APIConnectionError" in mro and len(chain) > 1:
            return not isinstance(chain[1], _BUG_TYPES)
        return True
    status = getattr(exc, "status_code", None)
    if mro and isinstance(status, int):
        return status in (408, 429) or status >= 500
    return isinstance(exc, TimeoutError | ConnectionError)


def retry_after_s(exc: BaseException) -> float | None:
    """Seconds the server asked us to wait (``retry-after-ms`` / ``retry-after``), if it did."""
    for headers in (getattr(exc, "headers", None), getattr(getattr(exc, "response", None), "headers", None)):
        if not headers:
            continue
        lowered = {str(k).lower(): str(v) for k, v in dict(headers).items()}
        if "retry-after-ms" in lowered:
            try:
                return max(0.0, float(lowered["retry-after-ms"]) / 1000)
            except ValueError:
                pass
        if "retry-after" in lowered:
            value = lowered["retry-after"]
            try:
                return max(0.0, float(value))
            except ValueError:
                try:
                    when = email.utils.parsedate_to_datetime(value)
                except (TypeError, ValueError):
                    continue
                return max(0.0, when.timestamp() - time.time())
    return None


class _BackoffOrRetryAfter:
    """Full-jitter exponential backoff, unless the error says how long to wait."""

    def __init__(self, policy: RetryPolicy) -> None:
        self.cap = policy.max_wait_s
        self.backoff = wait_random_exponential(multiplier=policy.initial_s, max=policy.max_wait_s)

    def __call__(self, state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome else None
        asked = retry_after_s(exc) if exc is not None else None
        if asked is not None:
            return min(asked, self.cap)
        return self.backoff(state)


def describe_error(exc: BaseException) -> str:
    """One redacted line naming the error, as recorded in ``extra["retries"]``."""
    return redact(f"{type(exc).__name__}: {exc}".splitlines()[0][:300])


async def call_with_retries(
    attempt: Callable[[], Awaitable[T]], policy: RetryPolicy, retries: list[dict[str, Any]]
) -> T:
    """``await attempt()`` until it succeeds, fails for good, or ``policy.max_attempts`` are spent.

    Appends ``{"attempt", "error", "wait_s"}`` to ``retries`` for each failed attempt followed by
    another; the last error propagates."""

    def record(state: RetryCallState) -> None:
        exc = state.outcome.exception() if state.outcome else None
        wait = state.next_action.sleep if state.next_action else 0.0
        retries.append(
            {
                "attempt": state.attempt_number,
                "error": describe_error(exc) if exc else "",
                "wait_s": round(float(wait), 3),
            }
        )

    retrying = AsyncRetrying(
        stop=stop_after_attempt(policy.max_attempts),
        wait=_BackoffOrRetryAfter(policy),
        retry=retry_if_exception(is_retryable),
        sleep=policy.sleep,
        before_sleep=record,
        reraise=True,
    )
    async for trying in retrying:
        with trying:
            return await attempt()
    raise AssertionError("unreachable: tenacity reraises the last error")  # pragma: no cover
