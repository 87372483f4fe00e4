"""Tool specs for tests (every argument a required string): OpenAI-format for provider tests, and
the built-in tools as an agent's task file lists them."""

from __future__ import annotations

from typing import Any

DESCRIPTIONS = {
    "bash": ("Run a shell command.", ["command"]),
    "read_file": ("Read a text file.", ["path"]),
    "write_file": ("Write text to a file.", ["path", "content"]),
    "submit": ("Submit the final answer.", ["answer"]),
}


def tool_definition(name: str) -> dict[str, Any]:
    """``name``'s tool as a harness or task file defines it (name, description, parameters)."""
    description, args = DESCRIPTIONS[name]
    parameters = {
        "type": "object",
        "properties": {a: {"type": "string"} for a in args},
        "required": list(args),
    }
    return {"name": name, "description": description, "parameters": parameters}


def tool_specs(*names: str) -> list[dict[str, Any]]:
    return [{"type": "function", "function": tool_definition(name)} for name in names]


def builtin_tools(*names: str) -> list[dict[str, Any]]:
    """The tools as a task file for an agent lists them: each bound to the built-in of its name."""
    return [{**tool_definition(name), "builtin": name} for name in names]
