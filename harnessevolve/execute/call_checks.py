"""What happens to a tool call before it runs: the loop's checks, in order.

1. ``loop.repair_calls``: checked against its tool's schema (``execute/call_repair.py``): repaired
   where one reading fits, or answered with what the schema needs;
2. ``loop.refuse_placeholders``: a value that looks made up is answered once instead of run
   (``execute/placeholder_check.py``); the harness's own tools (submit, bash, files) are not checked.

``checked_call`` gives ``(tool name, arguments, error)``: the call as it will run, and, when it
must not run, the reply the agent gets instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from harnessevolve.execute import placeholder_check
from harnessevolve.execute.call_repair import repair_call
from harnessevolve.execute.loop_state import Rollout
from harnessevolve.execute.rollout_tools import OfferedTool
from harnessevolve.harness.model import LoopSettings
from harnessevolve.models.call import ModelToolCall


def checked_call(
    call: ModelToolCall, loop: LoopSettings, tools: Mapping[str, OfferedTool], rollout: Rollout
) -> tuple[str, dict[str, Any] | None, str | None]:
    """``(tool name, arguments, error)`` of ``call`` as it will run; ``error`` set when it must not
    run (a required argument missing, a value that fits no reading of the schema, a placeholder);
    repairs and refusals are recorded in ``rollout.extra`` (``call_repairs``, ``placeholders``)."""
    name, arguments, error = call.name, call.arguments, None
    if loop.repair_calls:
        schemas = {n: tool.spec.parameters for n, tool in tools.items()}
        repair = repair_call(call.name, call.arguments, call.raw_arguments or "", schemas)
        if repair.notes:
            rollout.extra.setdefault("call_repairs", []).append(
                {"call": call.id, "tool": call.name, "notes": repair.notes}
            )
        name, arguments, error = repair.name, repair.arguments, repair.error
    tool = tools.get(name)
    if loop.refuse_placeholders and error is None and arguments and tool and not tool.spec.builtin:
        error = placeholder_check.hold_placeholder(rollout, name, arguments)
    return name, arguments, error


def error_kind(error: str, rollout: Rollout) -> str:
    """The step error's kind for a call ``checked_call`` refused: ``placeholder_value`` when this
    very reply is the placeholder check's last refusal, else ``missing_arguments``."""
    refused = rollout.extra.get("placeholders")
    last = refused[-1] if isinstance(refused, list) and refused else None
    if (
        last is not None
        and last.get("step") == len(rollout.steps()) + 1
        and "looks like a placeholder" in error
    ):
        return "placeholder_value"
    return "missing_arguments"
