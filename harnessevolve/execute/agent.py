"""The multi-turn agent loop: model -> tool calls -> observations, until submit or the step limit.

Every turn becomes an ATIF step. Nothing the model does is a crash: malformed replies, unknown
tools and bad arguments are recorded on the step (``extra.error``) and shown to the model.
"""

from __future__ import annotations

import json
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from harnessevolve import __version__
from harnessevolve.core.atif import ObservationResult, Step, ToolCall, Trajectory
from harnessevolve.core.tasks import Task
from harnessevolve.execute.sandbox import Sandbox
from harnessevolve.execute.tools import run_tool
from harnessevolve.harness.model import Harness
from harnessevolve.models import ModelReply, acomplete

NO_TOOL_NUDGE = "You did not call a tool. Call one of the tools; call submit with your final answer."
PARSE_NUDGE = "Your reply could not be read as a tool call ({error}). Reply with exactly one tool call."


class StopReason:
    """Why a run ended (``extra.stop_reason`` of its trajectory)."""

    SUBMITTED = "submitted"
    STEP_LIMIT = "step_limit"
    REPEATED = "repeated"
    MODEL_ERROR = "model_error"


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def repeats_last(steps: list[Step], times: int) -> bool:
    """True when the last ``times`` agent turns made the very same tool calls (0 disables)."""
    if times < 2:
        return False
    recent = [s for s in steps if s.source == "agent"][-times:]
    if len(recent) < times or not recent[-1].tool_calls:
        return False
    key = [(c.function_name, c.arguments) for c in recent[-1].tool_calls]
    return all([(c.function_name, c.arguments) for c in s.tool_calls] == key for s in recent)


def _metrics(reply: ModelReply) -> dict[str, Any]:
    return {
        "prompt_tokens": reply.prompt_tokens,
        "completion_tokens": reply.completion_tokens,
        "cost_usd": reply.cost_usd,
        # Provider faults that were retried before this reply (rate limits, 5xx, timeouts).
        **({"extra": {"retries": reply.extra["retries"]}} if reply.extra.get("retries") else {}),
    }


def _token_ids(reply: ModelReply) -> dict[str, Any]:
    """The exact prompt/completion token ids when the provider returns them (``local/torch:``),
    kept in the step's ``extra`` for the policy trainer."""
    return {k: reply.extra[k] for k in ("prompt_token_ids", "completion_token_ids") if k in reply.extra}


