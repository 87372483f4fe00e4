"""BFCL's multi-turn checker as a per-turn harnessevolve ``python`` check (runs in the sandbox).

For turn ``k`` it does what ``bfcl_eval``'s ``multi_turn_checker`` does at turn ``k``, with BFCL's
own functions: the model's calls of turns 0..k (from the tool server's call log, exact arguments)
and the ground truth's calls of turns 0..k are executed on fresh backend instances by
``execute_multi_turn_func_call``; then

- a turn whose ground truth is empty must have no model call (``multi_turn_irrelevance_checker``);
- a turn with ground truth needs at least one model call (``empty_turn_model_response``);
- ``state_checker``: every backend instance has the ground truth's public attributes;
- ``response_checker``: every ground-truth result of turn k is among the model's results so far.

Score 1 when the turn passes, else 0 with BFCL's error type and message as the reason. This file
is on the BFCL tasks' ``python_path`` and imports only ``bfcl_eval``.
"""

from __future__ import annotations

import itertools
from typing import Any

_runs = itertools.count()


def call_text(call: dict[str, Any]) -> str:
    """A logged call as the Python call text BFCL executes: ``mv(source='a', destination='b')``."""
    arguments = ", ".join(f"{k}={v!r}" for k, v in (call.get("arguments") or {}).items())
    return f"{call['tool']}({arguments})"


def model_calls_by_turn(check: Any) -> list[list[str]]:
    """The model's calls grouped by the turn they were made in (tool server log order)."""
    extra = check.trajectory.get("extra") or {}
    calls = check.state["calls"] if check.state else []
    counts = extra.get("turn_call_counts") or []
    turns: list[list[str]] = []
    start = 0
    for k in range(check.turn + 1):
        end = counts[k] if k < len(counts) and counts[k] >= 0 else len(calls)
        turns.append([call_text(c) for c in calls[start:end]])
        start = end
    return turns


def _execute(calls: list[str], args: dict[str, Any], label: str) -> tuple[list[str], dict[str, Any]]:
    from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_utils import execute_multi_turn_func_call

    return execute_multi_turn_func_call(
        func_call_list=calls,
        initial_config=args["initial_config"],
        involved_classes=args["involved_classes"],
        model_name=label,
        test_entry_id=args["id"],
        long_context=bool(args.get("long_context")),
        is_evaL_run=True,
    )


def score_turn(check: Any) -> tuple[float, str]:
    from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker import response_checker, state_checker

    args, turn = check.args, check.turn
    ground_truth: list[list[str]] = args["ground_truth"]
    model_turns = model_calls_by_turn(check)
    run = next(_runs)
    model_label, gold_label = f"he_model_{turn}_{run}", f"he_gold_{turn}_{run}"
    model_results: list[str] = []
    model_instances: dict[str, Any] = {}
    gold_results: list[str] = []
    gold_instances: dict[str, Any] = {}
    for k in range(turn + 1):
        # One call list per turn; BFCL's instances persist across calls with the same label.
        results, model_instances = _execute(model_turns[k], args, model_label)
        model_results += results
        gold_results, gold_instances = _execute(ground_truth[k], args, gold_label)
    if not ground_truth[turn]:
        if model_turns[turn]:
            return (
                0.0,
                f"multi_turn:irrelevance_error: the model made calls in turn {turn}, "
                "which has no ground truth",
            )
        return 1.0, "no call expected, none made"
    if not model_turns[turn]:
        return 0.0, f"multi_turn:empty_turn_model_response: no call in turn {turn}"
    states = state_checker(model_instances, gold_instances)
    if not states["valid"]:
        differences = ", ".join(states.get("details", {}).get("differences", {})) or "attributes differ"
        return 0.0, f"{states['error_type']}: {states['error_message']} ({differences})"
    responses = response_checker(model_results, gold_results, turn)
    if not responses["valid"]:
        missing = responses.get("details", {}).get("missing_items", [])
        return 0.0, f"{responses['error_type']}: missing {str(missing)[:200]}"
    return 1.0, "state and responses match the ground truth"
