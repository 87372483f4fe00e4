"""``harnessevolve validate BENCHMARK-FOLDER``: every problem of a native benchmark folder at once.

Checked, without running anything an agent or a task wrote: ``benchmark.yaml`` against its schema;
every ``tasks/*.yaml`` against the task schema (all violations of each file, each naming the key)
and then through the loader (id = file name, workspace-relative paths); each check that can be
checked statically (regexes compile, ``number`` expectations are numbers, shell commands of
``command``/``effect`` checks and of ``setup.commands`` parse with ``bash -n``, Python checks and
tools are located without being imported); every reference trajectory (valid ATIF, names a task of
the suite). Tasks with no reference and splits with no task are reported as notes, not problems.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harnessevolve.adapters.suite import shares_references
from harnessevolve.core import atif
from harnessevolve.core.errors import HarnessEvolveError
from harnessevolve.core.files import read_yaml
from harnessevolve.core.python_refs import check_ref, parse_ref
from harnessevolve.core.schema import all_errors
from harnessevolve.core.task_tools import python_check
from harnessevolve.core.tasks import SPLITS, Benchmark, Task, benchmark_settings, load_task


@dataclass(frozen=True)
class Problem:
    """One problem of a benchmark folder: the file, the key (a JSON path; may be empty), what is wrong."""

    file: str
    field: str
    message: str

    def __str__(self) -> str:
        return ": ".join(part for part in (self.file, self.field, self.message) if part)


HINTS = {
    "split": "every task names its split: train, validation or test (see docs/tasks.md)",
    "checker": "see docs/tasks.md for the check kinds and their keys",
    "gold": "gold is a list of {tool, arguments}; gold_script a shell script; not both",
}


@dataclass(frozen=True)
class BenchmarkReport:
    """What ``validate`` found in a benchmark folder."""

    root: Path
    name: str
    tasks: int
    by_split: dict[str, int]
    references: int
    problems: tuple[Problem, ...]
    notes: tuple[str, ...]

    @property
    def valid(self) -> bool:
        return not self.problems

    def to_dict(self) -> dict[str, Any]:
        return {
            "valid": self.valid,
            "kind": "benchmark",
            "name": self.name,
            "root": str(self.root),
            "tasks": self.tasks,
            "by_split": self.by_split,
            "references": self.references,
            "problems": [p.__dict__ for p in self.problems],
            "notes": list(self.notes),
        }


def is_benchmark_folder(path: Path) -> bool:
    return (Path(path) / "benchmark.yaml").is_file()


def validate_benchmark(root: Path) -> BenchmarkReport:
    root = Path(root)
    problems: list[Problem] = []
    meta_file = root / "benchmark.yaml"
    name = root.name
    try:
        meta = read_yaml(meta_file, error=HarnessEvolveError)
        schema = [Problem(str(meta_file), where, msg) for where, msg in all_errors(meta, "benchmark")]
        problems += schema
        if isinstance(meta, dict) and isinstance(meta.get("name"), str):
            name = meta["name"]
        if not schema:
            try:  # python_path and sandbox_ro folders exist
                benchmark_settings(meta, root, str(meta_file))
            except HarnessEvolveError as exc:
                problems.append(_problem(exc, str(meta_file)))
    except HarnessEvolveError as exc:
        problems.append(_problem(exc, str(meta_file)))
    task_files = sorted((root / "tasks").glob("*.yaml")) if (root / "tasks").is_dir() else []
    if not task_files:
        problems.append(Problem(str(root / "tasks"), "", "no task files (add one tasks/<id>.yaml per task)"))
    tasks = []
    settings_broken = any(p.file == str(meta_file) for p in problems)
    for path in task_files if not settings_broken else []:
        found = list(_task_problems(path))
        problems += found
        if not found:
            tasks.append(load_task(path))
    benchmark = Benchmark(name=name, root=root, tasks=tuple(tasks))
    references, ref_problems = _references(benchmark, {p.stem for p in task_files})
    problems += ref_problems
    by_split: dict[str, int] = {s: len(benchmark.split(s)) for s in SPLITS}
    notes = [f"no {s} tasks" for s, n in by_split.items() if n == 0 and tasks]
    missing = sorted(t.id for t in benchmark.split("train") if t.id not in references)
    if missing and tasks:
        notes.append(
            f"{len(missing)} train task(s) without a reference trajectory ({', '.join(missing[:3])}"
            f"{', ...' if len(missing) > 3 else ''}): failed runs of them get no first divergence; "
            f"build them with `harnessevolve refs import -b {root}` (gold solutions) or `refs generate`"
        )
    return BenchmarkReport(root, name, len(tasks), by_split, len(references), tuple(problems), tuple(notes))


def _problem(exc: HarnessEvolveError, file: str) -> Problem:
    return Problem(
        exc.file or file, exc.field or "", exc.message + (f" (hint: {exc.hint})" if exc.hint else "")
    )


def _hint_for(where: str) -> str:
    key = re.split(r"[.\[]", where, maxsplit=1)[0]
    return HINTS.get(key, "")


def _task_problems(path: Path) -> Iterator[Problem]:
    try:
        doc = read_yaml(path, error=HarnessEvolveError)
    except HarnessEvolveError as exc:
        yield _problem(exc, str(path))
        return
    schema = all_errors(doc, "task")
    for where, message in schema:
        hint = _hint_for(where)
        yield Problem(str(path), where, message + (f" (hint: {hint})" if hint else ""))
    if schema:
        return
    try:
        load_task(path)
    except HarnessEvolveError as exc:
        yield _problem(exc, str(path))
        return
    for i, command in enumerate((doc.get("setup") or {}).get("commands", [])):
        yield from _bash_syntax(path, f"setup.commands[{i}]", command)
    for i, check in enumerate(doc["checker"]):
        yield from _check_problems(path, f"checker[{i}]", check)


def _check_problems(path: Path, where: str, check: dict[str, Any]) -> Iterator[Problem]:
    kind, match = check.get("type"), check.get("match", "exact")
    expected = check.get("expected", "")
    if match == "regex":
        try:
            re.compile(expected)
        except re.error as exc:
            yield Problem(str(path), f"{where}.expected", f"invalid regex: {exc}")
    if match == "number":
        try:
            float(expected)
        except ValueError:
            yield Problem(str(path), f"{where}.expected", f"{expected!r} is not a number (match: number)")
    if kind in ("command", "effect") and isinstance(check.get("run"), str):
        yield from _bash_syntax(path, f"{where}.run", check["run"])


def _bash_syntax(path: Path, where: str, command: str) -> Iterator[Problem]:
    """``bash -n`` only parses the command; nothing of it runs."""
    bash = shutil.which("bash")
    if bash is None:
        return
    proc = subprocess.run([bash, "-n", "-c", command], capture_output=True, text=True, timeout=10)
    if proc.returncode != 0:
        detail = proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else "does not parse"
        yield Problem(str(path), where, f"shell syntax error: {detail.removeprefix('bash: -c: ')}")


def _references(benchmark: Benchmark, task_ids: set[str]) -> tuple[set[str], list[Problem]]:
    folder = benchmark.references_dir
    if not folder.is_dir():
        return set(), []
    found: set[str] = set()
    problems: list[Problem] = []
    shared = shares_references(benchmark)
    for path in sorted(p for p in folder.glob("*.json") if p.name != "regret.json"):
        if path.stem not in task_ids and shared:
            continue  # a folder every subset of the adapter shares (nl2bash:5): another subset's task
        if path.stem not in task_ids:
            problems.append(
                Problem(
                    str(path),
                    "",
                    f"reference for unknown task {path.stem!r} (rename it to a task id or remove it)",
                )
            )
            continue
        try:
            trajectory = atif.load(path)
        except HarnessEvolveError as exc:
            problems.append(_problem(exc, str(path)))
            continue
        if trajectory.task_id not in (None, path.stem):
            problems.append(
                Problem(str(path), "extra.task_id", f"{trajectory.task_id!r} differs from the file name")
            )
            continue
        found.add(path.stem)
    return found, problems


def names_adapter(folder: Path) -> bool:
    """True when the folder's benchmark.yaml loads it with its own ``adapter:`` (validated by loading)."""
    try:
        meta = read_yaml(folder / "benchmark.yaml", error=HarnessEvolveError)
    except HarnessEvolveError:
        return False
    return isinstance(meta, dict) and "adapter" in meta


