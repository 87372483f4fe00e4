"""Why a rollout failed, in the words the HTML report shows beside the task matrix and conversations.

The reasons live in two files of the run folder: the evaluation (``evaluations/<hash>/<task>.json``:
each check's line, ``ok``/``FAIL <type>: <message>``, a judge check's reason inside its message, and
the signal's optional LLM-judge view) and the trajectory (``extra.stop_reason``, why the agent loop
stopped; for a multi-turn task ``extra.turns`` and ``extra.user_end``, how the conversation ended).
Only the trajectory's root ``extra`` is read here; a file that cannot be read gives no reasons.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harnessevolve.core.enums import StopReason

STOP_TEXT: dict[str, str] = {
    StopReason.SUBMITTED: "the agent submitted an answer",
    StopReason.STEP_LIMIT: "the loop hit its step limit",
    StopReason.REPEATED: "the agent repeated the same action",
    StopReason.MODEL_ERROR: "the model call failed",
    StopReason.SETUP_ERROR: "the task's set-up failed",
    StopReason.WORKSPACE_TOO_LARGE: "the workspace grew past its size limit",
    StopReason.EXECUTOR_ERROR: "the executor failed",
    StopReason.NO_ANSWER: "the agent exited without an answer",
    StopReason.AGENT_CRASHED: "the agent crashed",
    StopReason.AGENT_TIMEOUT: "the agent ran past its time limit",
    StopReason.OUTPUT_FLOOD: "the agent printed too much and was killed",
    StopReason.BAD_TRAJECTORY: "the agent wrote a trajectory that is not valid ATIF",
    StopReason.MODEL_REFUSED: "the agent asked for a model it was not given",
    StopReason.FORMAT_ERROR: "the agent kept replying without a valid tool call",
    StopReason.BUDGET_EXHAUSTED: "the run's budget was spent mid-rollout",
    StopReason.BAD_OUTPUT: "a file the agent left was not readable",
    StopReason.REFUSAL_LIMIT: "the endpoint refused too many requests",
    StopReason.RECORD_LIMIT: "the rollout's record passed its size cap",
    StopReason.ENDED: "the conversation ended",
    StopReason.USER_TURN_LIMIT: "the simulated user reached its turn limit",
    StopReason.USER_ERROR: "the simulated user failed",
    StopReason.TOOL_ERROR: "the task's tool server could not start",
    StopReason.SANDBOX_ERROR: "the sandbox could not start the rollout",
}


@dataclass(frozen=True)
class Ending:
    """How a rollout ended, from its trajectory's root ``extra``."""

    stop_reason: str | None = None
    conversation: str = ""
    """How a multi-turn task's conversation ended (empty for a single-turn task)."""
    infra: str | None = None
    """The machine failure that scored it 0 (``extra.infra``), if any."""

    @property
    def stop(self) -> str:
        """``step_limit (the loop hit its step limit)``; empty when the trajectory recorded none."""
        if not self.stop_reason:
            return ""
        said = STOP_TEXT.get(self.stop_reason)
        return f"{self.stop_reason} ({said})" if said else self.stop_reason


def read_ending(path: Path | None) -> Ending:
    """The ending a trajectory file recorded (an empty one when the file cannot be read)."""
    if path is None:
        return Ending()
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return Ending()
    extra = doc.get("extra") if isinstance(doc, dict) else None
    if not isinstance(extra, dict):
        return Ending()
    stop = extra.get("stop_reason")
    stop = str(stop) if stop else None
    infra = extra.get("infra")
    return Ending(stop, conversation_end(extra), str(infra) if infra else None)


def conversation_end(extra: dict[str, Any]) -> str:
    """How a multi-turn task's conversation ended, in one sentence; empty for a single-turn task."""
    if "turns" not in extra and "user_end" not in extra:
        return ""
    turns = extra.get("turns")
    said = f" after {turns} user turn{'s' if turns != 1 else ''}" if isinstance(turns, int) else ""
    user_end, stop = extra.get("user_end"), extra.get("stop_reason")
    if user_end:
        submitted = ", the agent's answer submitted" if stop == StopReason.SUBMITTED else ""
        return f"the simulated user ended it ({user_end}){said}{submitted}"
    if stop == StopReason.USER_TURN_LIMIT:
        return f"the simulated user reached its turn limit{said} without writing its stop token"
    if stop == StopReason.USER_ERROR:
        return f"the simulated user's model failed{said}"
    if stop == StopReason.ENDED:
        return f"the agent ended the last user turn{said}"
    if stop == StopReason.SUBMITTED:
        return f"the agent submitted{said}"
    return f"cut off{said}: {STOP_TEXT.get(str(stop), str(stop))}" if stop else f"no stop recorded{said}"


def failed_checks(checks: tuple[str, ...]) -> tuple[str, ...]:
    """The check lines that failed (``FAIL answer: expected ...``), in the task's order."""
    return tuple(c for c in checks if c.startswith("FAIL"))


def judge_reasons(checks: tuple[str, ...], judged: Any = None) -> tuple[str, ...]:
    """What judges said: each ``judge`` check's message (``judge M: does not hold (why)``), then the
    signal's LLM-judge view of the divergence when the run asked for one."""
    out = []
    for line in checks:
        verdict, _, rest = line.partition(" ")
        if verdict in ("ok", "FAIL") and rest.startswith("judge: "):
            out.append(rest.removeprefix("judge: "))
    if isinstance(judged, dict) and judged.get("model"):
        model = judged["model"]
        if judged.get("error"):
            out.append(f"judge {model} on the divergence failed: {judged['error']}")
        elif judged.get("cause"):
            rules = judged.get("rules_cause")
            agrees = "as the rules" if judged.get("agrees") else f"the rules said {rules}"
            why = judged.get("why") or judged.get("hint") or ""
            out.append(
                f"judge {model} on the divergence: {judged['cause']} ({agrees})" + (f": {why}" if why else "")
            )
    return tuple(out)
