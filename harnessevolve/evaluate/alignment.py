"""Align a failed run with its reference trajectory and find the first divergent action.

Actions are compared in order: the tool, then the arguments. Two calls of one tool are the same
action when their arguments are similar as text (normalised similarity >= ``ARGUMENT_SIMILARITY``)
*and* name the same operands (the words that decide the effect on the workspace: file names,
numbers, words to write or replace), so ``wc -l  a.txt`` matches ``wc -l a.txt`` but ``wc -l b.txt``
does not; the submitted answer must match exactly after normalisation. At the first mismatch a one-step
look-ahead tells a skipped step (the run does the reference's *next* action) from an extra step
(the run's *next* action is the reference's current one).
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from typing import Any

from harnessevolve.core.atif import Trajectory
from harnessevolve.core.signals import BASE_SEVERITY, Cause, ErrorSignal

ARGUMENT_SIMILARITY = 0.8
LOOP_REPEATS = 3


@dataclass(frozen=True)
class Action:
    step_id: int
    tool: str | None
    arguments: dict[str, Any]
    error: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {"tool": self.tool, "arguments": self.arguments}


def actions(trajectory: Trajectory) -> list[Action]:
    """The agent's actions, one per tool call; a turn with no (readable) call is an action too."""
    out: list[Action] = []
    for step in trajectory.agent_steps:
        error = str(step.extra.get("error", ""))
        if not step.tool_calls:
            out.append(Action(step.step_id, None, {}, error or "no_tool_call"))
        out += [Action(step.step_id, c.function_name, dict(c.arguments), error) for c in step.tool_calls]
    return out


def _norm(value: Any) -> str:
    return re.sub(r"\s+", " ", str(value)).strip()


def argument_similarity(a: dict[str, Any], b: dict[str, Any]) -> float:
    keys = set(a) | set(b)
    if not keys:
        return 1.0
    total = 0.0
    for key in keys:
        if key in a and key in b:
            total += difflib.SequenceMatcher(None, _norm(a[key]), _norm(b[key])).ratio()
    return total / len(keys)


_OPERAND = re.compile(r"""[^\s'"`;&|<>(){}]+""")


def operands(value: Any) -> frozenset[str]:
    """The words of an argument that decide its effect, ignoring quoting, shell punctuation, a
    leading ``./`` and a trailing ``/``: ``mv a.txt old/`` and ``mv ./a.txt 'old'`` have the same."""
    words = (w.removeprefix("./") for w in _OPERAND.findall(str(value)))
    return frozenset(w.rstrip("/") or w for w in words)


def same_arguments(a: dict[str, Any], b: dict[str, Any]) -> bool:
    if argument_similarity(a, b) < ARGUMENT_SIMILARITY:
        return False
    return all(operands(a[key]) == operands(b[key]) for key in set(a) & set(b))


def same_action(run: Action, ref: Action) -> bool:
    if run.tool != ref.tool:
        return False
    if run.tool == "submit":
        return (
            _norm(run.arguments.get("answer", "")).lower() == _norm(ref.arguments.get("answer", "")).lower()
        )
    return same_arguments(run.arguments, ref.arguments)


def _describe(action: Action | None) -> str:
    if action is None or action.tool is None:
        return "nothing"
    args = ", ".join(f"{k}={_norm(v)[:60]!r}" for k, v in action.arguments.items())
    return f"{action.tool}({args})"


def _signal(
    task_id: str,
    cause: Cause,
    run: Action | None,
    ref: Action | None,
    ref_index: int | None,
    hint: str,
    score: float,
) -> ErrorSignal:
    severity = BASE_SEVERITY[cause] * (1.0 - 0.5 * score)
    return ErrorSignal(
        task_id=task_id,
        cause=cause,
        severity=severity,
        hint=hint,
        step=run.step_id if run else None,
        reference_step=ref_index,
        actual=run.as_dict() if run else None,
        expected=ref.as_dict() if ref else None,
    )


def _error_cause(run: Action) -> Cause | None:
    if run.error.startswith(("parse_error", "no_tool_call")):
        return Cause.FORMAT_ERROR
    if run.error.startswith("unknown_tool"):
        return Cause.UNKNOWN_TOOL
    if run.error.startswith(("bad_arguments", "tool_error: missing argument")):
        return Cause.MISSING_ARGUMENT
    if run.error.startswith("model_error"):
        return Cause.MODEL_ERROR
    return None


