"""Plain-text tool-call protocol for models without native tool calling.

Small local models (SmolLM2-135M) know only ``system``/``user``/``assistant`` turns and
have no tool-calling head. This module turns OpenAI-format tool specs into a short
instruction block, turns tool-call history into plain turns, and parses the model's
reply back into tool calls. It is pure Python: no model, no litellm, no I/O.

The protocol: the model answers with exactly one JSON object::

    {"tool": "read_file", "arguments": {"path": "notes.txt"}}

Parsing is lenient (first balanced JSON object, prose and code fences around it,
``{"name": ..}``/``{"function": ..}`` variants, arguments at the top level, a missing
closing brace) and never raises: a reply that is not a valid call comes back as plain
content with :attr:`ParsedReply.parse_error` saying why.
"""

from __future__ import annotations

import ast
import difflib
import json
import re
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from harnessevolve.models.raw_call import read_raw_call

TOOL_KEYS = ("tool", "name", "function", "tool_name", "action")
ARGUMENT_KEYS = ("arguments", "args", "parameters", "params", "input", "action_input")

TOOL_RESULT_TEMPLATE = "Result of {name}:\n{content}"
"""How a ``tool`` message is shown to the model, as a user turn."""

SHELL_TOOLS = ("bash", "shell", "run_command", "execute_bash", "terminal")
"""Tool names for which the tools prompt shows a literal example (``date``)."""

_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list,),
    "object": (dict,),
    "null": (type(None),),
}


@dataclass(frozen=True)
class ParsedToolCall:
    """One tool call read from a model reply."""

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)

    def arguments_json(self) -> str:
        """The arguments as the JSON string OpenAI-style tool calls carry."""
        return json.dumps(self.arguments, ensure_ascii=False)


@dataclass(frozen=True)
class ParsedReply:
    """A model reply read under the tool protocol: ``tool_calls`` non-empty (``content`` is any
    prose around the JSON, or None), or empty and ``content`` the raw reply. When tools were
    offered and the reply is not a valid call, ``parse_error`` says why."""

    content: str | None
    tool_calls: tuple[ParsedToolCall, ...] = ()
    parse_error: str | None = None
    argument_error: str | None = None
    """``keep_mistyped``: the call's arguments miss its tool's schema (why); the call is kept."""


def tool_function(tool: Mapping[str, Any]) -> Mapping[str, Any]:
    """The ``function`` part of an OpenAI tool spec (bare function specs pass through)."""
    function = tool.get("function")
    return function if isinstance(function, Mapping) else tool


def tool_names(tools: Sequence[Mapping[str, Any]]) -> list[str]:
    """The names of the offered tools, in order."""
    return [str(tool_function(t).get("name", "")) for t in tools if tool_function(t).get("name")]


def _parameters(tool: Mapping[str, Any]) -> Mapping[str, Any]:
    params = tool_function(tool).get("parameters")
    return params if isinstance(params, Mapping) else {}


def _placeholder(name: str, schema: Mapping[str, Any]) -> Any:
    """An example value for argument ``name``: its first enum value, or one of its type."""
    if schema.get("enum"):
        return schema["enum"][0]
    kind = schema.get("type")
    kind = next((k for k in kind if k != "null"), "string") if isinstance(kind, list) else kind
    return {"integer": 1, "number": 1, "boolean": True, "array": [], "object": {}}.get(str(kind), f"<{name}>")


def _signature(tool: Mapping[str, Any]) -> str:
    function = tool_function(tool)
    params = _parameters(tool)
    props = params.get("properties") or {}
    required = set(params.get("required") or ())
    args = []
    for name, schema in props.items():
        kind = schema.get("type", "any") if isinstance(schema, Mapping) else "any"
        kind = "|".join(kind) if isinstance(kind, list) else kind
        args.append(f"{name}: {kind}" + ("" if name in required else " (optional)"))
    description = " ".join(str(function.get("description") or "").split())
    line = f"- {function.get('name')}({', '.join(args)})"
    return f"{line}: {description}" if description else line


