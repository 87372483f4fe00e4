"""The agent loop: model -> tool calls -> observations, until submit or the step limit.

Every model turn becomes an ATIF step. Nothing the model does is a crash: malformed replies,
unknown tools and bad arguments are recorded on the step (``extra.error``) and shown to the model.

Multi-turn tasks (``turns``, or a simulated ``user``): the agent ends its turn by calling
``submit`` or by replying without a tool call; the next user turn is then delivered as a new
``user`` step (``extra.turn``, from 0) and the conversation goes on. ``loop.max_steps`` counts
model calls per user turn. A one-turn task keeps the original rule: a reply without a tool call
is answered with a nudge, and only ``submit`` ends the run.

Tasks with Python or MCP tools get a tool server for the rollout (``tool_server.py``); its state
after each user turn is kept in ``extra.tool_states`` (one per turn), its call log in
``extra.tool_calls`` and each turn's count of calls in ``extra.turn_call_counts``: the inputs of
Python checks.

The loop is cut where runtime components and harness hooks run (``LoopHooks``): each model call
is ``query -> execute_actions -> record`` (``AgentLoop.step``); the hooks run before the query
and between the actions and their record, and hear why the rollout stopped. ``loop_hooks``
is where a harness's runtime components become those hooks (``run_with_hooks`` takes them
directly). The conversation is one ``core.transcript.Transcript``: the messages the model is
shown are its source of truth, the trajectory's steps are derived from them. Ending a user turn
(``TurnEnded``) and ending the rollout (``Stopped``, carrying its ``StopReason``) are exceptions.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harnessevolve.core.atif import ObservationResult, Step, ToolCall, Trajectory
from harnessevolve.core.enums import StopReason
from harnessevolve.core.tasks import Task
from harnessevolve.core.transcript import NO_TOOL_NUDGE, PARSE_NUDGE, parse_nudge
from harnessevolve.execute import check_writes, verify_finish
from harnessevolve.execute.call_checks import checked_call
from harnessevolve.execute.rollout_tools import OfferedTool, dispatch, rollout_tools
from harnessevolve.execute.tool_server import ToolServer, ToolServerError, agent_view, with_read_only
from harnessevolve.execute.user_turn import simulated_turn
from harnessevolve.harness.model import ANSWER_CHECK_REPLY, FINAL_SUBMIT_ASK, Harness
from harnessevolve.models import ModelReply, acomplete
from harnessevolve.sandbox.base import Sandbox, resolve_sandbox

# fmt: off
__all__ = [
    "NO_TOOL_NUDGE", "PARSE_NUDGE", "Actions", "AgentLoop", "LoopHooks", "NoHooks", "Rollout", "Stopped",
    "TurnEnded", "repeats_last", "Settings", "loop_hooks", "run_agent", "run_with_hooks",
]
# fmt: on

from harnessevolve.execute.loop_state import (  # the loop's state and cut points, re-exported
    NO_HOOKS,
    Actions,
    LoopHooks,
    NoHooks,
    Rollout,
    Stopped,
    TurnEnded,
    _metrics,
    _now,
    _token_ids,
    _trajectory,
    repeats_last,
)


@dataclass
class AgentLoop:
    """One user turn of the builtin agent: ``step`` (query -> execute_actions -> record) until the
    agent ends its turn (``TurnEnded``) or the rollout stops (``Stopped``)."""

    harness: Harness
    tools: dict[str, OfferedTool]
    rollout: Rollout
    workspace: Path
    model: str
    seed: int
    server: ToolServer | None
    sandbox: Sandbox | None
    """Where the agent's commands run (its view: the benchmark's code paths hidden)."""
    multi_turn: bool
    hooks: LoopHooks = field(default_factory=NoHooks)

    def __post_init__(self) -> None:
        self.loop = self.harness.loop
        self.schemas = [t.spec.openai_schema() for t in self.tools.values()]
        # Options of the embedded provider only: grammar-constrained calls; with repair_calls, a
        # call whose arguments miss the schema comes back as a call (repaired here), not a parse error.
        local = self.model.startswith("local/")
        params = {"grammar_tools": self.loop.json_grammar, "keep_mistyped_calls": self.loop.repair_calls}
        self.extra_params = {k: True for k, on in params.items() if on and local} or None

    async def run_turn(self) -> None:
        """Model calls until the agent ends its turn; raises ``TurnEnded`` (multi-turn) or ``Stopped``."""
        for _ in range(self.loop.max_steps):
            await self.step()
        raise Stopped(StopReason.STEP_LIMIT)

    async def step(self) -> None:
        """One model call: query -> execute_actions -> record, the hooks between. A hook that
        raises ``Stopped`` still has the step recorded, and its reason wins."""
        await self.hooks.before_query(self.rollout)
        reply = await self.hooks.around_query(self)  # a component's own model call (lookahead)
        if reply is None:
            reply = await self.query()
        actions = await self.execute_actions(reply)
        stopped: Stopped | None = None
        try:
            await self.hooks.after_actions(self.rollout, reply, actions)
        except Stopped as exc:
            stopped = exc
        try:
            self.record(reply, actions)
        except (TurnEnded, Stopped):
            if stopped is None:
                raise
        if stopped is not None:
            raise stopped

    async def query(self) -> ModelReply:
        """One model call on the transcript so far; a provider fault is recorded and stops the rollout."""
        rollout = self.rollout
        index, rollout.model_calls = rollout.model_calls, rollout.model_calls + 1
        temperature, rollout.next_temperature = rollout.next_temperature, None
        try:
            return await acomplete(
                self.model,
                rollout.transcript.messages(),
                tools=self.schemas,
                temperature=self.loop.temperature if temperature is None else temperature,
                max_tokens=self.loop.max_tokens,
                seed=self.seed + index,
                extra_params=self.extra_params,
            )
        except Exception as exc:  # noqa: BLE001 - provider faults are recorded, never raised
            text = f"{type(exc).__name__}: {exc}".splitlines()[0][:500]
            failed = {"error": f"model_error: {text}", "retries": getattr(exc, "harnessevolve_retries", [])}
            rollout.transcript.add(
                {"role": "assistant", "content": ""},
                extra=failed,
                timestamp=_now(),
                model_name=self.model,
                in_chat=False,
            )
            raise Stopped(StopReason.MODEL_ERROR) from None

    async def final_answer(self, stop: StopReason) -> StopReason:
        """The run is ending (``stop``: the step limit, a repeat) without an answer: with
        ``loop.final_submit`` the model is asked once more with only the submit tool offered; with
        ``loop.answer_from`` (``TOOL.ARGUMENT``) the last such argument is submitted after that.
        Before that, an answer ``loop.verify_finish`` held back and never followed by another submit
        stands. One-turn tasks only, but for that held answer (a multi-turn task's turns end on their
        own). Returns the stop reason."""
        submit = next((n for n, t in self.tools.items() if t.spec.builtin == "submit"), None)
        if self.multi_turn or submit is None:
            return StopReason.SUBMITTED if self.take_held() else stop
        if self.loop.final_submit:
            self.rollout.transcript.add_text("user", FINAL_SUBMIT_ASK, nudge=True, timestamp=_now())
            everything, self.schemas = self.schemas, [self.tools[submit].spec.openai_schema()]
            try:
                reply = await self.query()
            finally:
                self.schemas = everything
            others = [c.name for c in reply.tool_calls if c.name != submit]
            reply = dataclasses.replace(
                reply, tool_calls=tuple(c for c in reply.tool_calls if c.name == submit)
            )
            if reply.tool_calls and not reply.parse_error:
                with contextlib.suppress(Stopped):  # a submit stops the run; a repeat may too
                    self.record(reply, await self.execute_actions(reply))
                if self.rollout.answer is not None:
                    return StopReason.SUBMITTED
            else:
                error = f"final_submit: no {submit} call" + (
                    f" (called {', '.join(others)})" if others else ""
                )
                meta: dict[str, Any] = {
                    "metrics": _metrics(reply),
                    "timestamp": _now(),
                    "model_name": self.model,
                }
                self.rollout.transcript.add_reply(reply.content, extra={"error": error}, **meta)
        if self.rollout.answer is None and self.take_held():  # submitted, held back, never again
            return StopReason.SUBMITTED
        given = self.arguments_made(self.loop.answer_from) if self.loop.answer_from else []
        if self.rollout.answer is None and given:
            step, self.rollout.answer = given[-1]
            self.rollout.extra["answer_from"] = {"setting": self.loop.answer_from, "step": step}
            return StopReason.SUBMITTED
        return stop

    def take_held(self) -> bool:
        """With ``loop.verify_finish``: the held answer, if any, becomes the rollout's answer."""
        held = verify_finish.held_answer(self.rollout) if self.loop.verify_finish else None
        if held is not None:
            self.rollout.answer = held
        return held is not None

    def arguments_made(self, source: str, pending: list[ToolCall] | None = None) -> list[tuple[int, str]]:
        """(step id, value) of every ARGUMENT this run passed to TOOL (``source``: ``TOOL.ARGUMENT``),
        oldest first; ``pending``: the calls of the reply being run, which is not a step yet."""
        tool, _, argument = source.partition(".")
        steps = self.rollout.steps()
        made = [(s.step_id, c) for s in steps for c in s.tool_calls]
        made += [(len(steps) + 1, c) for c in pending or []]
        return [
            (step, str(c.arguments[argument]))
            for step, c in made
            if c.function_name == tool and argument in c.arguments
        ]

    async def execute_actions(self, reply: ModelReply) -> Actions:
        """Run the reply's tool calls; unknown tools and bad arguments become error observations."""
        if reply.parse_error or not reply.tool_calls:
            return Actions()
        calls, observations, errors = [], [], []
        submitted = False
        for call in reply.tool_calls:
            name, given, missing, kind = checked_call(call, self.loop, self.tools, self.rollout)
            tool = self.tools.get(name)
            arguments = given if given is not None else {}
            calls.append(ToolCall(call.id, name, arguments))
            if tool is None:
                output = f"error: unknown tool {name!r}; tools: {', '.join(self.tools)}"
                errors.append(f"unknown_tool: {name}")
            elif missing is not None:
                output = missing
                errors.append(f"{kind}: {name}")
            elif given is None:
                output = f"error: arguments of {call.name} are not a JSON object: {call.raw_arguments[:200]}"
                errors.append(f"bad_arguments: {call.name}")
            else:
                result = await dispatch(
                    tool,
                    arguments,
                    self.workspace,
                    server=self.server,
                    timeout_s=self.loop.command_timeout_s,
                    limit=self.loop.tool_output_limit,
                    sandbox=self.sandbox,
                    check_writes=self.loop.check_writes,
                )
                output = result.output
                check_writes.record(self.rollout, arguments, result)
                if result.error:
                    errors.append(f"tool_error: {result.error}")
                submitted_answer = result.submitted
                checked = (
                    self.check_answer(submitted_answer, calls, name) if submitted_answer is not None else None
                )
                if checked is not None:
                    output, submitted_answer = checked
                    errors.append("answer_check: not one of the run's calls")
                if submitted_answer is not None and self.loop.verify_finish:
                    held = verify_finish.hold_submit(self.rollout, submitted_answer, name)
                    if held is not None:
                        output, submitted_answer = held, None
                if submitted_answer is not None:
                    self.rollout.answer = submitted_answer
                    submitted = True
            observations.append(ObservationResult(call.id, output))
        return Actions(tuple(calls), tuple(observations), tuple(errors), submitted)

    def check_answer(self, answer: str, calls: list[ToolCall], submit: str) -> tuple[str, str | None] | None:
        """``loop.answer_check``: for a submitted ``answer`` that is none of the ARGUMENT values this
        run passed to TOOL (``calls``: this reply's calls, the submit last), the submit's result and
        the answer taken instead: the first time, a result that turns it back and no answer; after
        that, the last such argument. None when the answer stands -- the setting is off, the run
        made no such call, or the answer is one of them."""
        if not self.loop.answer_check or self.multi_turn:
            return None
        given = [value for _, value in self.arguments_made(self.loop.answer_check, calls[:-1])]
        if not given or answer.strip() in {g.strip() for g in given}:
            return None
        tool, _, argument = self.loop.answer_check.partition(".")
        record = {"step": len(self.rollout.steps()) + 1, "answer": answer[:200]}
        checked = self.rollout.extra.get("answer_check")
        if checked is not None:  # turned back once already: the last argument is the answer
            checked["taken"] = record
            return f"submitted: your last {tool} {argument} (not {answer[:100]!r})", given[-1]
        self.rollout.extra["answer_check"] = {"setting": self.loop.answer_check, **record}
        last = given[-1] if len(given[-1]) <= 500 else given[-1][:500] + " [cut]"
        return ANSWER_CHECK_REPLY.format(tool=tool, argument=argument, last=last, submit=submit), None

    def record(self, reply: ModelReply, actions: Actions) -> None:
        """The reply and its results join the transcript; raises when the turn or rollout ends."""
        rollout, transcript = self.rollout, self.rollout.transcript
        meta: dict[str, Any] = {"metrics": _metrics(reply), "timestamp": _now(), "model_name": self.model}
        token_ids = _token_ids(reply)
        if self.multi_turn and not reply.parse_error and not reply.tool_calls:
            # A reply without a tool call ends the agent's turn: the user speaks next.
            transcript.add_reply(reply.content, extra=token_ids, **meta)
            held = verify_finish.hold_turn_end(rollout) if self.loop.verify_finish else None
            if held is not None:  # asked once whether every part is done; the turn goes on
                transcript.add_text("user", held, nudge=True, timestamp=_now())
                return
            rollout.last_end, rollout.closing = "message", reply.content or ""
            raise TurnEnded
        if reply.parse_error or not reply.tool_calls:
            error = f"parse_error: {reply.parse_error}" if reply.parse_error else "no_tool_call"
            transcript.add_reply(reply.content, extra={"error": error, **token_ids}, **meta)
            nudge = parse_nudge(reply.parse_error) if reply.parse_error else NO_TOOL_NUDGE
            transcript.add_text("user", nudge, nudge=True)
            self.end_if_repeating(reply)  # the same unreadable reply, again and again
            return
        failed = "; ".join(actions.errors)
        extra = {**({"error": failed} if failed else {}), **token_ids}
        transcript.add_reply(reply.content, actions.calls, extra=extra, **meta)
        transcript.add_results(actions.observations, self.loop.observation_note or "")
        if actions.submitted:
            rollout.last_end, rollout.closing = "submit", reply.content or rollout.answer or ""
            if self.multi_turn:
                raise TurnEnded
            raise Stopped(StopReason.SUBMITTED)
        self.end_if_repeating(reply)

    def end_if_repeating(self, reply: ModelReply) -> None:
        """``loop.stop_on_repeat``: the last turns repeat one block (``repeats_last``): a
        conversation's turn ends (the agent yields; the user's next turn may still go right), a
        one-turn run stops as ``repeated``."""
        if repeats_last(self.this_turn(), self.loop.stop_on_repeat):
            if self.multi_turn:
                self.rollout.last_end, self.rollout.closing = "repeated", reply.content or ""
                raise TurnEnded
            raise Stopped(StopReason.REPEATED)

    def this_turn(self) -> list[Step]:
        """The steps since the current user turn began (a conversation's), else all of them: a repeat
        is counted within one turn, never across a user message."""
        steps = self.rollout.steps()
        if not self.multi_turn:
            return steps
        starts = [i for i, s in enumerate(steps) if s.source == "user" and "turn" in s.extra]
        return steps[starts[-1] :] if starts else steps


