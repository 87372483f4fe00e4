"""What every adapter shares: a benchmark type whose references live where the adapter says,
deterministic splits for suites that bring none, and turning outside names into task ids.

Splits. A task whose source names a split keeps it. The others get one from a seeded hash of the
task id: ``sha256("harnessevolve-splits-v1:<id>")`` read as a number in [0, 1) gives train below
0.5, validation below 0.75, else test. That is stable: adding or removing a task never moves
another one. Under ``HASH_SPLIT_MIN_TASKS`` tasks a threshold would often leave validation or test
empty, so there the tasks are sorted by that same hash and cut 50/25/25 instead, with at least one
task in validation and one in test from three tasks up.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from harnessevolve.core.errors import BenchmarkError
from harnessevolve.core.tasks import Benchmark, Split

SPLIT_SEED = "harnessevolve-splits-v1"
HASH_SPLIT_MIN_TASKS = 20
"""Suites with at least this many unsplit tasks use per-task hash thresholds (stable under growth)."""

_NOT_ID = re.compile(r"[^a-z0-9._-]+")


@dataclass(frozen=True)
class AdaptedBenchmark(Benchmark):
    """A benchmark an adapter built; ``references`` is where its reference trajectories live."""

    references: Path | None = None
    source: str = ""
    """The spec it was loaded from (``harbor:/path``, ``nl2bash:5``), for messages and the ledger."""
    shared_references: bool = False
    """``references`` holds the references of every subset the adapter loads (task ids are unique
    across them): a subset reads those of its own tasks and skips the rest."""
    references_name: str = ""
    """The name of the user's reference folder (``refs import``/``generate`` write there when
    ``references`` is read-only); default: the shared folder's name, else the benchmark's name.
    A slice (``adapters/subset.py``) names the folder of the benchmark it cuts."""

    @property
    def references_dir(self) -> Path:
        return self.references if self.references is not None else super().references_dir


def shares_references(benchmark: Benchmark) -> bool:
    """Whether ``benchmark``'s reference folder also holds other subsets' tasks (skipped, not errors)."""
    return isinstance(benchmark, AdaptedBenchmark) and benchmark.shared_references


def reference_folder_name(benchmark: Benchmark) -> str:
    """The name of the user's reference folder of ``benchmark`` (``scoring.references``):
    what it says, else its shared folder's name (every subset of an adapter), else its own name."""
    if isinstance(benchmark, AdaptedBenchmark) and benchmark.references_name:
        return benchmark.references_name
    return benchmark.references_dir.name if shares_references(benchmark) else benchmark.name


def split_fraction(task_id: str, seed: str = SPLIT_SEED) -> float:
    """The task's place in [0, 1), from a seeded hash of its id."""
    digest = hashlib.sha256(f"{seed}:{task_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def assign_splits(
    task_ids: Sequence[str], given: Mapping[str, Split] | None = None, *, seed: str = SPLIT_SEED
) -> dict[str, Split]:
    """task id -> split: ``given`` ones kept, the rest 50/25/25 as the module docstring says."""
    given = dict(given or {})
    rest = [t for t in task_ids if t not in given]
    out: dict[str, Split] = dict(given)
    if len(rest) >= HASH_SPLIT_MIN_TASKS:
        for t in rest:
            x = split_fraction(t, seed)
            out[t] = "train" if x < 0.5 else "validation" if x < 0.75 else "test"
        return out
    ranked = sorted(rest, key=lambda t: (split_fraction(t, seed), t))
    n = len(ranked)
    n_val = max(1, round(n * 0.25)) if n >= 2 else 0
    n_test = max(1, round(n * 0.25)) if n >= 3 else 0
    for i, t in enumerate(ranked):
        out[t] = "validation" if i < n_val else "test" if i < n_val + n_test else "train"
    return out


def task_id_from(name: str, *, file: str) -> str:
    """An outside name (a folder, ``org/name``) as a task id: lower case, other characters -> ``-``."""
    task_id = _NOT_ID.sub("-", name.lower()).strip("-._")
    if not task_id:
        raise BenchmarkError(f"cannot make a task id from {name!r}", file=file, hint="rename it")
    return task_id