def example_call(tools: Sequence[Mapping[str, Any]]) -> tuple[str, str]:
    """``(introduction, call)``: the one example call shown in the tools prompt.

    A literal shell call (``date``) when a shell tool is offered: SmolLM2-135M follows a
    concrete example best and copies placeholders such as "..." into its answers.
    Otherwise the first tool with ``<argument name>`` placeholders.
    """
    for tool in tools:
        name = tool_function(tool).get("name")
        props = _parameters(tool).get("properties") or {}
        strings = [k for k, v in props.items() if isinstance(v, Mapping) and v.get("type") == "string"]
        if name in SHELL_TOOLS and len(props) == 1 and strings:
            return "to run the command date", json.dumps({"tool": name, "arguments": {strings[0]: "date"}})
    tool = tools[0]
    params = _parameters(tool)
    props = params.get("properties") or {}
    required = [k for k in params.get("required") or props if k in props]
    name = tool_function(tool).get("name")
    arguments = {k: _placeholder(k, props[k] or {}) for k in required}
    return f"to use {name}", json.dumps({"tool": name, "arguments": arguments})


def render_tools_prompt(tools: Sequence[Mapping[str, Any]]) -> str:
    """Instructions describing ``tools`` and the reply format, to append to the system message.

    Kept short and concrete for small models: one signature line per tool, the tool
    names spelled out again, and one literal example call.
    """
    if not tools:
        return ""
    names = ", ".join(tool_names(tools))
    lines = ["You can use these tools:", *(_signature(t) for t in tools), ""]
    intro, call = example_call(tools)
    lines.append(
        f"Reply with only one JSON object that calls one of the tools ({names}). For example, {intro}:"
    )
    lines.append(call)
    return "\n".join(lines)


# --- history -------------------------------------------------------------------------


def message_text(content: Any) -> str:
    """The text of an OpenAI message ``content`` (a string, None or a list of parts)."""
    if content is None or isinstance(content, str):
        return content or ""
    if isinstance(content, Sequence):
        return "".join(str(p.get("text", "")) if isinstance(p, Mapping) else str(p) for p in content)
    return str(content)


def _render_assistant(msg: Mapping[str, Any]) -> str:
    text = message_text(msg.get("content")).strip()
    calls = []
    for call in msg.get("tool_calls") or ():
        function = call.get("function") or {}
        raw = function.get("arguments") or "{}"
        try:
            arguments = json.loads(raw) if isinstance(raw, str) else raw
        except json.JSONDecodeError:
            arguments = raw
        calls.append(json.dumps({"tool": function.get("name"), "arguments": arguments}, ensure_ascii=False))
    return "\n".join([text, *calls] if text else calls)


def to_plain_messages(
    messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] = ()
) -> list[dict[str, str]]:
    """Rewrite OpenAI chat messages into system/user/assistant turns with string content.

    Assistant tool calls become the JSON the protocol asks for; ``tool`` (and legacy
    ``function``) results become user turns ``Result of <name>:``; the tools prompt is
    appended to the system message (one is created when absent). Consecutive turns of
    the same role are merged, since the chat template expects them to alternate.
    """
    names_by_id: dict[str, str] = {}
    turns: list[dict[str, str]] = []
    for msg in messages:
        role = str(msg.get("role", "user"))
        if role == "assistant":
            for call in msg.get("tool_calls") or ():
                names_by_id[str(call.get("id"))] = str((call.get("function") or {}).get("name"))
            text = _render_assistant(msg)
        elif role in ("tool", "function"):
            name = msg.get("name") or names_by_id.get(str(msg.get("tool_call_id")), "tool")
            text = TOOL_RESULT_TEMPLATE.format(name=name, content=message_text(msg.get("content")))
            role = "user"
        else:
            role = "system" if role in ("system", "developer") else "user"
            text = message_text(msg.get("content"))
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"] += "\n\n" + text
        else:
            turns.append({"role": role, "content": text})
    tools_prompt = render_tools_prompt(tools)
    if tools_prompt:
        if turns and turns[0]["role"] == "system":
            turns[0]["content"] = f"{turns[0]['content'].rstrip()}\n\n{tools_prompt}"
        else:
            turns.insert(0, {"role": "system", "content": tools_prompt})
    return turns