ENDS_WITHOUT_ANSWER = (StopReason.STEP_LIMIT, StopReason.REPEATED)
"""Stops after which ``loop.final_submit`` / ``loop.answer_from`` may still get an answer."""


def loop_hooks(harness: Harness) -> LoopHooks:
    """The hooks a harness's runtime components run at the loop's cut points (memory retrieved
    before a query, recovery rules after the actions, a world model's forecasts checked after a
    call; ``execute/components.py``). A harness that turns none on gets ``NO_HOOKS``: the loop as it is."""
    if not harness.runtime.any_on:
        return NO_HOOKS
    from harnessevolve.execute.components import hooks_for

    return hooks_for(harness) or NO_HOOKS


async def run_agent(
    harness: Harness, task: Task, workspace: Path, *, model: str, seed: int, sandbox: Sandbox | None = None
) -> Trajectory:
    """Run the harness's agent on ``task`` in ``workspace``; returns the full trajectory.

    Its commands run in ``sandbox`` (the default sandbox when None), with the task's read-only
    paths added; Python and MCP tools run in a tool server inside that sandbox. The harness's
    hooks (``loop_hooks``) run at the loop's cut points.
    """
    return await run_with_hooks(harness, task, workspace, Settings(model, seed, sandbox, loop_hooks(harness)))


