"""What the executor tests (test_ray_executor, test_process_executor) share: a scripted policy
their workers load by name (``scripted/executor_cases:echo_policy``: workers are other processes),
its tasks, and a comparable summary of a rollout."""

from __future__ import annotations

import os
from typing import Any

from harnessevolve.core.tasks import Check, Task
from harnessevolve.execute.executor import Rollout

MODEL = "scripted/executor_cases:echo_policy"


def echo_policy(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
    """Copies a.txt to copy.txt with bash, then submits the first word bash printed."""
    instruction = messages[1]["content"]
    if "crash the worker" in instruction:
        os._exit(3)
    if not any(m["role"] == "assistant" for m in messages):
        command = "cat a.txt > copy.txt && cat a.txt"
        if "big" in instruction:
            command = "head -c 300000 /dev/urandom > blob.bin && " + command
        return {"tool_calls": [{"name": "bash", "arguments": {"command": command}}]}
    printed = messages[-1]["content"].split()
    return {"tool_calls": [{"name": "submit", "arguments": {"answer": printed[0] if printed else ""}}]}


def make_task(task_id: str, word: str, instruction: str = "Copy a.txt to copy.txt; say its word.") -> Task:
    return Task(
        id=task_id,
        instruction=instruction,
        split="train",
        checks=(Check(type="answer", expected=word),),
        setup_files={"a.txt": f"{word}\n"},
    )


TASKS = [make_task(f"t{i}", word) for i, word in enumerate(["maple", "oak", "birch", "cedar", "elm"])] + [
    Task(id="t-setup", instruction="x", split="train", checks=(), setup_commands=("exit 3",))
]


def summary(rollout: Rollout) -> tuple[Any, ...]:
    steps = rollout.trajectory.agent_steps
    calls = [(c.function_name, c.arguments) for s in steps for c in s.tool_calls]
    observations = [o.content for s in steps for o in s.observations]
    copy = (rollout.workspace / "copy.txt").read_text() if rollout.workspace else None
    return rollout.task_id, rollout.stop_reason, rollout.answer, calls, observations, copy
