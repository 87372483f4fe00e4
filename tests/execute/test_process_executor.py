"""ProcessExecutor: the same rollouts as LocalExecutor, from worker processes on this machine.

Workers are other (spawned) processes, so the scripted policy is loaded by name
(``scripted/test_process_executor:echo_policy``); spawn hands this process's ``sys.path`` to them.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

import pytest

from harnessevolve.core import paths
from harnessevolve.core.enums import StopReason
from harnessevolve.core.tasks import Check, Task
from harnessevolve.execute.executor import EXECUTORS, LocalExecutor, Rollout
from harnessevolve.execute.process_executor import ProcessExecutor, make_process_executor
from harnessevolve.execute.workspace import remove_workspace
from harnessevolve.harness.load import load_harness

HARNESS = load_harness(paths.builtin_dir("harnesses") / "shell-agent")
MODEL = "scripted/test_process_executor:echo_policy"


def echo_policy(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
    """Copies a.txt to copy.txt with bash, then submits the first word bash printed."""
    instruction = messages[1]["content"]
    if "crash the worker" in instruction:
        os._exit(3)
    if not any(m["role"] == "assistant" for m in messages):
        return {
            "tool_calls": [{"name": "bash", "arguments": {"command": "cat a.txt > copy.txt && cat a.txt"}}]
        }
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


@pytest.fixture(scope="module")
def executor():
    """Two workers, two rollouts each, shared by the tests (a worker takes a second or two to start)."""
    executor = ProcessExecutor(concurrency=4, workers=2)
    yield executor
    executor.close()


def summary(rollout: Rollout) -> tuple[Any, ...]:
    steps = rollout.trajectory.agent_steps
    calls = [(c.function_name, c.arguments) for s in steps for c in s.tool_calls]
    observations = [o.content for s in steps for o in s.observations]
    copy = (rollout.workspace / "copy.txt").read_text() if rollout.workspace else None
    return rollout.task_id, rollout.stop_reason, rollout.answer, calls, observations, copy


def run(
    executor: Any, tasks: list[Task], seen: list[str] | None = None, harness: Any = HARNESS
) -> list[Rollout]:
    on_done = (lambda r: seen.append(r.task_id)) if seen is not None else None
    return asyncio.run(executor.run(harness, tasks, model=MODEL, seed=7, on_done=on_done))


def cleanup(rollouts: list[Rollout]) -> None:
    for rollout in rollouts:
        if rollout.workspace:
            remove_workspace(rollout.workspace)


def test_same_rollouts_as_local_executor(executor: ProcessExecutor) -> None:
    seen: list[str] = []
    local = run(LocalExecutor(concurrency=4), TASKS)
    remote = run(executor, TASKS, seen)
    try:
        assert [summary(r) for r in remote] == [summary(r) for r in local]
        assert sorted(seen) == sorted(t.id for t in TASKS)
        assert [r.answer for r in remote[:5]] == ["maple", "oak", "birch", "cedar", "elm"]
        assert remote[-1].stop_reason == "setup_error" and remote[-1].workspace is None
        assert [r.trajectory.extra["seed"] for r in remote] == [r.trajectory.extra["seed"] for r in local]
        assert executor.meters_remotely
        pids = {w.process.pid for w in executor._workers if w is not None}
        assert len(pids) == 2 and os.getpid() not in pids  # both workers served, none is us
    finally:
        cleanup(local + remote)


def test_workers_serve_later_batches_in_other_event_loops(executor: ProcessExecutor) -> None:
    """A worker outlives one ``run`` (and its event loop): the next batch reuses it."""
    first = run(executor, TASKS[:2])
    pids = [w.process.pid for w in executor._workers if w is not None]
    second = run(executor, TASKS[2:4])
    try:
        assert [r.answer for r in first + second] == ["maple", "oak", "birch", "cedar"]
        assert [w.process.pid for w in executor._workers if w is not None] == pids
    finally:
        cleanup(first + second)


def test_lost_worker_is_a_failed_rollout_and_is_replaced(executor: ProcessExecutor) -> None:
    crash = make_task("crash", "yew", instruction="crash the worker")
    first = run(executor, [crash, make_task("beside", "yew")])
    assert first[0].stop_reason == StopReason.EXECUTOR_ERROR and first[0].workspace is None
    assert "worker process exited" in first[0].trajectory.steps[0].extra["error"]
    assert first[1].answer == "yew"  # on the other worker
    after = run(executor, [make_task(f"after{i}", "yew") for i in range(4)])  # both workers again
    try:
        assert [r.answer for r in after] == ["yew"] * 4
    finally:
        cleanup(first[1:] + after)


def test_command_runner_harness_in_workers(executor: ProcessExecutor) -> None:
    """An external agent (the python-agent template, run by the command runner in each worker's
    sandbox, its model behind the worker's endpoint) gives the same rollouts as locally."""
    harness = load_harness(paths.builtin_dir("harnesses") / "python-agent")
    tasks = TASKS[:3]
    local = asyncio.run(LocalExecutor(concurrency=3).run(harness, tasks, model=MODEL, seed=7))
    remote = run(executor, tasks, harness=harness)
    try:
        assert [summary(r) for r in remote] == [summary(r) for r in local]
        assert [r.answer for r in remote] == ["maple", "oak", "birch"]
    finally:
        cleanup(local + remote)


def test_factory_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HARNESSEVOLVE_WORKERS", "3")
    executor = EXECUTORS["processes"](8)
    assert isinstance(executor, ProcessExecutor) and executor.worker_count == 3 and executor.per_worker == 3
    monkeypatch.setenv("HARNESSEVOLVE_WORKERS", "no")
    assert make_process_executor(1).worker_count == 1  # never more workers than rollouts at once
    executor.close()  # never started: nothing to stop
