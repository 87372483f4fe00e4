"""The per-rollout model endpoint: OpenAI-compatible chat completions, served on a unix socket.

An external agent (``command`` and ``mini-swe-agent`` runners) reaches a model only through this
endpoint. Every request is forwarded through :func:`harnessevolve.models.acomplete` (litellm, with
the resource layer's retries, per-model limits and usage metering into the run's meter) to the one
model the rollout was given; API keys stay in harnessevolve's process. Each request and reply is
recorded (:class:`ModelCall`) and becomes part of the rollout's trajectory.

Routes: ``POST /v1/chat/completions`` (``messages``, ``tools``, ``temperature``, ``max_tokens`` /
``max_completion_tokens``, ``seed``, ``stream`` -- a streamed reply is one chunk then ``[DONE]`` --
and ``PASSED_ON``) and
``GET /v1/models``. Refusals are OpenAI-style errors the agent sees, each recorded:

- a model name other than the rollout's: 404 ``model_not_found``;
- past the rollout's ``max_model_calls``: 429-free 403 ``call_limit_reached`` (OpenAI clients do
  not retry 403), and the rollout stops with ``step_limit``;
- the run's budget spent (:func:`budget_check`): 402 ``budget_exhausted``, and the rollout stops;
- under :func:`repeat_limit` (N), after N replies in a row with the same action (the same tool
  calls and arguments, or the same text): 403 ``repeated_action``, and the rollout stops with
  ``repeated`` instead of spending its remaining calls on the loop;
- a malformed body: 400 ``invalid_request_error``; a provider failure after retries: 502;
- a body over ``REQUEST_BYTES``: 413 ``request_too_large``, recorded as its size and sha256 only.

What it records is bounded (``rollout_bounds``): after ``REFUSED_CALLS`` refusals (provider failures
not counted) the rollout stops with ``refusal_limit``; once the record passes ``RECORD_BYTES`` it
stops with ``record_limit``; after either, requests are refused without being recorded (only
counted, ``unrecorded``). A provider's error text is redacted before the agent or the record sees it.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import time
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harnessevolve.core.enums import StopReason
from harnessevolve.core.redact import redact
from harnessevolve.execute.runners.rollout_bounds import (
    RECORD_BYTES,
    REFUSED_CALLS,
    REQUEST_BYTES,
    REQUEST_HARD_BYTES,
)
from harnessevolve.models import ModelReply, acomplete

BudgetCheck = Callable[[], str | None]
"""Returns None while the run may spend, else why it may not (``tokens budget reached: ...``)."""
_BUDGET: ContextVar[BudgetCheck | None] = ContextVar("harnessevolve_endpoint_budget", default=None)
_REPEATS: ContextVar[int | None] = ContextVar("harnessevolve_endpoint_repeats", default=None)
PASSED_ON = ("tool_choice", "response_format", "stop", "top_p", "presence_penalty", "frequency_penalty")
"""Request parameters forwarded to litellm as they are, when the agent gives them."""


@contextlib.contextmanager
def budget_check(check: BudgetCheck | None) -> Iterator[None]:
    """Make ``check`` the budget every endpoint started inside consults before each model call."""
    token = _BUDGET.set(check)
    try:
        yield
    finally:
        _BUDGET.reset(token)


@contextlib.contextmanager
def repeat_limit(times: int | None) -> Iterator[None]:
    """Every endpoint started inside stops its rollout (``repeated``) once ``times`` replies in a row
    carry the same action; None: no limit (the default: an evolved agent's loops are its score's)."""
    token = _REPEATS.set(times)
    try:
        yield
    finally:
        _REPEATS.reset(token)


def action_key(reply: ModelReply) -> str:
    """What a reply does, for telling a repeat: its tool calls (name and arguments, keys sorted)
    or, with none, its text; whitespace at the ends does not count."""
    if reply.tool_calls:
        calls = []
        for call in reply.tool_calls:
            try:
                arguments = json.dumps(json.loads(call.raw_arguments or "{}"), sort_keys=True)
            except ValueError:
                arguments = (call.raw_arguments or "").strip()
            calls.append(f"{call.name}({arguments})")
        return "\n".join(calls)
    return (reply.content or "").strip()


@dataclass
class ModelCall:
    """One request to the endpoint and what came of it (kept in ``extra.model_calls``)."""

    index: int
    status: int
    requested_model: str
    new_messages: list[dict[str, Any]]
    """The request's messages after its last assistant message (all of them for the first call)."""
    n_messages: int
    tools: list[str] = field(default_factory=list)
    reply: dict[str, Any] | None = None
    """``{"content", "tool_calls": [{"id", "name", "arguments"}]}`` when the model answered."""
    usage: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    token_ids: dict[str, list[int]] = field(default_factory=dict)
    """The exact prompt/completion token ids when the provider returns them (``local/torch:``),
    kept on the agent step for the policy trainer."""
    latency_ms: float = 0.0
    timestamp: float = 0.0
    body: dict[str, Any] | None = None
    """A refused oversized body: ``{"bytes", "sha256"}`` (its content is not kept)."""

    def to_dict(self) -> dict[str, Any]:
        skip: tuple[object, ...] = (None, [], {})
        return {k: v for k, v in self.__dict__.items() if k != "token_ids" and v not in skip}


