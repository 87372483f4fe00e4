"""Align a failed run with its reference trajectory and find the first divergent action.

Reads only the ATIF content plus the tool definitions when present (``actions.py`` says how
actions, finishes and turns are read; ``call_match.py`` when two calls are the same). Two calls
whose text differs still match when their **effect** is the same (``effect_match.py``): the same
informative observation, or, given an effect oracle (tasks with an ``effect`` check), the same
stdout, exit status and files. The actions are compared in order; at the first mismatch:

1. a malformed reply or non-JSON arguments (``format_error``), a tool no definition offers, a call
   missing a required argument as the loop recorded it, or a provider failure decides the cause;
2. a failed call (its observation reports an error the reference's did not) that the run retried
   or recovered from (the reference's action follows within ``RECOVERY_WINDOW`` actions) is not a
   divergence; one the run went on from is ``tool_error_ignored``, on the step that went on;
3. ``LOOP_REPEATS`` identical calls (after normalisation) are ``step_limit``, and so is a call
   redone (the same call, or the same code) where the reference finished, or any call there when
   the run never finished and was stopped by a limit;
4. a finish while the reference still had calls is ``premature_finish``, and so is a finish without
   the answer the reference's finishing call gave (a plain message where it called ``submit``);
   a submitted answer that differs from the reference's is ``wrong_argument`` on the submit, its
   hint saying what was submitted instead (an observation's text, another call's argument);
5. a one-step look-ahead (and the turn each action belongs to) tells a skipped step from an extra
   one; an unneeded *read-only* call is not counted while a later divergence explains the failure;
6. otherwise ``unknown_tool`` / ``wrong_tool`` / ``missing_argument`` / ``wrong_argument``.

**Step convention** (the same in ``diff``, the ledger, clusters and reports): ``step`` is the ATIF
``step_id`` in the run and ``reference_step`` the ATIF ``step_id`` in the reference, each of the
step holding the action at the divergence. When the run *lacks* an action (a skipped step), its
``step`` is where the two first differ step for step: the first step after the last action the
run got right that is not in an earlier turn than the missing action's, nor the user message that
opens its turn. That is the step holding what the run did instead, or, when the skipped call
ended a turn, the user step that began the next one. While the run matches the reference step for
step, ``step == reference_step``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from harnessevolve.core.atif import Trajectory
from harnessevolve.core.signals import BASE_SEVERITY, Cause, ErrorSignal
from harnessevolve.evaluate.actions import LIMIT_STOPS, Action, error_cause, read_actions, read_only, stop_key
from harnessevolve.evaluate.call_match import (
    ARGUMENT_SIMILARITY,
    Difference,
    argument_similarity,
    difference,
    operands,
)
from harnessevolve.evaluate.effect_match import EffectOracle, code_argument, same_observation
from harnessevolve.evaluate.no_reference import signal_without_reference
from harnessevolve.evaluate.side_by_side import GAP_COST, OTHER_TOOL_COST, SAME_TOOL_COST, AlignedRow, align
from harnessevolve.evaluate.tool_schemas import ToolSet, canonical_call, offered_tools

__all__ = [
    "ARGUMENT_SIMILARITY",
    "GAP_COST",
    "OTHER_TOOL_COST",
    "SAME_TOOL_COST",
    "Action",
    "AlignedRow",
    "actions",
    "align",
    "argument_similarity",
    "describe",
    "first_divergence",
    "offered_tools",
    "operands",
    "signal_without_reference",
]

LOOP_REPEATS = 3
RECOVERY_WINDOW = 3
HARMLESS_ONLY = "a read-only call; nothing else differed"


def actions(trajectory: Trajectory, tools: Iterable[Any] | None = None) -> list[Action]:
    """The agent's actions (calls, finishes, malformed replies) in order."""
    return list(read_actions(trajectory, offered_tools(trajectory, tools=tools)).actions)


def _describe(action: Action | None) -> str:
    if action is None:
        return "nothing"
    if action.tool is None:
        return "finish" if action.is_finish else "nothing"
    if action.raw_arguments is not None:
        return f"{action.tool}({_short(action.raw_arguments)!r})"
    args = ", ".join(f"{k}={_short(v)!r}" for k, v in action.arguments.items())
    return f"{action.tool}({args})"


def _short(value: Any) -> str:
    return " ".join(str(value).split())[:60]


