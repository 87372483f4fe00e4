"""A persistent, content-addressed cache of evaluated rollouts.

The key is the hash of everything a rollout's outcome depends on: the harness files it ran
(``Harness.content_hash``), the agent runner's kind and version, the task (instruction, setup,
checks, answer), the agent model, the rollout seed, the reference trajectory the failure was
aligned against, and the cache format version. Re-scoring an unchanged harness on the same task
therefore makes no model call, in this run or any later one, and a cached entry keeps the full
trajectory and evaluation.

Rollouts that ended in a provider or setup failure are not cached: they say nothing about the
harness, and the next attempt may succeed. Entries live under
``DIR/.harnessevolve/cache/rollouts/<k[:2]>/<k>.json``; a corrupt entry counts as a miss and is
overwritten.
"""

from __future__ import annotations

import hashlib
import json
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

CACHE_VERSION = 1
UNCACHED_STOPS = tuple(INFRASTRUCTURE_STOPS)  # model_error, setup_error, budget_exhausted


def task_fingerprint(task: Task) -> str:
    doc = asdict(task)
    doc.pop("split", None)  # moving a task between splits does not change its rollouts
    doc.pop("tags", None)
    return hashlib.sha256(json.dumps(doc, sort_keys=True, default=str).encode()).hexdigest()


def rollout_key(
    *,
    harness_hash: str,
    task: Task,
    model: str,
    seed: int,
    reference: Trajectory | None,
    runner: str = "builtin@1",
) -> str:
    """``runner``: the agent runner's ``kind@version`` (``execute.runners.runner_identity``)."""
    parts = {
        "v": CACHE_VERSION,
        "harness": harness_hash,
        "runner": runner,
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
