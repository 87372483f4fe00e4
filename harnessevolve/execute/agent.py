"""The agent loop: model -> tool calls -> observations, until submit or the step limit.

Every model turn becomes an ATIF step. Nothing the model does is a crash: malformed replies,
unknown tools and bad arguments are recorded on the step (``extra.error``) and shown to the model.

Multi-turn tasks (``turns``, or a simulated ``user``): the agent ends its turn by calling
``submit`` or by replying without a tool call; the next user turn is then delivered as a new
``user`` step (``extra.turn``, from 0) and the conversation goes on. ``loop.max_steps`` counts
model calls per user turn. A one-turn task keeps the original rule: a reply without a tool call
is answered with a nudge, and only ``submit`` ends the run.

Tasks with Python or MCP tools get a tool server for the rollout (``tool_server.py``); its state
after each user turn is kept in ``extra.tool_states`` (one per turn), its call log in
``extra.tool_calls`` and each turn's count of calls in ``extra.turn_call_counts``: the inputs of
Python checks.
"""

from __future__ import annotations

import contextlib
import json
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from harnessevolve import __version__
from harnessevolve.core.atif import ObservationResult, Step, ToolCall, Trajectory
from harnessevolve.core.enums import StopReason
from harnessevolve.core.tasks import Task
from harnessevolve.execute.rollout_tools import OfferedTool, dispatch, rollout_tools
from harnessevolve.sandbox.base import Sandbox, resolve_sandbox
from harnessevolve.execute.simulated_user import next_user_turn
from harnessevolve.execute.tool_server import ToolServer, ToolServerError, agent_view, with_read_only
from harnessevolve.harness.model import Harness
from harnessevolve.models import ModelReply, acomplete

NO_TOOL_NUDGE = "You did not call a tool. Call one of the tools; call submit with your final answer."
PARSE_NUDGE = "Your reply could not be read as a tool call ({error}). Reply with exactly one tool call."


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


def _agent_step(
    step_id: int,
    reply: ModelReply,
    model: str,
    *,
    error: str | None = None,
    calls: list[ToolCall] | None = None,
    observations: list[ObservationResult] | None = None,
) -> Step:
    """The agent step of one model reply: its tool calls and their observations, usage, token ids
    and ``extra.error`` when something went wrong."""
    return Step(
        step_id,
        "agent",
        reply.content,
        tool_calls=tuple(calls or ()),
        observations=tuple(observations or ()),
        metrics=_metrics(reply),
        extra={**({"error": error} if error else {}), **_token_ids(reply)},
        timestamp=_now(),
        model_name=model,
    )


class _Rollout:
    """The mutable state of one rollout while the loop runs."""

    def __init__(self, system: str) -> None:
        self.messages: list[dict[str, Any]] = [{"role": "system", "content": system}]
        self.steps: list[Step] = [Step(1, "system", system, timestamp=_now())]
        self.answer: str | None = None
        self.last_end = ""
        """How the agent ended its last turn: ``submit`` or ``message``."""
        self.closing = ""
        """The agent's last message content (what a simulated user answers)."""
        self.states: list[Any] = []
        self.call_counts: list[int] = []
        self.exchanges: list[tuple[str, str]] = []
        self.offered: tuple[dict[str, Any], ...] = ()
        """The OpenAI-style definitions of every tool offered (harness and task tools)."""

    def add_user(self, text: str, extra: dict[str, Any]) -> None:
        self.messages.append({"role": "user", "content": text})
        self.steps.append(Step(len(self.steps) + 1, "user", text, extra=extra, timestamp=_now()))


