"""Calls written with raw quotes inside a string value (code with its docstrings, a message that
quotes someone), which JSON cannot read, are read by their shape for a caller that repairs calls
(``keep_mistyped``); never otherwise, and never when the shape is not the protocol's."""

from __future__ import annotations

import json

from harnessevolve.execute.call_repair import repair_call, unfenced
from harnessevolve.models.raw_call import read_raw_call
from harnessevolve.models.tool_text import parse_tool_reply


def tool(name: str, **props: str) -> dict:
    return {
        "type": "function",
        "function": {
            "name": name,
            "parameters": {
                "type": "object",
                "properties": {k: {"type": v} for k, v in props.items()},
                "required": list(props),
            },
        },
    }


FILES = [tool("write_file", path="string", content="string"), tool("bash", command="string")]
SOCIAL = [tool("post_message", text="string", tags="array", urgent="boolean")]

CODE = (
    '{"tool": "write_file", "arguments": {"path": "util.py", "content": "def mean(xs):\\n'
    '    """Mean of "xs", an empty list gives 0."""\\n    return sum(xs) / len(xs) if xs else 0\\n"}}'
)


def test_code_with_raw_docstring_quotes_is_read_for_a_repairing_caller_only() -> None:
    assert parse_tool_reply(CODE, FILES).parse_error  # the plain parser refuses it, as before
    reply = parse_tool_reply(CODE, FILES, keep_mistyped=True)
    [call] = reply.tool_calls
    assert call.name == "write_file" and call.arguments["path"] == "util.py"
    content = call.arguments["content"]
    assert content.startswith('def mean(xs):\n    """Mean of "xs"') and content.endswith("else 0\n")
    compile(content, "util.py", "exec")
    assert reply.argument_error is None and reply.parse_error is None


def test_a_message_quoting_someone_on_a_tool_use_benchmark() -> None:
    text = (
        'Sure. {"tool": "post_message", "arguments": '
        '{"text": "She said "on my way" at 9", "tags": ["a", "b"], "urgent": false}}'
    )
    [call] = parse_tool_reply(text, SOCIAL, keep_mistyped=True).tool_calls
    assert call.arguments == {"text": 'She said "on my way" at 9', "tags": ["a", "b"], "urgent": False}


def test_a_reply_that_stops_after_a_whole_fenced_value_is_read_as_closed() -> None:
    head = '{"tool": "write_file", "arguments": {"path": "a.py", "content": '
    text = head + '"```python\ndef f():\n    return "x"\n```'
    [call] = parse_tool_reply(text, FILES, keep_mistyped=True).tool_calls
    assert call.arguments["content"] == '```python\ndef f():\n    return "x"\n```'
    # a reply cut off in the middle of its value (no closing fence) stays a parse error
    cut = (
        '{"tool": "write_file", "arguments": {"path": "a.py", "content": "```python\ndef f():\n    return "x'
    )
    assert parse_tool_reply(cut, FILES, keep_mistyped=True).parse_error


def test_other_shapes_are_not_guessed() -> None:
    for text in (
        '{"tool": "rm_rf", "arguments": {"path": "x"y"}}',  # not a tool offered
        '{"tool": "bash", "arguments": {"cmd": "echo "a""}}',  # not one of its arguments
        '{"tool": "bash", "arguments": {"command": echo "a"}}',  # a value neither a string nor JSON
        'run {"tool": "bash" with "quotes"',  # not the protocol's shape
        '{"tool": "write_file", "arguments": {"path": "a", "path": "b"}}',  # an argument twice
    ):
        assert read_raw_call(text, FILES) is None, text
    # valid JSON never reaches it: the ordinary parser reads it, escapes and all
    plain = json.dumps({"tool": "bash", "arguments": {"command": 'echo "a"'}})
    assert parse_tool_reply(plain, FILES, keep_mistyped=True).tool_calls[0].arguments == {
        "command": 'echo "a"'
    }


def test_a_string_wholly_in_one_code_fence_is_unwrapped_by_the_repair() -> None:
    schemas = {t["function"]["name"]: t["function"]["parameters"] for t in FILES}
    fenced = "```python\nprint('hi')\n```"
    repair = repair_call("write_file", {"path": "a.py", "content": fenced}, "", schemas)
    assert repair.arguments == {"path": "a.py", "content": "print('hi')\n"}
    assert repair.notes == ["content: code fence around the value removed"] and repair.error is None
    # the same on a tool-use shape: a command fenced as shell
    repair = repair_call("bash", {"command": "```bash\nls -la\n```"}, "", schemas)
    assert repair.arguments == {"command": "ls -la\n"}
    assert unfenced("see ```x``` here") is None  # prose with a fence inside is not a fenced value
    assert unfenced("```\na\n```\n```\nb\n```") is None  # two blocks: which one?
    assert unfenced("plain text") is None
