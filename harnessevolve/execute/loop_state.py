"""The builtin loop's state while one rollout runs (``Rollout``), what a reply's actions did
(``Actions``), the cut points where runtime components hook in (``LoopHooks``), why a rollout
stops (``Stopped``), and the trajectory made of it at the end. The loop itself is ``execute/agent.py``."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol

from harnessevolve import __version__
from harnessevolve.core.atif import ObservationResult, Step, ToolCall, Trajectory
from harnessevolve.core.enums import StopReason
from harnessevolve.core.tasks import Task
from harnessevolve.core.transcript import Transcript
from harnessevolve.execute.rollout_tools import OfferedTool
from harnessevolve.harness.model import Harness
from harnessevolve.models import ModelReply

if TYPE_CHECKING:
    from harnessevolve.harness.model import LoopSettings


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


class TurnEnded(Exception):
    """The agent ended its user turn (multi-turn tasks): the user speaks next."""


class Stopped(Exception):
    """The rollout ends, for ``reason`` (``extra.stop_reason`` of the trajectory)."""

    def __init__(self, reason: StopReason) -> None:
        super().__init__(str(reason))
        self.reason = reason


MAX_CYCLE = 3
"""The longest cycle of turns ``repeats_last`` sees as one repeated block (ls, rm, ls, rm, ...)."""


def _signature(step: Step) -> list[tuple[str, Any]]:
    """What a turn did, for ``repeats_last``: its calls, or an unreadable reply's text."""
    if step.tool_calls:
        return [(c.function_name, c.arguments) for c in step.tool_calls]
    error = (step.extra or {}).get("error")
    if isinstance(error, str) and error.startswith("parse_error") and (step.message or "").strip():
        return [("", str(step.message).strip())]
    return []


def repeats_last(steps: list[Step], times: int, max_period: int = MAX_CYCLE) -> bool:
    """True when the last agent turns repeat one block of tool calls ``times`` times in a row: the
    very same calls each turn (a block of one turn), or a cycle of up to ``max_period`` turns
    (``ls``, ``rm``, ``ls``, ``rm``, ...): nothing the next turn does will be new. A reply that could
    not be read as a call counts by its text: the same unreadable reply again is a repeat too.
    0 or 1 disables."""
    if times < 2:
        return False
    turns = [_signature(s) for s in steps if s.source == "agent"]
    for period in range(1, max_period + 1):
        recent = turns[-period * times :]
        if len(recent) < period * times or not all(recent):
            continue
        block = recent[:period]
        if period > 1 and all(turn == block[0] for turn in block):
            continue  # one call repeated: period 1's case
        if all(turn == block[i % period] for i, turn in enumerate(recent)):
            return True
    return False


def _metrics(reply: ModelReply) -> dict[str, Any]:
    return {
        "prompt_tokens": reply.prompt_tokens,
        "completion_tokens": reply.completion_tokens,
        **({"cached_tokens": reply.cached_tokens} if reply.cached_tokens else {}),
        "cost_usd": reply.cost_usd,
        # Provider faults that were retried before this reply (rate limits, 5xx, timeouts).
        **({"extra": {"retries": reply.extra["retries"]}} if reply.extra.get("retries") else {}),
    }


def _token_ids(reply: ModelReply) -> dict[str, Any]:
    """The exact prompt/completion token ids when the provider returns them (``local/torch:``),
    kept in the step's ``extra`` for the policy trainer."""
    return {k: reply.extra[k] for k in ("prompt_token_ids", "completion_token_ids") if k in reply.extra}


@dataclass
class Rollout:
    """The mutable state of one rollout while the loop runs (what hooks see and may extend)."""

    transcript: Transcript
    answer: str | None = None
    last_end: str = ""
    """How the agent ended its last turn: ``submit``, ``message``, or ``repeated`` (a repeat ended it)."""
    closing: str = ""
    """The agent's last message content (what a simulated user answers)."""
    states: list[Any] = field(default_factory=list)
    call_counts: list[int] = field(default_factory=list)
    exchanges: list[tuple[str, str]] = field(default_factory=list)
    offered: tuple[dict[str, Any], ...] = ()
    """The OpenAI-style definitions of every tool offered (harness and task tools)."""
    model_calls: int = 0
    """Model calls made so far (each seeds its call with ``seed + index``)."""
    user_end: str = ""
    """The end reason of the stop token the simulated user wrote (``extra.user_end``)."""
    extra: dict[str, Any] = field(default_factory=dict)
    """What runtime components record (``memory``, ``recovery``, ...): joins the trajectory's ``extra``."""
    next_temperature: float | None = None
    """Set by a hook: the temperature of the next model call only (a recovery rule's retry)."""

    @classmethod
    def opening(cls, system: str) -> Rollout:
        transcript = Transcript()
        transcript.add_text("system", system, timestamp=_now())
        return cls(transcript)

    def add_user(self, text: str, extra: dict[str, Any]) -> None:
        self.transcript.add_text("user", text, extra=extra, timestamp=_now())

    def add_failed_user(self, turn: int, error: str) -> None:
        """A simulated user turn that failed: a user step the model never sees."""
        entry = {"turn": turn, "error": error}
        self.transcript.add({"role": "user", "content": ""}, extra=entry, in_chat=False)

    def add_component_note(self, text: str, extra: dict[str, Any]) -> None:
        """A message from a runtime component (``extra.component`` names it): a user step, not a turn."""
        self.transcript.add_text("user", text, extra=extra, timestamp=_now())

    def steps(self) -> list[Step]:
        return self.transcript.steps()

    def last_user_text(self) -> str:
        return next(
            e.message["content"]
            for e in reversed(self.transcript.entries)
            if e.message["role"] == "user" and not e.nudge and "component" not in e.extra
        )