def describe(action: Action | None) -> str:
    """``tool(key='value', ...)``, ``finish`` for a final message, or ``nothing``."""
    return _describe(action)


@dataclass
class _Context:
    task_id: str
    run: list[Action]
    ref: list[Action]
    tools: ToolSet
    score: float
    gaps: list[str]
    turns_comparable: bool
    opening: int | None
    """The run's first user step (a skipped first action belonged right after it)."""
    steps: list[tuple[int, int, str]]
    """The run's steps as (step_id, turn, source); a user step belongs to the turn it opens."""
    hit_limit: bool = False
    """The run was stopped by a limit (steps, repeats, cost), not by finishing."""
    answered: bool = True
    """Whether the run gave an answer at all (its finishing call's, or its runner's)."""
    oracle: EffectOracle | None = None
    effects: dict[tuple[int, int], bool] = field(default_factory=dict)
    """Effect comparisons made so far, by (id of the run action, id of the reference action)."""

    def signal(
        self, cause: Cause, act: Action | None, exp: Action | None, hint: str, *, step: int | None = None
    ) -> ErrorSignal:
        severity = BASE_SEVERITY[cause] * (1.0 - 0.5 * self.score)
        gaps = list(self.gaps)
        if cause is Cause.WRONG_TOOL and not self.tools.known:
            gaps.append("no tool definitions: a tool that does not exist cannot be told from a wrong one")
        return ErrorSignal(
            task_id=self.task_id,
            cause=cause,
            severity=severity,
            hint=hint,
            step=step if step is not None else (act.step_id if act else None),
            reference_step=exp.step_id if exp else None,
            actual=act.as_dict() if act else None,
            expected=exp.as_dict() if exp else None,
            gaps=tuple(dict.fromkeys(gaps)),
        )

    def differs(self, a: Action, b: Action) -> Difference | None:
        if a.is_finish and b.is_finish and a.tool is None and not self.answered and b.arguments.get("answer"):
            return Difference("tool", None, "finished without an answer")
        diff = difference(a, b, self.tools.get(b.tool))
        if diff is None or a.is_finish or b.is_finish or a.tool is None or b.tool is None:
            return diff
        return None if self.same_effect(a, b) else diff

    def same_effect(self, a: Action, b: Action) -> bool:
        """``a`` does what ``b`` did though its call differs (see ``effect_match``)."""
        key = (id(a), id(b))
        if key not in self.effects:
            found = same_observation(a, b)
            if not found and self.oracle is not None:
                index = next((k for k, r in enumerate(self.ref) if r is b), len(self.ref))
                found = self.oracle(a, b, self.ref[:index]) is True
            self.effects[key] = found
        return self.effects[key]

    def same(self, a: Action | None, b: Action | None) -> bool:
        return a is not None and b is not None and self.differs(a, b) is None

    def key(self, a: Action) -> str:
        return canonical_call(a.tool, a.arguments, self.tools.get(a.tool)) + (a.raw_arguments or "")


def _error_signal(ctx: _Context, cause: Cause, act: Action, exp: Action | None) -> ErrorSignal:
    hint = {
        Cause.FORMAT_ERROR: f"step {act.step_id}: the reply was not a (readable) tool call ({act.error}); "
        f"the reference did {_describe(exp)}",
        Cause.UNKNOWN_TOOL: f"step {act.step_id}: called a tool that does not exist ({act.tool}); "
        f"the reference did {_describe(exp)}",
        Cause.MISSING_ARGUMENT: f"step {act.step_id}: {act.tool} was called without its required "
        f"arguments; the reference did {_describe(exp)}",
        Cause.MODEL_ERROR: f"step {act.step_id}: the model provider failed ({act.error}); "
        "the run is not evidence about the harness",
    }[cause]
    return ctx.signal(cause, act, exp, hint)


def _repeats(ctx: _Context, act: Action, before: Action) -> bool:
    """``act`` redoes ``before``: the same call, or the same code with other (unknown) arguments."""
    if act.is_finish or before.is_finish or act.tool != before.tool:
        return False
    code = code_argument(act)
    return ctx.key(act) == ctx.key(before) or (code is not None and code == code_argument(before))


def _loop_at(ctx: _Context, run: list[Action], start: int) -> bool:
    window = run[start : start + LOOP_REPEATS]
    return len(window) == LOOP_REPEATS and len({ctx.key(a) for a in window}) == 1 and not window[0].is_finish