def _loop_start(run: list[Action]) -> Action | None:
    for i in range(len(run) - LOOP_REPEATS + 1):
        window = run[i : i + LOOP_REPEATS]
        if all(a.tool == window[0].tool and a.arguments == window[0].arguments for a in window):
            return run[i]
    return None


def first_divergence(trajectory: Trajectory, reference: Trajectory, *, score: float = 0.0) -> ErrorSignal:
    """The first step where the failed run leaves the reference's path, with cause and hint."""
    task_id = trajectory.task_id or reference.task_id or "?"
    run, ref = actions(trajectory), [a for a in actions(reference) if a.tool is not None]
    for i, act in enumerate(run):
        expected = ref[i] if i < len(ref) else None
        cause = _error_cause(act)
        if cause is not None:
            hint = {
                Cause.FORMAT_ERROR: f"step {act.step_id}: the reply was not a tool call ({act.error}); "
                f"the reference did {_describe(expected)}",
                Cause.UNKNOWN_TOOL: f"step {act.step_id}: called a tool that does not exist ({act.tool}); "
                f"the reference did {_describe(expected)}",
                Cause.MISSING_ARGUMENT: f"step {act.step_id}: {act.tool} was called without its required "
                f"arguments; the reference did {_describe(expected)}",
                Cause.MODEL_ERROR: f"step {act.step_id}: the model provider failed ({act.error}); "
                "the run is not evidence about the harness",
            }[cause]
            return _signal(task_id, cause, act, expected, i + 1 if expected else None, hint, score)
        if expected is None:
            if act.tool == "submit":
                break
            return _signal(
                task_id,
                Cause.EXTRA_STEP,
                act,
                None,
                None,
                f"step {act.step_id}: {_describe(act)} after the reference had finished",
                score,
            )
        if same_action(act, expected):
            continue
        looping = i > 0 and _loop_start(run[i - 1 :]) is run[i - 1]
        if looping:
            hint = f"step {act.step_id}: repeating {_describe(act)} instead of {_describe(expected)}"
            return _signal(task_id, Cause.STEP_LIMIT, act, expected, i + 1, hint, score)
        prev_error = i > 0 and run[i - 1].error.startswith("tool_error")
        nxt_ref = ref[i + 1] if i + 1 < len(ref) else None
        nxt_run = run[i + 1] if i + 1 < len(run) else None
        if prev_error:
            cause, hint = (
                Cause.TOOL_ERROR_IGNORED,
                (
                    f"step {act.step_id}: the previous command failed ({run[i - 1].error}) and the agent "
                    f"went on with {_describe(act)} instead of fixing it; "
                    f"the reference did {_describe(expected)}"
                ),
            )
        elif act.tool == "submit" and expected.tool != "submit":
            cause, hint = (
                Cause.PREMATURE_FINISH,
                (f"step {act.step_id}: submitted before doing {_describe(expected)} as the reference did"),
            )
        elif nxt_ref is not None and same_action(act, nxt_ref):
            cause, hint = (
                Cause.SKIPPED_STEP,
                (f"step {act.step_id}: skipped {_describe(expected)} and went to {_describe(act)}"),
            )
        elif nxt_run is not None and same_action(nxt_run, expected):
            cause, hint = (
                Cause.EXTRA_STEP,
                (f"step {act.step_id}: an unneeded {_describe(act)} before {_describe(expected)}"),
            )
        elif act.tool != expected.tool:
            cause, hint = (
                Cause.WRONG_TOOL,
                (f"step {act.step_id}: used {act.tool} where the reference used {_describe(expected)}"),
            )
        else:
            cause, hint = (
                Cause.WRONG_ARGUMENT,
                (f"step {act.step_id}: {_describe(act)} where the reference did {_describe(expected)}"),
            )
        return _signal(task_id, cause, act, expected, i + 1, hint, score)
    return _without_divergent_action(task_id, trajectory, run, ref, score)


