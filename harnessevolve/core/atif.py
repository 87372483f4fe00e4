"""Trajectories in ATIF (Agent Trajectory Interchange Format, v1.0 to v1.5): in-memory values and JSON.

v1.5 adds ``agent.tool_definitions`` (the OpenAI-style function definitions the agent was offered);
a trajectory that carries them is written as v1.5, every other one as v1.4. A newer version
(``ATIF-v1.6`` and up, ``ATIF-v2.x``) is refused with "newer than supported".
Tool-call ``arguments`` given as a string (as OpenAI chat does) are parsed as JSON; a string that
is not a JSON object is kept as ``ToolCall.raw_arguments`` (with empty ``arguments``) so the
evaluator can name it a format error instead of the reader refusing the whole file.

Beyond the JSON Schema, loading checks what a schema cannot say: step ids count up from 1, the
agent-only fields (``tool_calls``, ``metrics``, ``model_name``, ``reasoning_*``) appear on agent
steps only, and every observation's ``source_call_id`` names a tool call of its own step.

Our own additions live in the format's ``extra`` objects: on a step, ``extra.error`` (a tool or
parse error) and ``extra.parse_error``; at the root, ``extra.task_id``, ``extra.stop_reason``,
``extra.answer`` and ``extra.harness_rev``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from harnessevolve.core.errors import TrajectoryError
from harnessevolve.core.files import atomic_write_json, read_json
from harnessevolve.core.redact import redact_obj
from harnessevolve.core.schema import check

ATIF_VERSION = "ATIF-v1.4"
ATIF_LATEST = "ATIF-v1.5"
"""The newest version read; the one written when a trajectory has ``tool_definitions``."""


@dataclass(frozen=True)
class ToolCall:
    tool_call_id: str
    function_name: str
    arguments: dict[str, Any]
    raw_arguments: str | None = None
    """The argument text when it was not a JSON object (then ``arguments`` is empty)."""


@dataclass(frozen=True)
class ObservationResult:
    source_call_id: str | None
    content: str


@dataclass(frozen=True)
class Step:
    step_id: int
    source: str  # "system" | "user" | "agent"
    message: str
    tool_calls: tuple[ToolCall, ...] = ()
    observations: tuple[ObservationResult, ...] = ()
    metrics: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    timestamp: str | None = None
    model_name: str | None = None
    reasoning_content: str | None = None
    reasoning_effort: str | float | None = None

    @property
    def is_action(self) -> bool:
        return self.source == "agent"

    @property
    def is_user_turn(self) -> bool:
        """A user message that opens a turn: not a runtime component's note to the agent (a user
        step with ``extra.component``, e.g. a recovery rule's; docs/runtime.md)."""
        return self.source == "user" and "component" not in self.extra


@dataclass(frozen=True)
class Trajectory:
    session_id: str
    agent_name: str
    agent_version: str
    model_name: str
    steps: tuple[Step, ...]
    extra: dict[str, Any] = field(default_factory=dict)
    final_metrics: dict[str, Any] = field(default_factory=dict)
    notes: str = ""
    agent_extra: dict[str, Any] = field(default_factory=dict)
    tool_definitions: tuple[dict[str, Any], ...] = ()
    """ATIF v1.5 ``agent.tool_definitions``: the functions the agent was offered (OpenAI style)."""

    @property
    def agent_steps(self) -> tuple[Step, ...]:
        return tuple(s for s in self.steps if s.source == "agent")

    @property
    def task_id(self) -> str | None:
        return self.extra.get("task_id")

    def with_extra(self, **values: Any) -> Trajectory:
        return replace(self, extra={**self.extra, **values})

    def to_dict(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "schema_version": ATIF_LATEST if self.tool_definitions else ATIF_VERSION,
            "session_id": self.session_id,
            "agent": self._agent_dict(),
            "steps": [_step_to_dict(s) for s in self.steps],
        }
        if self.notes:
            doc["notes"] = self.notes
        if self.final_metrics:
            doc["final_metrics"] = dict(self.final_metrics)
        if self.extra:
            doc["extra"] = dict(self.extra)
        return doc

    def _agent_dict(self) -> dict[str, Any]:
        agent: dict[str, Any] = {"name": self.agent_name, "version": self.agent_version}
        agent["model_name"] = self.model_name
        if self.tool_definitions:
            agent["tool_definitions"] = [dict(t) for t in self.tool_definitions]
        if self.agent_extra:
            agent["extra"] = dict(self.agent_extra)
        return agent


AGENT_ONLY_FIELDS = ("model_name", "reasoning_effort", "reasoning_content", "tool_calls", "metrics")


def _step_to_dict(step: Step) -> dict[str, Any]:
    doc: dict[str, Any] = {"step_id": step.step_id, "source": step.source, "message": step.message}
    if step.timestamp:
        doc["timestamp"] = step.timestamp
    if step.model_name:
        doc["model_name"] = step.model_name
    if step.reasoning_effort is not None:
        doc["reasoning_effort"] = step.reasoning_effort
    if step.reasoning_content is not None:
        doc["reasoning_content"] = step.reasoning_content
    if step.tool_calls:
        doc["tool_calls"] = [
            {
                "tool_call_id": c.tool_call_id,
                "function_name": c.function_name,
                "arguments": c.raw_arguments if c.raw_arguments is not None else c.arguments,
            }
            for c in step.tool_calls
        ]
    if step.observations:
        doc["observation"] = {
            "results": [{"source_call_id": o.source_call_id, "content": o.content} for o in step.observations]
        }
    if step.metrics:
        doc["metrics"] = dict(step.metrics)
    if step.extra:
        doc["extra"] = dict(step.extra)
    return doc


