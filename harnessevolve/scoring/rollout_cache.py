"""A persistent, content-addressed cache of evaluated rollouts.

The key is the hash of everything a rollout's outcome depends on: the harness files it ran
(``Harness.content_hash``), the agent runner's kind and version, the task (instruction, setup,
checks, answer), the agent model, the rollout seed, the reference trajectory the failure was
aligned against, the cache format version, and the rollout's environment
(``rollout_environment``): the sandbox's kind, its limits and what it shows read-only (a tighter
``--sandbox-limits`` or ``--unsafe-no-sandbox`` is a different rollout), the code that runs and
scores it (harnessevolve's own code, every module: the loop, the providers' parsing, the tool
server and the checks; and the task's own ``python_path`` modules), and the adapter (name and
version) that loaded the benchmark.
Re-scoring an unchanged harness on the same task in the same environment therefore makes no
model call, in this run or any later one, and a cached entry keeps the full trajectory and
evaluation.

Rollouts that ended in a provider or setup failure are not cached: they say nothing about the
harness, and the next attempt may succeed. Entries live under
``DIR/.harnessevolve/cache/rollouts/<k[:2]>/<k>.json``; a corrupt entry counts as a miss and is
overwritten.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

from harnessevolve.core import atif
from harnessevolve.core.atif import Trajectory
from harnessevolve.core.enums import INFRASTRUCTURE_STOPS
from harnessevolve.core.errors import TrajectoryError
from harnessevolve.core.files import atomic_write_json
from harnessevolve.core.redact import redact_obj
from harnessevolve.core.tasks import Task
from harnessevolve.sandbox.base import Sandbox

CACHE_VERSION = 2
UNCACHED_STOPS = tuple(INFRASTRUCTURE_STOPS)  # model_error, setup_error, budget_exhausted


def task_fingerprint(task: Task) -> str:
    doc = asdict(task)
    doc.pop("split", None)  # moving a task between splits does not change its rollouts
    doc.pop("tags", None)
    return hashlib.sha256(json.dumps(doc, sort_keys=True, default=str).encode()).hexdigest()


MAX_CODE_FILES = 5000
"""Python files of a task's ``python_path`` hashed into its key (more: the count and names only)."""


def _plain(value: Any) -> Any:
    """``value`` as deterministic JSON data: dataclasses, paths, tuples and sets become plain
    values; anything else (a lock, a client) only by its type's name, never its address."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, Path):
        return str(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
    if isinstance(value, (set, frozenset)):
        return sorted((_plain(v) for v in value), key=repr)
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return f"<{type(value).__module__}.{type(value).__qualname__}>"


def sandbox_identity(sandbox: Sandbox | None) -> dict[str, Any]:
    """What of ``sandbox`` can change a rollout: its kind (``name``), its limits and every other
    setting it holds (read-only paths, code-only paths, its view, a docker image). None is the
    default sandbox (bwrap with the default limits)."""
    if sandbox is None:
        from harnessevolve.sandbox.launch import SandboxLimits

        return {"kind": "bwrap", "limits": _plain(SandboxLimits())}
    held = getattr(sandbox, "__dict__", {})
    settings = {k: v for k, v in held.items() if not k.startswith("_") and k not in ("name", "limits")}
    return {
        "kind": sandbox.name,
        "limits": _plain(sandbox.limits),
        "settings": _plain(settings),
    }


@functools.lru_cache(maxsize=1)
def serving_code() -> str:
    """Hash of harnessevolve's own code (every ``*.py`` file of the package, names and contents)
    and its version: the agent loop, the model providers' parsing, the tool server, the checks and
    the evaluation all decide a cached rollout's outcome, so any change there is a new rollout. A
    comparison resumed at another commit runs its rollouts again rather than reuse ones an older
    loop made."""
    import harnessevolve

    root = Path(str(harnessevolve.__file__)).parent
    return hashlib.sha256(f"{harnessevolve.__version__}\0{code_digest(root)}".encode()).hexdigest()


def code_digest(root: Path) -> str:
    """Hash of the names and contents of every ``*.py`` file under ``root``."""
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        digest.update(str(path.relative_to(root)).encode() + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def task_code(folders: tuple[str, ...]) -> str | None:
    """Hash of the ``*.py`` files under a task's ``python_path`` (its tools and checks): names and
    contents, read once per process. None when the task has no Python code folders."""
    return _code_hash(tuple(folders)) if folders else None


@functools.lru_cache(maxsize=256)
def _code_hash(folders: tuple[str, ...]) -> str:
    digest = hashlib.sha256()
    for folder in folders:
        root = Path(folder)
        try:
            files = sorted(p for p in root.rglob("*.py") if p.is_file() and not p.is_symlink())
        except OSError:
            files = []
        digest.update(f"{folder}\0{len(files)}\0".encode())
        for path in files[:MAX_CODE_FILES]:
            digest.update(str(path.relative_to(root)).encode() + b"\0")
            try:
                digest.update(hashlib.sha256(path.read_bytes()).digest())
            except OSError:
                digest.update(b"unreadable")
    return digest.hexdigest()


def rollout_environment(sandbox: Sandbox | None, adapter: str = "") -> dict[str, Any]:
    """The rollout's environment as its cache key holds it (module docstring): the sandbox, the
    code serving Python tools and checks, and the benchmark's adapter ``name@version``."""
    return {"sandbox": sandbox_identity(sandbox), "serving": serving_code(), "adapter": adapter}


def rollout_key(
    *,
    harness_hash: str,
    task: Task,
    model: str,
    seed: int,
    reference: Trajectory | None,
    runner: str = "builtin@1",
    environment: Mapping[str, Any] | None = None,
) -> str:
    """``runner``: the agent runner's ``kind@version`` (``execute.runners.runner_identity``);
    ``environment``: ``rollout_environment(...)`` of the run (None: the default one)."""
    parts = {
        "v": CACHE_VERSION,
        "harness": harness_hash,
        "runner": runner,
        "environment": dict(environment) if environment is not None else rollout_environment(None),
        "task_code": task_code(task.python_path),
        "task": task_fingerprint(task),
        "model": model,
        "seed": seed,
        "reference": hashlib.sha256(json.dumps(reference.to_dict(), sort_keys=True).encode()).hexdigest()
        if reference is not None
        else None,
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


class RolloutCache:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.hits = 0
        self.misses = 0

    def path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> tuple[Trajectory, dict[str, Any]] | None:
        path = self.path(key)
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
            if doc.get("version") != CACHE_VERSION or doc.get("key") != key:
                raise ValueError("stale entry")
            found = atif.from_dict(doc["trajectory"], file=str(path)), dict(doc["evaluation"])
        except (OSError, ValueError, KeyError, TypeError, TrajectoryError):
            self.misses += 1
            return None
        self.hits += 1
        return found

    def put(self, key: str, trajectory: Trajectory, evaluation: dict[str, Any]) -> bool:
        if trajectory.extra.get("stop_reason") in UNCACHED_STOPS:
            return False
        atomic_write_json(
            self.path(key),
            {
                "version": CACHE_VERSION,
                "key": key,
                "trajectory": redact_obj(trajectory.to_dict()),
                "evaluation": redact_obj(evaluation),
            },
        )
        return True