async def run_agent(
    harness: Harness, task: Task, workspace: Path, *, model: str, seed: int, sandbox: Sandbox | None = None
) -> Trajectory:
    """Run the harness's agent on ``task`` in ``workspace``; returns the full trajectory.

    Its commands run in ``sandbox`` (the default sandbox when None).
    """
    loop = harness.loop
    tools = [t.openai_schema() for t in harness.tools]
    system = harness.assembled_prompt()
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": system},
        {"role": "user", "content": task.instruction},
    ]
    steps = [Step(1, "system", system, timestamp=_now()), Step(2, "user", task.instruction, timestamp=_now())]
    answer: str | None = None
    stop = StopReason.STEP_LIMIT
    # Grammar-constrained tool calls are a feature of the embedded provider only.
    extra_params = {"grammar_tools": True} if loop.json_grammar and model.startswith("local/") else None
    started = time.monotonic()
    for turn in range(loop.max_steps):
        try:
            reply = await acomplete(
                model,
                messages,
                tools=tools,
                temperature=loop.temperature,
                max_tokens=loop.max_tokens,
                seed=seed + turn,
                extra_params=extra_params,
            )
        except Exception as exc:  # noqa: BLE001 - provider faults are recorded, never raised
            text = f"{type(exc).__name__}: {exc}".splitlines()[0][:500]
            steps.append(
                Step(
                    len(steps) + 1,
                    "agent",
                    "",
                    extra={
                        "error": f"model_error: {text}",
                        "retries": getattr(exc, "harnessevolve_retries", []),
                    },
                    timestamp=_now(),
                    model_name=model,
                )
            )
            stop = StopReason.MODEL_ERROR
            break
        step_id = len(steps) + 1
        if reply.parse_error or not reply.tool_calls:
            error = f"parse_error: {reply.parse_error}" if reply.parse_error else "no_tool_call"
            steps.append(
                Step(
                    step_id,
                    "agent",
                    reply.content,
                    metrics=_metrics(reply),
                    extra={"error": error, **_token_ids(reply)},
                    timestamp=_now(),
                    model_name=model,
                )
            )
            messages.append({"role": "assistant", "content": reply.content})
            nudge = PARSE_NUDGE.format(error=reply.parse_error) if reply.parse_error else NO_TOOL_NUDGE
            messages.append({"role": "user", "content": nudge})
            continue
        calls, observations, errors = [], [], []
        for call in reply.tool_calls:
            spec = harness.tool(call.name)
            arguments = call.arguments if call.arguments is not None else {}
            calls.append(ToolCall(call.id, call.name, arguments))
            if spec is None:
                output = (
                    f"error: unknown tool {call.name!r}; tools: {', '.join(t.name for t in harness.tools)}"
                )
                errors.append(f"unknown_tool: {call.name}")
            elif call.arguments is None:
                output = f"error: arguments of {call.name} are not a JSON object: {call.raw_arguments[:200]}"
                errors.append(f"bad_arguments: {call.name}")
            else:
                result = await run_tool(
                    spec,
                    arguments,
                    workspace,
                    timeout_s=loop.command_timeout_s,
                    limit=loop.tool_output_limit,
                    sandbox=sandbox,
                )
                output = result.output
                if result.error:
                    errors.append(f"tool_error: {result.error}")
                if result.submitted is not None:
                    answer = result.submitted
            observations.append(ObservationResult(call.id, output))
        extra = {"error": "; ".join(errors)} if errors else {}
        extra.update(_token_ids(reply))
        steps.append(
            Step(
                step_id,
                "agent",
                reply.content,
                tool_calls=tuple(calls),
                observations=tuple(observations),
                metrics=_metrics(reply),
                extra=extra,
                timestamp=_now(),
                model_name=model,
            )
        )
        messages.append(
            {
                "role": "assistant",
                "content": reply.content or None,
                "tool_calls": [
                    {
                        "id": c.tool_call_id,
                        "type": "function",
                        "function": {"name": c.function_name, "arguments": json.dumps(c.arguments)},
                    }
                    for c in calls
                ],
            }
        )
        note = f"\n{loop.observation_note}" if loop.observation_note else ""
        messages += [
            {"role": "tool", "tool_call_id": o.source_call_id, "content": o.content + note}
            for o in observations
        ]
        if answer is not None:
            stop = StopReason.SUBMITTED
            break
        if repeats_last(steps, loop.stop_on_repeat):
            stop = StopReason.REPEATED
            break
    agent_steps = [s for s in steps if s.source == "agent"]
    return Trajectory(
        session_id=uuid.uuid4().hex,
        agent_name="harnessevolve",
        agent_version=__version__,
        model_name=model,
        steps=tuple(steps),
        extra={
            "task_id": task.id,
            "stop_reason": stop,
            "answer": answer,
            "harness": harness.name,
            "harness_hash": harness.content_hash(),
            "seed": seed,
            "wall_s": round(time.monotonic() - started, 3),
        },
        final_metrics={
            "total_prompt_tokens": sum(s.metrics.get("prompt_tokens", 0) for s in agent_steps),
            "total_completion_tokens": sum(s.metrics.get("completion_tokens", 0) for s in agent_steps),
            "total_cost_usd": sum(s.metrics.get("cost_usd", 0.0) for s in agent_steps),
            "total_steps": len(steps),
        },
    )
