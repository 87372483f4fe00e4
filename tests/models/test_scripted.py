"""The scripted provider through the real litellm path (``acomplete``): queues, policies, reply files,
``module:function`` specs, malformed tool calls and token usage."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from tool_specs import tool_specs

from harnessevolve.core.errors import ModelError
from harnessevolve.models import ModelReply, acomplete
from harnessevolve.models.scripted import register_script, reply_to_message, resolve_script, unregister_script

TOOLS = tool_specs("read_file")
USER = [{"role": "user", "content": "What is in a.txt?"}]


@pytest.fixture
def name(request: pytest.FixtureRequest) -> Any:
    """A unique script name per test, unregistered afterwards."""
    value = f"{request.node.name}-{uuid.uuid4().hex[:8]}"
    yield value
    unregister_script(value)


def ask(
    model: str, messages: list[dict[str, Any]] = USER, tools: list[dict[str, Any]] | None = TOOLS
) -> ModelReply:
    return asyncio.run(acomplete(model, messages, tools=tools))


def test_queued_replies_come_in_order(name: str) -> None:
    script = register_script(
        name,
        [
            "plain text",
            {"content": "thinking", "tool_calls": [{"name": "read_file", "arguments": {"path": "a.txt"}}]},
            {"tool_calls": [{"name": "submit", "arguments": {"answer": "42"}, "id": "mine"}]},
        ],
    )
    first, second, third = (ask(f"scripted/{name}") for _ in range(3))
    assert (first.content, first.tool_calls) == ("plain text", ())
    assert second.content == "thinking"
    assert [(c.name, c.arguments) for c in second.tool_calls] == [("read_file", {"path": "a.txt"})]
    assert json.loads(second.tool_calls[0].raw_arguments) == {"path": "a.txt"}
    assert third.tool_calls[0].id == "mine" and third.tool_calls[0].arguments == {"answer": "42"}
    assert script.calls == 3


def test_several_tool_calls_in_one_reply_get_distinct_ids(name: str) -> None:
    register_script(
        name,
        [
            {
                "tool_calls": [
                    {"name": "read_file", "arguments": {"path": "a"}},
                    {"name": "read_file", "arguments": {"path": "b"}},
                ]
            }
        ],
    )
    reply = ask(f"scripted/{name}")
    assert [c.arguments["path"] for c in reply.tool_calls] == ["a", "b"]
    assert len({c.id for c in reply.tool_calls}) == 2


def test_a_policy_receives_messages_and_tools(name: str) -> None:
    seen: list[tuple[list[dict[str, Any]], list[dict[str, Any]]]] = []

    def policy(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
        seen.append((messages, tools))
        return {"content": f"turn {len(seen)}: {messages[-1]['content']}"}

    register_script(name, policy)
    messages = [{"role": "system", "content": "sys"}, {"role": "user", "content": "hello"}]
    assert ask(f"scripted/{name}", messages).content == "turn 1: hello"
    assert ask(f"scripted/{name}", messages, tools=None).content == "turn 2: hello"
    assert [(m["role"], m["content"]) for m in seen[0][0]] == [("system", "sys"), ("user", "hello")]
    assert [t["function"]["name"] for t in seen[0][1]] == ["read_file"]
    assert seen[1][1] == []


def test_register_script_replaces_a_script_of_the_same_name(name: str) -> None:
    register_script(name, ["old"])
    register_script(name, ["new"])
    assert ask(f"scripted/{name}").content == "new"


def test_a_jsonl_reply_file(tmp_path: Path) -> None:
    path = tmp_path / "replies.jsonl"
    lines = [
        json.dumps({"tool_calls": [{"name": "read_file", "arguments": {"path": "a.txt"}}]}),
        "",
        json.dumps("done"),
    ]
    path.write_text("\n".join(lines) + "\n")
    try:
        first, second = ask(f"scripted/{path}"), ask(f"scripted/{path}")
        assert first.tool_calls[0].arguments == {"path": "a.txt"}
        assert second.content == "done"
        with pytest.raises(Exception, match="ran out of queued replies"):
            ask(f"scripted/{path}")
    finally:
        unregister_script(str(path))


def test_a_missing_jsonl_file_is_a_model_error(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match="does not exist"):
        resolve_script(str(tmp_path / "nope.jsonl"))


def test_module_function_spec(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    module = f"scripted_policy_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{module}.py").write_text(
        "def answer(messages, tools):\n"
        "    answer = messages[-1]['content'].upper()\n"
        "    return {'tool_calls': [{'name': 'submit', 'arguments': {'answer': answer}}]}\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    spec = f"{module}:answer"
    try:
        reply = ask(f"scripted/{spec}", [{"role": "user", "content": "shout"}])
        assert reply.tool_calls[0].name == "submit"
        assert reply.tool_calls[0].arguments == {"answer": "SHOUT"}
    finally:
        unregister_script(spec)


@pytest.mark.parametrize("spec", ["no_such_module_xyz:policy", "json:no_such_function"])
def test_an_unloadable_module_function_spec_is_a_model_error(spec: str) -> None:
    with pytest.raises(ModelError, match="cannot load scripted policy"):
        resolve_script(spec)


def test_an_unknown_script_name_is_a_model_error() -> None:
    with pytest.raises(ModelError, match="unknown scripted model"):
        resolve_script(f"never-registered-{uuid.uuid4().hex}")


def test_running_out_of_replies_raises_from_acomplete(name: str) -> None:
    register_script(name, ["only one"])
    assert ask(f"scripted/{name}").content == "only one"
    with pytest.raises(Exception, match="ran out of queued replies"):
        ask(f"scripted/{name}")


@pytest.mark.parametrize("raw", ["{path: a.txt", "not json at all", "[1, 2]", '"a string"'])
def test_malformed_tool_call_arguments_parse_to_none(name: str, raw: str) -> None:
    register_script(name, [{"tool_calls": [{"name": "read_file", "arguments": raw}]}])
    call = ask(f"scripted/{name}").tool_calls[0]
    assert call.name == "read_file"
    assert call.arguments is None
    assert call.raw_arguments == raw


def test_string_arguments_that_are_a_json_object_are_parsed(name: str) -> None:
    register_script(name, [{"tool_calls": [{"name": "read_file", "arguments": '{"path": "b.txt"}'}]}])
    assert ask(f"scripted/{name}").tool_calls[0].arguments == {"path": "b.txt"}


def test_usage_from_the_reply_is_reported(name: str) -> None:
    register_script(name, [{"content": "hi", "usage": {"prompt_tokens": 123, "completion_tokens": 45}}])
    reply = ask(f"scripted/{name}")
    assert (reply.prompt_tokens, reply.completion_tokens) == (123, 45)
    assert reply.cost_usd == 0.0


def test_usage_is_estimated_when_the_reply_gives_none(name: str) -> None:
    register_script(name, ["x" * 400])
    reply = ask(f"scripted/{name}", [{"role": "user", "content": "y" * 800}])
    assert reply.prompt_tokens == 200
    assert reply.completion_tokens >= 100


def test_reply_to_message() -> None:
    assert reply_to_message("hello", "c") == {"role": "assistant", "content": "hello"}
    message = reply_to_message(
        {"tool_calls": [{"name": "f", "arguments": {"a": 1}}, {"name": "g", "arguments": "{bad"}]}, "call-7"
    )
    assert message["content"] is None
    assert [c["id"] for c in message["tool_calls"]] == ["call-7-0", "call-7-1"]
    assert [c["function"]["arguments"] for c in message["tool_calls"]] == ['{"a": 1}', "{bad"]
    assert "tool_calls" not in reply_to_message({"content": "only text"}, "c")