async def run_agent(
    harness: Harness, task: Task, workspace: Path, *, model: str, seed: int, sandbox: Sandbox | None = None
) -> Trajectory:
    """Run the harness's agent on ``task`` in ``workspace``; returns the full trajectory.

    Its commands run in ``sandbox`` (the default sandbox when None), with the task's read-only
    paths added; Python and MCP tools run in a tool server inside that sandbox.
    """
    started = time.monotonic()
    if task.read_only_paths or task.needs_tool_server:
        sandbox = with_read_only(resolve_sandbox(sandbox), task.read_only_paths)
    commands = agent_view(sandbox)  # the agent's commands never see the benchmark's code paths
    multi_turn = bool(task.turns) or task.user is not None
    rollout = _Rollout(harness.assembled_prompt())
    extra: dict[str, Any] = {}
    stop: str | None = None
    if task.instruction:
        rollout.add_user(task.instruction, {"turn": 0} if multi_turn else {})
    else:  # a simulated user opens the conversation
        stop = await _simulated_turn(task, rollout, 0, seed)
    async with contextlib.AsyncExitStack() as stack:
        server = None
        if stop is None and task.needs_tool_server:
            try:
                server = await stack.enter_async_context(
                    ToolServer.start(
                        task,
                        workspace,
                        sandbox=sandbox,
                        timeout_s=harness.loop.command_timeout_s,
                        limit=harness.loop.tool_output_limit,
                    )
                )
            except ToolServerError as exc:
                extra["error"] = f"tool_error: {exc}"[:2000]
                stop = StopReason.TOOL_ERROR
        tools = rollout_tools(harness, task, server.offered if server else [])
        rollout.offered = tuple(t.spec.openai_schema() for t in tools.values())
        turn = 0
        while stop is None:
            stop = await _agent_turn(
                harness,
                tools,
                rollout,
                workspace,
                model=model,
                seed=seed,
                server=server,
                sandbox=commands,
                multi_turn=multi_turn,
            )
            if server is not None:
                state = await server.state()
                rollout.states.append(state["objects"] if state else None)
                rollout.call_counts.append(len(state["calls"]) if state else -1)
                if state:
                    extra["tool_calls"] = state["calls"]
            if stop is not None:
                break
            rollout.exchanges.append((rollout.steps[_last_user(rollout.steps)].message, rollout.closing))
            turn += 1
            if task.user is not None:
                stop = await _simulated_turn(task, rollout, turn, seed)
            elif turn < len(task.turns):
                rollout.add_user(task.turns[turn], {"turn": turn})
            else:
                stop = StopReason.SUBMITTED if rollout.last_end == "submit" else StopReason.ENDED
    if server is not None:
        extra.update(tool_states=rollout.states, turn_call_counts=rollout.call_counts)
    if multi_turn:
        extra["turns"] = sum(1 for s in rollout.steps if s.source == "user" and "turn" in s.extra)
    return _trajectory(harness, task, model, seed, rollout, stop, started, extra)


def _last_user(steps: list[Step]) -> int:
    return max(i for i, s in enumerate(steps) if s.source == "user")


async def _simulated_turn(task: Task, rollout: _Rollout, turn: int, seed: int) -> str | None:
    """Ask the simulated user for turn ``turn``: None when it was delivered, else the stop reason."""
    user = task.user
    assert user is not None
    if turn >= user.max_turns:
        return StopReason.USER_TURN_LIMIT
    try:
        reply = await next_user_turn(user, rollout.exchanges, seed=seed + 10_000 + turn)
    except Exception as exc:  # noqa: BLE001 - a failing user model is recorded, never raised
        error = f"user_error: {type(exc).__name__}: {exc}".splitlines()[0][:500]
        rollout.steps.append(Step(len(rollout.steps) + 1, "user", "", extra={"turn": turn, "error": error}))
        return StopReason.USER_ERROR
    if reply.stopped:
        return StopReason.SUBMITTED if rollout.last_end == "submit" else StopReason.ENDED
    if not reply.text:
        error = "user_error: the simulated user wrote nothing"
        rollout.steps.append(Step(len(rollout.steps) + 1, "user", "", extra={"turn": turn, "error": error}))
        return StopReason.USER_ERROR
    metrics = {
        "prompt_tokens": reply.prompt_tokens,
        "completion_tokens": reply.completion_tokens,
        "cost_usd": reply.cost_usd,
    }
    rollout.add_user(reply.text, {"turn": turn, "simulated_user": user.model, "user_metrics": metrics})
    return None


