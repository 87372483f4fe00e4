"""A simulated user (as in tau2-bench): a model through litellm that writes the next user turn.

The user model sees its persona instructions, then the task's ``frame`` (harnessevolve's framing
by default, or none), as the system prompt; then the task's ``opening`` message (unless empty) and
the conversation with the roles swapped (its own earlier turns as ``assistant``, what the agent said
at the end of each of its turns as ``user``). It replies with its next message, or with one of its
stop tokens: the earliest token in the reply ends the conversation with that token's end reason
(``extra.user_end``), and that reply is not delivered to the agent. Calls run at the task's
temperature (0 by default) with a seed derived from the rollout's, so a scripted or temperature-0
user is deterministic, and the whole rollout is cached like any.
"""

from __future__ import annotations

from dataclasses import dataclass

from harnessevolve.core.task_tools import SimulatedUser
from harnessevolve.models import acomplete

SILENT_TURN = "(The assistant ended its turn without a message.)"


@dataclass(frozen=True)
class UserTurn:
    """The user's next message (``text``), or ``stopped``, with the call's token counts."""

    text: str
    stopped: bool
    end_reason: str = ""
    """The reason of the stop token the user wrote (empty when it did not stop)."""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0


async def next_user_turn(
    user: SimulatedUser, exchanges: list[tuple[str, str]], *, seed: int, max_tokens: int = 512
) -> UserTurn:
    """The next turn after ``exchanges`` ((user message, agent's closing message) pairs).

    Raises whatever the provider raises (the agent loop records it as a failed user)."""
    tokens = ", ".join(token for token, _ in user.stop_tokens)
    frame = user.frame.replace("{stops}", tokens).replace("{stop}", user.stop)
    messages = [{"role": "system", "content": user.instructions.strip() + frame}]
    if not exchanges and user.opening:
        messages.append({"role": "user", "content": user.opening})
    for said, answer in exchanges:
        messages.append({"role": "assistant", "content": said})
        messages.append({"role": "user", "content": answer or SILENT_TURN})
    reply = await acomplete(
        user.model, messages, temperature=user.temperature, max_tokens=max_tokens, seed=seed
    )
    text = (reply.content or "").strip()
    found = [(text.find(token), reason, token) for token, reason in user.stop_tokens if token in text]
    reason = ""
    if found:
        at, reason, _token = min(found)
        text = text[:at].strip()
    usage = (reply.prompt_tokens, reply.completion_tokens, reply.cost_usd)
    return UserTurn(text, bool(found), reason, *usage)
