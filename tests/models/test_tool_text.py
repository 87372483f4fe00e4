"""The plain-text tool protocol: rendering, history, and parsing of malformed replies."""

from __future__ import annotations

import json

import pytest

from harnessevolve.models.tool_text import (
    ParsedToolCall,
    call_finished,
    call_prefill,
    parse_tool_reply,
    render_tools_prompt,
    to_plain_messages,
    tool_call_schema,
)


def _tool(name: str, description: str, properties: dict, required: list[str] | None = None) -> dict:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": properties,
                "required": required or list(properties),
            },
        },
    }


TOOLS = [
    _tool("bash", "Run a shell command.", {"command": {"type": "string"}}),
    _tool("read_file", "Read a file.", {"path": {"type": "string"}}),
    _tool("write_file", "Write a file.", {"path": {"type": "string"}, "content": {"type": "string"}}),
    _tool("submit", "Submit the final answer.", {"answer": {"type": "string"}}),
    _tool(
        "wait",
        "Wait.",
        {"seconds": {"type": "integer"}, "mode": {"type": "string", "enum": ["soft", "hard"]}},
        required=["seconds"],
    ),
]


def test_render_lists_every_tool_with_arguments_and_an_example() -> None:
    prompt = render_tools_prompt(TOOLS)
    assert "- bash(command: string): Run a shell command." in prompt
    assert "- write_file(path: string, content: string): Write a file." in prompt
    assert "mode: string (optional)" in prompt
    assert "(bash, read_file, write_file, submit, wait)" in prompt
    example = prompt.strip().splitlines()[-1]
    assert json.loads(example) == {"tool": "bash", "arguments": {"command": "date"}}


def test_render_without_a_shell_tool_shows_placeholders_of_the_first_tool() -> None:
    example = render_tools_prompt(TOOLS[1:]).strip().splitlines()[-1]
    assert json.loads(example) == {"tool": "read_file", "arguments": {"path": "<path>"}}
    example = render_tools_prompt(TOOLS[4:]).strip().splitlines()[-1]
    assert json.loads(example) == {"tool": "wait", "arguments": {"seconds": 1}}


def test_render_without_tools_is_empty() -> None:
    assert render_tools_prompt([]) == ""


@pytest.mark.parametrize(
    ("text", "finished"),
    [
        ('{"tool": "bash", "arguments": {"command": "ls"', False),
        ('{"tool": "bash", "arguments": {"command": "a}b"}', True),
        ('{"tool": "bash", "arguments": {"command": "ls"}}', True),
        ('{"tool": "bash", "arguments": ["ls"]', True),
        ('{"tool": "ba', False),
        ("I think", False),
    ],
)
def test_call_finished_stops_after_the_arguments(text: str, finished: bool) -> None:
    assert call_finished(text) is finished


def test_call_prefill_opens_the_forced_tool_up_to_its_first_argument() -> None:
    assert call_prefill() == '{"tool": "'
    assert call_prefill(TOOLS[3]) == '{"tool": "submit", "arguments": {"answer": "'
    assert call_prefill(TOOLS[4]) == '{"tool": "wait", "arguments": {"seconds": '
    no_args = {
        "type": "function",
        "function": {"name": "stop", "parameters": {"type": "object", "properties": {}}},
    }
    assert call_prefill(no_args) == '{"tool": "stop", "arguments": {'


def test_valid_call_is_parsed() -> None:
    reply = parse_tool_reply('{"tool": "read_file", "arguments": {"path": "notes.txt"}}', TOOLS)
    assert reply.parse_error is None
    assert reply.content is None
    assert reply.tool_calls == (ParsedToolCall("read_file", {"path": "notes.txt"}),)
    assert json.loads(reply.tool_calls[0].arguments_json()) == {"path": "notes.txt"}