@dataclass
class EndpointStop:
    reason: str
    """``budget_exhausted``, ``step_limit``, ``repeated``, ``refusal_limit`` or ``record_limit``."""
    message: str


class ModelEndpoint:
    """Serves one rollout's model on ``socket_path`` (see the module docstring); use as
    ``async with ModelEndpoint(...) as endpoint:``; ``calls`` and ``stop`` hold what happened."""

    def __init__(
        self,
        socket_path: Path,
        *,
        model: str,
        seed: int = 0,
        max_calls: int = 50,
        temperature: float = 0.0,
        max_tokens: int | None = None,
        extra_params: dict[str, Any] | None = None,
    ) -> None:
        """``temperature`` / ``max_tokens``: used when a request gives none; ``extra_params``: passed
        on with every call (the embedded model's ``grammar_tools``)."""
        self.socket_path = socket_path
        self.extra_params = extra_params
        self.model = model
        self.seed = seed
        self.max_calls = max_calls
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.calls: list[ModelCall] = []
        self.replies: list[ModelReply] = []
        self.stop: EndpointStop | None = None
        self.stopped = asyncio.Event()
        """Set when the endpoint refuses further calls (budget or call limit)."""
        self._budget = _BUDGET.get()
        self._repeats = _REPEATS.get()
        self._runner: Any = None
        self.refused = 0
        """Requests refused so far (provider failures not counted)."""
        self.recorded_bytes = 0
        """JSON bytes of what ``calls`` holds of requests and replies, about."""
        self.unrecorded = 0
        """Requests refused without a record (past ``REFUSED_CALLS`` or ``RECORD_BYTES``)."""

    async def __aenter__(self) -> ModelEndpoint:
        from aiohttp import web

        app = web.Application(client_max_size=REQUEST_HARD_BYTES)
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_post("/chat/completions", self._chat)
        app.router.add_get("/v1/models", self._models)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await self._runner.setup()
        site = web.UnixSite(self._runner, str(self.socket_path))
        await site.start()
        os.chmod(self.socket_path, 0o666)  # the sandbox's own uid must be able to connect
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    def _error(self, status: int, code: str, message: str) -> Any:
        from aiohttp import web

        kind = "invalid_request_error" if status == 400 else code
        body = {"error": {"message": message, "type": kind, "code": code, "param": None}}
        return web.json_response(body, status=status)

    async def _models(self, _request: Any) -> Any:
        from aiohttp import web

        return web.json_response(
            {"object": "list", "data": [{"id": self.model, "object": "model", "owned_by": "harnessevolve"}]}
        )

    async def _chat(self, request: Any) -> Any:
        started = time.perf_counter()
        if self.refused >= REFUSED_CALLS or self.recorded_bytes > RECORD_BYTES:
            self.unrecorded += 1
            stop = self.stop or EndpointStop(StopReason.REFUSAL_LIMIT, "no more requests are recorded")
            response = self._error(403, stop.reason, stop.message)
            response.force_close()
            return response
        call = ModelCall(len(self.calls) + 1, 0, "", [], 0, timestamp=time.time())
        self.calls.append(call)
        raw, size, digest = await read_body(request)
        if raw is None:
            call.body = {"bytes": size, "sha256": digest}
            response = self._refuse(
                call,
                413,
                "request_too_large",
                f"the request body ({size} bytes) is over {REQUEST_BYTES} bytes",
            )
            response.force_close()
            return response
        try:
            body = json.loads(raw)
        except (ValueError, UnicodeDecodeError) as exc:
            return self._refuse(call, 400, "invalid_json", f"request body is not JSON: {exc}")
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list) or not body["messages"]:
            return self._refuse(call, 400, "invalid_request", "'messages' must be a non-empty list")
        messages = body["messages"]
        call.requested_model = str(body.get("model", ""))
        call.n_messages = len(messages)
        call.new_messages = _after_last_assistant(messages) if self.replies else list(messages)
        tools = body.get("tools") or None
        if tools is not None and not isinstance(tools, list):
            return self._refuse(call, 400, "invalid_request", "'tools' must be a list")
        call.tools = [
            str((t.get("function") or {}).get("name", "")) for t in tools or [] if isinstance(t, dict)
        ]
        if call.requested_model != self.model:
            return self._refuse(
                call,
                404,
                "model_not_found",
                f"model {call.requested_model!r} is not served here; this rollout's model is {self.model!r}",
            )
        if self.stop is not None:
            return self._refuse(
                call,
                402 if self.stop.reason == "budget_exhausted" else 403,
                self.stop.reason,
                self.stop.message,
            )
        spent = self._budget() if self._budget is not None else None
        if spent:
            halted = self._halt(StopReason.BUDGET_EXHAUSTED, f"the run's {spent}; no more model calls")
            return self._refuse(call, 402, "budget_exhausted", halted.message)
        repeated = self._repeated()
        if repeated:
            halted = self._halt(StopReason.REPEATED, repeated)
            return self._refuse(call, 403, "repeated_action", halted.message)
        if len(self.replies) >= self.max_calls:
            halted = self._halt(
                StopReason.STEP_LIMIT, f"this rollout may make at most {self.max_calls} model calls"
            )
            return self._refuse(call, 403, "call_limit_reached", halted.message)
        self.recorded_bytes += len(json.dumps(call.new_messages, default=str)) + len(json.dumps(call.tools))
        if self.recorded_bytes > RECORD_BYTES:
            call.new_messages = []
            halted = self._halt(
                StopReason.RECORD_LIMIT,
                f"this rollout's requests passed the {RECORD_BYTES}-byte record limit",
            )
            return self._refuse(call, 413, "record_limit", halted.message)
        max_tokens = body.get("max_completion_tokens") or body.get("max_tokens") or self.max_tokens
        try:
            reply = await acomplete(
                self.model,
                messages,
                tools=tools,
                temperature=float(body.get("temperature", self.temperature) or 0.0),
                max_tokens=int(max_tokens) if max_tokens else None,
                seed=int(body["seed"])
                if isinstance(body.get("seed"), int)
                else self.seed + len(self.replies),
                extra_params={**{k: body[k] for k in PASSED_ON if k in body}, **(self.extra_params or {})}
                or None,
            )
        except Exception as exc:  # noqa: BLE001 - a provider fault is the agent's to see, and recorded
            text = redact(f"{type(exc).__name__}: {exc}".splitlines()[0][:500])
            call.latency_ms = (time.perf_counter() - started) * 1000
            return self._refuse(call, 502, "model_error", text)
        self.replies.append(reply)
        call.status = 200
        call.reply = {
            "content": reply.content,
            "tool_calls": [
                {"id": c.id, "name": c.name, "arguments": c.raw_arguments} for c in reply.tool_calls
            ],
        }
        call.usage = {
            "prompt_tokens": reply.prompt_tokens,
            "completion_tokens": reply.completion_tokens,
            "cost_usd": reply.cost_usd,
        }
        call.token_ids = {
            k: reply.extra[k] for k in ("prompt_token_ids", "completion_token_ids") if k in reply.extra
        }
        if reply.extra.get("retries"):
            call.usage["retries"] = len(reply.extra["retries"])
        call.latency_ms = round((time.perf_counter() - started) * 1000, 3)
        self.recorded_bytes += len(reply.content or "") + sum(
            len(c.raw_arguments or "") for c in reply.tool_calls
        )
        document = completion_document(reply, self.model, call.index)
        if body.get("stream"):
            return await _stream(request, document)
        from aiohttp import web

        return web.json_response(document)

    def _repeated(self) -> str | None:
        """Why no more calls are served under ``repeat_limit``: the last replies all did one thing."""
        times = self._repeats
        if not times or len(self.replies) < times:
            return None
        keys = {action_key(r) for r in self.replies[-times:]}
        if len(keys) != 1 or not next(iter(keys)):
            return None
        return f"the same action {times} times in a row ({next(iter(keys))[:160]}); no more model calls"

    def _halt(self, reason: str, message: str) -> EndpointStop:
        self.stop = EndpointStop(reason, message)
        self.stopped.set()
        return self.stop

    def _refuse(self, call: ModelCall, status: int, code: str, message: str) -> Any:
        call.status = status
        call.error = f"{code}: {message}"[:1000]
        self.recorded_bytes += len(call.error) + len(call.requested_model)
        if status != 502:
            self.refused += 1
            if self.refused >= REFUSED_CALLS and self.stop is None:
                self._halt(
                    StopReason.REFUSAL_LIMIT,
                    f"the endpoint refused {self.refused} requests (at most {REFUSED_CALLS} per rollout); "
                    f"the last: {call.error[:200]}",
                )
        return self._error(status, code, message)


