"""Infrastructure failures: rollouts that failed because of the machine, not the agent.

A rollout is ``infra`` when its trajectory says the failure came from outside the harness:

- ``sandbox_start``: the sandbox could not start the rollout's workspace or a command
  (``stop_reason: sandbox_error``, written by the executor);
- ``setup``: the task's workspace could not be set up (``setup_error``): the agent never ran;
- ``tool_server``: the task's tool server could not start or crashed (``tool_error``);
- ``endpoint``: the model endpoint failed with a server-side error after its retries
  (``model_error`` naming a 5xx status, a connection error or a timeout; a 4xx such as a bad
  request or an exceeded context window is the harness's or the user's, not the machine's);
- ``judge``: a judge check's model call failed, so the checks could not run (set by the scorer);
- ``executor``: the executor lost the rollout (a Ray worker died: ``executor_error``);
- ``killed``: the agent process was killed by a signal no limit of the rollout sent
  (``extra.infra`` set by the runner).

A runner may also name the reason itself in ``trajectory.extra["infra"]`` (it wins). Such a
rollout is scored 0 by the gates but counted apart from agent failures everywhere a result is
shown; the scorer retries it once (it never reached a checker, so nothing of it scored).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from harnessevolve.core.enums import StopReason

SERVER_SIDE = re.compile(
    r"InternalServerError|ServiceUnavailable|BadGateway|GatewayTimeout|APIConnectionError|"
    r"Timeout|ConnectionError|ConnectError|\b5\d\d\b",
)
"""A ``model_error`` whose text matches this was the endpoint's failure (5xx, unreachable, timed out)."""
CLIENT_SIDE = re.compile(
    r"\b4\d\d\b|AuthenticationError|PermissionDenied|BadRequest|NotFound|API key|api_key|"
    r"context (?:window|length)|ContextWindowExceeded|not supported|UnsupportedParams",
    re.IGNORECASE,
)
"""...unless it also says the request itself was refused (a 4xx, a missing key, a prompt over the
window): that is the run's input, not the machine. litellm reports any exception of a custom
provider as an ``APIConnectionError``, so the status and words inside count, not that name alone."""

STOP_REASONS = {
    StopReason.SANDBOX_ERROR: "sandbox_start",
    StopReason.SETUP_ERROR: "setup",
    StopReason.TOOL_ERROR: "tool_server",
    StopReason.EXECUTOR_ERROR: "executor",
}


def _error_text(trajectory_extra: Mapping[str, Any], steps: Any) -> str:
    texts = [str(trajectory_extra.get("error", ""))]
    for step in steps or ():
        extra = getattr(step, "extra", None) or {}
        if extra.get("error"):
            texts.append(str(extra["error"]))
    return " ".join(texts)


def infra_reason(trajectory: Any) -> str | None:
    """``sandbox_start``, ``setup``, ``tool_server``, ``endpoint``, ``executor``, ``killed`` (or a
    runner's own word) when ``trajectory`` (an ATIF ``Trajectory``) failed on the machine; None
    when the agent ran and its outcome is its own."""
    extra: Mapping[str, Any] = trajectory.extra
    named = extra.get("infra")
    if named:
        return str(named)
    stop = extra.get("stop_reason")
    if stop in STOP_REASONS:
        return STOP_REASONS[StopReason(stop)]
    if stop == StopReason.MODEL_ERROR:
        text = _error_text(extra, trajectory.steps)
        if SERVER_SIDE.search(text) and not CLIENT_SIDE.search(text):
            return "endpoint"
    return None


def infra_detail(trajectory: Any) -> str:
    """The failure's own words (the first error recorded), for the ledger; at most 300 characters."""
    text = _error_text(trajectory.extra, trajectory.steps).strip()
    return text[:300]