@pytest.mark.parametrize(
    "text",
    [
        '{"name": "read_file", "arguments": {"path": "notes.txt"}}',
        '{"function": "read_file", "arguments": "{\\"path\\": \\"notes.txt\\"}"}',
        '{"type": "function", "function": {"name": "read_file", "arguments": {"path": "notes.txt"}}}',
        '{"tool": "read_file", "parameters": {"path": "notes.txt"}}',
        '{"tool": "read_file", "path": "notes.txt"}',
        '{"read_file": {"path": "notes.txt"}}',
        '{"tool_calls": [{"name": "read_file", "arguments": {"path": "notes.txt"}}]}',
        "{'tool': 'read_file', 'arguments': {'path': 'notes.txt'}}",
        '{"tool": "read_file", "arguments": {"path": "notes.txt",},}',
        '{"tool": "READ-FILE", "arguments": {"path": "notes.txt"}}',
        '{"tool": "read_file", "arguments": {"path": "notes.txt"}',  # cut off before the last brace
    ],
)
def test_common_variants_are_accepted(text: str) -> None:
    reply = parse_tool_reply(text, TOOLS)
    assert reply.parse_error is None, reply.parse_error
    assert reply.tool_calls == (ParsedToolCall("read_file", {"path": "notes.txt"}),)


def test_a_python_literal_call_is_made_json_shaped() -> None:
    # a sampled small model wrote a set; its arguments must still go on as JSON
    text = "{'tool': 'bash', 'arguments': {'command': 'ls', 'flags': {'-a'}, 'pair': (1, b'x'), 2: None}}"
    reply = parse_tool_reply(text, TOOLS)
    assert reply.parse_error is None, reply.parse_error
    (call,) = reply.tool_calls
    expected = {"command": "ls", "flags": ["-a"], "pair": [1, "x"], "2": None}
    assert json.loads(call.arguments_json()) == expected


def test_prose_and_code_fence_around_json_become_content() -> None:
    text = 'I will read it.\n```json\n{"tool": "read_file", "arguments": {"path": "a {b}.txt"}}\n```\nDone.'
    reply = parse_tool_reply(text, TOOLS)
    assert reply.parse_error is None
    assert reply.tool_calls[0].arguments == {"path": "a {b}.txt"}
    assert reply.content == "I will read it.\n\nDone."


def test_multiple_objects_take_the_first_call() -> None:
    text = (
        '{"tool": "bash", "arguments": {"command": "ls"}}\n{"tool": "submit", "arguments": {"answer": "x"}}'
    )
    reply = parse_tool_reply(text, TOOLS)
    assert [c.name for c in reply.tool_calls] == ["bash"]


def test_leading_object_without_tool_name_is_skipped() -> None:
    text = '{"thought": "read first"} {"tool": "read_file", "arguments": {"path": "n.txt"}}'
    reply = parse_tool_reply(text, TOOLS)
    assert reply.parse_error is None
    assert reply.tool_calls[0].name == "read_file"


def test_an_unknown_tool_error_names_the_one_close_name() -> None:
    tools = [{"type": "function", "function": {"name": n, "parameters": {"type": "object"}}} for n in
             ("check_tire_pressure", "startEngine", "lockDoors")]  # fmt: skip
    close = parse_tool_reply('{"tool": "get_tire_pressure", "arguments": {}}', tools).parse_error
    assert close == (
        "unknown tool 'get_tire_pressure' (closest: 'check_tire_pressure'); available: "
        "check_tire_pressure, startEngine, lockDoors"
    )
    far = parse_tool_reply('{"tool": "post_tweet", "arguments": {}}', tools).parse_error
    assert far is not None and far.startswith("unknown tool 'post_tweet'; available:")


@pytest.mark.parametrize(
    ("text", "error_part"),
    [
        ("", "empty reply"),
        ("   \n", "empty reply"),
        ("The secret word is banana.", "no JSON object"),
        ("{tool: read_file}", "invalid JSON"),
        ('{"tool": "read_file", "arguments": {"path": "notes', "unterminated"),
        ('{"path": "notes.txt"}', "no tool name"),
        ('{"tool": "rm_rf", "arguments": {}}', "unknown tool 'rm_rf'"),
        ('{"tool": "read_file", "arguments": {}}', "missing required argument(s) path"),
        ('{"tool": "write_file", "arguments": {"path": "a"}}', "missing required argument(s) content"),
        ('{"tool": "read_file", "arguments": {"path": 3}}', "should be string"),
        ('{"tool": "wait", "arguments": {"seconds": "5"}}', "should be integer"),
        ('{"tool": "wait", "arguments": {"seconds": true}}', "should be integer"),
        ('{"tool": "wait", "arguments": {"seconds": 1, "mode": "medium"}}', "must be one of"),
        ('{"tool": "read_file", "arguments": ["notes.txt"]}', "not a JSON object"),
        ('{"tool": 7, "arguments": {}}', "no tool name"),
        ("[1, 2, 3]", "no JSON object"),
    ],
)
def test_malformed_replies_become_content_with_a_parse_error(text: str, error_part: str) -> None:
    reply = parse_tool_reply(text, TOOLS)
    assert reply.tool_calls == ()
    assert reply.content == text
    assert reply.parse_error is not None
    assert error_part in reply.parse_error


