"""RayExecutor on a local Ray instance started by the test: same rollouts as LocalExecutor.

Ray workers are other processes, so the scripted policy is loaded by name
(``executor_cases.MODEL``) with this folder on the workers' PYTHONPATH.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from harnessevolve.core import paths
from harnessevolve.core.enums import StopReason
from harnessevolve.core.tasks import Task
from harnessevolve.execute.executor import LocalExecutor, Rollout
from harnessevolve.execute.workspace import remove_workspace
from harnessevolve.harness.load import load_harness

ray = pytest.importorskip("ray")

# tests/execute is on sys.path
from executor_cases import MODEL, TASKS, assert_same_as_local, check_command_runner_batch, cleanup, make_task  # noqa: E402

from harnessevolve.execute.ray_executor import (  # noqa: E402
    WORKSPACE_LIMIT_BYTES,
    RayExecutor,
    make_ray_executor,
)

HARNESS = load_harness(paths.builtin_dir("harnesses") / "shell-agent")


@pytest.fixture(scope="module")
def local_ray():
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        runtime_env={"env_vars": {"PYTHONPATH": str(Path(__file__).parent)}},
    )
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def executor(local_ray: None):
    """Two actors, two rollouts each, shared by the tests (actors take seconds to start)."""
    executor = RayExecutor(concurrency=4, rollouts_per_worker=2)
    yield executor
    executor.close()
    assert ray.is_initialized()  # close() leaves alone a Ray instance it did not start


@pytest.fixture
def packing(executor: RayExecutor):
    """The executor shipping workspaces as archives, as it does from other machines."""
    executor.always_pack = True
    yield executor
    executor.always_pack = False
    executor.workspace_limit_bytes = WORKSPACE_LIMIT_BYTES


def run(executor: Any, tasks: list[Task], seen: list[str] | None = None) -> list[Rollout]:
    on_done = (lambda r: seen.append(r.task_id)) if seen is not None else None
    return asyncio.run(executor.run(HARNESS, tasks, model=MODEL, seed=7, on_done=on_done))


@pytest.mark.parametrize("pack", [False, True], ids=["shared-path", "packed"])
def test_same_rollouts_as_local_executor(executor: RayExecutor, pack: bool) -> None:
    executor.always_pack = pack
    seen: list[str] = []
    local = run(LocalExecutor(concurrency=4), TASKS)
    remote = run(executor, TASKS, seen)
    try:
        assert_same_as_local(remote, local, seen)
        for rollout in remote[:5]:
            assert rollout.workspace is not None and (rollout.workspace / "a.txt").is_file()
    finally:
        executor.always_pack = False
        cleanup(local + remote)


def test_workspace_over_the_limit_is_a_stop_reason(packing: RayExecutor) -> None:
    packing.workspace_limit_bytes = 100_000
    tasks = [make_task("small", "ash"), make_task("big", "fir", instruction="big: copy a.txt")]
    small, big = run(packing, tasks)
    assert small.answer == "ash" and small.workspace is not None
    assert (small.workspace / "copy.txt").read_text() == "ash\n"
    remove_workspace(small.workspace)
    assert big.stop_reason == StopReason.WORKSPACE_TOO_LARGE and big.workspace is None
    assert big.trajectory.extra["agent_stop_reason"] == "submitted" and big.answer == "fir"


def test_lost_worker_is_a_failed_rollout_and_is_replaced(executor: RayExecutor) -> None:
    crash = make_task("crash", "yew", instruction="crash the worker")
    first = run(executor, [crash, make_task("beside", "yew")])
    assert first[0].stop_reason == StopReason.EXECUTOR_ERROR and first[0].workspace is None
    assert first[0].trajectory.steps[0].extra["error"].startswith("executor_error: ActorDiedError")
    assert first[1].answer == "yew"  # on the other actor
    after = run(executor, [make_task(f"after{i}", "yew") for i in range(4)])  # both actors again
    assert [r.answer for r in after] == ["yew"] * 4
    for rollout in first[1:] + after:
        remove_workspace(rollout.workspace)


def test_factory_and_missing_ray_message(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    from harnessevolve.execute.ray_executor import ExecutorUnavailableError, _import_ray

    executor = make_ray_executor(8)
    assert isinstance(executor, RayExecutor) and executor.concurrency == 8 and executor.worker_count == 1
    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(ExecutorUnavailableError) as info:
        _import_ray()
    assert "pip install 'harnessevolve[ray]'" in info.value.hint


def test_command_runner_harness_through_ray(executor: RayExecutor) -> None:
    remote = check_command_runner_batch(executor)
    assert all(
        r.trajectory.extra["runner"] == "command" and r.trajectory.extra["model_calls"] for r in remote
    )