# --- parsing -------------------------------------------------------------------------


def _balanced_objects(text: str) -> Iterator[tuple[int, int, bool]]:
    """Yield ``(start, end, closed)`` for each top-level ``{...}`` span in ``text``.

    String literals (double or single quoted) are skipped so braces inside them do not
    count. An object still open at the end of the text is yielded with ``closed=False``.
    """
    depth, start, quote, escaped = 0, -1, "", False
    for i, char in enumerate(text):
        if quote:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == quote:
                quote = ""
            continue
        if depth and char in "\"'":
            # an apostrophe inside an object is a quote only where a Python literal would have one
            if char == '"' or text[i - 1] in "{[:, \n":
                quote = char
        elif char == "{":
            if depth == 0:
                start = i
            depth += 1
        elif char == "}" and depth:
            depth -= 1
            if depth == 0:
                yield start, i + 1, True
    if depth:
        yield start, len(text), False


def _loads(snippet: str) -> Any:
    """Parse a JSON object leniently: JSON, then trailing commas removed, then a Python literal."""
    try:
        return json.loads(snippet, strict=False)  # strict=False: raw newlines inside strings
    except json.JSONDecodeError:
        pass
    cleaned = re.sub(r",\s*([}\]])", r"\1", snippet)
    try:
        return json.loads(cleaned, strict=False)
    except json.JSONDecodeError:
        pass
    try:
        return _json_shaped(ast.literal_eval(cleaned))
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None


def _json_shaped(value: Any) -> Any:
    """A Python literal as JSON could have written it: sets and tuples become lists, keys strings,
    bytes and other values their text (a set in a call's arguments could not be sent on as JSON)."""
    if isinstance(value, dict):
        return {str(k): _json_shaped(v) for k, v in value.items()}
    if isinstance(value, set | frozenset):
        return [_json_shaped(v) for v in sorted(value, key=repr)]
    if isinstance(value, list | tuple):
        return [_json_shaped(v) for v in value]
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def _nesting(text: str) -> Iterator[tuple[str, int, bool]]:
    """Yield ``(char, depth after it, inside a string)`` over JSON-ish ``text``."""
    depth, quote, escaped = 0, False, False
    for char in text:
        if quote:
            escaped, quote = (False, True) if escaped else (char == "\\", char != '"')
        elif char == '"':
            quote = True
        elif char in "{[":
            depth += 1
        elif char in "}]":
            depth -= 1
        yield char, depth, quote


def _close(snippet: str) -> str:
    """Append the closing braces a truncated object is missing (when not inside a string)."""
    last = deque(_nesting(snippet), maxlen=1)
    _, depth, quote = last[0] if last else ("", 0, False)
    return snippet if quote else snippet + "}" * max(depth, 0)


def _find_objects(text: str) -> tuple[list[tuple[int, int, dict[str, Any]]], str | None]:
    """Every top-level JSON object in ``text`` with its span, and why the first one failed."""
    found: list[tuple[int, int, dict[str, Any]]] = []
    problem = None
    for start, end, closed in _balanced_objects(text):
        snippet = text[start:end] if closed else _close(text[start:end])
        value = _loads(snippet)
        if isinstance(value, dict):
            found.append((start, end, value))
        elif problem is None:
            problem = "invalid JSON object" if closed else "unterminated JSON object (reply cut off?)"
    return found, problem