def _recovers(ctx: _Context, i: int, exp: Action | None, *, attempt_at_exp: bool) -> int | None:
    """After the failed call ``run[i]``: the index of the later action, within the recovery window,
    that does ``exp`` after all, or None. ``attempt_at_exp``: the failed call was ``exp`` itself
    (then anything may come between: the agent fixed the cause and retried); else it was another
    call of ``exp``'s tool (a retry with other arguments), and only retries or read-only calls (looking
    into the error) may come between."""
    if exp is None or not (attempt_at_exp or ctx.run[i].tool == exp.tool):
        return None
    for d in range(1, RECOVERY_WINDOW + 1):
        if i + d >= len(ctx.run):
            return None
        nxt = ctx.run[i + d]
        if ctx.same(nxt, exp):
            return i + d
        if nxt.is_finish or not (attempt_at_exp or nxt.tool == exp.tool or read_only(nxt, ctx.tools)):
            return None
    return None


def first_divergence(
    trajectory: Trajectory,
    reference: Trajectory,
    *,
    score: float = 0.0,
    tools: Iterable[Any] | None = None,
    oracle: EffectOracle | None = None,
) -> ErrorSignal:
    """The first step where the failed run leaves the reference's path, with cause and hint.

    ``tools``: tool definitions the caller knows (the harness's or the task's), added to those the
    trajectories carry. ``oracle``: tells whether two differing calls have the same effect
    (``effect_check.effect_oracle`` for tasks with an effect check); observations are compared
    without one."""
    offered = offered_tools(trajectory, reference, tools=tools)
    run_list, ref_list = read_actions(trajectory, offered), read_actions(reference, offered)
    ctx = _Context(
        task_id=trajectory.task_id or reference.task_id or "?",
        run=list(run_list.actions),
        ref=[a for a in ref_list.actions if a.kind != "malformed"],
        tools=offered,
        score=score,
        gaps=list(run_list.gaps),
        turns_comparable=run_list.turns == ref_list.turns,
        opening=next((s.step_id for s in trajectory.steps if s.source == "user"), None),
        steps=_step_turns(trajectory),
        answered=bool(trajectory.extra.get("answer"))
        or any(a.arguments.get("answer") for a in run_list.actions),
        hit_limit=stop_key(trajectory.extra.get("stop_reason")) in LIMIT_STOPS,
        oracle=oracle,
    )
    return _walk(ctx, trajectory)


def _step_turns(trajectory: Trajectory) -> list[tuple[int, int, str]]:
    out, turn = [], 0
    for step in trajectory.steps:
        turn += step.is_user_turn
        out.append((step.step_id, turn, step.source))
    return out


def _walk(ctx: _Context, trajectory: Trajectory) -> ErrorSignal:
    run, ref = ctx.run, ctx.ref
    i = j = 0
    last: Action | None = None  # the last run action consumed (matched, recovered or harmless)
    pending: ErrorSignal | None = None  # a harmless unneeded call, reported if nothing else is found
    while i < len(run):
        act, exp = run[i], (ref[j] if j < len(ref) else None)
        cause = error_cause(act)
        if cause is not None:
            return _error_signal(ctx, cause, act, exp)
        if exp is None:
            if act.is_finish:
                break
            return ctx.signal(
                Cause.EXTRA_STEP,
                act,
                None,
                f"step {act.step_id}: {_describe(act)} after the reference had finished",
            )
        diff = ctx.differs(act, exp)
        failed_here = act.tool_failed and not (diff is None and exp.tool_failed)
        if failed_here:
            back = _recovers(ctx, i, exp, attempt_at_exp=diff is None)
            if back is not None:  # retried or recovered: the failed attempts are not the divergence
                last, i = run[back - 1], back
                continue
            nxt_ref = ref[j + 1] if j + 1 < len(ref) else None
            nxt = run[i + 1] if i + 1 < len(run) else None
            if nxt is not None and diff is None:
                hint = (
                    f"step {nxt.step_id}: the previous command {_describe(act)} failed "
                    f"({act.error.removeprefix('tool_error: ')}) and the agent went on with {_describe(nxt)} "
                    f"instead of retrying or fixing it; the reference's call succeeded"
                )
                return ctx.signal(Cause.TOOL_ERROR_IGNORED, nxt, nxt_ref, hint)
        if diff is None:
            last, i, j = act, i + 1, j + 1
            continue
        found = _classify(ctx, i, j, diff, last)
        if found is None:  # a harmless unneeded call: remember it and look further
            pending = pending or _extra(ctx, act, exp)
            last, i = act, i + 1
            continue
        return found
    return _without_divergent_action(ctx, trajectory, j, last, pending)