def _without_divergent_action(
    task_id: str, trajectory: Trajectory, run: list[Action], ref: list[Action], score: float
) -> ErrorSignal:
    """Every action matched the reference's prefix: the run stopped early, or looped."""
    stop = trajectory.extra.get("stop_reason")
    nxt = ref[len(run)] if len(run) < len(ref) else None
    if stop == "model_error":
        return _signal(
            task_id,
            Cause.MODEL_ERROR,
            run[-1] if run else None,
            nxt,
            len(run) + 1 if nxt else None,
            "the model provider failed; the run is not evidence about the harness",
            score,
        )
    if stop == "setup_error":
        return _signal(
            task_id, Cause.SETUP_ERROR, None, None, None, "the task's workspace setup failed", score
        )
    looped = _loop_start(run)
    if stop in ("step_limit", "repeated") or looped is not None:
        where = looped or (run[-1] if run else None)
        return _signal(
            task_id,
            Cause.STEP_LIMIT,
            where,
            nxt,
            len(run) + 1 if nxt else None,
            f"the run hit the step limit{' repeating ' + _describe(looped) if looped else ''} "
            f"before {_describe(nxt)}",
            score,
        )
    last = run[-1] if run else None
    return _signal(
        task_id,
        Cause.WRONG_ARGUMENT,
        last,
        ref[-1] if ref else None,
        len(ref) or None,
        "the run followed the reference's steps but the checker still failed",
        score,
    )


def signal_without_reference(trajectory: Trajectory, *, score: float = 0.0) -> ErrorSignal:
    """The same fields, from the run alone: no step, the cause read off its errors and stop reason."""
    task_id = trajectory.task_id or "?"
    run = actions(trajectory)
    for act in run:
        cause = _error_cause(act)
        if cause is not None:
            return ErrorSignal(
                task_id,
                cause,
                BASE_SEVERITY[cause] * (1 - 0.5 * score),
                f"{cause.value} at step {act.step_id} ({act.error})",
            )
    stop = trajectory.extra.get("stop_reason")
    cause = {
        "step_limit": Cause.STEP_LIMIT,
        "repeated": Cause.STEP_LIMIT,
        "model_error": Cause.MODEL_ERROR,
        "setup_error": Cause.SETUP_ERROR,
    }.get(stop, Cause.WRONG_ARGUMENT)
    hint = f"no reference trajectory; the run ended with {stop} and the checker failed"
    return ErrorSignal(task_id, cause, BASE_SEVERITY[cause] * (1 - 0.5 * score), hint)


@dataclass(frozen=True)
class AlignedRow:
    """One row of a full alignment: a run action, a reference action, or both side by side."""

    run: Action | None
    reference: Action | None
    reference_index: int | None
    """1-based index of ``reference`` among the reference's actions."""
    match: bool


GAP_COST, SAME_TOOL_COST, OTHER_TOOL_COST = 1.0, 1.0, 1.5


def align(trajectory: Trajectory, reference: Trajectory) -> list[AlignedRow]:
    """Every action of the run against every action of the reference (a global alignment: the
    fewest unmatched actions, a changed argument costing less than a changed tool), for display.

    ``first_divergence`` is what decides the divergent step; this only lays the two runs out.
    """
    run, ref = actions(trajectory), [a for a in actions(reference) if a.tool is not None]
    n, m = len(run), len(ref)

    def pair_cost(a: Action, b: Action) -> float:
        if same_action(a, b):
            return 0.0
        return SAME_TOOL_COST if a.tool == b.tool else OTHER_TOOL_COST

    cost = [[0.0] * (m + 1) for _ in range(n + 1)]
    for i in range(n + 1):
        for j in range(m + 1):
            if i == 0 or j == 0:
                cost[i][j] = (i + j) * GAP_COST
                continue
            cost[i][j] = min(
                cost[i - 1][j - 1] + pair_cost(run[i - 1], ref[j - 1]),
                cost[i - 1][j] + GAP_COST,
                cost[i][j - 1] + GAP_COST,
            )
    rows: list[AlignedRow] = []
    i, j = n, m
    while i or j:
        if i and j and cost[i][j] == cost[i - 1][j - 1] + pair_cost(run[i - 1], ref[j - 1]):
            rows.append(AlignedRow(run[i - 1], ref[j - 1], j, same_action(run[i - 1], ref[j - 1])))
            i, j = i - 1, j - 1
        elif i and cost[i][j] == cost[i - 1][j] + GAP_COST:
            rows.append(AlignedRow(run[i - 1], None, None, False))
            i -= 1
        else:
            rows.append(AlignedRow(None, ref[j - 1], j, False))
            j -= 1
    return rows[::-1]


def describe(action: Action | None) -> str:
    """``tool(key='value', ...)``, or ``nothing`` for a turn without a tool call."""
    return _describe(action)
