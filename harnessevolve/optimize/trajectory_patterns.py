"""Recurring failure patterns read from a batch's trajectories, with no model and no benchmark knowledge.

Each detector looks only at the runs' tool calls (``ProposalContext.failed_runs``), the reference
runs' calls (``references``), the error clusters and the harness's own tool list:

* ``repeated_call``: a failed run makes the same call (tool and arguments) more than once;
* ``never_submits``: a failed run ends without calling the harness's finishing tool (``builtin: submit``);
* ``wrong_submission``: the reference runs' answer is an earlier call's *argument* (the command
  they ran), and a failed run made such calls but submitted something else: a call's *result*
  (the output instead of what was asked for), a description of its work, a made-up value;
* ``unknown_tool``: a failed run calls a tool the harness does not have;
* ``malformed_call``: replies that are not tool calls, calls without their required arguments
  (``format_error`` / ``missing_argument`` clusters), or with a value wholly in a code fence;
* ``off_list_value``: a failed run passed a task's tool a value outside the closed list the
  parameter allows (its ``enum``, or a list its description states);
* ``placeholder_value``: a failed run passed a task's tool a value that looks made up (a fill-in
  marker, the digit run ``12345``, a parameter's name for its value) and that appears nowhere in
  its instruction or the results before it (``core/placeholder_values.py``);
* ``untested_write`` (not in ``DETECTORS``: measured on HumanEval with the 1.5B, the lever it
  proposes changed no task's outcome): a failed run wrote a file with the harness's ``write_file``
  tool and finished right after, with no other call between its last write and the submit
  (nothing run, nothing read back);
* ``finishes_early`` (not in ``DETECTORS`` yet, so no default run proposes from it): a failed run
  ends on its own having done less than the reference (fewer calls, a tool called less often than
  it needs), or a ``premature_finish`` / ``skipped_step`` cluster.

A :class:`Pattern` names the runs that show it; ``optimize.behaviour_proposer`` turns it into an
edit of the loop, the tools or the agent's code.
"""

from __future__ import annotations

import difflib
import json
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from harnessevolve.core.documents import bounded_yaml
from harnessevolve.core.placeholder_values import suspects, untold
from harnessevolve.core.signals import Cause
from harnessevolve.core.stated_options import with_stated_options
from harnessevolve.models.raw_call import unfenced
from harnessevolve.optimize.proposal import ProposalContext, ReferenceAction

MIN_ANSWER_CHARS = 2
"""Shorter answers are matched against results by chance (a '0', a 'y')."""


@dataclass(frozen=True)
class Pattern:
    """One recurring failure: its kind, the failed runs showing it, and what it is about."""

    kind: str
    tasks: tuple[str, ...]
    detail: dict[str, Any]
    """Kind-specific facts: the repeated tool, the answer's source (tool, argument), the unknown name..."""

    def evidence(self) -> str:
        facts = ", ".join(f"{k}={v}" for k, v in sorted(self.detail.items()))
        runs = ", ".join(self.tasks[:4])
        return f"{self.kind} in {len(self.tasks)} failed run(s) ({runs}){': ' + facts if facts else ''}"


@dataclass(frozen=True)
class HarnessTools:
    """The harness's tools as the detectors need them: names, the finishing tool and its answer argument."""

    names: tuple[str, ...]
    submit: str | None
    answer_argument: str | None
    required: dict[str, tuple[str, ...]]
    writes: tuple[str, ...] = ()
    """Tools that write a file (``builtin: write_file``)."""


def harness_tools(context: ProposalContext) -> HarnessTools:
    import yaml

    names, submit, answer, required, writes = [], None, None, {}, []
    for path, text in sorted(context.files.items()):
        if not (path.startswith("tools/") and path.endswith(".yaml")):
            continue
        try:
            doc = bounded_yaml(text)
        except yaml.YAMLError:
            continue
        if not isinstance(doc, dict) or not isinstance(doc.get("name"), str):
            continue
        found = doc.get("parameters")
        params: dict[str, Any] = found if isinstance(found, dict) else {}
        names.append(doc["name"])
        required[doc["name"]] = tuple(params.get("required") or ())
        if doc.get("builtin") == "write_file":
            writes.append(doc["name"])
        if doc.get("builtin") == "submit":
            submit = doc["name"]
            props = list(params.get("properties") or {})
            answer = "answer" if "answer" in props else (props[0] if props else None)
    return HarnessTools(tuple(names), submit, answer, required, tuple(writes))


