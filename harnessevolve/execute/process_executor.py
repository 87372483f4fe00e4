"""The process executor: rollouts spread over worker processes on this machine (``--executor processes``).

Same contract as ``Executor`` (executor.py): one ``Rollout`` per task, in order, ``on_done`` called in
this process as each one finishes; a failing task, or a worker that died under it, is a rollout with
``stop_reason`` set, never an exception.

Why: one asyncio loop is one core. At tens of concurrent rollouts against a fast endpoint the loop
itself (litellm's client, trajectory building, sandbox spawns) saturates that core while the others
idle. Here each worker process runs its own loop with up to ``ceil(concurrency / workers)``
rollouts at once: plain ``run_one``, as ``LocalExecutor`` does. Workers start once (``spawn``: a
fresh interpreter, no forked event loop or model state) and serve every batch after; a harness
travels once per worker and content hash, a task with each request. Workspaces stay where the
worker made them (this machine): the checker reads them here as usual.

Limits, as for Ray: a worker is another process, so an in-process scripted model
(``register_script``) is not seen there (``scripted/module:function`` and ``.jsonl`` scripts are),
and model calls are metered from each rollout's trajectory (``meters_remotely``). A local
(embedded) model would load once per worker: use ``HARNESSEVOLVE_LOCAL_POOL`` for that instead.
Workers run in their own session, so a terminal's Ctrl-C reaches this process only (which stops
them), and they exit when this process is gone (their pipe closes).
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import itertools
import math
import multiprocessing
import os
import threading
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from harnessevolve.core.enums import StopReason
from harnessevolve.core.tasks import Task
from harnessevolve.execute.executor import Rollout, RunOn, SlotExecutor, failed_rollout, rollout_seed
from harnessevolve.harness.model import Harness
from harnessevolve.sandbox.base import Sandbox
from harnessevolve.sandbox.launch import release_vanished
from harnessevolve.sandbox.limits import adopt_mount, hand_over_mount

# --- the worker side ------------------------------------------------------------------------------


def worker_main(conn: Connection, sandbox: Sandbox | None) -> None:
    """A worker's body: requests come in on ``conn``, each runs as an asyncio task of this loop.

    Messages in: ``("harness", key, harness)``, ``("run", id, key, task, model, seed)``, ``("stop",)``.
    Out: ``(id, trajectory, workspace path or None, tmpfs?)`` or ``(id, None, error text, False)``;
    a workspace tmpfs is handed over to the driver, who removes it (``hand_over_mount``)."""
    # its own session, as harnessevolve's other helper processes: a terminal's Ctrl-C is the
    # driver's to handle (it stops the workers), and the commands started here keep default signals
    with contextlib.suppress(OSError):
        os.setsid()
    asyncio.run(_serve(conn, sandbox))


async def _serve(conn: Connection, sandbox: Sandbox | None) -> None:
    from harnessevolve.execute.executor import run_one

    loop = asyncio.get_running_loop()
    inbox: asyncio.Queue[tuple[Any, ...] | None] = asyncio.Queue()
    send_lock = threading.Lock()

    def read() -> None:  # a thread: Connection.recv blocks
        while True:
            try:
                message = conn.recv()
            except (EOFError, OSError):  # the driver is gone
                message = None
            loop.call_soon_threadsafe(inbox.put_nowait, message)
            if message is None or message[0] == "stop":
                return

    def send(message: tuple[Any, ...]) -> None:
        with send_lock, contextlib.suppress(OSError):
            conn.send(message)

    async def one(request_id: int, harness: Harness, task: Task, model: str, seed: int) -> None:
        try:
            rollout = await run_one(harness, task, model=model, seed=seed, sandbox=sandbox)
        except Exception as exc:  # noqa: BLE001 - reported to the driver as this rollout's failure
            send((request_id, None, f"{type(exc).__name__}: {exc}", False))
            return
        workspace = rollout.workspace
        tmpfs = workspace is not None and hand_over_mount(workspace)
        send((request_id, rollout.trajectory, str(workspace) if workspace is not None else None, tmpfs))

    threading.Thread(target=read, daemon=True, name="he-worker-reader").start()
    harnesses: dict[str, Harness] = {}
    running: set[asyncio.Task[None]] = set()
    while (message := await inbox.get()) is not None and message[0] != "stop":
        if message[0] == "harness":
            harnesses[message[1]] = message[2]
        elif message[0] == "run":
            _, request_id, key, task, model, seed = message
            job = asyncio.create_task(one(request_id, harnesses[key], task, model, seed))
            running.add(job)
            job.add_done_callback(running.discard)
    for job in running:
        job.cancel()
    await asyncio.gather(*running, return_exceptions=True)
    # the driver removed the workspaces of our last rollouts: give back their uids and cgroups now,
    # since no later claim here will (else each worker leaves up to its share of --concurrency
    # empty cgroups behind until another harnessevolve process sweeps them)
    await asyncio.to_thread(release_vanished)


# --- the driver side ------------------------------------------------------------------------------


@dataclass
class _Worker:
    process: Any
    conn: Connection
    pending: dict[int, asyncio.Future[tuple[Any, Any]]] = field(default_factory=dict)
    harnesses: set[str] = field(default_factory=set)
    send_lock: threading.Lock = field(default_factory=threading.Lock)
    alive: bool = True

    def send(self, message: tuple[Any, ...]) -> None:
        with self.send_lock:
            self.conn.send(message)


class ProcessExecutor(SlotExecutor):
    """Runs rollouts in ``workers`` processes here (default: one per CPU), ``concurrency`` at once in all."""

    meters_remotely = True
    """Model calls happen in the workers, out of reach of this process's usage meter: the caller
    meters them from each rollout's trajectory (``final_metrics``)."""

    def __init__(
        self, concurrency: int = 4, sandbox: Sandbox | None = None, *, workers: int | None = None
    ) -> None:
        self.concurrency = max(1, concurrency)
        self.sandbox = sandbox
        self.worker_count = max(1, min(workers or os.cpu_count() or 1, self.concurrency))
        self._workers: list[_Worker | None] = [None] * self.worker_count
        self._ids = itertools.count()
        self._lock = threading.Lock()
        atexit.register(self.close)

    @property
    def per_worker(self) -> int:
        return math.ceil(self.concurrency / self.worker_count)

    def worker_pids(self) -> list[int]:
        """The process ids of the live worker processes (for measuring what they use)."""
        live = [w.process for w in self._workers if w is not None and w.process.is_alive()]
        return [p.pid for p in live if p.pid is not None]

    def _start(self, index: int) -> _Worker:
        context = multiprocessing.get_context("spawn")
        ours, theirs = context.Pipe(duplex=True)
        process = context.Process(
            target=worker_main, args=(theirs, self.sandbox), daemon=True, name=f"he-rollout-worker-{index}"
        )
        process.start()
        theirs.close()
        worker = _Worker(process, ours)
        threading.Thread(
            target=self._read, args=(worker,), daemon=True, name=f"he-worker-{index}-results"
        ).start()
        return worker

    def _read(self, worker: _Worker) -> None:
        """A thread per worker: resolves each request's future (in its own event loop: the worker
        outlives one ``run``) as its result comes back."""
        while True:
            try:
                request_id, trajectory, detail, tmpfs = worker.conn.recv()
            except (EOFError, OSError):
                break
            if tmpfs:  # before the rollout is back: whoever removes its workspace finds it ours
                adopt_mount(Path(detail))
            future = worker.pending.get(request_id)
            if future is not None:
                _resolve_soon(future, (trajectory, detail))
        worker.alive = False
        for future in dict(worker.pending).values():  # the process died under these rollouts
            _resolve_soon(future, (None, "the rollout's worker process exited"))

    def _worker(self, index: int) -> _Worker:
        with self._lock:
            worker = self._workers[index]
            if worker is None or not worker.alive:
                worker = self._workers[index] = self._start(index)
            return worker

    async def runner(self, harness: Harness, *, model: str, seed: int) -> RunOn:
        key = harness.content_hash()

        async def run_on(index: int, task: Task) -> Rollout:
            return await self._run_on(index, harness, key, task, model, seed)

        return run_on

    async def _run_on(
        self,
        index: int,
        harness: Harness,
        key: str,
        task: Task,
        model: str,
        seed: int,
    ) -> Rollout:
        task_seed = rollout_seed(seed, task.id)
        worker = self._worker(index)
        request_id = next(self._ids)
        future: asyncio.Future[tuple[Any, Any]] = asyncio.get_running_loop().create_future()
        worker.pending[request_id] = future
        try:
            # sent from this thread, in order (a harness before the first run that names it); the
            # worker's reader thread takes each message at once, so a send never waits long
            if key not in worker.harnesses:
                worker.harnesses.add(key)
                worker.send(("harness", key, harness))
            worker.send(("run", request_id, key, task, model, task_seed))
            if not worker.alive and not future.done():
                future.set_result((None, "the rollout's worker process exited"))
            trajectory, detail = await future
        except (OSError, EOFError, ValueError) as exc:  # the pipe broke: the worker is gone
            worker.alive = False
            trajectory, detail = None, f"cannot reach the rollout's worker process: {exc}"
        finally:
            worker.pending.pop(request_id, None)
        if trajectory is None:
            return failed_rollout(
                harness,
                task,
                model=model,
                seed=task_seed,
                reason=StopReason.EXECUTOR_ERROR,
                detail=str(detail),
            )
        return Rollout(task.id, trajectory, Path(detail) if detail else None)

    def close(self) -> None:
        """Stop the workers (each finishes nothing more; their workspaces stay for the caller)."""
        with self._lock:
            workers, self._workers = self._workers, [None] * self.worker_count
        for worker in workers:
            if worker is None:
                continue
            with contextlib.suppress(OSError, ValueError):
                worker.send(("stop",))
            worker.process.join(timeout=5)
            if worker.process.is_alive():
                worker.process.kill()
                worker.process.join(timeout=5)
            with contextlib.suppress(OSError):
                worker.conn.close()


def _resolve(future: asyncio.Future[Any], value: Any) -> None:
    if not future.done():
        future.set_result(value)


def _resolve_soon(future: asyncio.Future[Any], value: Any) -> None:
    with contextlib.suppress(RuntimeError):  # its event loop is closed: nobody waits for it
        future.get_loop().call_soon_threadsafe(_resolve, future, value)


def make_process_executor(concurrency: int, sandbox: Sandbox | None = None) -> ProcessExecutor:
    """The ``--executor processes`` factory; ``HARNESSEVOLVE_WORKERS`` sets the worker count."""
    raw = os.environ.get("HARNESSEVOLVE_WORKERS", "").strip()
    workers = int(raw) if raw.isdigit() and int(raw) > 0 else None
    return ProcessExecutor(concurrency, sandbox=sandbox, workers=workers)
