"""OpenAI-format tool specs for provider tests (every argument a required string)."""

from __future__ import annotations

from typing import Any

DESCRIPTIONS = {
    "bash": ("Run a shell command.", ["command"]),
    "read_file": ("Read a text file.", ["path"]),
    "write_file": ("Write text to a file.", ["path", "content"]),
    "submit": ("Submit the final answer.", ["answer"]),
}


def tool_specs(*names: str) -> list[dict[str, Any]]:
    specs = []
    for name in names:
        description, args = DESCRIPTIONS[name]
        parameters = {
            "type": "object",
            "properties": {a: {"type": "string"} for a in args},
            "required": list(args),
        }
        specs.append(
            {
                "type": "function",
                "function": {"name": name, "description": description, "parameters": parameters},
            }
        )
    return specs
