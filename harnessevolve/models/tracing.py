"""OpenTelemetry GenAI spans for model calls, following the GenAI semantic conventions: a CLIENT span
named ``chat {model}`` with ``gen_ai.operation.name``, ``gen_ai.provider.name``,
``gen_ai.request.*``, ``gen_ai.response.*`` and ``gen_ai.usage.input_tokens/output_tokens``.

Off unless enabled -- by :func:`enable_tracing` (an exporter, a tracer provider, or the global
provider the application configured) or by ``HARNESSEVOLVE_OTEL`` = ``1`` (global provider) or
``console`` (spans printed to stderr). Disabled, :func:`traced_call` only awaits the call:
opentelemetry is not even imported. Prompt and reply text are recorded only when
``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`` (or ``capture_content=True``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Awaitable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from harnessevolve.core.errors import HarnessEvolveError

ENABLE_ENV = "HARNESSEVOLVE_OTEL"
CAPTURE_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
T = TypeVar("T")

_state: dict[str, Any] = {"tracer": None, "capture": None, "env_checked": False}


def enable_tracing(
    exporter: Any | None = None, *, tracer_provider: Any | None = None, capture_content: bool | None = None
) -> None:
    """Start emitting spans: into ``tracer_provider``; else into a private provider that sends them
    to ``exporter`` as they end; else into the global provider (``opentelemetry-instrument``, or
    one the application set)."""
    try:
        from opentelemetry import trace
    except ImportError:
        raise HarnessEvolveError(
            "OpenTelemetry tracing needs opentelemetry-sdk", hint="pip install 'harnessevolve[tracking]'"
        ) from None
    if tracer_provider is None and exporter is not None:
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor

        tracer_provider = TracerProvider()
        tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    provider = tracer_provider or trace.get_tracer_provider()
    from harnessevolve import __version__

    _state["tracer"] = provider.get_tracer("harnessevolve", __version__)
    _state["capture"] = capture_content


def disable_tracing() -> None:
    _state.update(tracer=None, capture=None, env_checked=True)


def _enable_from_env() -> None:
    _state["env_checked"] = True
    mode = os.environ.get(ENABLE_ENV, "").strip().lower()
    if mode in ("", "0", "off", "false", "no"):
        return
    if mode == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        enable_tracing(ConsoleSpanExporter())
    else:
        enable_tracing()


def tracing_enabled() -> bool:
    if not _state["env_checked"]:
        _enable_from_env()
    return _state["tracer"] is not None


def capture_content() -> bool:
    if _state["capture"] is not None:
        return bool(_state["capture"])
    return os.environ.get(CAPTURE_ENV, "").strip().lower() in ("1", "true", "yes")


def provider_name(model: str) -> str:
    """``openai/gpt-4o`` -> ``openai``; a bare name has no prefix to go by."""
    prefix, sep, _ = model.partition("/")
    return prefix if sep else "unknown"


class CallSpan:
    """The span of one call; :meth:`record` reads the reply, whatever its shape."""

    def __init__(self, span: Any) -> None:
        self.span = span

    def record(self, reply: Any) -> None:
        """A litellm/OpenAI response (``choices``, ``usage``) or a :class:`ModelReply`."""
        attributes: dict[str, Any] = {}
        usage = getattr(reply, "usage", None)
        input_tokens = getattr(usage, "prompt_tokens", None) if usage is not None else None
        output_tokens = getattr(usage, "completion_tokens", None) if usage is not None else None
        input_tokens = input_tokens if input_tokens is not None else getattr(reply, "prompt_tokens", None)
        output_tokens = (
            output_tokens if output_tokens is not None else getattr(reply, "completion_tokens", None)
        )
        if isinstance(input_tokens, int):
            attributes["gen_ai.usage.input_tokens"] = input_tokens
        if isinstance(output_tokens, int):
            attributes["gen_ai.usage.output_tokens"] = output_tokens
        choices = getattr(reply, "choices", None)
        if choices:
            reasons = [str(getattr(c, "finish_reason", None) or "") for c in choices]
        else:
            extra = getattr(reply, "extra", None) or {}
            default = "tool_calls" if getattr(reply, "tool_calls", None) else "stop"
            reasons = [str(extra.get("finish_reason") or default)]
        attributes["gen_ai.response.finish_reasons"] = [r for r in reasons if r]
        for attr, key in (("model", "gen_ai.response.model"), ("id", "gen_ai.response.id")):
            value = getattr(reply, attr, None)
            if isinstance(value, str) and value:
                attributes[key] = value
        if capture_content():
            attributes["gen_ai.output.messages"] = json.dumps(_output_messages(reply), default=str)
        self.span.set_attributes(attributes)


def _output_messages(reply: Any) -> list[dict[str, Any]]:
    choices = getattr(reply, "choices", None)
    if choices:
        return [{"role": "assistant", "content": getattr(c.message, "content", None)} for c in choices]
    return [{"role": "assistant", "content": getattr(reply, "content", None)}]


@contextmanager
def model_call_span(
    model: str,
    *,
    operation: str = "chat",
    messages: list[dict[str, Any]] | None = None,
    temperature: float | None = None,
    max_tokens: int | None = None,
    seed: int | None = None,
) -> Iterator[CallSpan | None]:
    """A span around one model call (``None`` when tracing is off). An exception ends the span with
    status ERROR and ``error.type``, and propagates."""
    if not tracing_enabled():
        yield None
        return
    from opentelemetry.trace import SpanKind, Status, StatusCode

    attributes: dict[str, Any] = {
        "gen_ai.operation.name": operation,
        "gen_ai.provider.name": provider_name(model),
        "gen_ai.request.model": model,
    }
    for key, value in (
        ("gen_ai.request.temperature", temperature),
        ("gen_ai.request.max_tokens", max_tokens),
        ("gen_ai.request.seed", seed),
    ):
        if value is not None:
            attributes[key] = value
    attributes.update(_stage_attributes())
    if messages is not None and capture_content():
        attributes["gen_ai.input.messages"] = json.dumps(messages, default=str)
    tracer = _state["tracer"]
    with tracer.start_as_current_span(
        f"{operation} {model}", kind=SpanKind.CLIENT, attributes=attributes, record_exception=False
    ) as span:
        try:
            yield CallSpan(span)
        except BaseException as exc:
            span.set_attribute("error.type", type(exc).__qualname__)
            span.set_status(Status(StatusCode.ERROR, str(exc)[:300]))
            raise


def _stage_attributes() -> dict[str, str]:
    """The pipeline stage (and proposer) the call is charged to, when one is metering it."""
    try:
        from harnessevolve.models.usage import current_scope
    except ImportError:
        return {}
    scope = current_scope()
    if scope is None:
        return {}
    out = {"harnessevolve.stage": scope.stage}
    if scope.proposer:
        out["harnessevolve.proposer"] = scope.proposer
    return out


async def traced_call(
    model: str,
    call: Awaitable[T],
    *,
    messages: list[dict[str, Any]] | None = None,
    temperature: float | None = None,
    max_tokens: int | None = None,
    seed: int | None = None,
) -> T:
    """Await ``call`` (one model call) inside a GenAI span, recording usage and finish reasons from
    what it returns; just awaits it when tracing is off."""
    if not tracing_enabled():
        return await call
    with model_call_span(
        model, messages=messages, temperature=temperature, max_tokens=max_tokens, seed=seed
    ) as span:
        result = await call
        if span is not None:
            span.record(result)
        return result