async def read_body(request: Any) -> tuple[bytes | None, int, str]:
    """The request's body when at most ``REQUEST_BYTES``; else None, its size and sha256 (reading
    stops past ``REQUEST_HARD_BYTES``: the size is then a lower bound and the hash of what was read)."""
    kept = bytearray()
    digest: Any = None
    size = 0
    async for chunk in request.content.iter_chunked(1 << 20):
        size += len(chunk)
        if digest is None and size > REQUEST_BYTES:
            digest = hashlib.sha256(kept)
            kept = bytearray()
        if digest is not None:
            digest.update(chunk)
            if size > REQUEST_HARD_BYTES:
                break
        else:
            kept.extend(chunk)
    if digest is None:
        return bytes(kept), size, ""
    return None, size, digest.hexdigest()


def _after_last_assistant(messages: list[Any]) -> list[dict[str, Any]]:
    last = max(
        (i for i, m in enumerate(messages) if isinstance(m, dict) and m.get("role") == "assistant"),
        default=-1,
    )
    return [m for m in messages[last + 1 :] if isinstance(m, dict)]


def completion_document(reply: ModelReply, model: str, index: int) -> dict[str, Any]:
    """The reply as an OpenAI ``chat.completion`` object (usage carries ``cost_usd`` too)."""
    message: dict[str, Any] = {"role": "assistant", "content": reply.content or None}
    if reply.tool_calls:
        message["tool_calls"] = [
            {
                "id": c.id,
                "type": "function",
                "function": {"name": c.name, "arguments": c.raw_arguments or "{}"},
            }
            for c in reply.tool_calls
        ]
    return {
        "id": f"chatcmpl-he-{index}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {"index": 0, "message": message, "finish_reason": "tool_calls" if reply.tool_calls else "stop"}
        ],
        "usage": {
            "prompt_tokens": reply.prompt_tokens,
            "completion_tokens": reply.completion_tokens,
            "total_tokens": reply.prompt_tokens + reply.completion_tokens,
            "cost_usd": reply.cost_usd,
        },
    }


async def _stream(request: Any, document: dict[str, Any]) -> Any:
    """The whole reply as one ``chat.completion.chunk`` server-sent event, then ``[DONE]``."""
    from aiohttp import web

    choice = document["choices"][0]
    delta = dict(choice["message"])
    if "tool_calls" in delta:
        delta["tool_calls"] = [{"index": i, **c} for i, c in enumerate(delta["tool_calls"])]
    chunk = {
        **{k: document[k] for k in ("id", "created", "model")},
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": delta, "finish_reason": choice["finish_reason"]}],
        "usage": document["usage"],
    }
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await response.prepare(request)
    await response.write(f"data: {json.dumps(chunk)}\n\n".encode())
    await response.write(b"data: [DONE]\n\n")
    await response.write_eof()
    return response