def _key(action: ReferenceAction) -> str:
    return f"{action.tool} {json.dumps(action.arguments, sort_keys=True)}"


def repeated_call(context: ProposalContext, tools: HarnessTools) -> Pattern | None:
    runs, repeated = [], Counter[str]()
    for task, actions in context.failed_runs.items():
        counts = Counter(_key(a) for a in actions if a.tool != tools.submit)
        twice = [k for k, n in counts.items() if n > 1]
        if twice:
            runs.append(task)
            repeated.update(k.split(" ", 1)[0] for k in twice)
    if not runs:
        return None
    return Pattern("repeated_call", tuple(runs), {"tool": repeated.most_common(1)[0][0]})


def never_submits(context: ProposalContext, tools: HarnessTools) -> Pattern | None:
    """Failed runs with calls and no submit, where one was due: the task's reference run submits,
    or (no reference) the run was stopped by the step limit. A conversation a reference ends
    without submit (a multi-turn task) does not count."""
    if tools.submit is None:
        return None
    stopped = {s.task_id for c in context.clusters if c.cause == Cause.STEP_LIMIT for s in c.signals}

    def due(task: str) -> bool:
        reference = context.references.get(task)
        return any(a.tool == tools.submit for a in reference) if reference else task in stopped

    runs = [
        t
        for t, actions in context.failed_runs.items()
        if actions and due(t) and all(a.tool != tools.submit for a in actions)
    ]
    return Pattern("never_submits", tuple(runs), {"submit": tools.submit}) if runs else None


def answer_source(
    actions: tuple[ReferenceAction, ...], submit: str, answer_argument: str
) -> tuple[str, str, str] | None:
    """Where a run's submitted answer came from: ``("argument", tool, name)`` when it equals an
    argument of an earlier call, ``("result", tool, "")`` when it is found in an earlier result,
    None when neither (or there is no submit)."""
    final = next((a for a in reversed(actions) if a.tool == submit), None)
    if final is None:
        return None
    answer = str(final.arguments.get(answer_argument, "")).strip()
    if len(answer) < MIN_ANSWER_CHARS:
        return None
    earlier = actions[: actions.index(final)]
    for action in reversed(earlier):
        for name, value in action.arguments.items():
            if isinstance(value, str) and value.strip() == answer:
                return ("argument", action.tool, name)
    for action in reversed(earlier):
        if answer in action.observation:
            return ("result", action.tool, "")
    return None


def submitted_other_than(
    actions: tuple[ReferenceAction, ...], submit: str, answer_argument: str, tool: str, argument: str
) -> bool:
    """The run called ``tool``, then submitted an answer that is none of those calls' ``argument``:
    a result it read, a description of what it did ("the command ran"), a number it made up --
    what the references never submit when they submit that argument. A run without a submit
    (``never_submits``) or without such a call before it (it had nothing of the kind to submit:
    an unknown tool, say) is not one."""
    final = next((a for a in reversed(actions) if a.tool == submit), None)
    if final is None:
        return False
    answer = str(final.arguments.get(answer_argument, "")).strip()
    earlier = actions[: actions.index(final)]
    made = {str(a.arguments.get(argument, "")).strip() for a in earlier if a.tool == tool}
    return bool(made) and answer not in made


def wrong_submission(context: ProposalContext, tools: HarnessTools) -> Pattern | None:
    """The references submit an earlier call's argument (most often ``tool.argument``, e.g. the
    command they ran); failed runs that submitted anything else."""
    if tools.submit is None or tools.answer_argument is None:
        return None
    wanted = Counter[tuple[str, str]]()
    for actions in context.references.values():
        source = answer_source(actions, tools.submit, tools.answer_argument)
        if source and source[0] == "argument":
            wanted[(source[1], source[2])] += 1
    if not wanted:
        return None
    (tool, argument), _ = wanted.most_common(1)[0]
    runs = [
        task
        for task, actions in context.failed_runs.items()
        if submitted_other_than(actions, tools.submit, tools.answer_argument, tool, argument)
    ]
    if not runs:
        return None
    return Pattern(
        "wrong_submission",
        tuple(runs),
        {"submit": tools.submit, "answer": tools.answer_argument, "tool": tool, "argument": argument},
    )


