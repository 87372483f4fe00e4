"""OpenTelemetry GenAI spans around model calls, read back from an in-memory exporter."""

from __future__ import annotations

import asyncio
import json
import uuid

import pytest

from harnessevolve.models import acomplete
from harnessevolve.models.registry import litellm_module
from harnessevolve.models.scripted import register_script, unregister_script
from harnessevolve.models.tracing import disable_tracing, enable_tracing, model_call_span, traced_call

pytest.importorskip("opentelemetry.sdk", reason="the tracking extra is not installed")
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402
from opentelemetry.trace import SpanKind, StatusCode  # noqa: E402

USER = [{"role": "user", "content": "the secret word is swordfish"}]


@pytest.fixture
def spans():
    exporter = InMemorySpanExporter()
    enable_tracing(exporter)
    yield exporter
    disable_tracing()


@pytest.fixture
def scripted():
    name = f"trace-{uuid.uuid4().hex[:8]}"
    register_script(name, [{"content": "hello there"}, {"tool_calls": [{"name": "submit", "arguments": {}}]}])
    yield f"scripted/{name}"
    unregister_script(name)


def test_a_litellm_call_becomes_one_genai_client_span(spans, scripted, monkeypatch) -> None:
    monkeypatch.delenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", raising=False)
    litellm = litellm_module()
    response = asyncio.run(
        traced_call(
            scripted,
            litellm.acompletion(model=scripted, messages=USER, temperature=0.0, seed=7),
            messages=USER,
            temperature=0.0,
            seed=7,
        )
    )
    assert response.choices[0].message.content == "hello there"
    (span,) = spans.get_finished_spans()
    assert span.name == f"chat {scripted}" and span.kind is SpanKind.CLIENT
    attrs = dict(span.attributes)
    assert attrs["gen_ai.operation.name"] == "chat" and attrs["gen_ai.request.model"] == scripted
    assert attrs["gen_ai.provider.name"] == "scripted"
    assert attrs["gen_ai.request.temperature"] == 0.0 and attrs["gen_ai.request.seed"] == 7
    assert attrs["gen_ai.usage.input_tokens"] == response.usage.prompt_tokens > 0
    assert attrs["gen_ai.usage.output_tokens"] == response.usage.completion_tokens > 0
    assert tuple(attrs["gen_ai.response.finish_reasons"]) == ("stop",)
    # No prompt or reply text by default.
    assert "swordfish" not in json.dumps(attrs) and "hello there" not in json.dumps(attrs)


def test_a_model_reply_and_opt_in_content(spans, scripted, monkeypatch) -> None:
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
    # acomplete traces itself: one span per logical call (retries included).
    asyncio.run(acomplete(scripted, USER))
    reply = asyncio.run(acomplete(scripted, USER))
    assert reply.tool_calls[0].name == "submit"
    first, second = spans.get_finished_spans()
    assert tuple(first.attributes["gen_ai.response.finish_reasons"]) == ("stop",)
    assert tuple(second.attributes["gen_ai.response.finish_reasons"]) == ("tool_calls",)
    assert second.attributes["gen_ai.usage.input_tokens"] == reply.prompt_tokens
    assert "swordfish" in first.attributes["gen_ai.input.messages"]
    assert "hello there" in first.attributes["gen_ai.output.messages"]


def test_a_failing_call_ends_its_span_with_an_error(spans) -> None:
    async def boom():
        raise ConnectionError("provider down")

    with pytest.raises(ConnectionError):
        asyncio.run(traced_call("openai/gpt-4o-mini", boom()))
    (span,) = spans.get_finished_spans()
    assert span.status.status_code is StatusCode.ERROR
    assert span.attributes["error.type"] == "ConnectionError"
    assert span.attributes["gen_ai.provider.name"] == "openai"


def test_off_by_default_no_span_and_the_call_still_runs(scripted, monkeypatch) -> None:
    monkeypatch.delenv("HARNESSEVOLVE_OTEL", raising=False)
    exporter = InMemorySpanExporter()
    enable_tracing(exporter)
    disable_tracing()
    reply = asyncio.run(traced_call(scripted, acomplete(scripted, USER)))
    assert reply.content == "hello there" and exporter.get_finished_spans() == ()
    with model_call_span(scripted) as span:
        assert span is None