def _extra(ctx: _Context, act: Action, exp: Action) -> ErrorSignal:
    return ctx.signal(
        Cause.EXTRA_STEP,
        act,
        exp,
        f"step {act.step_id}: an unneeded {_describe(act)} before {_describe(exp)}",
    )


def _slot(ctx: _Context, act: Action, last: Action | None, exp: Action) -> int:
    """The run's step where the skipped ``exp`` belonged (see the module docstring): the first step
    after the last action the run got right that is neither in an earlier turn than ``exp``'s nor
    the user step opening ``exp``'s turn (the run and the reference still agree on those)."""
    after = last.step_id if last is not None else 0
    if ctx.turns_comparable:
        for step_id, turn, source in ctx.steps:
            if step_id <= after or turn < exp.turn or (turn == exp.turn and source == "user"):
                continue
            return min(step_id, act.step_id)
        return act.step_id
    before = last.step_id if last is not None else ctx.opening
    return act.step_id if before is None else min(act.step_id, before + 1)


def _classify(ctx: _Context, i: int, j: int, diff: Difference, last: Action | None) -> ErrorSignal | None:
    run, ref = ctx.run, ctx.ref
    act, exp = run[i], ref[j]
    nxt_ref = ref[j + 1] if j + 1 < len(ref) else None
    nxt = run[i + 1] if i + 1 < len(run) else None
    if i > 0 and _loop_at(ctx, run, i - 1):
        return ctx.signal(
            Cause.STEP_LIMIT,
            act,
            exp,
            f"step {act.step_id}: repeating {_describe(act)} instead of {_describe(exp)}",
        )
    if exp.is_finish and not act.is_finish:
        if i > 0 and _repeats(ctx, act, run[i - 1]):
            hint = (
                f"step {act.step_id}: repeated {_describe(act)} instead of finishing with "
                f"{_describe(exp)} as the reference did"
            )
            return ctx.signal(Cause.STEP_LIMIT, act, exp, hint)
        if ctx.hit_limit and exp.tool is not None and not any(a.is_finish for a in run[i:]):
            hint = (
                f"step {act.step_id}: went on with {_describe(act)} instead of finishing with "
                f"{_describe(exp)} as the reference did, and never finished (stopped by the step limit)"
            )
            return ctx.signal(Cause.STEP_LIMIT, act, exp, hint)
        hint = f"step {act.step_id}: {_describe(act)} after the reference had finished"
        if exp.tool is not None:
            hint += f" (the reference did {_describe(exp)} here)"
        return ctx.signal(Cause.EXTRA_STEP, act, None, hint)
    if act.is_finish and exp.is_finish:
        return _finish_signal(ctx, i, act, exp, diff)
    if act.is_finish and not exp.is_finish:
        return ctx.signal(
            Cause.PREMATURE_FINISH,
            act,
            exp,
            f"step {act.step_id}: {'submitted' if act.tool else 'finished'} before doing {_describe(exp)} "
            "as the reference did",
        )
    later_turn = ctx.turns_comparable and act.turn > exp.turn
    if ctx.same(act, nxt_ref) or (later_turn and not exp.is_finish):
        hint = f"step {_slot(ctx, act, last, exp)}: skipped {_describe(exp)} and went to {_describe(act)}"
        return ctx.signal(Cause.SKIPPED_STEP, act, exp, hint, step=_slot(ctx, act, last, exp))
    harmless = read_only(act, ctx.tools) and not exp.is_finish
    earlier_turn = ctx.turns_comparable and act.turn < exp.turn
    if ctx.same(nxt, exp) or earlier_turn:
        return None if harmless and not earlier_turn else _extra(ctx, act, exp)
    if (
        harmless
        and act.tool != exp.tool
        and nxt is not None
        and nxt.tool == exp.tool
        and not ctx.same(nxt, nxt_ref)
    ):
        return None
    if ctx.tools.offers(act.tool or "") is False:
        return _error_signal(ctx, Cause.UNKNOWN_TOOL, act, exp)
    if diff.kind == "tool":
        return ctx.signal(
            Cause.WRONG_TOOL,
            act,
            exp,
            f"step {act.step_id}: used {act.tool} where the reference used {_describe(exp)}",
        )
    if diff.kind == "missing":
        hint = (
            f"step {act.step_id}: {_describe(act)} leaves out {diff.key}; the reference did {_describe(exp)}"
        )
        return ctx.signal(Cause.MISSING_ARGUMENT, act, exp, hint)
    detail = f" ({diff.detail})" if diff.detail else ""
    hint = f"step {act.step_id}: {_describe(act)} where the reference did {_describe(exp)}{detail}"
    return ctx.signal(Cause.WRONG_ARGUMENT, act, exp, hint)


