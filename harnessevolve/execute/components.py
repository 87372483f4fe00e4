"""The runtime components a harness turns on, as the builtin loop's hooks (``agent.LoopHooks``).

Each component is one hooks object (``memory.MemoryHooks``, ``recovery.RecoveryHooks``,
``progress.ProgressHooks``, ``world_model.WorldModelHooks``); ``ComponentHooks`` runs them in that
order at each cut point. A component that raises anything but ``Stopped`` is reported in the
trajectory's ``extra.component_errors`` (component, where, error) and switched off for the rest of
the rollout, which goes on without it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from harnessevolve.harness.model import Harness

if TYPE_CHECKING:
    from harnessevolve.core.enums import StopReason
    from harnessevolve.execute.agent import Actions, AgentLoop, LoopHooks, Rollout
    from harnessevolve.models import ModelReply


def component_hooks(harness: Harness) -> list[Any]:
    """One fresh hooks object per component the harness turns on (per rollout: they keep state)."""
    from harnessevolve.execute.memory import MemoryHooks
    from harnessevolve.execute.progress import ProgressHooks
    from harnessevolve.execute.recovery import RecoveryHooks
    from harnessevolve.execute.world_model import WorldModelHooks

    runtime = harness.runtime
    parts: list[Any] = []
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

    def __init__(self, parts: list[Any]) -> None:
        self.parts = list(parts)

    def tools(self) -> list[Any]:
        """The tools the components offer the agent (``OfferedTool``s)."""
        return [tool for part in self.parts for tool in getattr(part, "tools", lambda: [])()]

    async def _each(self, rollout: Rollout, where: str, *args: Any) -> None:
        from harnessevolve.execute.agent import Stopped

        for part in list(self.parts):
            try:
                await getattr(part, where)(rollout, *args)
            except Stopped:
                raise
            except Exception as exc:  # noqa: BLE001 - a failing component never ends the rollout
                text = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
                rollout.extra.setdefault("component_errors", []).append(
                    {"component": part.name, "where": where, "error": text}
                )
                self.parts.remove(part)

    async def before_query(self, rollout: Rollout) -> None:
        await self._each(rollout, "before_query")

    async def around_query(self, loop: AgentLoop) -> ModelReply:
        """The model call of a step: a component's own (the world model's lookahead) if one has
        it, else the loop's; a component that fails here is reported and the loop's call made."""
        from harnessevolve.execute.agent import Stopped

        part = next((p for p in self.parts if hasattr(p, "around_query")), None)
        if part is None:
            return await loop.query()
        try:
            reply: ModelReply = await part.around_query(loop)
            return reply
        except Stopped:
            raise
        except Exception as exc:  # noqa: BLE001 - a failing component never ends the rollout
            text = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
            loop.rollout.extra.setdefault("component_errors", []).append(
                {"component": part.name, "where": "around_query", "error": text}
            )
            self.parts.remove(part)
            return await loop.query()

    async def after_actions(self, rollout: Rollout, reply: ModelReply, actions: Actions) -> None:
        await self._each(rollout, "after_actions", reply, actions)

    async def on_stop(self, rollout: Rollout, reason: StopReason) -> None:
        await self._each(rollout, "on_stop", reason)


def hooks_for(harness: Harness) -> LoopHooks | None:
    """The harness's component hooks, or None when it turns none on."""
    parts = component_hooks(harness)
    return ComponentHooks(parts) if parts else None
