"""Reference trajectories: loading them for a benchmark, and building them by replaying gold
tool calls through the real agent loop (so every observation is real).

Where they are read from, in order (a task's first file wins):

1. the benchmark's own folder (``Benchmark.references_dir``: ``<suite>/trajectories``, or the
   shipped ``trajectories/<name>`` -- inside the wheel for an installed package);
2. the user's reference folder (``user_references_dir``: ``$HARNESSEVOLVE_REFERENCES/<name>``, else
   ``$XDG_CACHE_HOME/harnessevolve/references/<name>``), where ``refs import`` / ``refs generate``
   write when the benchmark's folder is read-only (a built-in suite of an installed package).

An adapter whose references folder serves every subset it loads (``AdaptedBenchmark.
shared_references``: ``trajectories/nl2bash`` for ``nl2bash:5`` as for ``nl2bash``) has the files
of tasks outside the subset skipped; anywhere else a file for an unknown task is an error.
"""

from __future__ import annotations

import itertools
import json
import os
from dataclasses import replace
from pathlib import Path
from typing import Any

from harnessevolve.adapters.suite import reference_folder_name, shares_references
from harnessevolve.core import atif
from harnessevolve.core.atif import Trajectory
from harnessevolve.core.errors import BenchmarkError, TrajectoryError
from harnessevolve.core.tasks import Benchmark, Task
from harnessevolve.evaluate.checkers import check_rollout
from harnessevolve.execute.agent import run_agent
from harnessevolve.execute.workspace import create_workspace, remove_workspace
from harnessevolve.harness.model import Harness
from harnessevolve.models.scripted import register_script, unregister_script
from harnessevolve.sandbox.base import Sandbox
from harnessevolve.scoring.sandboxed_checks import sandboxed_runner

_counter = itertools.count()
UNJUDGED_NOTE = (
    "{n} judge check(s) not run: a gold replay has no conversation to judge (only the gold calls, "
    "no agent message)"
)


REFERENCES_ENV = "HARNESSEVOLVE_REFERENCES"
"""Overrides the user's reference folder (default ``$XDG_CACHE_HOME/harnessevolve/references``)."""


def user_references_dir(benchmark: Benchmark) -> Path:
    """The user's own reference folder for ``benchmark`` (see the module docstring)."""
    override = os.environ.get(REFERENCES_ENV, "").strip()
    if override:
        return Path(override) / reference_folder_name(benchmark)
    base = os.environ.get("XDG_CACHE_HOME", "").strip() or str(Path.home() / ".cache")
    return Path(base) / "harnessevolve" / "references" / reference_folder_name(benchmark)


def load_references(benchmark: Benchmark) -> dict[str, Trajectory]:
    """Every ``<task-id>.json`` of the benchmark's references (its folder, then the user's); a file
    for an unknown task is an error, except in a folder shared by an adapter's subsets."""
    out: dict[str, Trajectory] = {}
    for folder in dict.fromkeys((benchmark.references_dir, user_references_dir(benchmark))):
        for task_id, trajectory in _load_folder(benchmark, folder).items():
            out.setdefault(task_id, trajectory)
    return out


def _load_folder(benchmark: Benchmark, folder: Path) -> dict[str, Trajectory]:
    if not folder.is_dir():
        return {}
    known = {t.id for t in benchmark.tasks}
    shared = shares_references(benchmark)
    out: dict[str, Trajectory] = {}
    for path in sorted(p for p in folder.glob("*.json") if p.name != "regret.json"):
        if path.stem not in known and shared:
            continue  # another subset's task
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


def gold_replies(task: Task) -> list[dict[str, Any]]:
    """The scripted model's replies replaying ``task.gold``: one call per reply; for a multi-turn
    task, a closing message after each turn's calls (that ends the agent's turn)."""
    if not (task.turns or task.user):
        return [{"tool_calls": [{"name": g.tool, "arguments": g.arguments}]} for g in task.gold]
    replies: list[dict[str, Any]] = []
    for turn in range(len(task.user_turns)):
        replies += [
            {"tool_calls": [{"name": g.tool, "arguments": g.arguments}]} for g in task.gold if g.turn == turn
        ]
        replies.append({"content": f"Done with request {turn + 1}."})
    return replies


def first_tool_error(trajectory: Trajectory) -> str:
    """``step N: tool(...) -> error`` for the first failed tool call of a trajectory, or ""."""
    for step in trajectory.steps:
        error = step.extra.get("error")
        if step.source != "agent" or not error:
            continue
        call = step.tool_calls[0] if step.tool_calls else None
        seen = " | ".join(step.observations[0].content.split("\n")).strip() if step.observations else ""
        name = f"{call.function_name}({json.dumps(call.arguments)[:120]})" if call else "the reply"
        detail = f": {seen[:300]}" if seen and seen.removeprefix("error: ") not in error else ""
        return f"step {step.step_id}: {name} -> {error}{detail}"
    return ""


async def replay_gold(harness: Harness, task: Task, *, sandbox: Sandbox | None = None) -> Trajectory:
    """Run the agent loop with a scripted model that makes the task's gold calls, one per turn,
    with every command and check in ``sandbox`` (the default one when None).

    Raises ``BenchmarkError`` when the task has no gold solution or the replay fails its checker
    (naming the first tool error the replay met, if any).

    ``judge`` checks are skipped: a gold replay makes the gold calls and says nothing, so there is
    no conversation for a judge to read. The skipped checks are recorded in the reference's
    ``extra.unjudged`` (``index``, ``assertion``, ``model``) and its ``extra.notes``; the other
    checks must pass as usual.
    """
    if not task.gold:
        raise BenchmarkError(f"task {task.id} has no gold solution to replay", field="gold")
    unjudged = [
        {"index": i, "assertion": c.assertion, "model": c.model}
        for i, c in enumerate(task.checks)
        if c.type == "judge"
    ]
    checked = replace(task, checks=tuple(c for c in task.checks if c.type != "judge"))
    name = f"gold-{task.id}-{next(_counter)}"
    replies = gold_replies(task)
    # The replay makes exactly the gold calls: the harness's step limit and repeat stop must not cut it.
    loop = replace(harness.loop, max_steps=max(harness.loop.max_steps, len(replies) + 1), stop_on_repeat=0)
    harness = replace(harness, loop=loop)
    register_script(name, replies)
    workspace = await create_workspace(task, sandbox=sandbox)
    try:
        trajectory = await run_agent(
            harness, task, workspace, model=f"scripted/{name}", seed=0, sandbox=sandbox
        )
        result = (
            check_rollout(checked, workspace, trajectory, runner=sandboxed_runner(sandbox))
            if checked.checks
            else None
        )
    finally:
        unregister_script(name)
        remove_workspace(workspace)
    if unjudged:
        note = UNJUDGED_NOTE.format(n=len(unjudged))
        trajectory = trajectory.with_extra(
            unjudged=unjudged, notes=[*trajectory.extra.get("notes", []), note]
        )
    if result is None:  # judge checks only: nothing a replay can be checked by
        return trajectory.with_extra(reference="gold-replay", passed=True)
    if not result.passed:
        failed = next(d for d in result.details if not d.ok)
        tool_error = first_tool_error(trajectory) or trajectory.extra.get("error", "")
        raise BenchmarkError(
            f"gold solution of {task.id} fails its checker: {failed.message}"
            + (f"; first tool error: {tool_error}" if tool_error else ""),
            field="gold",
            hint="fix the task's gold calls or its tools (run with the same --sandbox options as your runs)",
        )
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
