"""A pool of embedded-model instances, so that rollouts on the local model run side by side.

One llama.cpp instance answers one call at a time (``generate`` holds it for the whole completion),
so with one instance concurrent rollouts on ``local/...`` take turns however many cores are free.
``HARNESSEVOLVE_LOCAL_POOL`` turns on a pool: up to N instances of the same model, each loaded on
first need (when every loaded one is busy) and then kept, each with 1 llama.cpp thread; a call
borrows a free instance and gives it back (llama.cpp releases the GIL, so they do run at once).
A caller may say which free instance it prefers (``borrow(prefer=...)``): ``generate`` takes the one
whose cached prompt its conversation continues, so a rollout's next call reuses that instance's
evaluated prefix instead of evaluating its whole prompt again on the other one.

- unset or ``1``: off, one instance (with ``HARNESSEVOLVE_LOCAL_THREADS`` threads), as before;
- ``N`` (>= 2): at most N instances, and never more than the cores or what the free memory holds;
- ``auto``: as many as the cores, within the free memory.

The memory check is an estimate made when the pool is made: an instance is counted as
``MEMORY_FACTOR`` x its GGUF file (weights, KV cache and scratch of a few-thousand-token context),
against the memory available then (``psutil``); a pool never drops below one instance.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

from harnessevolve.core.errors import ModelError

POOL_ENV = "HARNESSEVOLVE_LOCAL_POOL"
MEMORY_FACTOR = 1.5
"""Memory an instance needs, as a multiple of its model file (an estimate; see the module doc)."""

Instance = TypeVar("Instance")


class LocalPoolError(ModelError):
    """``HARNESSEVOLVE_LOCAL_POOL`` is not ``auto`` or a whole number >= 1."""


def requested_size() -> int | None:
    """The pool size asked for: a number, or None for ``auto``; 1 (off) when unset."""
    value = os.environ.get(POOL_ENV, "").strip().lower()
    if not value:
        return 1
    if value == "auto":
        return None
    if not value.isdigit() or int(value) < 1:
        raise LocalPoolError(
            f"{POOL_ENV} must be 'auto' or a whole number >= 1, not {value!r}",
            field=POOL_ENV,
            hint=f"e.g. {POOL_ENV}=2 to run two local-model calls at once",
        )
    return int(value)


def available_memory() -> int | None:
    """Bytes of memory available now (None: unknown)."""
    try:
        import psutil
    except ImportError:
        return None
    return int(psutil.virtual_memory().available)


def capped_by_cores(requested: int | None, cores: int | None = None) -> int:
    """``requested`` instances (None: one per core), at most one per core: the pool's size before
    the memory check, which needs the model file (``pool_size``)."""
    cores = cores if cores is not None else (os.cpu_count() or 1)
    return cores if requested is None else min(requested, cores)


def pool_size(
    model_file: Path,
    requested: int | None,
    *,
    cores: int | None = None,
    available_bytes: int | None = None,
) -> int:
    """How many instances of ``model_file`` to allow: ``requested`` (None: one per core), at most one
    per core and as many as ``available_bytes`` holds at ``MEMORY_FACTOR`` x the file; at least 1."""
    size = capped_by_cores(requested, cores)
    if size > 1 and available_bytes is not None:
        need = max(1, int(model_file.stat().st_size * MEMORY_FACTOR))
        size = min(size, available_bytes // need)
    return max(1, size)


def best_index(free: list[Instance], prefer: Callable[[Instance], int] | None) -> int:
    """The free instance to lend: ``prefer``'s highest score, the last given back among equals."""
    if prefer is None or len(free) == 1:
        return len(free) - 1
    scores = [prefer(instance) for instance in free]
    return max(range(len(free)), key=lambda i: (scores[i], i))


def common_prefix_length(a: str, b: str) -> int:
    """Characters ``a`` and ``b`` share from their start (binary search over C-level slice compares)."""
    low, high = 0, min(len(a), len(b))
    while low < high:
        middle = (low + high + 1) // 2
        if a[:middle] == b[:middle]:
            low = middle
        else:
            high = middle - 1
    return low


class ModelPool(Generic[Instance]):
    """Up to ``size`` instances made by ``load`` (called with no lock held, on first need), lent out
    one caller at a time by ``borrow``; thread-safe."""

    def __init__(self, load: Callable[[], Instance], size: int) -> None:
        self.size = max(1, size)
        self._load = load
        self._cond = threading.Condition()
        self.instances: list[Instance] = []
        self._free: list[Instance] = []
        self._loading = 0

    def first(self) -> Instance:
        """The first instance, loaded if need be (not borrowed: for callers that inspect the model)."""
        with self.borrow() as instance:
            pass
        return self.instances[0] if self.instances else instance

    @contextlib.contextmanager
    def borrow(self, prefer: Callable[[Instance], int] | None = None) -> Iterator[Instance]:
        """Lend a free instance (waiting for one, or loading one while the pool is not full).
        ``prefer`` scores the free ones: the highest is lent (ties: the one given back last)."""
        instance = self._take(prefer)
        try:
            yield instance
        finally:
            with self._cond:
                self._free.append(instance)
                self._cond.notify()

    def _take(self, prefer: Callable[[Instance], int] | None) -> Instance:
        with self._cond:
            while True:
                if self._free:
                    return self._free.pop(best_index(self._free, prefer))
                if len(self.instances) + self._loading < self.size:
                    self._loading += 1
                    break
                self._cond.wait()
        try:
            instance = self._load()
        except BaseException:
            with self._cond:
                self._loading -= 1
                self._cond.notify()
            raise
        with self._cond:
            self._loading -= 1
            self.instances.append(instance)
        return instance


def cached_prefix(llama: Any, tokens: Sequence[int]) -> int:
    """How many of ``tokens`` llama-cpp-python will take from the KV cache rather than evaluate: the
    prefix they share with the tokens the context holds (``Llama.generate``'s own rule), less one
    when the whole prompt is cached (that last token is evaluated again for fresh logits)."""
    held = int(getattr(llama, "n_tokens", 0) or 0)
    if held <= 0:
        return 0
    shared = int(type(llama).longest_token_prefix(llama.input_ids[:held], tokens))
    return shared - 1 if shared == len(tokens) and shared > 0 else shared


@dataclass
class LoadedModel:
    llama: Any
    lock: threading.Lock
    conversation: str = ""
    """The last conversation this instance completed, as ChatML (its KV cache holds that prompt)."""

    def reuse_score(self, conversation: str) -> int:
        """How well ``conversation`` fits this instance: the prefix it reuses from the cache, less
        what it would overwrite (the rest of the cached conversation, which another rollout may be
        about to continue). A continuation scores its whole cached prefix, an empty instance 0, and
        a conversation that shares only the system prompt with a long cached one scores below 0, so
        it goes to an empty instance rather than evict another rollout's history."""
        shared = common_prefix_length(self.conversation, conversation)
        return shared - (len(self.conversation) - shared)
