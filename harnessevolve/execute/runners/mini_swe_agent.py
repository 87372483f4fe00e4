"""The ``mini-swe-agent`` runner: mini-swe-agent's ``DefaultAgent``, configured by the harness.

The harness holds mini-swe-agent's own YAML config (``agent.config``: system/instance templates,
step and cost limits, environment settings, observation and format-error templates), checked at
load time by ``harness/mini_config.py``. Each rollout runs ``mini_driver.py`` inside the sandbox as
an external agent (``runners/external.py``): its commands run in the sandbox, its model calls go
through the rollout's endpoint to harnessevolve's litellm layer (embedded, scripted or any model).

Its messages become ATIF: the system and instance messages are the system and user steps, each
model reply an agent step whose bash actions are tool calls with their observations, a format
error a user step marked ``format_error``, and the submission the answer of the finishing step.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from harnessevolve.core.atif import ObservationResult, Step, ToolCall, Trajectory
from harnessevolve.core.enums import StopReason
from harnessevolve.core.errors import TrajectoryError
from harnessevolve.execute.runners.agent_sandbox import CONTROL_MOUNT
from harnessevolve.execute.runners.external import ExternalAgent, ExternalRunner
from harnessevolve.harness.agent_config import HARNESS_MOUNT
from harnessevolve.harness.model import Harness

DRIVER = Path(__file__).with_name("mini_driver.py")
RECORD = "mini_trajectory.json"
"""What ``mini_driver.py`` saves in the out folder (read back by ``external.py``, never through a link)."""
EXIT_TO_STOP = {
    "Submitted": StopReason.SUBMITTED,
    "LimitsExceeded": StopReason.STEP_LIMIT,
    "TimeExceeded": StopReason.AGENT_TIMEOUT,
    "RepeatedFormatError": StopReason.FORMAT_ERROR,
}
"""mini-swe-agent's exit statuses as stop reasons (anything else: the exception's name, crashed)."""


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("mini-swe-agent")
    except Exception:  # noqa: BLE001 - not installed: the rollout says so when it runs
        return "missing"


class MiniSweAgentRunner(ExternalRunner):
    kind = "mini-swe-agent"
    version = f"1+mini-swe-agent-{_version()}"

    def agent(self, harness: Harness, model: str) -> ExternalAgent:
        return ExternalAgent(
            self.kind,
            self.version,
            ("python", f"{CONTROL_MOUNT}/{DRIVER.name}", f"{HARNESS_MOUNT}/{harness.agent.config}"),
            {},
            "mini-swe-agent",
            files=(DRIVER,),
            record=RECORD,
            convert=lambda data: mini_to_atif(data, model),
        )


def _text(content: Any) -> str:
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return "" if content is None else str(content)


def mini_to_atif(data: bytes, model: str) -> Trajectory:
    """mini-swe-agent's saved trajectory (the bytes of ``RECORD``) as ATIF; ``extra.answer`` is the
    submission, ``extra.stop_hint`` the stop reason its exit status means."""
    try:
        doc = json.loads(data.decode("utf-8", errors="replace"))
        messages = doc["messages"]
        info = doc.get("info", {})
    except (ValueError, KeyError, TypeError, RecursionError) as exc:
        raise TrajectoryError(f"mini-swe-agent's trajectory is unreadable: {exc}", file=RECORD) from None
    steps: list[Step] = []
    owner: dict[str, int] = {}
    exit_status, submission = str(info.get("exit_status", "")), None
    for msg in messages if isinstance(messages, list) else []:
        if not isinstance(msg, dict):
            continue
        role, extra = msg.get("role"), msg.get("extra") or {}
        step_id = len(steps) + 1
        if role == "system":
            steps.append(Step(step_id, "system", _text(msg.get("content"))))
        elif role == "user":
            marks = {"error": "format_error"} if extra.get("interrupt_type") == "FormatError" else {}
            steps.append(Step(step_id, "user", _text(msg.get("content")), extra=marks))
        elif role == "assistant":
            calls = tuple(
                ToolCall(
                    str(a.get("tool_call_id", f"action-{step_id}-{i}")),
                    "bash",
                    {"command": a.get("command", "")},
                )
                for i, a in enumerate(extra.get("actions", []))
            )
            steps.append(
                Step(step_id, "agent", _text(msg.get("content")), tool_calls=calls, model_name=model)
            )
            owner.update({c.tool_call_id: len(steps) - 1 for c in calls})
        elif role == "tool" and msg.get("tool_call_id") in owner:
            index = owner.pop(msg["tool_call_id"])
            result = ObservationResult(msg["tool_call_id"], _text(msg.get("content")))
            steps[index] = replace(steps[index], observations=(*steps[index].observations, result))
        elif role == "exit":
            exit_status = str(extra.get("exit_status", exit_status))
            submission = extra.get("submission")
    if submission is not None and owner:  # the submitting command has no observation of its own
        index = max(owner.values())
        call_id = next(k for k, v in owner.items() if v == index)
        result = ObservationResult(call_id, f"[submitted]\n{submission}")
        steps[index] = replace(steps[index], observations=(*steps[index].observations, result))
    stop = EXIT_TO_STOP.get(exit_status, StopReason.AGENT_CRASHED if exit_status else StopReason.NO_ANSWER)
    answer = submission.strip() if isinstance(submission, str) and exit_status == "Submitted" else None
    return Trajectory(
        session_id="mini-swe-agent",
        agent_name="mini-swe-agent",
        agent_version=str(info.get("mini_version", "")),
        model_name=model,
        steps=tuple(steps),
        extra={"answer": answer, "stop_hint": stop, "mini_exit_status": exit_status},
    )