@dataclass(frozen=True)
class Settings:
    """One rollout's model, seed, sandbox and hooks."""

    model: str
    seed: int
    sandbox: Sandbox | None = None
    hooks: LoopHooks = NO_HOOKS


async def run_with_hooks(harness: Harness, task: Task, workspace: Path, settings: Settings) -> Trajectory:
    """``run_agent`` with the hooks given in ``settings`` (tests, and runtime components)."""
    model, seed, sandbox, hooks = settings.model, settings.seed, settings.sandbox, settings.hooks
    started = time.monotonic()
    if task.read_only_paths or task.needs_tool_server:
        sandbox = with_read_only(resolve_sandbox(sandbox), task.read_only_paths)
    commands = agent_view(sandbox)  # the agent's commands never see the benchmark's code paths
    multi_turn = bool(task.turns) or task.user is not None
    rollout = Rollout.opening(task.system_message(harness.assembled_prompt()))
    extra: dict[str, Any] = {}
    stop: StopReason | None = None
    try:
        if task.instruction:
            rollout.add_user(task.instruction, {"turn": 0} if multi_turn else {})
        else:  # a simulated user opens the conversation
            await simulated_turn(task, rollout, 0, seed)
    except Stopped as exc:
        stop = exc.reason
    server = None
    async with contextlib.AsyncExitStack() as stack:
        if stop is None and task.needs_tool_server:
            try:
                server = await stack.enter_async_context(
                    ToolServer.start(
                        task,
                        workspace,
                        sandbox=sandbox,
                        timeout_s=harness.loop.command_timeout_s,
                        limit=harness.loop.tool_output_limit,
                    )
                )
            except ToolServerError as exc:
                extra["error"] = f"tool_error: {exc}"[:2000]
                stop = StopReason.TOOL_ERROR
        tools = rollout_tools(harness, task, server.offered if server else [])
        tools.update((t.spec.name, t) for t in hooks.tools())  # a component's own tools
        rollout.offered = tuple(t.spec.openai_schema() for t in tools.values())
        if stop is None:
            loop = AgentLoop(
                harness,
                tools,
                rollout,
                workspace,
                model=model,
                seed=seed,
                server=server,
                sandbox=commands,
                multi_turn=multi_turn,
                hooks=hooks,
            )
            try:
                await _conversation(loop, task, server, extra, seed)
            except Stopped as exc:
                stop = exc.reason
            if stop in ENDS_WITHOUT_ANSWER and rollout.answer is None:
                try:
                    stop = await loop.final_answer(stop)
                except Stopped as exc:  # the last model call failed
                    stop = exc.reason
    stop = stop or StopReason.STEP_LIMIT
    await hooks.on_stop(rollout, stop)
    if server is not None:
        extra.update(tool_states=rollout.states, turn_call_counts=rollout.call_counts)
    steps = rollout.steps()
    if multi_turn:
        extra["turns"] = sum(1 for s in steps if s.source == "user" and "turn" in s.extra)
        if rollout.user_end:
            extra["user_end"] = rollout.user_end
    return _trajectory(harness, task, model, seed, rollout, steps, stop, started, extra)


