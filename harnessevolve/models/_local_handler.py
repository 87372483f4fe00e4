"""litellm ``CustomLLM`` for the embedded local model.

Imports litellm at the top, so import this module only lazily (through
:func:`harnessevolve.models.local.make_local_handler`). See ``local.py`` for the options.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import os
import uuid
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from litellm import CustomLLM, ModelResponse  # noqa: E402
from litellm.llms.custom_llm import CustomLLMError  # noqa: E402

from harnessevolve.models.local import (  # noqa: E402
    Generation,
    LocalModelConfig,
    LocalModelError,
    LocalModelNotFoundError,
    LocalModelUnavailableError,
    PromptTooLongError,
    generate,
)
from harnessevolve.models.local_pool import capped_by_cores, requested_size  # noqa: E402
from harnessevolve.models.tool_text import (  # noqa: E402
    ParsedReply,
    call_prefill,
    parse_tool_reply,
    to_plain_messages,
    tool_call_schema,
    tool_function,
)
from harnessevolve.models.torch_backend import (  # noqa: E402
    TorchGeneration,
    TorchOptionError,
)

_STATUS: dict[type[LocalModelError], int] = {
    LocalModelNotFoundError: 404,  # litellm.NotFoundError
    PromptTooLongError: 400,  # litellm.BadRequestError
    LocalModelUnavailableError: 503,  # litellm.ServiceUnavailableError
    TorchOptionError: 400,
}


def _option(optional_params: Mapping[str, Any], name: str, default: Any = None) -> Any:
    """An extra option given as a keyword argument or inside ``extra_body``."""
    if name in optional_params:
        return optional_params[name]
    extra = optional_params.get("extra_body")
    return extra.get(name, default) if isinstance(extra, Mapping) else default


def _select_tools(optional_params: Mapping[str, Any]) -> tuple[list[dict[str, Any]], str | None]:
    """The tools on offer after ``tool_choice``, and the forced tool name if there is one."""
    tools = list(optional_params.get("tools") or ())
    forced = optional_params.get("tool_choice")
    if forced == "none":
        return [], None
    if isinstance(forced, Mapping):
        name = (forced.get("function") or {}).get("name") or forced.get("name")
        chosen = [t for t in tools if tool_function(t).get("name") == name]
        if chosen:
            return chosen, str(name)
    return tools, None


def _grammar(tools: list[dict[str, Any]], optional_params: Mapping[str, Any]) -> str | None:
    """The GBNF grammar the options ask for, or None."""
    response_format = optional_params.get("response_format")
    kind = response_format.get("type") if isinstance(response_format, Mapping) else None
    wanted = _option(optional_params, "grammar_tools") or kind == "json_object" if tools else kind
    if not wanted or kind not in (None, "text", "json_object", "json_schema"):
        return None
    try:
        from llama_cpp.llama_grammar import JSON_GBNF, json_schema_to_gbnf
    except ImportError as exc:
        raise LocalModelUnavailableError("grammar decoding needs llama-cpp-python") from exc
    if tools:
        return json_schema_to_gbnf(json.dumps(tool_call_schema(tools)))
    wrapper = response_format.get("json_schema") if response_format is not None else None
    schema = (wrapper or {}).get("schema") if kind == "json_schema" else None
    return json_schema_to_gbnf(json.dumps(schema)) if isinstance(schema, Mapping) else JSON_GBNF


def _prefill(
    tools: list[dict[str, Any]], forced: str | None, grammar: str | None, params: Mapping[str, Any]
) -> str:
    """The start of the reply put in the model's mouth ("" for none)."""
    if not tools or grammar is not None:
        return ""
    if forced is not None:
        return call_prefill(tools[0])
    wanted = params.get("tool_choice") == "required" or _option(params, "tool_prefill", True)
    return call_prefill() if wanted else ""


