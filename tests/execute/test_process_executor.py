"""ProcessExecutor: the same rollouts as LocalExecutor, from worker processes on this machine.

Workers are other (spawned) processes, so the scripted policy is loaded by name
(``executor_cases.MODEL``); spawn hands this process's ``sys.path`` to them.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

import pytest

# tests/execute is on sys.path
from executor_cases import MODEL, TASKS, assert_same_as_local, check_command_runner_batch, cleanup, make_task

from harnessevolve.core import paths
from harnessevolve.core.enums import StopReason
from harnessevolve.core.tasks import Task
from harnessevolve.execute.executor import LocalExecutor, Rollout
from harnessevolve.execute.executors import EXECUTORS
from harnessevolve.execute.process_executor import ProcessExecutor, make_process_executor
from harnessevolve.harness.load import load_harness
from harnessevolve.sandbox import limits

HARNESS = load_harness(paths.builtin_dir("harnesses") / "shell-agent")


@pytest.fixture(scope="module")
def executor():
    """Two workers, two rollouts each, shared by the tests (a worker takes a second or two to start)."""
    executor = ProcessExecutor(concurrency=4, workers=2)
    yield executor
    executor.close()


def run(executor: Any, tasks: list[Task], seen: list[str] | None = None) -> list[Rollout]:
    on_done = (lambda r: seen.append(r.task_id)) if seen is not None else None
    return asyncio.run(executor.run(HARNESS, tasks, model=MODEL, seed=7, on_done=on_done))


def test_same_rollouts_as_local_executor(executor: ProcessExecutor) -> None:
    seen: list[str] = []
    local = run(LocalExecutor(concurrency=4), TASKS)
    remote = run(executor, TASKS, seen)
    try:
        assert_same_as_local(remote, local, seen)
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
    check_command_runner_batch(executor)


def test_factory_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HARNESSEVOLVE_WORKERS", "3")
    executor = EXECUTORS["processes"](8)
    assert isinstance(executor, ProcessExecutor) and executor.worker_count == 3 and executor.per_worker == 3
    monkeypatch.setenv("HARNESSEVOLVE_WORKERS", "no")
    assert make_process_executor(1).worker_count == 1  # never more workers than rollouts at once
    executor.close()  # never started: nothing to stop


@pytest.mark.skipif(os.geteuid() != 0, reason="a workspace tmpfs needs root")
def test_a_workers_workspace_tmpfs_is_handed_to_the_driver(
    executor: ProcessExecutor, count_mountinfo_reads: list[int]
) -> None:
    """The worker mounts the workspace, the driver removes it: told by the hand-over, the driver
    needs no read of /proc/self/mountinfo (a line per mount on the machine) to unmount it."""
    rollouts = run(executor, TASKS[:2])
    workspaces = [r.workspace for r in rollouts if r.workspace is not None]
    assert len(workspaces) == 2
    try:
        assert all(os.path.ismount(w) and str(w) in limits._mounted for w in workspaces)
    finally:
        cleanup(rollouts)
    assert count_mountinfo_reads[0] == 0
    assert not any(os.path.lexists(w) or str(w) in limits._mounted for w in workspaces)


def test_a_stopped_worker_leaves_no_cgroup_of_its_rollouts_behind() -> None:
    """The driver removes a worker's workspaces; the worker gives back their uids and cgroups at its
    next claim, or, for its last rollouts, when it stops (none were left before: each worker kept
    its share of the batch's cgroups, empty, until another harnessevolve process swept them)."""
    layout = limits.cgroup_layout()
    if layout is None or os.geteuid() != 0:
        pytest.skip("rollout cgroups need root and a writable cgroup tree")
    executor = ProcessExecutor(concurrency=4, workers=2)
    try:
        cleanup(run(executor, TASKS[:4]))  # the driver removes every workspace, as the scorer does
        pids = [w.process.pid for w in executor._workers if w is not None]
        assert pids

        def ours() -> list[str]:
            names = {p.name for p in (layout.memory_parent, layout.pids_parent) for p in p.iterdir()}
            return sorted(n for n in names if any(n.startswith(f"{limits.PREFIX}{pid}-") for pid in pids))

        assert ours(), "the workers' claims are still held before they stop (the positive control)"
    finally:
        executor.close()
    assert ours() == []
