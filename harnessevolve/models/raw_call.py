"""A tool call written as text whose string values hold raw quotes, read where JSON cannot read it.

Small models that put a file's content in a call write Python as it is, quotes unescaped
(``{"tool": "write_file", "arguments": {"path": "a.py", "content": "def f():\\n    \"\"\"Doc.\"\"\"..."}}``):
no JSON parser reads that, and the reply is a parse error although its reading is plain. Here the
call is read by its shape instead: ``{"tool": NAME, "arguments": {...}}`` with NAME one of the
tools, the argument names the tool's parameters, each in the order written; a value is everything
up to the next known argument name (or the end of the call), so a quote inside it is just a
character. JSON escapes that are valid (``\\n``, ``\\"``, ``\\\\``, ...) keep their meaning. A
reply that stops right after its last value, a whole markdown code fence (three
backticks, code, three backticks), without closing the string and the braces, is read as closed there.

Used by the embedded provider's parser for a caller that repairs calls (``keep_mistyped``:
``loop.repair_calls``), only when the reply holds no JSON object at all. Nothing here names a
benchmark or a task.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

HEAD = re.compile(r'\{\s*"tool"\s*:\s*"(?P<name>[^"\\]+)"\s*,\s*"arguments"\s*:\s*\{', re.S)
TAIL = re.compile(r"\}\s*\}\s*$")
ESCAPES = set('"\\/bfnrtu')


def _string(inner: str) -> str | None:
    """The text of a string literal's inside, its raw quotes kept as quotes."""
    out: list[str] = []
    i = 0
    while i < len(inner):
        char = inner[i]
        if char == "\\" and i + 1 < len(inner) and inner[i + 1] in ESCAPES:
            out.append(inner[i : i + 2])
            i += 2
            continue
        out.append('\\"' if char == '"' else "\\\\" if char == "\\" else char)
        i += 1
    try:
        value = json.loads('"' + "".join(out) + '"', strict=False)
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, str) else None


def _value(text: str) -> tuple[bool, Any]:
    text = text.strip().rstrip(",").strip()
    if len(text) >= 2 and text[0] == '"' and text[-1] == '"':
        value = _string(text[1:-1])
        return value is not None, value
    try:
        return True, json.loads(text)
    except json.JSONDecodeError:
        return False, None


def read_raw_call(
    text: str, tools: Sequence[Mapping[str, Any]]
) -> tuple[int, int, str, dict[str, Any]] | None:
    """``(start, end, tool name, arguments)`` of the one call ``text`` holds in the protocol's shape
    with raw quotes in its values, or None (another shape, an unknown tool or argument, a value
    that is neither a string nor JSON)."""
    from harnessevolve.models.tool_text import tool_function  # it imports this module

    head = HEAD.search(text)
    if head is None:
        return None
    tool = next((t for t in tools if tool_function(t).get("name") == head["name"]), None)
    if tool is None:
        return None
    stripped = text[head.end() :].rstrip()
    fenced = stripped.endswith("```")
    tail = TAIL.search(stripped[:-3].rstrip() if fenced else stripped)
    if tail is not None:
        end, body = head.end() + tail.end(), stripped[: tail.start()]
    elif fenced and stripped.count("```") >= 2:
        # the reply ended with its last value, a whole fenced block, unclosed: the model was done
        end, body = head.end() + len(stripped), stripped + '"'
    else:
        return None
    params = tool_function(tool).get("parameters")
    properties = params.get("properties") if isinstance(params, Mapping) else None
    names = "|".join(re.escape(str(name)) for name in properties or ())
    if not names:
        return None
    keys = list(re.finditer(rf'(?:^|,)\s*"(?P<key>{names})"\s*:\s*', body))
    arguments: dict[str, Any] = {}
    for index, key in enumerate(keys):
        if key["key"] in arguments or (index == 0 and key.start() != 0 and body[: key.start()].strip()):
            return None
        stop = keys[index + 1].start() if index + 1 < len(keys) else len(body)
        ok, value = _value(body[key.end() : stop])
        if not ok:
            return None
        arguments[key["key"]] = value
    return (head.start(), end, head["name"], arguments) if arguments else None


FENCED = re.compile(r"\s*```[\w.+-]*[ \t]*\n(?P<inner>.*?)\n?[ \t]*```\s*", re.S)


def unfenced(value: str) -> str | None:
    """The inside of a string wholly wrapped in one markdown code fence (a small model writing a
    file's content as it would in chat), else None."""
    found = FENCED.fullmatch(value)
    if found is None or "```" in found["inner"]:
        return None
    inner = found["inner"]
    return inner + "\n" if inner and not inner.endswith("\n") else inner
