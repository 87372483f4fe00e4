"""``loop.verify_finish``: the agent's first attempt to finish (a turn, or the run) is held back once,
with the request quoted again and a question: is every part of it done?

Small agents stop early: one call where the request needs one per part, a submit before the state
is as asked, a turn ended after the first of two changes. A rule in the system prompt does little
for them (they do not follow such text); asking at the moment they finish, with the request in
front of them, changes what the loop does. Per turn (multi-turn tasks) or per run, once:

- a submit is not taken: its result is :data:`VERIFY_SUBMIT` and the run goes on; the next submit
  is taken. Should the run then end without one (the step limit), the held answer stands
  (``held_answer``), so the check never costs an answer the agent gave;
- a reply that would end a multi-turn task's turn (no tool call) is kept, followed by
  :data:`VERIFY_TURN`; the next such reply ends the turn.

Recorded in the rollout's ``extra.verify_finish``: one entry per hold (``turn``, ``step``, and the
held ``answer``). Nothing here names a benchmark or a task: the request is the task's own last user
message.
"""

from __future__ import annotations

from typing import Any

from harnessevolve.execute.loop_state import Rollout

REQUEST_CHARS = 800
VERIFY_SUBMIT = (
    "Not submitted yet. Before you finish, check your work against the request:\n{request}\n"
    "Is every part of it done, with the exact names and values it asks for? If anything is missing "
    "or wrong, do it now with the tools. If everything is done, call {submit} again with your final answer."
)
VERIFY_TURN = (
    "Before you answer, check your work against the request:\n{request}\n"
    "Is every part of it done, with the exact names and values it asks for? If anything is missing "
    "or wrong, make those calls now. If everything is done, reply with your answer."
)


def _request(rollout: Rollout) -> str:
    text = rollout.last_user_text().strip()
    return text if len(text) <= REQUEST_CHARS else text[:REQUEST_CHARS] + " [cut]"


def _held(rollout: Rollout) -> list[dict[str, Any]]:
    found = rollout.extra.get("verify_finish")
    return found if isinstance(found, list) else []


def _turn(rollout: Rollout) -> int:
    return len(rollout.exchanges)


def _first_this_turn(rollout: Rollout) -> bool:
    return all(entry.get("turn") != _turn(rollout) for entry in _held(rollout))


def _record(rollout: Rollout, **entry: Any) -> None:
    rollout.extra.setdefault("verify_finish", []).append(
        {"turn": _turn(rollout), "step": len(rollout.steps()) + 1, **entry}
    )


def hold_submit(rollout: Rollout, answer: str, submit: str) -> str | None:
    """The result a first submit of this turn gets instead of being taken (None: take it)."""
    if not _first_this_turn(rollout):
        return None
    _record(rollout, answer=answer[:2000])
    return VERIFY_SUBMIT.format(request=_request(rollout), submit=submit)


def hold_turn_end(rollout: Rollout) -> str | None:
    """The message that follows a first reply ending this turn, which then goes on (None: end it)."""
    if not _first_this_turn(rollout):
        return None
    _record(rollout, answer=None)
    return VERIFY_TURN.format(request=_request(rollout))


def held_answer(rollout: Rollout) -> str | None:
    """The last answer held back and never followed by another submit (the run ended first)."""
    for entry in reversed(_held(rollout)):
        if entry.get("answer") is not None:
            entry["stood"] = True
            return str(entry["answer"])
    return None