def _as_arguments(value: Any) -> dict[str, Any] | None:
    if value is None:
        return {}
    if isinstance(value, str):
        value = _loads(value) if value.strip() else {}
    return value if isinstance(value, dict) else None


def _normalise(obj: dict[str, Any], names: Sequence[str]) -> tuple[str, Any] | None:
    """Read ``(tool name, raw arguments)`` from the call shapes models commonly produce."""
    for wrapper in ("tool_call", "tool_calls", "function_call", "call"):
        inner = obj.get(wrapper)
        if isinstance(inner, list) and inner and isinstance(inner[0], dict):
            inner = inner[0]
        if isinstance(inner, dict) and len(obj) <= 2:
            return _normalise(inner, names)
    for key in TOOL_KEYS:
        entry = obj.get(key)
        if isinstance(entry, dict) and isinstance(entry.get("name"), str):
            return _normalise(entry, names)  # {"function": {"name": .., "arguments": ..}}
        if not isinstance(entry, str):
            continue
        for arg_key in ARGUMENT_KEYS:
            if arg_key in obj:
                return entry, obj[arg_key]
        rest = {k: v for k, v in obj.items() if k not in (key, "type", "id")}
        return entry, rest  # arguments given at the top level
    if len(obj) == 1:
        ((only, entry),) = obj.items()
        if only in names and (entry is None or isinstance(entry, dict)):
            return only, entry  # {"read_file": {"path": ..}}
    return None


def _type_ok(value: Any, kind: Any) -> bool:
    kinds = kind if isinstance(kind, list) else [kind]
    for name in kinds:
        expected = _JSON_TYPES.get(str(name))
        if expected is None:
            return True
        if isinstance(value, bool) and name in ("integer", "number"):
            continue
        if isinstance(value, expected):
            return True
        if name == "integer" and isinstance(value, float) and value.is_integer():
            return True
    return False


def validate_arguments(arguments: Mapping[str, Any], tool: Mapping[str, Any]) -> str | None:
    """Why ``arguments`` do not fit the tool's JSON schema (first level only), or None."""
    params = _parameters(tool)
    props = params.get("properties") or {}
    missing = [name for name in params.get("required") or () if name not in arguments]
    if missing:
        return (
            f"missing required argument(s) {', '.join(missing)} for tool '{tool_function(tool).get('name')}'"
        )
    for name, value in arguments.items():
        schema = props.get(name)
        if not isinstance(schema, Mapping):
            if params.get("additionalProperties") is False:
                return f"unexpected argument '{name}' for tool '{tool_function(tool).get('name')}'"
            continue
        if "type" in schema and not _type_ok(value, schema["type"]):
            return f"argument '{name}' should be {schema['type']}, got {type(value).__name__}"
        if "enum" in schema and value not in schema["enum"]:
            return f"argument '{name}' must be one of {schema['enum']}, got {value!r}"
    return None