@pytest.mark.parametrize(
    ("text", "call", "error_part"),
    [
        ('{"tool": "wait", "arguments": {"seconds": "5"}}', ("wait", {"seconds": "5"}), "should be integer"),
        ('{"tool": "read_file", "arguments": {}}', ("read_file", {}), "missing required argument(s) path"),
        (
            '{"tool": "wait", "arguments": {"seconds": 1, "mode": "x"}}',
            ("wait", {"seconds": 1, "mode": "x"}),
            "one of",
        ),
        ('{"tool": "Read-File", "arguments": {"path": "a"}}', ("read_file", {"path": "a"}), None),
        ('{"tool": "reed_file", "arguments": {"path": "a"}}', ("reed_file", {"path": "a"}), "unknown tool"),
    ],
)
def test_keep_mistyped_returns_the_call_with_why_it_misses_the_schema(
    text: str, call: tuple[str, dict], error_part: str | None
) -> None:
    """For ``loop.repair_calls``: a readable call whose arguments (or name) miss the schema comes
    back as a call, so the repair sees it, instead of as a parse error the model must fix itself."""
    reply = parse_tool_reply(text, TOOLS, keep_mistyped=True)
    assert reply.parse_error is None
    assert reply.tool_calls == (ParsedToolCall(*call),)
    assert (reply.argument_error is None) if error_part is None else (error_part in reply.argument_error)
    assert parse_tool_reply("no call here", TOOLS, keep_mistyped=True).parse_error  # unreadable stays so
    assert parse_tool_reply('{"tool": "wait", "arguments": [1]}', TOOLS, keep_mistyped=True).parse_error


def test_without_tools_the_reply_is_plain_content() -> None:
    reply = parse_tool_reply('{"tool": "bash"}', [])
    assert reply.content == '{"tool": "bash"}'
    assert reply.tool_calls == ()
    assert reply.parse_error is None


def test_integral_float_is_an_integer_and_optional_args_may_be_absent() -> None:
    reply = parse_tool_reply('{"tool": "wait", "arguments": {"seconds": 2.0}}', TOOLS)
    assert reply.parse_error is None


def test_history_is_rendered_into_plain_turns() -> None:
    messages = [
        {"role": "system", "content": "You are an agent."},
        {"role": "user", "content": [{"type": "text", "text": "Read notes.txt."}]},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": '{"path": "notes.txt"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "secret: banana"},
        {"role": "user", "content": "Now submit."},
    ]
    turns = to_plain_messages(messages, TOOLS)
    assert [t["role"] for t in turns] == ["system", "user", "assistant", "user"]
    assert turns[0]["content"].startswith("You are an agent.\n\nYou can use these tools:")
    assert json.loads(turns[2]["content"]) == {"tool": "read_file", "arguments": {"path": "notes.txt"}}
    assert turns[3]["content"] == "Result of read_file:\nsecret: banana\n\nNow submit."


def test_history_without_system_gets_one_for_the_tools() -> None:
    turns = to_plain_messages([{"role": "user", "content": "hi"}], TOOLS)
    assert turns[0]["role"] == "system"
    assert "You can use these tools:" in turns[0]["content"]
    assert to_plain_messages([{"role": "user", "content": "hi"}]) == [{"role": "user", "content": "hi"}]


def test_tool_call_schema_has_one_branch_per_tool() -> None:
    schema = tool_call_schema(TOOLS)
    branches = schema["anyOf"]
    assert [b["properties"]["tool"]["const"] for b in branches] == [
        "bash",
        "read_file",
        "write_file",
        "submit",
        "wait",
    ]
    assert branches[0]["properties"]["arguments"]["required"] == ["command"]
    single = tool_call_schema(TOOLS[:1])
    assert single["properties"]["tool"] == {"const": "bash"}
