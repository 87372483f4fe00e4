"""What happens to a tool call before it runs: the loop's checks, in order.

1. ``loop.repair_calls``: checked against its tool's schema (``execute/call_repair.py``): repaired
   where one reading fits, or answered with what the schema needs;
2. ``loop.refuse_placeholders``: a call of a task's Python or MCP tool with a value that looks
   made up is answered once instead of run (``execute/placeholder_check.py``).

``checked_call`` gives a :class:`Checked`: the call as it will run, and, when it must not run, the
reply the agent gets instead and its kind (the step's ``extra.error``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from harnessevolve.execute import placeholder_check
from harnessevolve.execute.call_repair import repair_call
from harnessevolve.execute.loop_state import Rollout
from harnessevolve.execute.rollout_tools import OfferedTool
from harnessevolve.harness.model import LoopSettings
from harnessevolve.models.call import ModelToolCall


class Checked(NamedTuple):
    """A call as it will run, and, when it must not, the reply the agent gets and its kind."""

    name: str
    arguments: dict[str, Any] | None
    error: str | None = None
    kind: str = ""
    """``missing_arguments`` (the schema check) or ``placeholder_value``; '' when it runs."""


def checked_call(
    call: ModelToolCall, loop: LoopSettings, tools: Mapping[str, OfferedTool], rollout: Rollout
) -> Checked:
    """``call`` as it will run; ``error`` set when it must not run (a required argument missing, a
    value that fits no reading of the schema, a placeholder); repairs and refusals are recorded in
    ``rollout.extra`` (``call_repairs``, ``placeholders``)."""
    name, arguments = call.name, call.arguments
    if loop.repair_calls:
        schemas = {n: tool.spec.parameters for n, tool in tools.items()}
        repair = repair_call(call.name, call.arguments, call.raw_arguments or "", schemas)
        if repair.notes:
            rollout.extra.setdefault("call_repairs", []).append(
                {"call": call.id, "tool": call.name, "notes": repair.notes}
            )
        if repair.error is not None:
            return Checked(repair.name, repair.arguments, repair.error, "missing_arguments")
        name, arguments = repair.name, repair.arguments
    tool = tools.get(name)
    if loop.refuse_placeholders and arguments and tool is not None and tool.served:
        refused = placeholder_check.hold_placeholder(rollout, name, arguments)
        if refused is not None:
            return Checked(name, arguments, refused, "placeholder_value")
    return Checked(name, arguments)
