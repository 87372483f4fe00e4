"""Runs one ``python`` check INSIDE the sandbox (``python python_check_main.py INPUT.json``).

Standard library only, started by path (``evaluate/python_check.py``). ``INPUT.json`` holds the
check (``module:function``, ``args``, ``per_turn``), the task's ``python_path``, the workspace path,
the submitted answer, the trajectory and the tool server's per-turn state. The function is called
with one ``CheckInput`` per turn (``per_turn``) or once, and must return a score in [0, 1], a
``(score, reason)`` pair or ``{"score": ..., "reason": ...}``. One JSON line goes to stdout:
``{"results": [{"score", "reason"} | {"error"}, ...]}``; whatever the check prints goes to stderr.
"""

from __future__ import annotations

import importlib
import json
import math
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class CheckInput:
    """What a Python check receives."""

    workspace: Path
    """The workspace the agent left (the final one, also for per-turn checks)."""
    trajectory: dict[str, Any]
    """The ATIF trajectory as JSON; for a per-turn check, cut after that turn's last agent step."""
    state: dict[str, Any] | None
    """The tool server's state after the turn (per turn) or at the end: ``objects`` (``module:Class``
    -> the instance's public attributes as JSON) and ``calls`` (every call so far: ``tool``,
    ``arguments``, ``result``, ``error``); None when the task has no Python or MCP tools."""
    calls: list[dict[str, Any]]
    """Every tool call the agent made (up to the turn, for a per-turn check), read from the
    trajectory, whether or not the tools have implementations: ``tool``, ``arguments``, ``result``
    (the observation's text, or None) and ``error`` (the error recorded on the call's step, or None).
    ``state["calls"]`` holds only the calls the tool server served."""
    turn: int | None
    """The user turn (from 0) being scored; None for a check scored once at the end."""
    turns: int
    """How many user turns the task has."""
    answer: str | None
    args: dict[str, Any]
    """The check's ``args`` from the task file."""


def _turn_cut(trajectory: dict[str, Any], turn: int) -> dict[str, Any]:
    steps = trajectory.get("steps", [])
    starts = [
        i
        for i, s in enumerate(steps)
        if s.get("source") == "user" and (s.get("extra") or {}).get("turn", 0) > turn
    ]
    return {**trajectory, "steps": steps[: starts[0]] if starts else steps}


def agent_calls(trajectory: dict[str, Any]) -> list[dict[str, Any]]:
    """The agent's tool calls of an ATIF trajectory, each with its result and its step's error."""
    out = []
    for step in trajectory.get("steps", []):
        if step.get("source") != "agent":
            continue
        results = {
            r.get("source_call_id"): r.get("content")
            for r in ((step.get("observation") or {}).get("results") or [])
        }
        error = (step.get("extra") or {}).get("error")
        for call in step.get("tool_calls") or []:
            out.append(
                {
                    "tool": call.get("function_name"),
                    "arguments": call.get("arguments"),
                    "result": results.get(call.get("tool_call_id")),
                    "error": error,
                }
            )
    return out


def inputs(doc: dict[str, Any]) -> list[CheckInput | str]:
    """One input per scored turn (a string: why that turn cannot be scored)."""
    trajectory = doc["trajectory"]
    extra = trajectory.get("extra") or {}
    states, calls, counts = (
        extra.get("tool_states"),
        extra.get("tool_calls") or [],
        extra.get("turn_call_counts") or [],
    )
    turns = int(doc["turns"])
    common = {
        "workspace": Path(doc["workspace"]),
        "turns": turns,
        "answer": doc.get("answer"),
        "args": doc.get("args", {}),
    }

    def state_at(k: int) -> dict[str, Any] | None:
        if states is None:
            return None
        return {
            "objects": states[k],
            "calls": calls[: counts[k]] if k < len(counts) and counts[k] >= 0 else calls,
        }

    if not doc.get("per_turn"):
        last = state_at(len(states) - 1) if states else None
        return [
            CheckInput(trajectory=trajectory, state=last, calls=agent_calls(trajectory), turn=None, **common)
        ]
    delivered = extra.get("turns", 1)
    out: list[CheckInput | str] = []
    for k in range(turns):
        if k >= delivered or (states is not None and k >= len(states)):
            out.append(f"turn {k} was never reached (the rollout stopped: {extra.get('stop_reason')})")
        else:
            cut = _turn_cut(trajectory, k)
            out.append(
                CheckInput(trajectory=cut, state=state_at(k), calls=agent_calls(cut), turn=k, **common)
            )
    return out


def score_of(value: Any) -> dict[str, Any]:
    reason = ""
    if isinstance(value, dict) and "score" in value:
        value, reason = value["score"], str(value["reason"]) if "reason" in value else ""
    elif isinstance(value, tuple | list) and len(value) == 2:
        value, reason = value[0], str(value[1])
    if isinstance(value, bool):
        value = float(value)
    if not isinstance(value, int | float):
        return {
            "error": f"returned {type(value).__name__}; expected a score in [0, 1], "
            "(score, reason) or {score, reason}"
        }
    if math.isnan(value) or not 0.0 <= value <= 1.0:
        return {"error": f"returned score {value!r}, outside [0, 1]"}
    return {"score": float(value), "reason": reason[:500]}


def main() -> None:
    if sys.path and os.path.abspath(sys.path[0]) == os.path.dirname(os.path.abspath(__file__)):
        sys.path.pop(0)
    protocol = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    doc = json.loads(Path(sys.argv[1]).read_text(encoding="utf-8"))
    for folder in reversed(doc.get("python_path", [])):
        sys.path.insert(0, folder)
    results: list[dict[str, Any]]
    try:
        module, _, name = doc["check"].partition(":")
        function = getattr(importlib.import_module(module), name)
    except Exception as exc:  # noqa: BLE001 - reported, the check fails with the cause
        results = [{"error": f"cannot load {doc['check']}: {type(exc).__name__}: {exc}"}]
    else:
        results = []
        for item in inputs(doc):
            if isinstance(item, str):
                results.append({"score": 0.0, "reason": item})
                continue
            try:
                results.append(score_of(function(item)))
            except Exception as exc:  # noqa: BLE001
                results.append({"error": f"raised {type(exc).__name__}: {exc}".splitlines()[0][:500]})
    protocol.write(json.dumps({"results": results}) + "\n")
    protocol.flush()


if __name__ == "__main__":
    main()
