"""Benchmark tasks: the plain data every stage shares, and loading them from a benchmark folder.

A benchmark is a folder with ``benchmark.yaml`` and ``tasks/*.yaml`` (one task a file, schema
``task.schema.json``). Reference trajectories live in the folder's ``trajectories/`` or, for a
built-in benchmark, in the checkout's ``trajectories/<name>/``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Literal

from harnessevolve.core import paths
from harnessevolve.core.errors import BenchmarkError
from harnessevolve.core.files import read_yaml
from harnessevolve.core.schema import check

Split = Literal["train", "validation", "test"]
SPLITS: tuple[Split, ...] = ("train", "validation", "test")


@dataclass(frozen=True)
class Check:
    """One checker step: ``answer``, ``file``, ``command`` or ``effect`` (see task.schema.json)."""

    type: str
    expected: str = ""
    match: str = "exact"
    path: str = ""
    run: str = ""


@dataclass(frozen=True)
class GoldCall:
    tool: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class Task:
    id: str
    instruction: str
    split: Split
    checks: tuple[Check, ...]
    setup_files: dict[str, str] = field(default_factory=dict)
    setup_commands: tuple[str, ...] = ()
    answer: str | None = None
    gold: tuple[GoldCall, ...] = ()
    tags: tuple[str, ...] = ()


@dataclass(frozen=True)
class Benchmark:
    name: str
    root: Path
    tasks: tuple[Task, ...]
    description: str = ""

    @property
    def references_dir(self) -> Path:
        local = self.root / "trajectories"
        return local if local.is_dir() else paths.builtin_dir("trajectories") / self.name

    def split(self, name: Split) -> tuple[Task, ...]:
        return tuple(t for t in self.tasks if t.split == name)

    def task(self, task_id: str) -> Task:
        for t in self.tasks:
            if t.id == task_id:
                return t
        raise BenchmarkError(
            f"unknown task {task_id!r}",
            file=str(self.root),
            hint=f"tasks are the files in {self.root / 'tasks'}",
        )


def builtin_benchmarks() -> list[str]:
    root = paths.builtin_dir("benchmarks")
    return sorted(p.name for p in root.iterdir() if (p / "benchmark.yaml").is_file()) if root.is_dir() else []


def resolve_benchmark(name_or_dir: str) -> Path:
    """A built-in benchmark's name or a folder path -> the folder; unknown names are an error."""
    candidate = Path(name_or_dir)
    if (candidate / "benchmark.yaml").is_file():
        return candidate
    builtin = paths.builtin_dir("benchmarks") / name_or_dir
    if "/" not in name_or_dir and (builtin / "benchmark.yaml").is_file():
        return builtin
    known = ", ".join(builtin_benchmarks()) or "none"
    raise BenchmarkError(
        f"unknown benchmark {name_or_dir!r}",
        field="--benchmark",
        hint=f"built-in benchmarks: {known}; or a folder with benchmark.yaml",
    )


def _safe_relative(path: str, *, file: str, field: str) -> str:
    pure = PurePosixPath(path)
    if pure.is_absolute() or ".." in pure.parts or not pure.parts:
        raise BenchmarkError(f"path {path!r} must stay inside the workspace", file=file, field=field)
    return str(pure)


def gold_calls(doc: dict) -> tuple[GoldCall, ...]:
    """The task's gold solution as tool calls; a ``gold_script`` becomes one bash call per line."""
    if "gold_script" not in doc:
        return tuple(GoldCall(g["tool"], g["arguments"]) for g in doc.get("gold", []))
    lines = [ln.strip() for ln in doc["gold_script"].splitlines()]
    calls = [GoldCall("bash", {"command": ln}) for ln in lines if ln and not ln.startswith("#")]
    return (*calls, GoldCall("submit", {"answer": doc.get("answer", "done")}))


def load_task(path: Path) -> Task:
    doc = read_yaml(path, error=BenchmarkError)
    check(doc, "task", file=str(path), error=BenchmarkError)
    if doc["id"] != path.stem:
        raise BenchmarkError(
            f"id {doc['id']!r} differs from the file name",
            file=str(path),
            field="id",
            hint=f"rename the file to {doc['id']}.yaml or change the id",
        )
    setup = doc.get("setup", {})
    files = {
        _safe_relative(k, file=str(path), field=f"setup.files.{k}"): v
        for k, v in setup.get("files", {}).items()
    }
    checks = []
    for i, c in enumerate(doc["checker"]):
        if c["type"] == "file":
            _safe_relative(c["path"], file=str(path), field=f"checker[{i}].path")
        checks.append(Check(**c))
    return Task(
        id=doc["id"],
        instruction=doc["instruction"],
        split=doc["split"],
        checks=tuple(checks),
        setup_files=files,
        setup_commands=tuple(setup.get("commands", [])),
        answer=doc.get("answer"),
        gold=gold_calls(doc),
        tags=tuple(doc.get("tags", [])),
    )


def load_benchmark(name_or_dir: str) -> Benchmark:
    root = resolve_benchmark(name_or_dir)
    meta_file = root / "benchmark.yaml"
    meta = read_yaml(meta_file, error=BenchmarkError)
    check(meta, "benchmark", file=str(meta_file), error=BenchmarkError)
    task_files = sorted((root / "tasks").glob("*.yaml"))
    if not task_files:
        raise BenchmarkError(
            "benchmark has no tasks", file=str(root / "tasks"), hint="add one tasks/<id>.yaml per task"
        )
    tasks = tuple(load_task(p) for p in task_files)
    return Benchmark(name=meta["name"], root=root, tasks=tasks, description=meta.get("description", ""))
