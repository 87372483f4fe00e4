"""The contract every task-suite format meets (``BenchmarkAdapter``); ``adapters/base.py`` has the
registry and the native format, and its module docstring the contract in full."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from harnessevolve.core.tasks import Benchmark


@runtime_checkable
class BenchmarkAdapter(Protocol):
    """A task-suite format (see the module docstring for the contract)."""

    name: str

    def detect(self, spec: str) -> bool: ...

    def load(self, spec: str) -> Benchmark: ...
