"""ProcessExecutor: the same rollouts as LocalExecutor, from worker processes on this machine.

Workers are other (spawned) processes, so the scripted policy is loaded by name
(``executor_cases.MODEL``); spawn hands this process's ``sys.path`` to them.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

import pytest
from executor_cases import MODEL, TASKS, make_task, summary  # tests/execute is on sys.path

from harnessevolve.core import paths
from harnessevolve.core.enums import StopReason
from harnessevolve.core.tasks import Task
from harnessevolve.execute.executor import EXECUTORS, LocalExecutor, Rollout
from harnessevolve.execute.process_executor import ProcessExecutor, make_process_executor
from harnessevolve.execute.workspace import remove_workspace
from harnessevolve.harness.load import load_harness

HARNESS = load_harness(paths.builtin_dir("harnesses") / "shell-agent")


@pytest.fixture(scope="module")
def executor():
    """Two workers, two rollouts each, shared by the tests (a worker takes a second or two to start)."""
    executor = ProcessExecutor(concurrency=4, workers=2)
    yield executor
    executor.close()


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
