"""The scripted provider: replies that are queued or computed, for tests and dry runs.

A model named ``scripted/<spec>`` answers from a script:

* a name registered from Python with :func:`register_script` (a list of replies, consumed in
  order, or a callable ``(messages, tools) -> reply``);
* ``module:function`` — an importable callable, as above; ``policy:learner`` (and the other
  functions of ``harnessevolve.models.policy``) are shipped dry-run agents;
* a path to a ``.jsonl`` file — one reply per line, consumed in order.

A reply is a string (plain content), or a dict with ``content`` and/or ``tool_calls``
(``[{"name": ..., "arguments": {...} or "raw json text"}]``); a string ``arguments`` is passed on
unparsed, which is how tests send malformed tool calls. ``usage`` may give token counts;
``parse_error`` is passed on as the embedded provider passes a reply it could not read as a call.

A policy may be an ``async`` function (awaited; slow providers without blocking the event loop)
and may raise a litellm exception (``litellm.RateLimitError(...)``) to simulate provider faults.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import json
import threading
from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import Any

from harnessevolve.core.errors import ModelError

Reply = str | dict[str, Any]
Policy = Callable[[list[dict[str, Any]], list[dict[str, Any]]], Reply | Awaitable[Reply]]


class Script:
    """Replies for one scripted model: a queue, or a policy computing each reply."""

    def __init__(self, replies: Iterable[Reply] | Policy) -> None:
        self._lock = threading.Lock()
        self.policy: Policy | None = replies if callable(replies) else None
        self.queue: deque[Reply] = deque() if callable(replies) else deque(replies)
        self.calls = 0

    def next_reply(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]
    ) -> Reply | Awaitable[Reply]:
        with self._lock:
            self.calls += 1
            if self.policy is None:
                if not self.queue:
                    raise ModelError(
                        "scripted model ran out of queued replies",
                        field="model",
                        hint="queue more replies or use a policy callable",
                    )
                return self.queue.popleft()
        return self.policy(messages, tools)


SHIPPED_POLICIES = {"policy": "harnessevolve.models.policy"}
"""``scripted/policy:<name>`` names a dry-run agent shipped in the package (``learner``,
``gives_up``: see harnessevolve/models/policy.py); any other ``module:function`` is imported."""

_scripts: dict[str, Script] = {}
_scripts_lock = threading.Lock()


def register_script(name: str, replies: Iterable[Reply] | Policy) -> Script:
    """Make ``scripted/<name>`` answer from ``replies``; replaces any script of that name."""
    script = Script(replies)
    with _scripts_lock:
        _scripts[name] = script
    return script


def unregister_script(name: str) -> None:
    with _scripts_lock:
        _scripts.pop(name, None)


def resolve_script(spec: str) -> Script:
    with _scripts_lock:
        if spec in _scripts:
            return _scripts[spec]
    if spec.endswith(".jsonl"):
        path = Path(spec)
        if not path.is_file():
            raise ModelError(f"scripted reply file {spec} does not exist", field="--model")
        return register_script(spec, read_reply_file(path))
    if ":" in spec:
        module_name, _, attr = spec.partition(":")
        module_name = SHIPPED_POLICIES.get(module_name, module_name)
        try:
            policy = getattr(importlib.import_module(module_name), attr)
        except Exception as exc:  # the user's module: an import error, or its own code failing
            raise ModelError(
                f"cannot load scripted policy {spec!r}: {type(exc).__name__}: {exc}",
                field="--model",
                hint="use scripted/<module>:<function> with an importable module",
            ) from None
        if not callable(policy):
            raise ModelError(
                f"scripted policy {spec!r} is a {type(policy).__name__}, not a function",
                field="--model",
                hint="name a function (messages, tools) -> reply",
            )
        return register_script(spec, policy)
    raise ModelError(
        f"unknown scripted model {spec!r}",
        field="--model",
        hint="register it with register_script(), or use scripted/<module>:<fn> or a .jsonl file",
    )


def read_reply_file(path: Path) -> list[Reply]:
    """The replies of a ``scripted/FILE.jsonl``: one JSON reply a line (a string, or an object with
    ``content`` and/or ``tool_calls`` of ``{"name": ..., "arguments": {...}}``). A malformed line is
    a ``ModelError`` naming the file and the line."""
    from harnessevolve.core.documents import load_json_text
    from harnessevolve.core.files import read_text

    text = read_text(path, error=ModelError, max_bytes=64 * 2**20)
    replies: list[Reply] = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            reply = load_json_text(line, file=str(path), error=ModelError)
            problem = _reply_problem(reply)
        except ModelError as exc:
            problem = exc.message
        if problem:  # the file and line in the message itself: callers re-raise it under --model
            raise ModelError(
                f"scripted reply file {path} line {number}: {problem}",
                hint='each line is a JSON string or {"content": ..., "tool_calls": [{"name": ..., '
                '"arguments": {...}}]}',
            )
        replies.append(reply)
    return replies


def _reply_problem(reply: Any) -> str | None:
    if isinstance(reply, str):
        return None
    if not isinstance(reply, dict):
        return f"a reply is a string or an object, not {type(reply).__name__}"
    content, calls = reply.get("content"), reply.get("tool_calls", [])
    if content is not None and not isinstance(content, str):
        return f"content is {type(content).__name__}, not a string"
    if not isinstance(calls, list):
        return f"tool_calls is {type(calls).__name__}, not a list"
    for i, call in enumerate(calls):
        if not isinstance(call, dict) or not isinstance(call.get("name"), str):
            return f"tool_calls[{i}] has no string name"
        if not isinstance(call.get("arguments", {}), (dict, str)):
            return f"tool_calls[{i}].arguments is neither an object nor a JSON string"
    return None


def reply_to_message(reply: Reply, call_prefix: str) -> dict[str, Any]:
    """A reply in OpenAI assistant-message form."""
    if isinstance(reply, str):
        return {"role": "assistant", "content": reply}
    calls = []
    for i, call in enumerate(reply.get("tool_calls", [])):
        args = call.get("arguments", {})
        calls.append(
            {
                "id": call.get("id", f"{call_prefix}-{i}"),
                "type": "function",
                "function": {
                    "name": call["name"],
                    "arguments": args if isinstance(args, str) else json.dumps(args),
                },
            }
        )
    message: dict[str, Any] = {"role": "assistant", "content": reply.get("content")}
    if calls:
        message["tool_calls"] = calls
    if isinstance(reply.get("parse_error"), str):
        message["provider_specific_fields"] = {"parse_error": reply["parse_error"]}
    return message


async def _awaited(reply: Awaitable[Reply]) -> Reply:
    return await reply


def make_scripted_handler() -> Any:
    """The litellm ``CustomLLM`` for ``scripted/``; litellm is imported here, not at module import."""
    import litellm

    class ScriptedLLM(litellm.CustomLLM):
        def _respond(self, model: str, messages: list, optional_params: dict) -> Any:
            script = resolve_script(model)
            reply = script.next_reply(messages, optional_params.get("tools") or [])
            if inspect.isawaitable(reply):
                reply = asyncio.run(_awaited(reply))
            return self._response(model, script, messages, reply)

        async def _arespond(self, model: str, messages: list, optional_params: dict) -> Any:
            script = resolve_script(model)
            reply = script.next_reply(messages, optional_params.get("tools") or [])
            if inspect.isawaitable(reply):
                reply = await reply
            return self._response(model, script, messages, reply)

        def _response(self, model: str, script: Script, messages: list, reply: Reply) -> Any:
            msg = reply_to_message(reply, f"call-{script.calls}")
            usage = reply.get("usage") if isinstance(reply, dict) else None
            # counted without the call ids, which number the script's calls in this process: the same
            # reply costs the same tokens whatever ran before it (a resumed run sums to the same)
            text = json.dumps(reply_to_message(reply, "call"))
            prompt_tokens = sum(len(str(m.get("content") or "")) for m in messages) // 4
            usage = usage or {"prompt_tokens": prompt_tokens, "completion_tokens": max(1, len(text) // 4)}
            usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
            finish = "tool_calls" if msg.get("tool_calls") else "stop"
            return litellm.ModelResponse(
                choices=[{"message": msg, "finish_reason": finish}],
                usage=usage,
                model=f"scripted/{model}",
            )

        def completion(self, model, messages, *args, **kwargs):  # noqa: ANN001
            return self._respond(model, messages, kwargs.get("optional_params") or {})

        async def acompletion(self, model, messages, *args, **kwargs):  # noqa: ANN001
            return await self._arespond(model, messages, kwargs.get("optional_params") or {})

    return ScriptedLLM()