def _finish_signal(ctx: _Context, i: int, act: Action, exp: Action, diff: Difference) -> ErrorSignal:
    """Both finished, differently: without the reference's answer, or with another one."""
    if diff.kind == "tool":
        hint = (
            f"step {act.step_id}: ended with {'a plain message' if act.tool is None else _describe(act)} "
            f"instead of {_describe(exp)} as the reference did, so no answer reached the checker"
        )
        return ctx.signal(Cause.PREMATURE_FINISH, act, exp, hint)
    answer = " ".join(str(act.arguments.get("answer", "")).split())
    expected = " ".join(str(exp.arguments.get("answer", "")).split())
    what = _answer_source(ctx.run[:i], answer)
    reference_what = _answer_source(ctx.ref[: next(k for k, r in enumerate(ctx.ref) if r is exp)], expected)
    hint = f"step {act.step_id}: submitted {_short(answer)!r}"
    if what:
        hint += f" ({what})"
    hint += f" where the reference submitted {_short(expected)!r}"
    if reference_what:
        hint += f" ({reference_what})"
    return ctx.signal(Cause.WRONG_ARGUMENT, act, exp, hint)


def _answer_source(before: list[Action], answer: str) -> str:
    """Where an answer came from among the earlier calls: a call's own argument (a command it
    ran), or the text a call observed (its output)."""
    if not answer:
        return "an empty answer"
    low = answer.lower()
    for a in reversed(before):
        if any(" ".join(str(v).split()).lower() == low for v in a.arguments.values()):
            return f"the argument of its call at step {a.step_id}"
    for a in reversed(before):
        seen = " ".join((a.observation or "").split()).lower()
        if len(low) >= 2 and seen and low in seen:
            return f"the output of step {a.step_id} instead of the call that produced it"
    return ""


def _without_divergent_action(
    ctx: _Context, trajectory: Trajectory, j: int, last: Action | None, pending: ErrorSignal | None
) -> ErrorSignal:
    """Every action matched the reference's prefix (but for harmless extra calls, the first of which
    is ``pending``): the provider or setup failed, the run looped or stopped early, or an extra
    call is all that differs."""
    run, ref = ctx.run, ctx.ref
    stop = stop_key(trajectory.extra.get("stop_reason"))
    nxt = ref[j] if j < len(ref) else None
    if stop == "modelerror":
        hint = "the model provider failed; the run is not evidence about the harness"
        return ctx.signal(Cause.MODEL_ERROR, run[-1] if run else None, nxt, hint)
    if stop == "setuperror":
        return ctx.signal(Cause.SETUP_ERROR, None, None, "the task's workspace setup failed")
    looped = next((run[k] for k in range(len(run)) if _loop_at(ctx, run, k)), None)
    if stop in LIMIT_STOPS or looped is not None:
        where = looped or (run[-1] if run else None)
        repeating = f" repeating {_describe(looped)}" if looped else ""
        return ctx.signal(
            Cause.STEP_LIMIT, where, nxt, f"the run hit the step limit{repeating} before {_describe(nxt)}"
        )
    if pending is not None:
        return replace(pending, hint=f"{pending.hint} ({HARMLESS_ONLY})")
    if nxt is not None and not nxt.is_finish:
        end = run[-1] if run else None
        step = trajectory.steps[-1].step_id if trajectory.steps else None
        hint = f"the run ended before doing {_describe(nxt)} as the reference did"
        return ctx.signal(
            Cause.PREMATURE_FINISH, end, nxt, hint, step=end.step_id if end and end.is_finish else step
        )
    return ctx.signal(
        Cause.WRONG_ARGUMENT,
        last or (run[-1] if run else None),
        ref[-1] if ref else None,
        "the run followed the reference's steps but the checker still failed",
    )
