"""The per-rollout model endpoint over its unix socket: OpenAI-shaped replies with tools, streaming,
refusals (wrong model, bad body, call limit, spent budget), each request recorded."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx
import pytest

from harnessevolve.execute.runners.endpoint import ModelEndpoint, budget_check
from harnessevolve.models.scripted import register_script, unregister_script

MODEL = "scripted/endpoint-test"
TOOLS = [
    {"type": "function", "function": {"name": "bash", "parameters": {"type": "object", "properties": {}}}}
]


@pytest.fixture(autouse=True)
def script():
    register_script(
        "endpoint-test",
        lambda messages, tools: {"tool_calls": [{"name": "bash", "arguments": {"n": len(tools)}}]},
    )
    yield
    unregister_script("endpoint-test")


def talk(
    tmp_path: Path, requests: list[dict | bytes], **settings
) -> tuple[list[httpx.Response], ModelEndpoint]:
    async def go():
        endpoint = ModelEndpoint(tmp_path / "m.sock", model=MODEL, **settings)
        async with endpoint:
            transport = httpx.AsyncHTTPTransport(uds=str(tmp_path / "m.sock"))
            async with httpx.AsyncClient(
                transport=transport, base_url="http://endpoint", timeout=120
            ) as client:
                out = []
                for body in requests:
                    if body == b"models":
                        out.append(await client.get("/v1/models"))
                    elif isinstance(body, bytes):
                        out.append(await client.post("/v1/chat/completions", content=body))
                    else:
                        out.append(await client.post("/v1/chat/completions", json=body))
        return out, endpoint

    return asyncio.run(go())


def chat(**extra) -> dict:
    return {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "tools": TOOLS, **extra}


def test_completion_with_tools_is_openai_shaped_and_recorded(tmp_path: Path) -> None:
    (reply, models), endpoint = talk(tmp_path, [chat(), b"models"])
    doc = reply.json()
    assert reply.status_code == 200 and doc["object"] == "chat.completion"
    call = doc["choices"][0]["message"]["tool_calls"][0]
    assert call["function"]["name"] == "bash" and json.loads(call["function"]["arguments"]) == {"n": 1}
    assert doc["choices"][0]["finish_reason"] == "tool_calls"
    assert models.json()["data"][0]["id"] == MODEL
    record = endpoint.calls[0]
    assert record.status == 200 and record.tools == ["bash"] and record.new_messages[0]["content"] == "hi"
    assert record.reply["tool_calls"][0]["name"] == "bash"
    assert doc["usage"]["total_tokens"] == record.usage["prompt_tokens"] + record.usage["completion_tokens"]


def test_sampling_parameters_are_passed_on(tmp_path: Path, monkeypatch) -> None:
    from harnessevolve.execute.runners import endpoint as endpoint_module

    seen: list[dict] = []
    real = endpoint_module.acomplete

    async def spy(model, messages, **kwargs):
        seen.append(kwargs)
        return await real(model, messages, **kwargs)

    monkeypatch.setattr(endpoint_module, "acomplete", spy)
    body = chat(top_p=0.5, stop=["\n\n"], tool_choice="auto", temperature=0.3, max_tokens=7, seed=11)
    (reply,), _ = talk(tmp_path, [body])
    assert reply.status_code == 200
    assert seen[0]["extra_params"] == {"tool_choice": "auto", "stop": ["\n\n"], "top_p": 0.5}
    assert (seen[0]["temperature"], seen[0]["max_tokens"], seen[0]["seed"]) == (0.3, 7, 11)


def test_streaming_reply_is_one_chunk_then_done(tmp_path: Path) -> None:
    (reply,), _ = talk(tmp_path, [chat(stream=True)])
    events = [line[6:] for line in reply.text.splitlines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    chunk = json.loads(events[0])
    assert chunk["object"] == "chat.completion.chunk"
    assert chunk["choices"][0]["delta"]["tool_calls"][0]["index"] == 0


def test_refusals_are_errors_the_agent_sees_and_recorded(tmp_path: Path) -> None:
    requests = [b"{not json", {"model": MODEL, "messages": []}, chat(model="gpt-4o"), chat(), chat()]
    replies, endpoint = talk(tmp_path, requests, max_calls=1)
    assert [r.status_code for r in replies] == [400, 400, 404, 200, 403]
    assert (
        replies[2].json()["error"]["code"] == "model_not_found"
        and MODEL in replies[2].json()["error"]["message"]
    )
    assert replies[4].json()["error"]["code"] == "call_limit_reached"
    assert [c.status for c in endpoint.calls] == [400, 400, 404, 200, 403]
    assert endpoint.stop is not None and endpoint.stop.reason == "step_limit"


def test_spent_budget_is_refused_before_the_model_is_called(tmp_path: Path) -> None:
    with budget_check(lambda: "cost_usd budget reached: 1.2 of 1"):
        (reply,), endpoint = talk(tmp_path, [chat()])
    assert reply.status_code == 402 and reply.json()["error"]["code"] == "budget_exhausted"
    assert endpoint.stop.reason == "budget_exhausted" and endpoint.stopped.is_set()
    assert endpoint.replies == []


def test_provider_failure_is_a_502_with_the_error(tmp_path: Path) -> None:
    def fail(messages, tools):
        raise ValueError("provider fell over")

    register_script("endpoint-test", fail)
    (reply,), endpoint = talk(tmp_path, [chat()])
    assert reply.status_code == 502 and "provider fell over" in reply.json()["error"]["message"]
    assert endpoint.calls[0].error.startswith("model_error:")