@dataclass(frozen=True)
class Actions:
    """What ``execute_actions`` did with one reply's tool calls."""

    calls: tuple[ToolCall, ...] = ()
    observations: tuple[ObservationResult, ...] = ()
    errors: tuple[str, ...] = ()
    submitted: bool = False


class QueryLoop(Protocol):
    """What a hook's ``around_query`` may use of the loop running it (``agent.AgentLoop`` is one):
    the rollout, the model and seed, the harness's loop settings, and one model call."""

    rollout: Rollout
    model: str
    seed: int
    loop: LoopSettings

    async def query(self) -> ModelReply: ...


class LoopHooks(Protocol):
    """Where runtime components (memory, recovery rules, a world model) and harness hooks run in
    the builtin loop. Every method may read and extend ``rollout`` (e.g. add a message to its
    transcript); none may raise except ``Stopped`` to end the rollout for its own reason.

    - ``before_query``: before each model call (retrieve memory, consult a world model);
    - ``after_actions``: after a reply's tool calls ran, before the step is recorded (recovery
      rules on loop events: a tool error, a repeated call);
    - ``on_stop``: once, with the reason the rollout ended;
    - ``around_query``: the step's model call made by the hooks (the world model's lookahead samples
      candidates through ``loop.query`` and returns the one picked), or None: the loop makes it;
    - ``tools``: the tools the hooks offer the agent besides the harness's (the progress notes).
    """

    def tools(self) -> list[OfferedTool]: ...

    async def before_query(self, rollout: Rollout) -> None: ...

    async def around_query(self, loop: QueryLoop) -> ModelReply | None: ...

    async def after_actions(self, rollout: Rollout, reply: ModelReply, actions: Actions) -> None: ...

    async def on_stop(self, rollout: Rollout, reason: StopReason) -> None: ...


class NoHooks:
    """The default: the loop as it is, nothing added at any cut point."""

    def tools(self) -> list[OfferedTool]:
        return []

    async def before_query(self, rollout: Rollout) -> None:
        return None

    async def around_query(self, loop: QueryLoop) -> ModelReply | None:
        return None

    async def after_actions(self, rollout: Rollout, reply: ModelReply, actions: Actions) -> None:
        return None

    async def on_stop(self, rollout: Rollout, reason: StopReason) -> None:
        return None


NO_HOOKS = NoHooks()


class Component:
    """A runtime component: hooks at the loop's cut points (``agent.LoopHooks``), each a no-op
    here, and the tools it offers the agent (none here). A component overrides what it uses."""

    name = "component"

    def tools(self) -> list[OfferedTool]:
        return []

    async def before_query(self, rollout: Rollout) -> None:
        return None

    async def around_query(self, loop: QueryLoop) -> ModelReply | None:
        """The step's model call made by the component (the world model's lookahead), or None:
        the loop makes it."""
        return None

    async def after_actions(self, rollout: Rollout, reply: ModelReply, actions: Actions) -> None:
        return None

    async def on_stop(self, rollout: Rollout, reason: StopReason) -> None:
        return None


def _trajectory(
    harness: Harness,
    task: Task,
    model: str,
    seed: int,
    rollout: Rollout,
    steps: list[Step],
    stop: StopReason,
    started: float,
    extra: dict[str, Any],
) -> Trajectory:
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
            "stop_reason": stop,
            "answer": rollout.answer,
            "harness": harness.name,
            "harness_hash": harness.content_hash(),
            "seed": seed,
            "wall_s": round(time.monotonic() - started, 3),
            # what the loop appended to every tool result the model saw (the trainer replays it)
            "observation_note": harness.loop.observation_note or "",
            **rollout.extra,
            **extra,
        },
        final_metrics={
            "total_prompt_tokens": sum(s.metrics.get("prompt_tokens", 0) for s in agent_steps),
            "total_completion_tokens": sum(s.metrics.get("completion_tokens", 0) for s in agent_steps),
            "total_cached_tokens": sum(s.metrics.get("cached_tokens", 0) for s in agent_steps),
            "total_cost_usd": sum(s.metrics.get("cost_usd", 0.0) for s in agent_steps),
            "total_steps": len(steps),
        },
    )
