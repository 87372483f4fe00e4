"""Tool names a provider would refuse (``math.add``): offered under safe names, mapped back in the
reply, deterministic and collision-free (``models/tool_names.py`` through ``acomplete``)."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from harnessevolve.models import acomplete
from harnessevolve.models.scripted import register_script, unregister_script
from harnessevolve.models.tool_names import SAFE_TOOL_NAME, safe_names


def tool(name: str) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "description": name, "parameters": {}}}


def test_safe_names_are_deterministic_collision_free_and_leave_safe_names_alone() -> None:
    names = ["math.add", "math_add", "math/add", "ok-name", "x" * 70 + ".y", "spaces are bad"]
    mapped = safe_names(names)
    assert "math_add" not in mapped and "ok-name" not in mapped  # safe names keep themselves
    assert set(mapped) == {"math.add", "math/add", "x" * 70 + ".y", "spaces are bad"}
    offered = [mapped.get(n, n) for n in names]
    assert len(set(offered)) == len(names)  # no two tools share a name
    assert all(SAFE_TOOL_NAME.match(n) for n in offered)
    assert mapped["spaces are bad"] == "spaces_are_bad"
    assert mapped["math.add"].startswith("math_add_")  # math_add is taken: a hash of the original
    assert safe_names(reversed(names)) == mapped  # the order offered does not matter
    assert safe_names(["a.b"]) == {"a.b": "a_b"}


def test_acomplete_offers_safe_names_and_maps_the_reply_back() -> None:
    seen: list[tuple[list[str], list[dict[str, Any]]]] = []

    def policy(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
        seen.append(([t["function"]["name"] for t in tools], messages))
        return {"tool_calls": [{"name": "math_add", "arguments": {"a": 1}}]}

    name = f"dotted-{uuid.uuid4().hex[:8]}"
    register_script(name, policy)
    history = [
        {"role": "user", "content": "add"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "math.add", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "name": "math.add", "content": "2"},
    ]
    try:
        reply = asyncio.run(acomplete(f"scripted/{name}", history, tools=[tool("math.add"), tool("submit")]))
    finally:
        unregister_script(name)
    offered, messages = seen[0]
    assert offered == ["math_add", "submit"]
    calls = [m for m in messages if m["role"] == "assistant"][0]["tool_calls"]
    assert calls[0]["function"]["name"] == "math_add"
    assert [c.name for c in reply.tool_calls] == ["math.add"]  # the original, for the tool and trajectory
    assert history[1]["tool_calls"][0]["function"]["name"] == "math.add"  # the caller's list untouched
