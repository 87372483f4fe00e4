"""Shipped dry-run agents for the scripted provider: ``--model scripted/policy:learner``.

No model, no key, no network: a Python function stands in for the agent model, so every command
of the docs can be tried in seconds and a whole ``run`` shows accepted and reverted edits.

The contract of a scripted policy (any ``scripted/<module>:<function>``, these included): it is
called once per agent turn as ``policy(messages, tools)`` with the OpenAI-format conversation so
far (``messages[0]`` the system prompt, ``messages[1]`` the task's instruction) and the tool specs
offered, and returns one reply: a string (plain content) or ``{"content": ..., "tool_calls":
[{"name": ..., "arguments": {...}}]}`` (see ``harnessevolve.models.scripted``). It may be ``async``
and may raise a litellm exception to simulate provider faults.

``learner`` is deterministic and its success depends on the harness, which is what makes it a
useful stand-in for a small model:

* it knows the tasks of the built-in native benchmarks (``shell-basics``, ``shell-onecall``) by
  their instruction, plus those of any benchmark folder listed in ``HARNESSEVOLVE_POLICY_BENCHMARKS``
  (``os.pathsep``-separated);
* it solves a task (replays the task's ``gold`` calls, one per turn) only when the system prompt
  holds a demonstration (a ``Task: <instruction>`` line, as the ``demo`` proposer writes them) of
  a task of the same family (the task's first tag);
* with more than one demonstration in the prompt it gets confused and fails everything;
* otherwise, and on any task it does not know, it submits ``I do not know`` at once.

So on a seed harness it fails every task; an edit adding one demonstration makes that family
pass (accepted), a second demonstration makes everything fail (reverted).
"""

from __future__ import annotations

import os
import re
import threading
from pathlib import Path
from typing import Any

MAX_EXAMPLES = 1
BUILTIN = ("shell-basics", "shell-onecall")
_DEMO = re.compile(r"^Task: (.*)$", re.MULTILINE)
_lock = threading.Lock()
_index: dict[str, Any] | None = None


def _known_tasks() -> dict[str, Any]:
    """Instruction -> task, for every benchmark the learner knows (loaded once)."""
    global _index
    with _lock:
        if _index is None:
            from harnessevolve.core.tasks import load_benchmark

            specs = list(BUILTIN) + [
                p for p in os.environ.get("HARNESSEVOLVE_POLICY_BENCHMARKS", "").split(os.pathsep) if p
            ]
            index: dict[str, Any] = {}
            for spec in specs:
                if spec in BUILTIN or Path(spec, "benchmark.yaml").is_file():
                    for task in load_benchmark(spec).tasks:
                        index.setdefault(task.instruction, task)
            _index = index
        return _index


def _family(task: Any) -> str:
    return task.tags[0] if task.tags else task.id


def _give_up() -> dict[str, Any]:
    return {"tool_calls": [{"name": "submit", "arguments": {"answer": "I do not know"}}]}


def learner(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
    """Solves a task when the prompt demonstrates its family once; see the module docstring."""
    known = _known_tasks()
    system = str(messages[0].get("content") or "") if messages else ""
    user = next((m for m in messages if m.get("role") == "user"), None)
    task = known.get(str(user.get("content") or "")) if user else None
    demos = _DEMO.findall(system)
    families = {_family(known[d]) for d in demos if d in known}
    if task is None or not task.gold or _family(task) not in families or len(demos) > MAX_EXAMPLES:
        return _give_up()
    turn = sum(1 for m in messages if m.get("role") == "assistant")
    gold = task.gold[min(turn, len(task.gold) - 1)]
    return {"tool_calls": [{"name": gold.tool, "arguments": dict(gold.arguments)}]}


def gives_up(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
    """Submits ``I do not know`` on every task: a suite this agent cannot solve, whatever the harness
    (every gate then sees ties; see the run summary's ``no net change``)."""
    return _give_up()


def repeater(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
    """Makes the very same call every turn: the first offered tool other than ``submit`` that needs
    no argument (else the first other than ``submit``), with no arguments; ``submit`` when it is
    the only tool. A stuck agent, for trying recovery rules (``repeated_call``) and
    ``loop.stop_on_repeat``."""
    names = [t["function"]["name"] for t in tools if t.get("function", {}).get("name") != "submit"]
    free = [
        t["function"]["name"]
        for t in tools
        if t["function"]["name"] in names and not t["function"].get("parameters", {}).get("required")
    ]
    name = (free or names or ["submit"])[0]
    return {"tool_calls": [{"name": name, "arguments": {} if name != "submit" else {"answer": ""}}]}