def validate_spec(spec: str, adapters: tuple[str, ...] = ()) -> BenchmarkReport | None:
    """A benchmark named any way ``--benchmark`` accepts (built-in name, Harbor folder, adapter
    spec): native folders get the full check, others are loaded through their adapter and their
    references checked. ``adapters``: ``module:attr`` references (``--adapter``) tried first, as
    ``run --adapter`` does. ``None`` when ``spec`` names no benchmark at all."""
    from harnessevolve.adapters.base import load_benchmark_spec

    if is_benchmark_folder(Path(spec)) and not names_adapter(Path(spec)) and not adapters:
        return validate_benchmark(Path(spec))
    try:
        benchmark = load_benchmark_spec(spec, adapters)
    except HarnessEvolveError as exc:
        if exc.field == "--benchmark" and exc.message.startswith("unknown benchmark"):
            return None
        return BenchmarkReport(Path(spec), spec, 0, {}, 0, (_problem(exc, spec),), ())
    native = not adapters or benchmark.adapter.startswith("harnessevolve@")
    if is_benchmark_folder(benchmark.root) and not names_adapter(benchmark.root) and native:
        return validate_benchmark(benchmark.root)
    references, problems = _references(benchmark, {t.id for t in benchmark.tasks})
    for task in benchmark.tasks:
        problems += _python_ref_problems(task, spec)
    by_split: dict[str, int] = {s: len(benchmark.split(s)) for s in SPLITS}
    notes = _reference_notes(benchmark, references, spec)
    return BenchmarkReport(
        benchmark.root,
        benchmark.name,
        len(benchmark.tasks),
        by_split,
        len(references),
        tuple(problems),
        tuple(notes),
    )


