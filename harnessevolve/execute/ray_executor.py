"""The Ray executor: rollouts spread over the machines of a Ray cluster (``--executor ray``).

Same contract as ``Executor`` (see executor.py): one ``Rollout`` per task, in order, ``on_done``
called in this process as each one finishes, a failing task (or a lost worker) is a rollout with
``stop_reason`` set, never an exception.

How it works: a few Ray actors (``RolloutWorker``), each running up to ``rollouts_per_worker``
rollouts at once in its own asyncio loop (rollouts mostly wait on the model, so one process per
rollout would waste memory and CPUs). Each rollout is plain ``run_one`` on the worker's machine;
the harness and task travel as data (frozen dataclasses). The checker runs later, in this process,
so the rollout's workspace must be here: when the worker is on this node its path is used as is;
otherwise the worker packs the workspace into a gzip'd tar (at most ``workspace_limit_bytes`` of
files, else the rollout ends ``workspace_too_large``), removes its copy, and it is unpacked here
into a fresh temporary folder. Ray is an optional extra, imported only when a run starts.

Workers are other processes, often other machines: scripted models must be loadable there
(``scripted/module:function`` or a ``.jsonl`` file, not ``register_script``), and provider API
keys must be in the workers' environment (a local instance inherits this process's; for a
cluster set them on the nodes or in the job's ``runtime_env``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import io
import math
import os
import tarfile
import tempfile
from pathlib import Path
from typing import Any

from harnessevolve.core.atif import Trajectory
from harnessevolve.core.enums import StopReason
from harnessevolve.core.errors import HarnessEvolveError
from harnessevolve.core.tasks import Task
from harnessevolve.execute.executor import (
    Rollout,
    RunOn,
    SlotExecutor,
    failed_rollout,
    rollout_seed,
    run_one,
)
from harnessevolve.execute.workspace import remove_workspace
from harnessevolve.harness.model import Harness
from harnessevolve.sandbox.base import Sandbox

INSTALL_HINT = "pip install 'harnessevolve[ray]'"
WORKSPACE_LIMIT_BYTES = 16 * 2**20


class ExecutorUnavailableError(HarnessEvolveError):
    """An executor's optional dependency is missing or its cluster cannot be reached."""


def _import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise ExecutorUnavailableError(
            "the Ray executor needs the optional 'ray' extra", field="--executor", hint=INSTALL_HINT
        ) from None
    return ray


# --- workspaces over the wire -------------------------------------------------------------------------


def pack_workspace(workspace: Path, limit_bytes: int) -> bytes | None:
    """The workspace as a gzip'd tar (symlinks kept as links), or None when its files exceed the limit."""
    total = 0
    for path in workspace.rglob("*"):
        if path.is_file() and not path.is_symlink():
            total += path.lstat().st_size
            if total > limit_bytes:
                return None
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz", compresslevel=3) as archive:
        archive.add(workspace, arcname=".", recursive=True)
    return buffer.getvalue()


def unpack_workspace(archive: bytes, task_id: str) -> tuple[Path, list[str]]:
    """Unpack into a fresh temporary folder; members that would escape it are skipped and named."""
    target = Path(tempfile.mkdtemp(prefix=f"he-{task_id}-"))
    skipped: list[str] = []
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
        for member in tar:
            try:
                tar.extract(member, target, filter="data")
            except (tarfile.FilterError, OSError) as exc:
                skipped.append(f"{member.name}: {type(exc).__name__}")
    return target, skipped


# --- the worker (runs inside Ray) ---------------------------------------------------------------------


class RolloutWorker:
    """A Ray actor body: runs rollouts in its event loop and hands back trajectory + workspace.

    ``sandbox`` (None: the default one, checked on the worker's machine) travels pickled.
    """

    def __init__(self, sandbox: Sandbox | None = None) -> None:
        self.sandbox = sandbox

    def node_id(self) -> str:
        import ray

        return ray.get_runtime_context().get_node_id()

    async def run(
        self,
        harness: Harness,
        task: Task,
        model: str,
        seed: int,
        driver_node: str,
        always_pack: bool,
        limit_bytes: int,
    ) -> dict[str, Any]:
        rollout = await run_one(harness, task, model=model, seed=seed, sandbox=self.sandbox)
        result: dict[str, Any] = {"trajectory": rollout.trajectory, "path": None, "archive": None}
        workspace = rollout.workspace
        if workspace is None:
            return result
        if not always_pack and self.node_id() == driver_node:
            result["path"] = str(workspace)
            return result
        try:
            archive = await asyncio.to_thread(pack_workspace, workspace, limit_bytes)
        finally:
            remove_workspace(workspace)
        result["archive"] = archive
        result["too_large"] = archive is None
        return result


# --- the driver side -----------------------------------------------------------------------------------


def _with_extra(trajectory: Trajectory, **extra: Any) -> Trajectory:
    return dataclasses.replace(trajectory, extra={**trajectory.extra, **extra})