def unknown_tool(context: ProposalContext, tools: HarnessTools) -> Pattern | None:
    """Names the evaluator flagged (``unknown_tool`` signals, read against the tools the run was
    offered), and, in runs of tasks with a reference, names that no harness tool, reference run or
    passed run has (a task may bring tools of its own: those show up in its reference)."""
    if not tools.names:
        return None
    known = set(tools.names) | set(context.task_tools)  # a task's own tools are no unknown names
    for runs in (context.references, context.passed_runs):
        known.update(a.tool for actions in runs.values() for a in actions)
    flagged = {
        str((s.actual or {}).get("tool"))
        for c in context.clusters
        if c.cause == Cause.UNKNOWN_TOOL
        for s in c.signals
        if (s.actual or {}).get("tool")
    }
    unknown_runs: list[str] = []
    names = Counter[str]()
    for task, actions in context.failed_runs.items():
        judged = task in context.references  # its reference shows the task's own tools
        unknown = [a.tool for a in actions if a.tool in flagged or (judged and a.tool not in known)]
        if unknown:
            unknown_runs.append(task)
            names.update(unknown)
    if not unknown_runs:
        return None
    name = names.most_common(1)[0][0]
    offered = [*tools.names, *(t for t in context.task_tools if t not in tools.names)]
    close = difflib.get_close_matches(name, offered, n=1, cutoff=0.0)
    return Pattern(
        "unknown_tool",
        tuple(unknown_runs),
        {"called": name, "closest": close[0] if close else tools.names[0]},
    )


def _recurring_argument(kind: str, hits: Iterable[tuple[str, str, str, dict[str, Any]]]) -> Pattern | None:
    """The pattern of ``hits`` (``(task, tool, argument, facts)`` per bad value): the failed runs
    that show any, and the tool argument hit most often with the facts of its first hit."""
    runs: dict[str, None] = {}
    seen = Counter[tuple[str, str]]()
    example: dict[tuple[str, str], dict[str, Any]] = {}
    for task, tool, key, facts in hits:
        runs[task] = None
        seen[(tool, key)] += 1
        example.setdefault((tool, key), facts)
    if not runs:
        return None
    (tool, key), _ = seen.most_common(1)[0]
    return Pattern(kind, tuple(runs), {"tool": tool, "argument": key, **example[(tool, key)]})


def off_list_value(context: ProposalContext, tools: HarnessTools) -> Pattern | None:
    """Failed runs that passed a tool a value outside the closed list its parameter allows: the
    schema's ``enum``, or a list its description states (``core/stated_options.py``). Many tools
    take such a value without an error and do the wrong thing, so the run never learns of it."""
    schemas = {  # each tool's parameters with their stated lists, read once
        name: with_stated_options(spec["parameters"]).get("properties") or {}
        for name, spec in context.task_tools.items()
        if isinstance(spec.get("parameters"), dict)
    }

    def hits() -> Iterator[tuple[str, str, str, dict[str, Any]]]:
        for task, actions in context.failed_runs.items():
            for action in actions:
                properties = schemas.get(action.tool)
                if not properties:
                    continue
                for key, value in (action.arguments or {}).items():
                    options = _allowed(properties.get(key))
                    values = value if isinstance(value, list) else [value]
                    off = [v for v in values if isinstance(v, str) and options and v not in options]
                    if off:
                        yield task, action.tool, key, {"value": off[0], "options": options}

    return _recurring_argument("off_list_value", hits())


def placeholder_value(context: ProposalContext, tools: HarnessTools) -> Pattern | None:
    """Failed runs that passed a task's tool a value that looks made up and that the run was never
    told: not in the tools' schemas, its instruction, nor a result before the call (a later user
    turn of a multi-turn task is not known here, so a value given there may be counted: the gate
    decides)."""
    schemas = json.dumps(context.task_tools, ensure_ascii=False)  # a value an enum gives is told

    def hits() -> Iterator[tuple[str, str, str, dict[str, Any]]]:
        for task, actions in context.failed_runs.items():
            told = [schemas, context.instructions.get(task, "")]
            for action in actions:
                task_tool = action.tool in context.task_tools and action.tool not in tools.names
                found = suspects(action.arguments or {}) if task_tool else []
                if found:  # the run's text is joined only for a call with a suspect value
                    for key, value, why in untold(found, "\n".join(told)):
                        yield task, action.tool, key, {"value": value, "why": why}
                told.append(action.observation)

    return _recurring_argument("placeholder_value", hits())