def _python_ref_problems(task: Task, spec: str) -> list[Problem]:
    """Every Python reference of an adapter-made task (checks, tools, tool set-ups), located and
    parsed without importing it, as the loader of native task files does."""
    where = f"{spec} task {task.id}"
    refs = [(f"checker[{i}].python", c.python, "check") for i, c in enumerate(task.checks) if c.python]
    refs += [
        (f"tools[{i}].implementation.python", t.python, "") for i, t in enumerate(task.tools) if t.python
    ]
    refs += [(f"tool_setup.{s.owner}", s.owner, "") for s in task.tool_setup]
    out = []
    for field, text, kind in refs:
        try:
            if kind == "check":
                python_check(text, task.python_path, file=where, field=field)
            else:
                check_ref(parse_ref(text, file=where, field=field), task.python_path, file=where, field=field)
        except HarnessEvolveError as exc:
            out.append(_problem(exc, where))
    return out


def _reference_notes(benchmark: Benchmark, references: set[str], spec: str) -> list[str]:
    """Tasks with neither a reference nor gold (their failures get only the generic signal), and
    tasks with gold but no reference yet (``refs import`` builds them)."""
    notes = []
    bare = sorted(t.id for t in benchmark.tasks if t.id not in references and not t.gold)
    buildable = sorted(t.id for t in benchmark.tasks if t.id not in references and t.gold)
    if bare:
        notes.append(
            f"{len(bare)} task(s) with no reference trajectory and no gold ({_some(bare)}): their failed "
            "runs get only the generic signal"
        )
    if buildable:
        notes.append(
            f"{len(buildable)} task(s) with gold but no reference yet ({_some(buildable)}): "
            f"build them with `harnessevolve refs import -b {spec}`"
        )
    return notes


def _some(ids: list[str]) -> str:
    return ", ".join(ids[:3]) + (", ..." if len(ids) > 3 else "")
