"""One chat-completion call through litellm, reduced to the plain data the agent loop needs."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from harnessevolve.models.registry import litellm_module


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


async def acomplete(
    model: str,
    messages: list[dict[str, Any]],
    *,
    tools: list[dict[str, Any]] | None = None,
    temperature: float = 0.0,
    max_tokens: int | None = None,
    seed: int | None = None,
    extra_params: dict[str, Any] | None = None,
) -> ModelReply:
    """Ask ``model`` (any litellm model name) for the next assistant turn."""
    litellm = litellm_module()
    params: dict[str, Any] = {"temperature": temperature}
    if tools:
        params["tools"] = tools
    if max_tokens is not None:
        params["max_tokens"] = max_tokens
    if seed is not None:
        params["seed"] = seed
    params.update(extra_params or {})
    response = await litellm.acompletion(model=model, messages=messages, **params)
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
    try:
        cost = float(litellm.completion_cost(completion_response=response) or 0.0)
    except Exception:  # noqa: BLE001 - models without price data (local, scripted) cost nothing
        cost = 0.0
    specific = getattr(message, "provider_specific_fields", None) or {}
    return ModelReply(
        content=message.content or "",
        tool_calls=calls,
        prompt_tokens=getattr(usage, "prompt_tokens", 0) or 0,
        completion_tokens=getattr(usage, "completion_tokens", 0) or 0,
        cost_usd=cost,
        parse_error=specific.get("parse_error"),
    )
