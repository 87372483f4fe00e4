"""``refs generate``: reference trajectories from the agent itself, given a privileged hint.

For each task the agent runs with the task's answer (or its gold solution) appended to the
instruction as a hint, up to ``attempts`` times; the first run that is *genuine* is kept: it passes
the checker and reached its answer through tool observations (the submitted answer appears in an
observation before the submit), rather than restating the hint. The kept trajectory is stored
with the original instruction. Each task's pass rate with and without the hint, and their
difference (regret: solvable but not yet solved), go to ``regret.json`` beside the references.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path

from harnessevolve.core.atif import Trajectory
from harnessevolve.core.tasks import Task
from harnessevolve.core.text import folded
from harnessevolve.evaluate.checkers import run_checks
from harnessevolve.execute.runners import runner_for
from harnessevolve.execute.workspace import create_workspace, remove_workspace
from harnessevolve.harness.model import Harness
from harnessevolve.runs.files import read_regret
from harnessevolve.runs.files import write_regret as write_regret_table
from harnessevolve.scoring.sandboxed_checks import sandboxed_runner

HINT = "\n\n(Hint for this run only: {hint}. Still use the tools to do the task and check the result.)"
REGRET_FILE = "regret.json"


@dataclass(frozen=True)
class Generated:
    task_id: str
    reference: Trajectory | None
    pass_without: float
    pass_with: float
    attempts: int
    reason: str

    @property
    def regret(self) -> float:
        return self.pass_with - self.pass_without


def hint_for(task: Task) -> str:
    if task.answer:
        return f"the answer is {task.answer}"
    steps = "; ".join(f"{g.tool} {json.dumps(g.arguments)}" for g in task.gold if g.tool != "submit")
    return f"one solution is: {steps}" if steps else "no hint available"


def is_genuine(trajectory: Trajectory, task: Task) -> bool:
    """The answer came from the workspace: it appears in a tool observation before the submit
    (tasks checked on their effect need at least one tool call that did not fail)."""
    answer = trajectory.extra.get("answer")
    observations = [
        o.content
        for s in trajectory.agent_steps
        for c, o in zip(s.tool_calls, s.observations, strict=False)
        if c.function_name != "submit"
    ]
    if task.answer:
        return bool(answer) and any(folded(answer) in folded(o) for o in observations)
    worked = [s for s in trajectory.agent_steps if s.tool_calls and not s.extra.get("error")]
    return any(c.function_name != "submit" for s in worked for c in s.tool_calls)


def without_hint(trajectory: Trajectory, task: Task) -> Trajectory:
    steps = tuple(
        replace(s, message=task.instruction) if s.source == "user" and i == 1 else s
        for i, s in enumerate(trajectory.steps)
    )
    return replace(trajectory, steps=steps).with_extra(reference="generated", hinted=True)


async def _attempt(
    harness: Harness, task: Task, run_task: Task, *, model: str, seed: int
) -> tuple[Trajectory, bool]:
    workspace = await create_workspace(task)
    try:
        trajectory = await runner_for(harness).run(harness, run_task, workspace, model=model, seed=seed)
        passed = run_checks(task, workspace, trajectory.extra.get("answer"), runner=sandboxed_runner()).passed
    finally:
        remove_workspace(workspace)
    return trajectory, passed


async def generate_reference(
    harness: Harness, task: Task, *, model: str, attempts: int = 5, probes: int = 2, seed: int = 0
) -> Generated:
    """Up to ``attempts`` hinted runs; ``probes`` unhinted runs measure the pass rate without the hint."""
    hinted = replace(task, instruction=task.instruction + HINT.format(hint=hint_for(task)))
    kept, with_passes, tried = None, 0, 0
    for k in range(attempts):
        tried += 1
        trajectory, passed = await _attempt(harness, task, hinted, model=model, seed=seed + k)
        with_passes += passed
        if passed and is_genuine(trajectory, task):
            kept = without_hint(trajectory, task)
            break
    without = [
        (await _attempt(harness, task, task, model=model, seed=seed + 1000 + k))[1] for k in range(probes)
    ]
    reason = "genuine run kept" if kept else f"no genuine passing run in {tried} attempt(s)"
    return Generated(task.id, kept, sum(without) / max(1, probes), with_passes / tried, tried, reason)


def write_regret(folder: Path, results: list[Generated]) -> Path:
    """Merge these tasks' pass rates into ``regret.json`` (atomically; versioned, see runs/files.py)."""
    path = folder / REGRET_FILE
    table = read_regret(path)
    for r in results:
        table[r.task_id] = {
            "pass_without_hint": r.pass_without,
            "pass_with_hint": r.pass_with,
            "regret": round(r.regret, 4),
            "attempts": r.attempts,
        }
    return write_regret_table(path, table)


def load_regret(folder: Path) -> dict[str, float]:
    return {k: float(v.get("regret", 0.0)) for k, v in read_regret(folder / REGRET_FILE).items()}