def _allowed(prop: Any) -> list[Any]:
    if not isinstance(prop, dict):
        return []
    items = prop.get("items")
    enum = prop.get("enum") if "enum" in prop else items.get("enum") if isinstance(items, dict) else None
    return list(enum) if isinstance(enum, list) else []


def malformed_call(context: ProposalContext, tools: HarnessTools) -> Pattern | None:
    """Replies that are no tool call, calls without their required arguments, and calls with a
    string argument wholly wrapped in a markdown code fence (code written as in chat, which the
    tool then takes with its fence: ``detail["fenced"]``, the runs that show only that)."""
    runs = [
        s.task_id
        for c in context.clusters
        if c.cause in (Cause.FORMAT_ERROR, Cause.MISSING_ARGUMENT)
        for s in c.signals
    ]
    for task, actions in context.failed_runs.items():
        if any(set(tools.required.get(a.tool, ())) - set(a.arguments) for a in actions):
            runs.append(task)
    fenced = [
        task
        for task, actions in context.failed_runs.items()
        if task not in runs
        and any(isinstance(v, str) and unfenced(v) is not None for a in actions for v in a.arguments.values())
    ]
    runs = list(dict.fromkeys(runs + fenced))
    return Pattern("malformed_call", tuple(runs), {"fenced": len(fenced)} if fenced else {}) if runs else None


def untested_write(context: ProposalContext, tools: HarnessTools) -> Pattern | None:
    """Failed runs whose last calls are a file write and then the submit: the file was never run,
    parsed or read back before the run finished."""
    if tools.submit is None or not tools.writes:
        return None
    runs = []
    for task, actions in context.failed_runs.items():
        names = [a.tool for a in actions]
        if len(names) >= 2 and names[-1] == tools.submit and names[-2] in tools.writes:
            runs.append(task)
    return Pattern("untested_write", tuple(runs), {"tool": tools.writes[0]}) if runs else None


def finishes_early(context: ProposalContext, tools: HarnessTools) -> Pattern | None:
    """Runs that ended on their own (not at the step limit) having done less than the reference:
    fewer calls than it made besides the finishing one, some of its tools never called as often
    (one call where the request needs one per part), or a ``premature_finish`` / ``skipped_step``
    cluster."""
    limited = {s.task_id for c in context.clusters if c.cause == Cause.STEP_LIMIT for s in c.signals}
    early = (Cause.PREMATURE_FINISH, Cause.SKIPPED_STEP)
    runs = [s.task_id for c in context.clusters if c.cause in early for s in c.signals]
    for task, actions in context.failed_runs.items():
        reference = context.references.get(task)
        if not reference:
            continue
        done = Counter(a.tool for a in actions if a.tool != tools.submit)
        needed = Counter(a.tool for a in reference if a.tool != tools.submit)
        if sum(needed.values()) > sum(done.values()) and needed - done:
            runs.append(task)
    runs = [r for r in dict.fromkeys(runs) if r not in limited]
    return Pattern("finishes_early", tuple(runs), {}) if runs else None


DETECTORS = (
    never_submits,
    wrong_submission,
    repeated_call,
    unknown_tool,
    malformed_call,
    off_list_value,
    placeholder_value,
)
"""In the order they are tried: a run that never finishes, or finishes with the wrong thing, scores
nothing whatever else it did right."""


ENDING_WEIGHT = 2
"""How much more a run that never finishes, or finishes with the wrong thing, counts than a run with
another pattern: it scores nothing whatever else it did right (and such runs also repeat calls)."""


def find_patterns(context: ProposalContext) -> list[Pattern]:
    """Every pattern the batch's failed runs show, by weighted number of runs (``ENDING_WEIGHT``
    for never_submits and wrong_submission), ties in ``DETECTORS`` order."""
    tools = harness_tools(context)
    found = [p for detect in DETECTORS if (p := detect(context, tools)) is not None]
    ending = ("never_submits", "wrong_submission")
    return sorted(found, key=lambda p: -len(p.tasks) * (ENDING_WEIGHT if p.kind in ending else 1))
