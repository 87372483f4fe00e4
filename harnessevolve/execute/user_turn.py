"""A simulated user's next turn delivered into a rollout (or the reason the rollout stops)."""

from __future__ import annotations

from harnessevolve.core.enums import StopReason
from harnessevolve.core.tasks import Task
from harnessevolve.execute.loop_state import Rollout, Stopped
from harnessevolve.execute.simulated_user import next_user_turn


async def simulated_turn(task: Task, rollout: Rollout, turn: int, seed: int) -> None:
    """Ask the simulated user for turn ``turn`` and deliver it; ``Stopped`` when it ends the rollout."""
    user = task.user
    assert user is not None
    if turn >= user.max_turns:
        raise Stopped(StopReason.USER_TURN_LIMIT)
    try:
        reply = await next_user_turn(user, rollout.exchanges, seed=seed + 10_000 + turn)
    except Exception as exc:  # noqa: BLE001 - a failing user model is recorded, never raised
        rollout.add_failed_user(turn, f"user_error: {type(exc).__name__}: {exc}".splitlines()[0][:500])
        raise Stopped(StopReason.USER_ERROR) from None
    if reply.stopped:
        rollout.user_end = reply.end_reason
        raise Stopped(StopReason.SUBMITTED if rollout.last_end == "submit" else StopReason.ENDED)
    if not reply.text:
        rollout.add_failed_user(turn, "user_error: the simulated user wrote nothing")
        raise Stopped(StopReason.USER_ERROR)
    metrics = {
        "prompt_tokens": reply.prompt_tokens,
        "completion_tokens": reply.completion_tokens,
        "cost_usd": reply.cost_usd,
    }
    rollout.add_user(reply.text, {"turn": turn, "simulated_user": user.model, "user_metrics": metrics})