def from_dict(doc: Any, *, file: str = "<trajectory>", strict: bool = True) -> Trajectory:
    """Build a trajectory from parsed JSON; anything not valid ATIF raises ``TrajectoryError``.

    ``strict=False`` (what the evaluator reads with) keeps an observation whose ``source_call_id``
    names no call of its step instead of refusing the file; the evaluator names that gap."""
    _check_version(doc, file)
    check(doc, "trajectory", file=file, error=TrajectoryError)
    steps = []
    for i, s in enumerate(doc["steps"]):
        if s["step_id"] != i + 1:
            raise TrajectoryError(
                f"step_id {s['step_id']} out of order (expected {i + 1})",
                file=file,
                field=f"steps[{i}].step_id",
            )
        _check_step(s, i, file, strict)
        steps.append(
            Step(
                step_id=s["step_id"],
                source=s["source"],
                message=s["message"],
                tool_calls=tuple(_tool_call(c) for c in s.get("tool_calls", [])),
                observations=tuple(
                    ObservationResult(o.get("source_call_id"), o.get("content") or "")
                    for o in s.get("observation", {}).get("results", [])
                ),
                metrics=s.get("metrics", {}),
                extra=s.get("extra", {}),
                timestamp=s.get("timestamp"),
                model_name=s.get("model_name"),
                reasoning_content=s.get("reasoning_content"),
                reasoning_effort=s.get("reasoning_effort"),
            )
        )
    agent = doc["agent"]
    return Trajectory(
        session_id=doc["session_id"],
        agent_name=agent["name"],
        agent_version=agent["version"],
        model_name=agent.get("model_name", ""),
        steps=tuple(steps),
        extra=doc.get("extra", {}),
        final_metrics=doc.get("final_metrics", {}),
        notes=doc.get("notes", ""),
        agent_extra=agent.get("extra", {}),
        tool_definitions=tuple(agent.get("tool_definitions") or ()),
    )


_VERSION = re.compile(r"^ATIF-v(\d+)\.(\d+)$")


def _version(text: str) -> tuple[int, int] | None:
    match = _VERSION.match(text)
    return (int(match.group(1)), int(match.group(2))) if match else None


def _check_version(doc: Any, file: str) -> None:
    """Refuse a version newer than ``ATIF_LATEST`` (a newer major or minor) before the schema does,
    so the message says what is wrong."""
    if not isinstance(doc, dict) or not isinstance(doc.get("schema_version"), str):
        return  # the schema names the missing or mistyped field
    version = _version(doc["schema_version"])
    latest = _version(ATIF_LATEST)
    if version is not None and latest is not None and version > latest:
        raise TrajectoryError(
            f"{doc['schema_version']} is newer than supported (this version reads up to {ATIF_LATEST})",
            file=file,
            field="schema_version",
            hint="upgrade harnessevolve, or convert the trajectory to ATIF-v1.5",
        )


def _tool_call(doc: dict[str, Any]) -> ToolCall:
    arguments = doc["arguments"]
    if isinstance(arguments, dict):
        return ToolCall(doc["tool_call_id"], doc["function_name"], arguments)
    try:
        parsed = json.loads(arguments)
    except (TypeError, ValueError):
        parsed = None
    if isinstance(parsed, dict):
        return ToolCall(doc["tool_call_id"], doc["function_name"], parsed)
    return ToolCall(doc["tool_call_id"], doc["function_name"], {}, raw_arguments=str(arguments))


def _check_step(step: dict[str, Any], index: int, file: str, strict: bool = True) -> None:
    """The rules of ATIF that its JSON Schema cannot express."""
    if step["source"] != "agent":
        for name in AGENT_ONLY_FIELDS:
            if name in step:
                raise TrajectoryError(
                    f"{name} is only allowed on agent steps (this step's source is {step['source']!r})",
                    file=file,
                    field=f"steps[{index}].{name}",
                )
    call_ids = {c["tool_call_id"] for c in step.get("tool_calls", [])}
    for j, result in enumerate(step.get("observation", {}).get("results", [])):
        ref = result.get("source_call_id")
        if strict and ref is not None and ref not in call_ids:
            raise TrajectoryError(
                f"source_call_id {ref!r} names no tool call of this step",
                file=file,
                field=f"steps[{index}].observation.results[{j}].source_call_id",
            )


def load(path: Path) -> Trajectory:
    """Any file, any bytes: a trajectory or ``TrajectoryError`` naming the file (and field)."""
    doc = read_json(path, error=TrajectoryError)
    try:
        return from_dict(doc, file=str(path))
    except RecursionError:
        raise TrajectoryError(
            "nested too deeply to check", file=str(path), hint="no valid trajectory nests that deep"
        ) from None


def save(trajectory: Trajectory, path: Path) -> None:
    atomic_write_json(path, redact_obj(trajectory.to_dict()))
