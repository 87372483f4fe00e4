"""A simulated user (as in tau2-bench): a model through litellm that writes the next user turn.

The user model sees its persona instructions as the system prompt and the conversation with the
roles swapped (its own earlier turns as ``assistant``, what the agent said at the end of each of
its turns as ``user``). It replies with its next message, or with the stop token when its goal is
met. Calls run at the task's temperature (0 by default) with a seed derived from the rollout's,
so a scripted or temperature-0 user is deterministic, and the whole rollout is cached like any.
"""

from __future__ import annotations

from dataclasses import dataclass

from harnessevolve.core.task_tools import SimulatedUser
from harnessevolve.models import acomplete

USER_FRAME = (
    "\n\nYou are the user in a conversation with an AI assistant. Write only your next message to "
    "the assistant, in your own words. When your goal is met, or the assistant cannot help you "
    "further, reply with exactly {stop}."
)
OPENING = "(The assistant is waiting for your first message.)"
SILENT_TURN = "(The assistant ended its turn without a message.)"


@dataclass(frozen=True)
class UserTurn:
    """The user's next message (``text``), or ``stopped``, with the call's token counts."""

    text: str
    stopped: bool
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0


async def next_user_turn(
    user: SimulatedUser, exchanges: list[tuple[str, str]], *, seed: int, max_tokens: int = 512
) -> UserTurn:
    """The next turn after ``exchanges`` ((user message, agent's closing message) pairs).

    Raises whatever the provider raises (the agent loop records it as a failed user)."""
    messages = [{"role": "system", "content": user.instructions.strip() + USER_FRAME.format(stop=user.stop)}]
    if not exchanges:
        messages.append({"role": "user", "content": OPENING})
    for said, answer in exchanges:
        messages.append({"role": "assistant", "content": said})
        messages.append({"role": "user", "content": answer or SILENT_TURN})
    reply = await acomplete(
        user.model, messages, temperature=user.temperature, max_tokens=max_tokens, seed=seed
    )
    text = (reply.content or "").strip()
    stopped = user.stop in text
    if stopped:
        text = text.split(user.stop)[0].strip()
    return UserTurn(text, stopped, reply.prompt_tokens, reply.completion_tokens, reply.cost_usd)