def _match_tool(name: str, tools: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    by_name = {str(tool_function(t).get("name")): t for t in tools}
    if name in by_name:
        return by_name[name]
    folded = name.strip().lower().replace("-", "_")
    return next((t for n, t in by_name.items() if n.lower().replace("-", "_") == folded), None)


def _closest(name: str, names: Sequence[str]) -> str:
    close = difflib.get_close_matches(name, list(names), n=2, cutoff=0.6)  # the one close spelling
    return f" (closest: '{close[0]}')" if len(close) == 1 else ""


def _failure(text: str, error: str) -> ParsedReply:
    return ParsedReply(content=text, tool_calls=(), parse_error=error)


def parse_tool_reply(
    text: str, tools: Sequence[Mapping[str, Any]], *, keep_mistyped: bool = False
) -> ParsedReply:
    """Read a model reply under the tool protocol; never raises. Without ``tools`` the reply is
    plain content. With tools, the first JSON object that names a tool is the call (later ones are
    ignored), prose around it ``content``. Anything else is plain content with ``parse_error`` set:
    empty reply, no or invalid JSON, no tool name, an unknown tool (the one close name said),
    arguments not an object, missing or mistyped arguments. ``keep_mistyped``: an unknown tool or
    arguments that miss the schema come back as a call with ``argument_error`` saying why, and raw
    quotes in a value are read (``raw_call``), for a caller that repairs calls (``repair_calls``)."""
    text = text if isinstance(text, str) else str(text or "")
    if not tools:
        return ParsedReply(content=text)
    if not text.strip():
        return _failure(text, "empty reply; expected a JSON tool call")
    names = tool_names(tools)
    objects, problem = _find_objects(text)
    if not objects and keep_mistyped and (raw := read_raw_call(text, tools)) is not None:
        objects = [(raw[0], raw[1], {"tool": raw[2], "arguments": raw[3]})]  # raw quotes in a value
    if not objects:
        expected = '{"tool": ..., "arguments": {...}}'
        return _failure(text, problem or f"no JSON object in reply; expected a tool call like {expected}")
    for start, end, obj in objects:
        found = _normalise(obj, names)
        if found is None:
            continue
        name, raw_arguments = found
        tool = _match_tool(name, tools)
        unknown = f"unknown tool '{name}'{_closest(name, names)}; available: {', '.join(names)}"
        if tool is None and not (keep_mistyped and isinstance(raw_arguments, (dict, type(None)))):
            return _failure(text, unknown)
        arguments = _as_arguments(raw_arguments)
        if arguments is None:
            return _failure(text, f"arguments of '{name}' are not a JSON object")
        error = validate_arguments(arguments, tool) if tool is not None else unknown
        if error and not keep_mistyped:
            return _failure(text, error)
        prose = re.sub(r"```(?:json)?\s*```", "", (text[:start] + text[end:]).strip()).strip()
        call = ParsedToolCall(str(tool_function(tool).get("name")) if tool else name, arguments)
        return ParsedReply(content=prose or None, tool_calls=(call,), argument_error=error)
    return _failure(text, 'JSON object has no tool name; expected {"tool": ..., "arguments": {...}}')


def call_finished(text: str) -> bool:
    """Whether a reply that starts with a JSON object has said all a tool call needs.

    True once that object closes, or once a value nested directly in it (the
    ``arguments``) closes: small models tend to add stray keys after the arguments.
    """
    stripped = text.lstrip()
    return stripped.startswith("{") and any(
        char in "}]" and depth <= 1 and not quote for char, depth, quote in _nesting(stripped)
    )


def call_prefill(tool: Mapping[str, Any] | None = None) -> str:
    """The start of a protocol reply, to put in the model's mouth.

    Without a tool, just ``{"tool": "`` (the model picks the tool); with a forced tool,
    everything up to the value of its first required argument.
    """
    if tool is None:
        return '{"tool": "'
    prefix = f'{{"tool": {json.dumps(tool_function(tool).get("name"))}, "arguments": {{'
    params = _parameters(tool)
    required = [name for name in params.get("required") or () if name in (params.get("properties") or {})]
    if not required:
        return prefix
    kind = (params["properties"][required[0]] or {}).get("type")
    return prefix + json.dumps(required[0]) + (': "' if kind == "string" else ": ")


# --- grammar -------------------------------------------------------------------------


def tool_call_schema(tools: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """A JSON schema accepting exactly ``{"tool": <one tool>, "arguments": <its parameters>}``, one
    ``anyOf`` branch a tool (its arguments checked against its own parameters): for grammars."""
    branches = []
    for tool in tools:
        params = dict(_parameters(tool)) or {"type": "object"}
        params.setdefault("type", "object")
        branches.append(
            {
                "type": "object",
                "properties": {"tool": {"const": tool_function(tool).get("name")}, "arguments": params},
                "required": ["tool", "arguments"],
                "additionalProperties": False,
            }
        )
    return branches[0] if len(branches) == 1 else {"anyOf": branches}