class RayExecutor(SlotExecutor):
    """Runs rollouts on Ray actors, at most ``concurrency`` at once over the whole cluster.

    ``address``: a running cluster (``"auto"``, ``"ray://host:10001"``); None starts a local Ray
    instance unless this process already has one. ``sandbox`` is passed to every ``run_one``.
    ``rollouts_per_worker``: rollouts one actor (process) runs at once. ``always_pack``: ship
    workspaces as archives even from this node (tests use it to exercise the multi-machine path).
    """

    meters_remotely = True
    """Model calls happen in other processes, out of reach of this process's usage meter: the
    caller meters them from each rollout's trajectory (``final_metrics``)."""

    def __init__(
        self,
        concurrency: int = 4,
        sandbox: Sandbox | None = None,
        address: str | None = None,
        *,
        rollouts_per_worker: int = 8,
        num_cpus_per_worker: float = 1.0,
        workspace_limit_bytes: int = WORKSPACE_LIMIT_BYTES,
        always_pack: bool = False,
    ) -> None:
        self.concurrency = max(1, concurrency)
        self.sandbox = sandbox
        self.address = address
        self.rollouts_per_worker = max(1, min(rollouts_per_worker, self.concurrency))
        self.num_cpus_per_worker = num_cpus_per_worker
        self.workspace_limit_bytes = workspace_limit_bytes
        self.always_pack = always_pack
        self._workers: list[Any] = []
        self._actor_class: Any = None
        self._started_ray = False
        self.worker_count = math.ceil(self.concurrency / self.rollouts_per_worker)

    def _connect(self, ray: Any) -> None:
        if ray.is_initialized():
            return
        try:
            if self.address:
                ray.init(address=self.address, ignore_reinit_error=True, log_to_driver=False)
            else:
                cpus = max(os.cpu_count() or 1, math.ceil(self.worker_count * self.num_cpus_per_worker))
                ray.init(
                    ignore_reinit_error=True, include_dashboard=False, num_cpus=cpus, log_to_driver=False
                )
                self._started_ray = True
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise ExecutorUnavailableError(
                f"cannot start or reach Ray at {self.address or 'a local instance'}: {exc}",
                field="--ray-address",
                hint="check the address (`ray status` on the head node), or omit it for a local instance",
            ) from None

    def _new_worker(self, ray: Any) -> Any:
        if self._actor_class is None:
            self._actor_class = ray.remote(RolloutWorker)
        actor = self._actor_class.options(
            num_cpus=self.num_cpus_per_worker,
            max_concurrency=self.rollouts_per_worker,
            scheduling_strategy="SPREAD",
        )
        return actor.remote(self.sandbox)

    async def runner(self, harness: Harness, *, model: str, seed: int) -> RunOn:
        ray = _import_ray()
        self._connect(ray)
        while len(self._workers) < self.worker_count:
            self._workers.append(self._new_worker(ray))
        driver_node = ray.get_runtime_context().get_node_id()
        harness_ref = ray.put(harness)

        async def run_on(index: int, task: Task) -> Rollout:
            return await self._run_on(ray, index, harness, harness_ref, task, model, seed, driver_node)

        return run_on

    async def _run_on(
        self,
        ray: Any,
        index: int,
        harness: Harness,
        harness_ref: Any,
        task: Task,
        model: str,
        seed: int,
        driver_node: str,
    ) -> Rollout:
        task_seed = rollout_seed(seed, task.id)
        worker = self._workers[index]
        ref = worker.run.remote(
            harness_ref, task, model, task_seed, driver_node, self.always_pack, self.workspace_limit_bytes
        )
        try:
            result = await ref
        except asyncio.CancelledError:
            ray.cancel(ref)
            raise
        except ray.exceptions.RayError as exc:
            if isinstance(exc, ray.exceptions.RayActorError) and self._workers[index] is worker:
                self._workers[index] = self._new_worker(ray)  # the process or its node is gone
            detail = f"{type(exc).__name__}: {str(exc).strip().splitlines()[-1] if str(exc).strip() else ''}"
            return failed_rollout(
                harness, task, model=model, seed=task_seed, reason=StopReason.EXECUTOR_ERROR, detail=detail
            )
        trajectory: Trajectory = result["trajectory"]
        if result.get("too_large"):
            trajectory = _with_extra(
                trajectory,
                stop_reason=StopReason.WORKSPACE_TOO_LARGE,
                agent_stop_reason=trajectory.extra.get("stop_reason", ""),
                workspace_limit_bytes=self.workspace_limit_bytes,
            )
            return Rollout(task.id, trajectory, None)
        if result["archive"] is not None:
            workspace, skipped = await asyncio.to_thread(unpack_workspace, result["archive"], task.id)
            if skipped:
                trajectory = _with_extra(trajectory, workspace_skipped=skipped)
            return Rollout(task.id, trajectory, workspace)
        return Rollout(task.id, trajectory, Path(result["path"]) if result["path"] else None)

    def close(self) -> None:
        """Stop the actors, and the local Ray instance when this executor started it."""
        if not self._workers and not self._started_ray:
            return
        ray = _import_ray()
        for worker in self._workers:
            ray.kill(worker)
        self._workers = []
        self._actor_class = None
        if self._started_ray:
            ray.shutdown()
            self._started_ray = False


def make_ray_executor(concurrency: int, sandbox: Sandbox | None = None) -> RayExecutor:
    """The ``--executor ray`` factory; the cluster address comes from ``RAY_ADDRESS`` when set."""
    return RayExecutor(concurrency, sandbox=sandbox, address=os.environ.get("RAY_ADDRESS") or None)
