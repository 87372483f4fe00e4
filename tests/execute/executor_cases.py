"""What the executor tests (test_ray_executor, test_process_executor) share: a scripted policy
their workers load by name (``scripted/executor_cases:echo_policy``: workers are other processes),
its tasks, a comparable summary of a rollout, and the checks of a batch against LocalExecutor's."""

from __future__ import annotations

import asyncio
import os
from typing import Any

from harnessevolve.core import paths
from harnessevolve.core.tasks import Check, Task
from harnessevolve.execute.executor import LocalExecutor, Rollout
from harnessevolve.execute.workspace import remove_workspace
from harnessevolve.harness.load import load_harness

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


def assert_same_as_local(remote: list[Rollout], local: list[Rollout], seen: list[str]) -> None:
    """``remote``: an executor's rollouts of ``TASKS`` (``seen``: the task ids its ``on_done`` got),
    ``local``: LocalExecutor's. The same rollouts and seeds, in order, each one reported, the failed
    set-up a rollout without workspace."""
    assert [summary(r) for r in remote] == [summary(r) for r in local]
    assert sorted(seen) == sorted(t.id for t in TASKS)
    assert [r.answer for r in remote[:5]] == ["maple", "oak", "birch", "cedar", "elm"]
    assert remote[-1].stop_reason == "setup_error" and remote[-1].workspace is None
    assert [r.trajectory.extra["seed"] for r in remote] == [r.trajectory.extra["seed"] for r in local]


def cleanup(rollouts: list[Rollout]) -> None:
    for rollout in rollouts:
        if rollout.workspace:
            remove_workspace(rollout.workspace)


def check_command_runner_batch(executor: Any) -> list[Rollout]:
    """An external agent (the python-agent template, run by the command runner in each worker's
    sandbox, its model behind the worker's endpoint) on three of ``TASKS``: ``executor`` gives the
    same rollouts as LocalExecutor. Returns ``executor``'s, their workspaces removed."""
    harness = load_harness(paths.builtin_dir("harnesses") / "python-agent")
    tasks = TASKS[:3]
    local = asyncio.run(LocalExecutor(concurrency=3).run(harness, tasks, model=MODEL, seed=7))
    remote = asyncio.run(executor.run(harness, tasks, model=MODEL, seed=7))
    try:
        assert [summary(r) for r in remote] == [summary(r) for r in local]
        assert [r.answer for r in remote] == ["maple", "oak", "birch"]
    finally:
        cleanup(local + remote)
    return remote
