"""Scripted models for ``efficacy.py --smoke``: every arm of the table in seconds, no real model.

efficacy.py names them ``scripted/efficacy_smoke:agent`` and ``scripted/efficacy_smoke:reflector``
(``AGENT_MODEL``, ``REFLECTOR_MODEL``), which each ``harnessevolve compare run`` process imports.

The agent works through each shell-basics task's gold calls but does not call ``submit`` on its
own -- the failure the behaviour operators read from trajectories ("never submits"). It submits
the task's answer only when the loop leaves it no other choice (``submit`` is the one tool offered,
as the python-agent's patched step-limit code does) or when the submit tool's description says a
run without it scores nothing (the builtin arm's tool-definition edit). So the two harnessevolve
arms can gain and the prompt-only arms (GEPA, best-of-k, llm-rule's rules) cannot: a check that
every arm runs and is scored, never a measurement of any of them.
"""

from __future__ import annotations

import functools
from typing import Any

from harnessevolve.core.tasks import load_benchmark

CUE = "scores nothing"


class SubmitsOnlyWhenTold:
    """(messages, tools) -> the next gold call, holding back ``submit`` (module docstring)."""

    def __init__(self, benchmark: str = "shell-basics") -> None:
        self.tasks = {t.instruction: t for t in load_benchmark(benchmark).tasks}

    def __call__(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
        text = "\n".join(str(m.get("content") or "") for m in messages if m.get("role") == "user")
        task = next((t for i, t in self.tasks.items() if i in text), None)
        if task is None or not task.gold:
            return {"content": "I cannot tell which task this is."}
        functions = [t.get("function", t) for t in tools]
        names = [f.get("name") for f in functions]
        told = names == ["submit"] or any(
            f.get("name") == "submit" and CUE in str(f.get("description", "")) for f in functions
        )
        done = sum(1 for m in messages if m.get("role") == "assistant")
        calls = [g for g in task.gold if told or g.tool != "submit"]
        if names == ["submit"]:
            calls = [g for g in task.gold if g.tool == "submit"]
        call = calls[min(done, len(calls) - 1)]
        return {"tool_calls": [{"name": call.tool, "arguments": dict(call.arguments)}]}


CODING_STEPS = (
    # the coding-agent optimizer (``--proposer agent``): the submit tool's description gets the cue
    f"sed -i 's/^description: .*/description: Finish the task; a run without it {CUE}./' "
    "harness/tools/submit.yaml",
    "echo 'submit tool: say that a run without it scores nothing' > SUMMARY.txt",
    "printf 'COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\\n%s\\n' done",
)


def reflector(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str | dict[str, Any]:
    """GEPA's reflection and llm-rule's rule writer: a general rule the agent does not act on. As the
    coding-agent optimizer (offered a bash tool): the three commands of ``CODING_STEPS`` in turn."""
    if any(t.get("function", t).get("name") == "bash" for t in tools):
        turn = sum(1 for m in messages if m.get("role") == "assistant")
        command = CODING_STEPS[min(turn, len(CODING_STEPS) - 1)]
        return {"tool_calls": [{"name": "bash", "arguments": {"command": command}}]}
    return "RULE: Check the result of every command before you decide what to do next."


@functools.cache
def _agent() -> SubmitsOnlyWhenTold:
    return SubmitsOnlyWhenTold()


def agent(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
    """The scripted agent (``scripted/efficacy_smoke:agent``): ``SubmitsOnlyWhenTold`` on shell-basics."""
    return _agent()(messages, tools)


AGENT_MODEL = "scripted/efficacy_smoke:agent"
REFLECTOR_MODEL = "scripted/efficacy_smoke:reflector"
"""The two models by name: importable functions, so that every ``compare run`` process resolves
them (with this folder on ``PYTHONPATH``, as efficacy.py sets it)."""