def _response(model: str, generation: Generation, reply: ParsedReply) -> ModelResponse:
    message: dict[str, Any] = {"role": "assistant", "content": reply.content}
    if reply.tool_calls:
        message["tool_calls"] = [
            {
                "id": f"call_{uuid.uuid4().hex[:24]}",
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments_json()},
            }
            for call in reply.tool_calls
        ]
    fields: dict[str, Any] = {}
    if reply.parse_error is not None:
        fields["parse_error"] = reply.parse_error
    if reply.argument_error is not None:
        fields["argument_error"] = reply.argument_error
    if isinstance(generation, TorchGeneration):
        fields.update(generation.token_ids())
    if fields:
        message["provider_specific_fields"] = fields
    if reply.tool_calls:
        finish_reason = "tool_calls"
    else:
        finish_reason = "length" if generation.finish_reason == "length" else "stop"
    response = ModelResponse(
        choices=[{"index": 0, "message": message, "finish_reason": finish_reason}],
        usage={
            "prompt_tokens": generation.prompt_tokens,
            "completion_tokens": generation.completion_tokens,
            "total_tokens": generation.prompt_tokens + generation.completion_tokens,
            "prompt_tokens_details": {"cached_tokens": generation.cached_tokens},
        },
        model=model,
    )
    response._hidden_params["dropped_turns"] = generation.dropped_turns
    response._hidden_params.update(fields)
    return response


class LocalLLM(CustomLLM):
    """Serves ``local/<alias or path.gguf>`` with llama.cpp (``local/torch:...`` with torch), in-process."""

    def __init__(self, config: LocalModelConfig | None = None) -> None:
        super().__init__()
        self.config = config or LocalModelConfig()
        # One worker per instance a model's pool may hold (one unless HARNESSEVOLVE_LOCAL_POOL is
        # set, see local_pool.py): waiting calls then queue here instead of filling asyncio's
        # default pool, which tools and sandboxes also use.
        workers = capped_by_cores(requested_size())
        self._executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="harnessevolve-local")

    def complete(
        self, model: str, messages: list[dict[str, Any]], optional_params: Mapping[str, Any]
    ) -> ModelResponse:
        """Blocking completion; the body of both ``completion`` and ``acompletion``."""
        tools, forced = _select_tools(optional_params)
        stop = optional_params.get("stop") or ()
        max_tokens = optional_params.get("max_tokens") or optional_params.get("max_completion_tokens")
        try:
            grammar = _grammar(tools, optional_params)
            prefill = _prefill(tools, forced, grammar, optional_params)
            generation = generate(
                model,
                to_plain_messages(messages, tools),
                max_tokens=max_tokens,
                temperature=optional_params.get("temperature"),
                seed=optional_params.get("seed"),
                top_p=optional_params.get("top_p"),
                repeat_penalty=_option(optional_params, "repeat_penalty"),
                frequency_penalty=optional_params.get("frequency_penalty") or 0.0,
                presence_penalty=optional_params.get("presence_penalty") or 0.0,
                stop=[stop] if isinstance(stop, str) else list(stop),
                grammar_gbnf=grammar,
                prefill=prefill,
                stop_after_call=bool(prefill),
                config=self.config,
            )
        except LocalModelError as exc:
            # litellm wraps whatever a provider raises; a status code picks its exception class
            status = _STATUS.get(type(exc), 500)
            hint = f" (hint: {exc.hint})" if exc.hint else ""
            raise CustomLLMError(status_code=status, message=f"{exc.message}{hint}") from exc
        keep = bool(_option(optional_params, "keep_mistyped_calls", False))
        reply = (
            parse_tool_reply(generation.text, tools, keep_mistyped=keep)
            if tools
            else ParsedReply(content=generation.text)
        )
        return _response(model, generation, reply)

    # litellm calls both with keyword arguments (its CustomLLM signature: model, messages, api_base,
    # ..., optional_params, ...); only the request's ``optional_params`` matter here, as in scripted.py.
    def completion(self, model: str, messages: list, *args: Any, **kwargs: Any) -> ModelResponse:
        return self.complete(model, messages, kwargs.get("optional_params") or {})

    async def acompletion(self, model: str, messages: list, *args: Any, **kwargs: Any) -> ModelResponse:
        context = contextvars.copy_context()
        return await asyncio.get_running_loop().run_in_executor(
            self._executor, context.run, self.complete, model, messages, kwargs.get("optional_params") or {}
        )