async def _keep_tool_state(server: ToolServer | None, rollout: Rollout, extra: dict[str, Any]) -> None:
    """The tool server's state after a user turn (the inputs of Python checks)."""
    if server is None:
        return
    state = await server.state()
    rollout.states.append(state["objects"] if state else None)
    rollout.call_counts.append(len(state["calls"]) if state else -1)
    if state:
        extra["tool_calls"] = state["calls"]


async def _conversation(
    loop: AgentLoop, task: Task, server: ToolServer | None, extra: dict[str, Any], seed: int
) -> None:
    """The agent's turns, each followed by the next user turn, until ``Stopped`` is raised."""
    rollout, turn = loop.rollout, 0
    while True:
        stopped: Stopped | None = None
        try:
            await loop.run_turn()
        except TurnEnded:
            pass
        except Stopped as exc:
            stopped = exc
        await _keep_tool_state(server, rollout, extra)
        if stopped is not None:
            raise stopped
        rollout.exchanges.append((rollout.last_user_text(), rollout.closing))
        turn += 1
        if task.user is not None:
            await simulated_turn(task, rollout, turn, seed)
        elif turn < len(task.turns):
            rollout.add_user(task.turns[turn], {"turn": turn})
        else:
            last = {"submit": StopReason.SUBMITTED, "repeated": StopReason.REPEATED}
            raise Stopped(last.get(rollout.last_end, StopReason.ENDED))
