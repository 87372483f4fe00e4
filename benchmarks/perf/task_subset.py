"""A fixed subset of a benchmark for the measurement scripts: the ``efficacy-subset:`` adapter
(``efficacy-subset:validation=12,test=16@SPEC``), registered in ``adapters.ADAPTERS`` on import."""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from harnessevolve.adapters import load_benchmark_spec
from harnessevolve.adapters.base import ADAPTERS
from harnessevolve.adapters.suite import AdaptedBenchmark, split_fraction
from harnessevolve.core.errors import BenchmarkError
from harnessevolve.core.tasks import Benchmark

SUBSET = "efficacy-subset"
SUBSET_SALT = "efficacy-subset"

# ---------------------------------------------------------------- a fixed subset of a benchmark


class SubsetAdapter:
    """``efficacy-subset:validation=12,test=16@SPEC``: the benchmark SPEC with each named split cut
    to its first N tasks in a seeded hash order (the same tasks in every process and every arm);
    the other splits whole. References stay those of SPEC. Registered only by this script."""

    name = SUBSET

    def detect(self, spec: str) -> bool:
        return False

    def load(self, spec: str) -> Benchmark:
        limits_text, at, inner = spec.partition("@")
        if not at or not inner:
            raise BenchmarkError(f"expected LIMITS@SPEC, got {spec!r}", field="--benchmark")
        limits = {}
        for item in filter(None, limits_text.split(",")):
            split, _, count = item.partition("=")
            if split not in ("train", "validation", "test") or not count.isdigit():
                raise BenchmarkError(f"bad subset limit {item!r}", field="--benchmark")
            limits[split] = int(count)
        full = load_benchmark_spec(inner)
        keep: list[Any] = []
        for split in ("train", "validation", "test"):
            tasks = sorted(full.split(split), key=lambda t: split_fraction(t.id, SUBSET_SALT))
            keep += tasks[: limits[split]] if limits.get(split) else tasks
        order = {t.id: i for i, t in enumerate(full.tasks)}
        return AdaptedBenchmark(
            name=f"{full.name}-subset",
            root=full.root,
            tasks=tuple(sorted(keep, key=lambda t: order[t.id])),
            description=f"{full.description} (subset {limits_text})",
            references=subset_references(full.references_dir, {t.id for t in keep}, spec),
            source=f"{SUBSET}:{spec}",
        )


def subset_references(folder: Path, keep: set[str], spec: str) -> Path:
    """The subset's reference trajectories (a reference for a task not in a benchmark is an error):
    copies of SPEC's for the kept tasks, in a temporary folder named after the spec."""
    out = (
        Path(tempfile.gettempdir())
        / "he-efficacy-refs"
        / hashlib.sha256(f"{folder}\n{spec}".encode()).hexdigest()[:16]
    )
    out.mkdir(parents=True, exist_ok=True)
    sources = {p.name: p for p in folder.glob("*.json")} if folder.is_dir() else {}
    for stale in out.glob("*.json"):  # an earlier run's copy of a task no longer kept or shipped
        if stale.stem not in keep or stale.name not in sources:
            stale.unlink(missing_ok=True)
    for name, path in sources.items():
        if path.stem in keep:  # copied afresh each time: a shipped reference may have changed
            tmp = out / f".{name}.{os.getpid()}"
            shutil.copyfile(path, tmp)
            os.replace(tmp, out / name)
    return out


ADAPTERS.setdefault(SUBSET, SubsetAdapter())  # type: ignore[arg-type]
