"""The runtime components a harness turns on, as the builtin loop's hooks (``agent.LoopHooks``).

Each component is one hooks object (``memory.MemoryHooks``, ``recovery.RecoveryHooks``,
``progress.ProgressHooks``, ``world_model.WorldModelHooks``); ``ComponentHooks`` runs them in that
order at each cut point. A component that raises anything but ``Stopped`` is reported in the
trajectory's ``extra.component_errors`` (component, where, error) and switched off for the rest of
the rollout, which goes on without it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from harnessevolve.execute.loop_state import Component, Stopped
from harnessevolve.harness.model import Harness

if TYPE_CHECKING:
    from harnessevolve.core.enums import StopReason
    from harnessevolve.execute.loop_state import Actions, LoopHooks, QueryLoop, Rollout
    from harnessevolve.execute.rollout_tools import OfferedTool
    from harnessevolve.models import ModelReply

__all__ = ["Component", "ComponentHooks", "component_hooks", "hooks_for"]


def component_hooks(harness: Harness) -> list[Component]:
    """One fresh hooks object per component the harness turns on (per rollout: they keep state)."""
    from harnessevolve.execute.memory import MemoryHooks
    from harnessevolve.execute.progress import ProgressHooks
    from harnessevolve.execute.recovery import RecoveryHooks
    from harnessevolve.execute.world_model import WorldModelHooks

    runtime = harness.runtime
    parts: list[Component] = []
    if runtime.memory is not None:
        parts.append(MemoryHooks(runtime.entries, runtime.memory.top_k))
    if runtime.progress is not None:
        parts.append(ProgressHooks(runtime.progress.max_chars))
    if runtime.recovery:
        parts.append(RecoveryHooks(runtime.recovery, harness.loop.max_steps))
    if runtime.world_model is not None:
        parts.append(WorldModelHooks(runtime.world_model.lookahead))
    return parts


class ComponentHooks:
    """Runs each component's hooks; a failing one is reported and dropped (see the module docstring)."""

    def __init__(self, parts: list[Component]) -> None:
        self.parts = list(parts)

    def tools(self) -> list[OfferedTool]:
        """The tools the components offer the agent."""
        return [tool for part in self.parts for tool in part.tools()]

    def _drop(self, rollout: Rollout, part: Component, where: str, exc: Exception) -> None:
        text = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
        rollout.extra.setdefault("component_errors", []).append(
            {"component": part.name, "where": where, "error": text}
        )
        self.parts.remove(part)

    async def _each(self, rollout: Rollout, where: str, hook: Callable[[Component], Awaitable[None]]) -> None:
        for part in list(self.parts):
            try:
                await hook(part)
            except Stopped:
                raise
            except Exception as exc:  # noqa: BLE001 - a failing component never ends the rollout
                self._drop(rollout, part, where, exc)

    async def before_query(self, rollout: Rollout) -> None:
        await self._each(rollout, "before_query", lambda part: part.before_query(rollout))

    async def around_query(self, loop: QueryLoop) -> ModelReply | None:
        """The model call of a step: the first component's own that makes one (the world model's
        lookahead), else None (the loop's); a component that fails here is reported and dropped."""
        for part in list(self.parts):
            try:
                reply = await part.around_query(loop)
            except Stopped:
                raise
            except Exception as exc:  # noqa: BLE001 - a failing component never ends the rollout
                self._drop(loop.rollout, part, "around_query", exc)
                continue
            if reply is not None:
                return reply
        return None

    async def after_actions(self, rollout: Rollout, reply: ModelReply, actions: Actions) -> None:
        await self._each(rollout, "after_actions", lambda part: part.after_actions(rollout, reply, actions))

    async def on_stop(self, rollout: Rollout, reason: StopReason) -> None:
        await self._each(rollout, "on_stop", lambda part: part.on_stop(rollout, reason))


def hooks_for(harness: Harness) -> LoopHooks | None:
    """The harness's component hooks, or None when it turns none on."""
    parts = component_hooks(harness)
    return ComponentHooks(parts) if parts else None
