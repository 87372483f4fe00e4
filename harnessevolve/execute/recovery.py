"""Recovery policies: the harness's declarative rules (``harness.yaml: recovery.rules``) applied by
the builtin loop after each reply's actions ran.

Events (``event``), judged on the step just made:

- ``tool_error``: a tool call failed (its result is an error);
- ``malformed_call``: the reply could not be read as a tool call, named an unknown tool or gave
  arguments that are not a JSON object;
- ``repeated_call``: the same tool calls as the ``times - 1`` agent turns before it;
- ``step_limit_near``: ``within`` or fewer model calls are left in this user turn.

Actions: ``note`` shows ``note`` to the model as a user message before its next call; ``retry``
does the same (when it has a note) and makes the next model call at ``temperature``; ``stop`` ends
the rollout at once, submitting the last observation as the answer when nothing was submitted.
A rule fires at most ``max_fires`` times a rollout; every firing is kept in the trajectory's
``extra.recovery`` (rule, event, action, the agent step it answered), and each note is a user
step with ``extra.component: recovery``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from harnessevolve.core.enums import StopReason
from harnessevolve.execute.loop_state import Component
from harnessevolve.harness.runtime import RecoveryRule

if TYPE_CHECKING:
    from harnessevolve.core.atif import Step
    from harnessevolve.execute.loop_state import Actions, Rollout
    from harnessevolve.models import ModelReply


def _calls_key(calls: Any) -> list[tuple[str, Any]]:
    return [(c.function_name, c.arguments) for c in calls]


def _turn_steps(steps: list[Step]) -> list[Step]:
    """The agent steps since the last user turn (notes from components are not turns)."""
    start = 0
    for i, step in enumerate(steps):
        if step.is_user_turn:
            start = i
    return [s for s in steps[start:] if s.source == "agent"]


def events(
    reply: ModelReply, actions: Actions, steps: list[Step], rule: RecoveryRule, max_steps: int
) -> bool:
    """Whether ``rule``'s event happened on this step (``steps``: the ones recorded before it)."""
    if rule.event == "tool_error":
        return any(e.startswith("tool_error") for e in actions.errors)
    if rule.event == "malformed_call":
        return bool(reply.parse_error) or any(
            e.startswith(("unknown_tool", "bad_arguments")) for e in actions.errors
        )
    if rule.event == "repeated_call":
        if not actions.calls:
            return False
        before = [s for s in steps if s.source == "agent"][-(rule.times - 1) :]
        key = _calls_key(actions.calls)
        return len(before) == rule.times - 1 and all(_calls_key(s.tool_calls) == key for s in before)
    if rule.event == "step_limit_near":
        used = len(_turn_steps(steps)) + 1
        return max_steps - used <= rule.within
    return False


class RecoveryHooks(Component):
    """The rules of one rollout, with their firing counts."""

    name = "recovery"

    def __init__(self, rules: tuple[RecoveryRule, ...], max_steps: int) -> None:
        self.rules = rules
        self.max_steps = max_steps
        self.fired = [0] * len(rules)
        self.pending: list[tuple[RecoveryRule, str]] = []

    async def before_query(self, rollout: Rollout) -> None:
        for rule, note in self.pending:
            rollout.add_component_note(note, {"component": "recovery", "rule": rule.name})
        self.pending = []

    async def after_actions(self, rollout: Rollout, reply: ModelReply, actions: Actions) -> None:
        from harnessevolve.execute.loop_state import Stopped

        steps = rollout.steps()
        for i, rule in enumerate(self.rules):
            if self.fired[i] >= rule.max_fires or not events(reply, actions, steps, rule, self.max_steps):
                continue
            self.fired[i] += 1
            step = sum(1 for s in steps if s.source == "agent") + 1
            firing = {"rule": rule.name, "event": rule.event, "action": rule.action, "agent_step": step}
            rollout.extra.setdefault("recovery", []).append(firing)
            if rule.action == "stop":
                if rollout.answer is None and not actions.submitted:
                    rollout.answer = actions.observations[-1].content if actions.observations else ""
                raise Stopped(StopReason.SUBMITTED)
            if rule.action == "retry":
                rollout.next_temperature = rule.temperature
            if rule.note:
                self.pending.append((rule, rule.note))
