"""Cross-stage values are str enums: on disk they are the same plain strings as before."""

from __future__ import annotations

import json

from harnessevolve.core.enums import INFRASTRUCTURE_STOPS, Outcome, StopReason, Verdict
from harnessevolve.execute import agent


def test_members_are_their_strings_in_json_and_compare_equal_to_them() -> None:
    record = {"stop_reason": StopReason.MODEL_ERROR, "verdict": Verdict.ACCEPTED, "outcome": Outcome.REJECT}
    assert json.loads(json.dumps(record)) == {
        "stop_reason": "model_error",
        "verdict": "accepted",
        "outcome": "reject",
    }
    assert StopReason("step_limit") is StopReason.STEP_LIMIT and "setup_error" in INFRASTRUCTURE_STOPS


def test_the_builtin_agent_uses_the_shared_stop_reasons() -> None:
    assert agent.StopReason is StopReason
