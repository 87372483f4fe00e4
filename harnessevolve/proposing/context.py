"""What a proposer is shown: the ``ProposalContext`` built from a generation's batch results."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from harnessevolve.core.atif import Trajectory
from harnessevolve.core.documents import bounded_yaml
from harnessevolve.core.signals import Cluster
from harnessevolve.core.tasks import Task
from harnessevolve.gate.config import QualityConfig
from harnessevolve.harness.components import harness_components
from harnessevolve.harness.model import Harness
from harnessevolve.models.tokens import count_tokens
from harnessevolve.optimize.proposal import PromptLimits, ProposalContext, ReferenceAction
from harnessevolve.scoring.scorer import TaskResult


def reference_actions(trajectory: Trajectory) -> tuple[ReferenceAction, ...]:
    """A trajectory's tool calls with their observations (a reference's, or a run's)."""
    out = []
    for step in trajectory.agent_steps:
        observations = {o.source_call_id: o.content for o in step.observations}
        out += [
            ReferenceAction(c.function_name, dict(c.arguments), observations.get(c.tool_call_id, ""))
            for c in step.tool_calls
        ]
    return tuple(out)


def forecast_misses(trajectory: Trajectory) -> tuple[dict[str, Any], ...]:
    """The world model's forecasts that did not match in a run (``execute/world_model.py``)."""
    world = trajectory.extra.get("world_model")
    records = world.get("records") if isinstance(world, dict) else None
    if not isinstance(records, list):
        return ()
    return tuple(r for r in records if isinstance(r, dict) and r.get("match") is False)


def static_context(harness: Harness) -> dict[str, Any]:
    """What a ``ProposalContext`` knows of a harness before any run: its files, what may change and
    where its components are (``harness/components.py``)."""
    components = harness_components(bounded_yaml(harness.files["harness.yaml"]), harness.files)
    return {
        "files": dict(harness.files),
        "editable": harness.editable,
        "system_prompt_path": components.system_prompt,
        "examples_path": components.examples,
        "step_limit_path": components.step_limit,
        "templates": components.templates,
    }


def reach_context(harness: Harness) -> ProposalContext:
    """A context without evidence (no clusters, no runs): what ``Proposer.reaches`` is asked with."""
    return ProposalContext(**static_context(harness), clusters=())


def build_context(
    current: Harness,
    clusters: Sequence[Cluster],
    batch: Sequence[Task],
    results: Sequence[TaskResult],
    *,
    references: dict[str, Trajectory],
    rejected: tuple[str, ...],
    quality: QualityConfig,
    model: str,
    strikes: dict[str, int] | None = None,
) -> ProposalContext:
    failed_ids = {s.task_id for c in clusters for s in c.signals}
    tasks = {t.id: t for t in batch}
    prompt = current.assembled_prompt()
    return ProposalContext(
        **static_context(current),
        clusters=tuple(clusters),
        instructions={tid: tasks[tid].opening_in(references.get(tid)) for tid in tasks},
        references={tid: reference_actions(references[tid]) for tid in failed_ids if tid in references},
        rejected=rejected,
        failed_runs={r.task_id: reference_actions(r.trajectory) for r in results if not r.passed},
        passed_runs={r.task_id: reference_actions(r.trajectory) for r in results if r.passed},
        limits=PromptLimits(
            max_prompt_chars=quality.max_prompt_chars,
            max_prompt_tokens=quality.max_prompt_tokens,
            max_new_examples=quality.max_new_examples,
        ),
        prompt_chars=len(prompt),
        prompt_tokens=count_tokens(prompt, model),
        splits={tid: str(task.split) for tid, task in tasks.items()},
        forecast_misses={r.task_id: misses for r in results if (misses := forecast_misses(r.trajectory))},
        strikes=dict(strikes or {}),
        task_tools={
            tool.name: {"description": tool.description, "parameters": tool.parameters}
            for task in batch
            for tool in task.tools
        },
        train_calls=train_calls(batch, references),
    )


def train_calls(
    batch: Sequence[Task], references: dict[str, Trajectory]
) -> dict[str, tuple[tuple[str, dict[str, Any]], ...]]:
    """tool -> (task id, arguments) of every call in the references of the batch's train tasks."""
    calls: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    for task in batch:
        reference = references.get(task.id)
        if reference is None or str(task.split) != "train":
            continue
        for action in reference_actions(reference):
            calls.setdefault(action.tool, []).append((task.id, action.arguments))
    return {tool: tuple(found) for tool, found in calls.items()}
