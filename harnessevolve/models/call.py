"""One chat-completion call through litellm, reduced to the plain data the agent loop needs;
with retries, per-model limits and usage metering around it."""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass, field, replace
from typing import Any

from harnessevolve.models.limits import concurrency_slot, limits_for, rate_limiter
from harnessevolve.models.pricing import given_price
from harnessevolve.models.registry import litellm_module
from harnessevolve.models.retry import RetryPolicy, call_with_retries, retry_policy
from harnessevolve.models.tool_names import (
    rename_messages,
    rename_tool_choice,
    rename_tools,
    safe_names,
    tool_names_of,
)
from harnessevolve.models.tracing import traced_call
from harnessevolve.models.usage import current_scope


@dataclass(frozen=True)
class ModelToolCall:
    id: str
    name: str
    arguments: dict[str, Any] | None
    """Parsed arguments; ``None`` when the model's argument text was not a JSON object."""
    raw_arguments: str = ""


@dataclass(frozen=True)
class ModelReply:
    content: str
    tool_calls: tuple[ModelToolCall, ...] = ()
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    """Prompt tokens the provider did not evaluate again (its prompt cache; the local model's KV
    cache): ``usage.prompt_tokens_details.cached_tokens``, 0 when the provider does not say."""
    cost_usd: float = 0.0
    parse_error: str | None = None
    """Set by providers that parse tool calls out of text (the local model) when that failed."""
    extra: dict[str, Any] = field(default_factory=dict)


def _parse_arguments(raw: Any) -> dict[str, Any] | None:
    if isinstance(raw, dict):
        return raw
    try:
        parsed = json.loads(raw or "{}")
    except (TypeError, json.JSONDecodeError):
        return None
    return parsed if isinstance(parsed, dict) else None


_UNPRICED: set[str] = set()
"""Models litellm has no price data for (their calls cost 0)."""


async def acomplete(
    model: str,
    messages: list[dict[str, Any]],
    *,
    tools: list[dict[str, Any]] | None = None,
    temperature: float = 0.0,
    max_tokens: int | None = None,
    seed: int | None = None,
    extra_params: dict[str, Any] | None = None,
    retry: RetryPolicy | None = None,
) -> ModelReply:
    """Ask ``model`` (any litellm model name) for the next assistant turn.

    Transient faults (rate limits, server errors, timeouts, lost connections) are retried per
    ``retry`` (default: :func:`retry_policy`); each retry is listed in ``extra["retries"]`` of the
    reply. The model's :mod:`~harnessevolve.models.limits` apply to every attempt, and the call is
    recorded in the current :func:`~harnessevolve.models.usage.usage_scope`, failed or not. A call
    that still fails raises litellm's exception, with the retries in its ``harnessevolve_retries``.
    Tool names a provider would refuse (``math.add``) are offered under safe ones and mapped back
    in the reply (:mod:`~harnessevolve.models.tool_names`)."""
    litellm = litellm_module()
    limits = limits_for(model)
    params: dict[str, Any] = {"temperature": temperature}
    names = safe_names(tool_names_of(tools or ()))  # math.add -> math_add for the provider, and back
    if names:
        tools = rename_tools(list(tools or ()), names)
        messages = rename_messages(messages, names)
        if extra_params and "tool_choice" in extra_params:
            choice = rename_tool_choice(extra_params["tool_choice"], names)
            extra_params = {**extra_params, "tool_choice": choice}
    if tools:
        params["tools"] = tools
    if max_tokens is not None:
        params["max_tokens"] = max_tokens
    if seed is not None:
        params["seed"] = seed
    if limits.request_timeout_s is not None:
        params["timeout"] = limits.request_timeout_s
    params.update(extra_params or {})
    retries: list[dict[str, Any]] = []

    async def attempt() -> Any:
        slot = concurrency_slot(model, limits)
        limiter = rate_limiter(model, limits)
        if slot is None:
            if limiter is not None:
                await limiter.acquire()
            return await litellm.acompletion(model=model, messages=messages, **params)
        async with slot:
            if limiter is not None:
                await limiter.acquire()
            return await litellm.acompletion(model=model, messages=messages, **params)

    try:
        response = await traced_call(
            model,
            call_with_retries(attempt, retry or retry_policy(), retries),
            messages=messages,
            temperature=temperature,
            max_tokens=max_tokens,
            seed=seed,
        )
    except Exception as exc:
        _meter(model, failed=True, retries=len(retries))
        with contextlib.suppress(AttributeError):  # exceptions with __slots__ cannot carry them
            exc.harnessevolve_retries = retries  # type: ignore[attr-defined]
        raise
    reply = _to_reply(litellm, response, model)
    if names:
        original = {safe: name for name, safe in names.items()}
        reply = replace(
            reply,
            tool_calls=tuple(replace(c, name=original.get(c.name, c.name)) for c in reply.tool_calls),
        )
    if retries:
        reply.extra["retries"] = retries
    _meter(
        model,
        prompt_tokens=reply.prompt_tokens,
        completion_tokens=reply.completion_tokens,
        cost_usd=reply.cost_usd,
        retries=len(retries),
    )
    return reply


def _meter(model: str, **usage: Any) -> None:
    scope = current_scope()
    if scope is not None:
        scope.meter.record(stage=scope.stage, proposer=scope.proposer, model=model, **usage)


def _cached_tokens(usage: Any) -> int:
    details = getattr(usage, "prompt_tokens_details", None)
    cached = getattr(details, "cached_tokens", None) if details is not None else None
    return int(cached) if isinstance(cached, int) and cached > 0 else 0


def _to_reply(litellm: Any, response: Any, model: str) -> ModelReply:
    message = response.choices[0].message
    calls = tuple(
        ModelToolCall(
            id=c.id or f"call-{i}",
            name=c.function.name or "",
            arguments=_parse_arguments(c.function.arguments),
            raw_arguments=c.function.arguments
            if isinstance(c.function.arguments, str)
            else json.dumps(c.function.arguments),
        )
        for i, c in enumerate(message.tool_calls or [])
    )
    usage = getattr(response, "usage", None)
    cost = 0.0
    given = given_price(model)
    if given is not None:
        cost = given.cost(
            getattr(usage, "prompt_tokens", 0) or 0, getattr(usage, "completion_tokens", 0) or 0
        )
    elif model not in _UNPRICED:
        try:
            cost = float(litellm.completion_cost(completion_response=response) or 0.0)
        except Exception:  # noqa: BLE001 - models without price data (local, scripted) cost nothing
            _UNPRICED.add(model)  # looking it up again costs ~1 ms a call for nothing
    specific = getattr(message, "provider_specific_fields", None) or {}
    return ModelReply(
        content=message.content or "",
        tool_calls=calls,
        prompt_tokens=getattr(usage, "prompt_tokens", 0) or 0,
        completion_tokens=getattr(usage, "completion_tokens", 0) or 0,
        cached_tokens=_cached_tokens(usage),
        cost_usd=cost,
        parse_error=specific.get("parse_error"),
        # the torch backend's exact token ids, kept for the policy trainer (harnessevolve/train)
        extra={k: list(specific[k]) for k in ("prompt_token_ids", "completion_token_ids") if k in specific},
    )
