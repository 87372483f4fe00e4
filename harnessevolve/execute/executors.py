"""Executors by name (``--executor``): the in-process pool, one pool per CPU in worker processes,
and Ray. The variants are imported when chosen (Ray is an optional extra)."""

from __future__ import annotations

from collections.abc import Callable

from harnessevolve.execute.executor import Executor, LocalExecutor
from harnessevolve.sandbox.base import Sandbox


def _ray_executor(concurrency: int, sandbox: Sandbox | None = None) -> Executor:
    from harnessevolve.execute.ray_executor import make_ray_executor

    return make_ray_executor(concurrency, sandbox)


def _process_executor(concurrency: int, sandbox: Sandbox | None = None) -> Executor:
    from harnessevolve.execute.process_executor import make_process_executor

    return make_process_executor(concurrency, sandbox)


EXECUTORS: dict[str, Callable[..., Executor]] = {
    "local": LocalExecutor,
    "processes": _process_executor,
    "ray": _ray_executor,
}
"""Executor factories by name (``--executor``): ``factory(concurrency, sandbox=None)``."""
