"""Reference trajectories: loading them for a benchmark, and building them by replaying gold
tool calls through the real agent loop (so every observation is real)."""

from __future__ import annotations

import itertools
from pathlib import Path

from harnessevolve.core import atif
from harnessevolve.core.atif import Trajectory
from harnessevolve.core.errors import BenchmarkError, TrajectoryError
from harnessevolve.core.tasks import Benchmark, Task
from harnessevolve.evaluate.checkers import run_checks
from harnessevolve.execute.agent import run_agent
from harnessevolve.execute.workspace import create_workspace, remove_workspace
from harnessevolve.harness.model import Harness
from harnessevolve.models.scripted import register_script, unregister_script

_counter = itertools.count()


def load_references(benchmark: Benchmark) -> dict[str, Trajectory]:
    """Every ``<task-id>.json`` of the benchmark's references; a file for an unknown task is an error."""
    folder = benchmark.references_dir
    if not folder.is_dir():
        return {}
    known = {t.id for t in benchmark.tasks}
    out: dict[str, Trajectory] = {}
    for path in sorted(p for p in folder.glob("*.json") if p.name != "regret.json"):
        if path.stem not in known:
            raise BenchmarkError(
                f"reference for unknown task {path.stem!r}",
                file=str(path),
                hint=f"rename it to an id of {benchmark.name}, or remove it",
            )
        trajectory = atif.load(path)
        if trajectory.task_id not in (None, path.stem):
            raise TrajectoryError(
                f"extra.task_id {trajectory.task_id!r} differs from the file name",
                file=str(path),
                field="extra.task_id",
            )
        out[path.stem] = trajectory
    return out


async def replay_gold(harness: Harness, task: Task) -> Trajectory:
    """Run the agent loop with a scripted model that makes the task's gold calls, one per turn.

    Raises ``BenchmarkError`` when the task has no gold solution or the replay fails its checker.
    """
    if not task.gold:
        raise BenchmarkError(f"task {task.id} has no gold solution to replay", field="gold")
    name = f"gold-{task.id}-{next(_counter)}"
    replies = [{"tool_calls": [{"name": g.tool, "arguments": g.arguments}]} for g in task.gold]
    register_script(name, replies)
    workspace = await create_workspace(task)
    try:
        trajectory = await run_agent(harness, task, workspace, model=f"scripted/{name}", seed=0)
        result = run_checks(task, workspace, trajectory.extra.get("answer"))
    finally:
        unregister_script(name)
        remove_workspace(workspace)
    if not result.passed:
        failed = next(d for d in result.details if not d.ok)
        raise BenchmarkError(f"gold solution of {task.id} fails its checker: {failed.message}", field="gold")
    return trajectory.with_extra(reference="gold-replay", score=result.score, passed=True)


def import_atif(benchmark: Benchmark, files: list[Path]) -> list[tuple[str, Trajectory]]:
    """Read ATIF reference files for ``benchmark``: each must be valid and name a task of it in
    ``extra.task_id``. Raises on the first bad file, before anything is written."""
    known = {t.id for t in benchmark.tasks}
    out: list[tuple[str, Trajectory]] = []
    for path in files:
        trajectory = atif.load(path)
        task_id = trajectory.task_id
        if task_id is None:
            raise TrajectoryError(
                "no extra.task_id: which task is this a reference for?",
                file=str(path),
                field="extra.task_id",
                hint="set it with `harnessevolve traj convert FILE --to atif --task-id ID --out FILE`",
            )
        if task_id not in known:
            raise BenchmarkError(
                f"reference for unknown task {task_id!r}",
                file=str(path),
                field="extra.task_id",
                hint=f"task ids of {benchmark.name} are the files in {benchmark.root / 'tasks'}",
            )
        if not any(s.source == "agent" for s in trajectory.steps):
            raise TrajectoryError("a reference needs at least one agent step", file=str(path), field="steps")
        out.append((task_id, trajectory.with_extra(reference="imported-atif")))
    return out


def save_reference(trajectory: Trajectory, folder: Path, task_id: str) -> Path:
    path = folder / f"{task_id}.json"
    atif.save(trajectory, path)
    return path