async def _agent_turn(
    harness: Harness,
    tools: dict[str, OfferedTool],
    rollout: _Rollout,
    workspace: Path,
    *,
    model: str,
    seed: int,
    server: ToolServer | None,
    sandbox: Sandbox | None,
    multi_turn: bool,
) -> str | None:
    """Model calls until the agent ends its turn; None when it did (multi-turn), else why the
    rollout stops (``submitted`` for a one-turn task, the step limit, a model error ...)."""
    loop = harness.loop
    schemas = [t.spec.openai_schema() for t in tools.values()]
    messages, steps = rollout.messages, rollout.steps
    # Grammar-constrained tool calls are a feature of the embedded provider only.
    extra_params = {"grammar_tools": True} if loop.json_grammar and model.startswith("local/") else None
    for _ in range(loop.max_steps):
        call_index = sum(1 for s in steps if s.source == "agent")
        try:
            reply = await acomplete(
                model,
                messages,
                tools=schemas,
                temperature=loop.temperature,
                max_tokens=loop.max_tokens,
                seed=seed + call_index,
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
            return StopReason.MODEL_ERROR
        step_id = len(steps) + 1
        if multi_turn and not reply.parse_error and not reply.tool_calls:
            # A reply without a tool call ends the agent's turn: the user speaks next.
            steps.append(_agent_step(step_id, reply, model))
            messages.append({"role": "assistant", "content": reply.content})
            rollout.last_end, rollout.closing = "message", reply.content or ""
            return None
        if reply.parse_error or not reply.tool_calls:
            error = f"parse_error: {reply.parse_error}" if reply.parse_error else "no_tool_call"
            steps.append(_agent_step(step_id, reply, model, error=error))
            messages.append({"role": "assistant", "content": reply.content})
            nudge = PARSE_NUDGE.format(error=reply.parse_error) if reply.parse_error else NO_TOOL_NUDGE
            messages.append({"role": "user", "content": nudge})
            continue
        calls, observations, errors = [], [], []
        submitted = False
        for call in reply.tool_calls:
            tool = tools.get(call.name)
            arguments = call.arguments if call.arguments is not None else {}
            calls.append(ToolCall(call.id, call.name, arguments))
            if tool is None:
                output = f"error: unknown tool {call.name!r}; tools: {', '.join(tools)}"
                errors.append(f"unknown_tool: {call.name}")
            elif call.arguments is None:
                output = f"error: arguments of {call.name} are not a JSON object: {call.raw_arguments[:200]}"
                errors.append(f"bad_arguments: {call.name}")
            else:
                result = await dispatch(
                    tool,
                    arguments,
                    workspace,
                    server=server,
                    timeout_s=loop.command_timeout_s,
                    limit=loop.tool_output_limit,
                    sandbox=sandbox,
                )
                output = result.output
                if result.error:
                    errors.append(f"tool_error: {result.error}")
                if result.submitted is not None:
                    rollout.answer = result.submitted
                    submitted = True
            observations.append(ObservationResult(call.id, output))
        failed = "; ".join(errors) or None
        steps.append(_agent_step(step_id, reply, model, error=failed, calls=calls, observations=observations))
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
        if submitted:
            rollout.last_end, rollout.closing = "submit", reply.content or rollout.answer or ""
            return None if multi_turn else StopReason.SUBMITTED
        if repeats_last(steps, loop.stop_on_repeat):
            return StopReason.REPEATED
    return StopReason.STEP_LIMIT


def _trajectory(
    harness: Harness,
    task: Task,
    model: str,
    seed: int,
    rollout: _Rollout,
    stop: str | None,
    started: float,
    extra: dict[str, Any],
) -> Trajectory:
    steps = rollout.steps
    agent_steps = [s for s in steps if s.source == "agent"]
    return Trajectory(
        session_id=uuid.uuid4().hex,
        # the functions offered (ATIF v1.5): the evaluator tells an unknown tool from a wrong one
        tool_definitions=rollout.offered,
        agent_name="harnessevolve",
        agent_version=__version__,
        model_name=model,
        steps=tuple(steps),
        extra={
            "task_id": task.id,
            "stop_reason": stop or StopReason.STEP_LIMIT,
            "answer": rollout.answer,
            "harness": harness.name,
            "harness_hash": harness.content_hash(),
            "seed": seed,
            "wall_s": round(time.monotonic() - started, 3),
            **extra,
        },
        final_metrics={
            "total_prompt_tokens": sum(s.metrics.get("prompt_tokens", 0) for s in agent_steps),
            "total_completion_tokens": sum(s.metrics.get("completion_tokens", 0) for s in agent_steps),
            "total_cost_usd": sum(s.metrics.get("cost_usd", 0.0) for s in agent_steps),
            "total_steps": len(steps),
        },
    )
