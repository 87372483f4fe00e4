"""``behaviour``: offline operators that change what the agent *does* about a recurring failure pattern.

The patterns (``trajectory_patterns``) are read from the batch's trajectories; each operator is
stated in terms of trajectories and the agent loop, never of a benchmark or a task. For each
pattern, most runs first, the first lever the harness lets us pull wins:

1. **agent code** (``agent.kind: command`` whose script is editable, e.g. the python-agent template):
   a ``patch_file`` unified diff on the loop. The operator finds the loop's statement it changes
   (the tool-result append, the end of the step loop, the unknown-tool and no-tool-call branches);
   code that has no such statement is left alone.
2. **loop settings** (builtin loop, ``harness.yaml`` or its ``harness.yaml#loop`` section editable):
   ``set_loop``.
3. **tool definitions** (``tools/*.yaml`` editable): ``edit_tool`` descriptions.

Per pattern (agent code / loop / tools):

* repeated_call: a repeated call's result says so and asks for submit / ``stop_on_repeat`` / the
  tool says a repeat returns the same;
* never_submits: at the step limit, one last call offering only submit, then the answer the
  references' pattern gives / the same as ``final_submit`` and ``answer_from`` (else
  ``observation_note``) / submit says when to call it;
* wrong_submission: a submit that is none of the run's calls' arguments the references submit is
  turned back once, naming the last, and replaced by the last the second time / ``answer_check`` /
  submit's answer is that argument, not a result;
* unknown_tool: an unknown name goes to the closest tool / -- / the closest tool names itself;
* malformed_call: a tool call written as JSON text is run / ``json_grammar`` (local model) / --.

Every candidate is a normal edit-operation candidate (``Candidate.edits``), gated like any other;
code edits meet the quality gate's compile and sandboxed smoke run. Never revised.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from typing import Any

from harnessevolve.core.documents import bounded_yaml
from harnessevolve.core.signals import Cause, Cluster
from harnessevolve.harness.model import ANSWER_CHECK_REPLY, FINAL_SUBMIT_ASK
from harnessevolve.optimize.proposal import Candidate, ProposalContext, ProposalFailed
from harnessevolve.optimize.trajectory_patterns import Pattern, find_patterns, harness_tools

CAUSE_OF = {
    "repeated_call": Cause.STEP_LIMIT,
    "never_submits": Cause.STEP_LIMIT,
    "wrong_submission": Cause.WRONG_ARGUMENT,
    "unknown_tool": Cause.UNKNOWN_TOOL,
    "malformed_call": Cause.FORMAT_ERROR,
}
Lever = Callable[[ProposalContext, Pattern, dict[str, Any]], tuple[list[dict[str, Any]], str, str] | None]
"""(context, pattern, harness.yaml) -> (edits, summary, why) or None when this lever does not fit."""


def harness_settings(context: ProposalContext) -> dict[str, Any]:
    import yaml

    try:
        doc = bounded_yaml(context.files.get("harness.yaml", "")) or {}
    except yaml.YAMLError:
        return {}
    return doc if isinstance(doc, dict) else {}


def _section(settings: dict[str, Any], key: str) -> dict[str, Any]:
    """``settings[key]`` when it is a mapping, else an empty one."""
    found = settings.get(key)
    return found if isinstance(found, dict) else {}


def agent_script(context: ProposalContext, settings: dict[str, Any]) -> str | None:
    """The editable Python script a ``command`` agent runs (``/harness/agent.py`` -> ``agent.py``)."""
    agent = _section(settings, "agent")
    if agent.get("kind") != "command":
        return None
    for arg in agent.get("command") or []:
        rel = str(arg).removeprefix("/harness/")
        if rel.endswith(".py") and rel in context.files and context.may_edit(rel):
            return rel
    return None


def code_patch(path: str, old: str, new: str) -> dict[str, Any]:
    diff = "".join(
        difflib.unified_diff(
            old.splitlines(keepends=True), new.splitlines(keepends=True), f"a/{path}", f"b/{path}", n=2
        )
    )
    return {"op": "patch_file", "path": path, "diff": diff}


def _applied(context: ProposalContext, path: str, marker: str) -> bool:
    """True when ``path`` already holds a code lever's change (its ``marker``): the loop then does
    what the lever would add, and applying it twice would only stack a second copy."""
    return marker in context.files[path]


CodeEdit = tuple[list[tuple[str, str]], str, str]
"""A code lever's change: the (anchor, replacement) steps on the agent script (``_rewrite``), its
summary and why."""


def _code_lever(
    kind: str, marker: str
) -> Callable[[Callable[[ProposalContext, Pattern, str], CodeEdit | None]], Lever]:
    """The lever that patches the agent script with what ``build(context, pattern, path)`` gives, for
    ``kind`` patterns. It does not fit when the pattern is of another kind, the harness has no
    editable script, the script holds the change already (``marker``), ``build`` gives None, or an
    anchor of its steps is missing or repeated."""

    def wrap(build: Callable[[ProposalContext, Pattern, str], CodeEdit | None]) -> Lever:
        def lever(
            context: ProposalContext, pattern: Pattern, settings: dict[str, Any]
        ) -> tuple[list[dict[str, Any]], str, str] | None:
            path = agent_script(context, settings)
            if path is None or pattern.kind != kind or _applied(context, path, marker):
                return None
            found = build(context, pattern, path)
            if found is None:
                return None
            steps, summary, why = found
            new = _rewrite(context.files[path], steps)
            if new is None:
                return None
            return [code_patch(path, context.files[path], new)], summary, why

        return lever

    return wrap


def _rewrite(code: str, steps: list[tuple[str, str]]) -> str | None:
    """``code`` with each (anchor, replacement) applied once; None when an anchor is missing or repeated."""
    for anchor, replacement in steps:
        if code.count(anchor) != 1:
            return None
        code = code.replace(anchor, replacement)
    return code


# --- agent code (the python-agent template's loop statements) ------------------------------------

TOOL_RESULT = (
    '                messages.append({"role": "tool", "tool_call_id": call.id, "content": output + note})\n'
)
STEP_LOOP_END = "            if answer is not None:\n                break\n"
MESSAGES_START = '    messages = [{"role": "system", "content": task["system_prompt"]}]\n'
UNKNOWN_BRANCH = "    spec = specs.get(name)\n    if spec is None:\n"
NO_TOOL_BRANCH = "            message = reply.choices[0].message\n            if not message.tool_calls:\n"
MAIN = "def main() -> int:\n"

REPEAT_NOTE = (
    "You already made this exact call; its result is above and will not change. Do not repeat it: "
    "if you have what the task asks for, call submit with it now."
)
REPEAT_LITERAL = repr("\n" + REPEAT_NOTE)


@_code_lever("repeated_call", "seen_calls: set")
def _repeat_code(context: ProposalContext, pattern: Pattern, path: str) -> CodeEdit:
    steps = [
        (MESSAGES_START, MESSAGES_START + "    seen_calls: set = set()\n"),
        (
            TOOL_RESULT,
            "                call_key = (call.function.name, call.function.arguments)\n"
            "                if call_key in seen_calls:\n"
            f"                    output += {REPEAT_LITERAL}\n"
            "                seen_calls.add(call_key)\n" + TOOL_RESULT,
        ),
    ]
    why = "the runs repeated a call; the loop now tells the model when a call repeats and asks for submit."
    return steps, f"answer a repeated call in {path} with a submit nudge", why


CALL_ARGUMENTS = (
    "def call_arguments(messages: list, tool: str, argument: str) -> list:\n"
    '    """The ``argument`` of every ``tool`` call in the conversation so far, oldest first."""\n'
    "    found = []\n"
    "    for earlier in messages:\n"
    '        for made in earlier.get("tool_calls") or []:\n'
    '            if made["function"]["name"] != tool:\n'
    "                continue\n"
    "            try:\n"
    '                args = json.loads(made["function"].get("arguments") or "{}")\n'
    "            except json.JSONDecodeError:\n"
    "                continue\n"
    "            if isinstance(args, dict) and argument in args:\n"
    "                found.append(str(args[argument]))\n"
    "    return found\n\n\n"
)
"""Written into the agent script once, by the first code lever that reads the run's own calls."""


def _call_arguments_step(context: ProposalContext, path: str) -> list[tuple[str, str]]:
    """The step that adds ``call_arguments`` to the script, unless an earlier edit did."""
    return [] if CALL_ARGUMENTS.splitlines()[0] in context.files[path] else [(MAIN, CALL_ARGUMENTS + MAIN)]


@_code_lever("never_submits", "def final_submit(")
def _final_submit_code(context: ProposalContext, pattern: Pattern, path: str) -> CodeEdit | None:
    tools = harness_tools(context)
    if tools.submit is None:
        return None
    fallback = _reference_answer_pattern(context)
    fallback_code = ""
    if fallback is not None:
        fallback_code = (
            "    # what the references submit\n"
            f"    made = call_arguments(messages, {fallback[0]!r}, {fallback[1]!r})\n"
            "    if made:\n"
            "        return made[-1]\n"
        )
    function = (
        "def final_submit(messages: list) -> str | None:\n"
        '    """The step limit came without an answer: one last call that may only submit."""\n'
        f'    offered = [t for t in tools if t["function"]["name"] == {tools.submit!r}]\n'
        "    try:\n"
        "        reply = client.chat.completions.create(\n"
        '            model=os.environ["OPENAI_MODEL"],\n'
        f'            messages=[*messages, {{"role": "user", "content": {FINAL_SUBMIT_ASK!r}}}],\n'
        "            tools=offered,\n"
        '            temperature=loop["temperature"],\n'
        '            max_tokens=loop["max_tokens"],\n'
        "        )\n"
        "    except APIStatusError:\n"
        "        return None\n"
        "    for call in reply.choices[0].message.tool_calls or []:\n"
        "        try:\n"
        '            args = json.loads(call.function.arguments or "{}")\n'
        "        except json.JSONDecodeError:\n"
        "            continue\n"
        f"        if call.function.name == {tools.submit!r} and isinstance(args, dict):\n"
        f'            return str(args.get({(tools.answer_argument or "answer")!r}, ""))\n'
        + fallback_code
        + "    return None\n\n\n"
    )
    steps = [
        (
            STEP_LOOP_END,
            STEP_LOOP_END + "        if answer is None:\n            answer = final_submit(messages)\n",
        ),
        (MAIN, function + MAIN),
        *(_call_arguments_step(context, path) if fallback else []),
    ]
    why = _final_submit_why(tools.submit, fallback)
    return steps, f"make {path} ask for submit at the step limit", why


def _final_submit_why(submit: str, fallback: tuple[str, str] | None) -> str:
    """Why a final-submit edit (code or loop setting) was made, and what it falls back to."""
    then = (
        f", then submits the last {fallback[0]} call's {fallback[1]} as the references do."
        if fallback
        else "."
    )
    return (
        f"the runs ended without calling {submit}; at the step limit the loop now asks once more, "
        f"offering only {submit}{then}"
    )


def _reference_answer_pattern(context: ProposalContext) -> tuple[str, str] | None:
    """(tool, argument) when every reference run submits an earlier call's argument, the same one."""
    from harnessevolve.optimize.trajectory_patterns import answer_source

    tools = harness_tools(context)
    if tools.submit is None or tools.answer_argument is None or not context.references:
        return None
    sources = {answer_source(a, tools.submit, tools.answer_argument) for a in context.references.values()}
    if len(sources) == 1:
        only = next(iter(sources))
        if only is not None and only[0] == "argument":
            return only[1], only[2]
    return None


RUN_TOOL = (
    "                    output, submitted = run_tool(call.function.name, args)\n"
    "                    answer = submitted if submitted is not None else answer\n"
)


@_code_lever("wrong_submission", "answer_checked = ")
def _answer_check_code(context: ProposalContext, pattern: Pattern, path: str) -> CodeEdit:
    detail = pattern.detail
    tool, argument = detail["tool"], detail["argument"]
    reply = ANSWER_CHECK_REPLY.format(tool=tool, argument=argument, submit=detail["submit"], last="{last}")
    check = (
        "                    output, submitted = run_tool(call.function.name, args)\n"
        "                    made = []\n"
        "                    if submitted is not None:\n"
        f"                        made = call_arguments(messages, {tool!r}, {argument!r})\n"
        "                    wrong = bool(made) and submitted.strip() not in {m.strip() for m in made}\n"
        "                    if wrong and answer_checked:  # turned back once already: the last one\n"
        f"                        output, submitted = 'submitted: your last {tool} {argument}', made[-1]\n"
        "                    elif wrong:\n"
        "                        answer_checked = True\n"
        f"                        output, submitted = {reply!r}.format(last=made[-1][:500]), None\n"
        "                    answer = submitted if submitted is not None else answer\n"
    )
    steps = [
        (MESSAGES_START, MESSAGES_START + "    answer_checked = False\n"),
        (RUN_TOOL, check),
        *_call_arguments_step(context, path),
    ]
    summary = f"turn back a {detail['submit']} that is not a {tool} {argument} the run made in {path}"
    return steps, summary, _answer_check_why(detail)


def _answer_check_why(detail: dict[str, Any]) -> str:
    """Why an answer-check edit (code or loop setting) was made for a ``wrong_submission`` pattern."""
    return (
        f"the runs called {detail['tool']}, then submitted something else than the {detail['argument']} "
        f"they passed to it (its result, a description of the work), where the reference runs submit "
        f"that {detail['argument']}; the loop now turns such a {detail['submit']} back once, naming the "
        f"last {detail['argument']}, and takes that {detail['argument']} the second time."
    )


@_code_lever("unknown_tool", "get_close_matches(name")
def _unknown_code(context: ProposalContext, pattern: Pattern, path: str) -> CodeEdit:
    branch = (
        "    if name not in specs:  # a misspelt tool name: the closest one, if it is close\n"
        "        import difflib\n\n"
        "        close = difflib.get_close_matches(name, list(specs), n=1, cutoff=0.6)\n"
        "        name = close[0] if close else name\n" + UNKNOWN_BRANCH
    )
    called = pattern.detail["called"]
    why = f"the runs called {called!r}, which is not a tool; the loop now runs the closest tool."
    return [(UNKNOWN_BRANCH, branch)], f"run the closest tool for a misspelt name in {path}", why


@_code_lever("malformed_call", "def text_call(")
def _text_call_code(context: ProposalContext, pattern: Pattern, path: str) -> CodeEdit:
    parser = (
        "def text_call(content: str):\n"
        '    """A tool call written as JSON text ({"name"|"tool": ..., "arguments": {...}}), or None."""\n'
        '    start, end = content.find("{"), content.rfind("}")\n'
        "    try:\n"
        "        doc = json.loads(content[start : end + 1]) if start >= 0 else None\n"
        "    except json.JSONDecodeError:\n"
        "        return None\n"
        "    if not isinstance(doc, dict):\n"
        "        return None\n"
        '    name = doc.get("name") or doc.get("tool")\n'
        '    args = doc.get("arguments", doc.get("parameters", {}))\n'
        "    return (name, args) if name in specs and isinstance(args, dict) else None\n\n\n"
    )
    branch = (
        "            message = reply.choices[0].message\n"
        '            written = None if message.tool_calls else text_call(message.content or "")\n'
        "            if written is not None:  # run it, and show the model the call it made\n"
        "                output, submitted = run_tool(*written)\n"
        "                answer = submitted if submitted is not None else answer\n"
        "                messages += [\n"
        '                    {"role": "assistant", "content": message.content or ""},\n'
        '                    {"role": "user", "content": f"Result of {written[0]}:\\n{output}{note}"},\n'
        "                ]\n"
        "                if answer is not None:\n"
        "                    break\n"
        "                continue\n"
        "            if not message.tool_calls:\n"
    )
    why = "the runs' replies were not tool calls; the loop now runs a tool call written as JSON text."
    return [(NO_TOOL_BRANCH, branch), (MAIN, parser + MAIN)], f"run tool calls written as text in {path}", why


# --- loop settings (builtin loop) -----------------------------------------------------------------


def _builtin(settings: dict[str, Any]) -> bool:
    agent = _section(settings, "agent")
    return agent.get("kind", "builtin") == "builtin"


def _loop_edit(context: ProposalContext, pattern: Pattern, settings: dict[str, Any]) -> Any:
    if not _builtin(settings):
        return None
    if context.may_edit("harness.yaml", "recovery"):
        found = _recovery_edit(context, pattern, settings)
        if found is not None:
            return found
    if not context.may_edit("harness.yaml", "loop"):
        return None
    loop = _section(settings, "loop")
    tools = harness_tools(context)
    if pattern.kind == "never_submits" and tools.submit and not loop.get("final_submit"):
        edits: list[dict[str, Any]] = [{"op": "set_loop", "setting": "final_submit", "value": True}]
        fallback = _reference_answer_pattern(context)
        if fallback is not None and not loop.get("answer_from"):
            edits.append(
                {"op": "set_loop", "setting": "answer_from", "value": f"{fallback[0]}.{fallback[1]}"}
            )
        return edits, f"ask for {tools.submit} at the step limit", _final_submit_why(tools.submit, fallback)
    if pattern.kind == "wrong_submission" and not loop.get("answer_check"):
        detail = pattern.detail
        source = f"{detail['tool']}.{detail['argument']}"
        edit: dict[str, Any] = {"op": "set_loop", "setting": "answer_check", "value": source}
        summary = f"turn back a {detail['submit']} that is not a {source} the run made"
        return [edit], summary, _answer_check_why(detail)
    if pattern.kind == "repeated_call" and not loop.get("stop_on_repeat"):
        edit = {"op": "set_loop", "setting": "stop_on_repeat", "value": 2}
        return (
            [edit],
            "stop runs that repeat the same call twice",
            "the runs repeated a call until the step limit.",
        )
    if pattern.kind == "never_submits" and tools.submit and not loop.get("observation_note"):
        note = f"When this result gives what the task asks for, call {tools.submit} now."
        edit = {"op": "set_loop", "setting": "observation_note", "value": note}
        why = f"the runs ended without calling {tools.submit}; every tool result now reminds the model to."
        return [edit], f"remind the agent after each result to call {tools.submit}", why
    if pattern.kind == "malformed_call" and not loop.get("json_grammar"):
        model = str(settings.get("model", ""))
        if model.startswith("local/"):
            edit = {"op": "set_loop", "setting": "json_grammar", "value": True}
            return (
                [edit],
                "constrain replies to JSON tool calls",
                "the runs' replies were not valid tool calls.",
            )
    return None


def _recovery_edit(context: ProposalContext, pattern: Pattern, settings: dict[str, Any]) -> Any:
    """A recovery rule for repeated calls, on a harness whose recovery component is on."""
    recovery = _section(settings, "recovery")
    found = recovery.get("rules")
    rules: list[Any] = found if isinstance(found, list) else []
    on = bool(recovery) and recovery.get("enabled") is not False
    if (
        pattern.kind != "repeated_call"
        or not on
        or any(isinstance(r, dict) and r.get("event") == "repeated_call" for r in rules)
    ):
        return None
    note = "You made the same call twice in a row; its result will not change. Use it, or submit."
    rule = {"event": "repeated_call", "times": 2, "action": "note", "note": note}
    return (
        [{"op": "set_recovery", "rules": [*rules, rule]}],
        "add a recovery rule for repeated calls",
        "the runs repeated a call; the harness's recovery rules now tell the agent when it does.",
    )


# --- tool definitions ------------------------------------------------------------------------------


def _tool_yaml(context: ProposalContext, name: str) -> dict[str, Any] | None:
    import yaml

    path = f"tools/{name}.yaml"
    if path not in context.files or not context.may_edit(path):
        return None
    try:
        doc = bounded_yaml(context.files[path])
    except yaml.YAMLError:
        return None
    return doc if isinstance(doc, dict) and isinstance(doc.get("parameters"), dict) else None


def _described(doc: dict[str, Any], name: str, sentence: str) -> dict[str, Any] | None:
    description = str(doc.get("description", "")).rstrip()
    if sentence in description:
        return None
    return {"op": "edit_tool", "name": name, "description": f"{description} {sentence}".strip()}


def _tool_edit(context: ProposalContext, pattern: Pattern, settings: dict[str, Any]) -> Any:
    tools = harness_tools(context)
    detail = pattern.detail
    if pattern.kind == "wrong_submission":
        doc = _tool_yaml(context, detail["submit"])
        if doc is None:
            return None
        sentence = (
            f"Its {detail['answer']} is the exact {detail['argument']} you passed to {detail['tool']}, "
            f"not the {detail['tool']} output."
        )
        edit = _described(doc, detail["submit"], sentence)
        if edit is None:
            return None
        params = doc["parameters"]
        prop = dict((params.get("properties") or {}).get(detail["answer"]) or {"type": "string"})
        prop["description"] = (
            f"The exact {detail['argument']} you passed to {detail['tool']} (not its output)."
        )
        edit["parameters"] = {
            **params,
            "properties": {**params.get("properties", {}), detail["answer"]: prop},
        }
        why = (
            f"the runs called {detail['tool']}, then submitted something else than the {detail['argument']} "
            f"they passed to it (its result, a description of the work), where the reference runs submit "
            f"that {detail['argument']}."
        )
        return (
            [edit],
            f"say that {detail['submit']} takes the {detail['tool']} {detail['argument']}, not its output",
            why,
        )
    if pattern.kind == "never_submits" and tools.submit:
        doc = _tool_yaml(context, tools.submit)
        sentence = (
            "Call it as soon as you have done what the task asks; a run that ends without it scores nothing."
        )
        edit = _described(doc, tools.submit, sentence) if doc else None
        if edit is None:
            return None
        why = f"the runs ended without calling {tools.submit}."
        return [edit], f"say when to call {tools.submit}", why
    if pattern.kind == "repeated_call":
        doc = _tool_yaml(context, detail["tool"])
        sentence = "Calling it again with the same arguments returns the same result: do not repeat a call."
        edit = _described(doc, detail["tool"], sentence) if doc else None
        if edit is None:
            return None
        return (
            [edit],
            f"say that repeating a {detail['tool']} call changes nothing",
            "the runs repeated a call.",
        )
    if pattern.kind == "unknown_tool":
        doc = _tool_yaml(context, detail["closest"])
        sentence = f"Call it by this exact name, {detail['closest']} (there is no tool {detail['called']})."
        edit = _described(doc, detail["closest"], sentence) if doc else None
        if edit is None:
            return None
        why = f"the runs called {detail['called']!r}, which is not a tool of this harness."
        return [edit], f"name tool {detail['closest']} exactly, not {detail['called']}", why
    return None


LEVERS: tuple[Lever, ...] = (
    _final_submit_code,
    _repeat_code,
    _answer_check_code,
    _unknown_code,
    _text_call_code,
    _loop_edit,
    _tool_edit,
)


class BehaviourProposer:
    """The offline operators (module docstring): a pattern read from the failed runs, the first lever
    that fits, as one edit-operation candidate."""

    name = "behaviour"

    async def propose(self, context: ProposalContext) -> Candidate | None:
        settings = harness_settings(context)
        for pattern in find_patterns(context):
            for lever in LEVERS:
                found = lever(context, pattern, settings)
                if found is None:
                    continue
                edits, summary, why = found
                changes = context.fresh_changes(edits, summary)
                if changes is None:
                    continue
                cluster = _cluster_for(context, pattern)
                cause = cluster.cause.value if cluster else CAUSE_OF[pattern.kind].value
                return Candidate(
                    changes=changes,
                    summary=summary,
                    rationale=f"{len(pattern.tasks)} failed run(s) show {pattern.kind}: {why}",
                    targets=(cause,),
                    target_tasks=pattern.tasks,
                    proposer=self.name,
                    edits=tuple(edits),
                    evidence=(pattern.evidence(),),
                )
        return None

    async def revise(self, context: ProposalContext, candidate: Candidate, reason: str) -> Candidate:
        raise ProposalFailed(self.name, [f"cannot revise an operator's edit ({reason})"])


def _cluster_for(context: ProposalContext, pattern: Pattern) -> Cluster | None:
    """The cluster holding most of the pattern's runs (the cause the edit is recorded against)."""
    best, overlap = None, 0
    for cluster in context.clusters:
        shared = len(set(cluster.task_ids) & set(pattern.tasks))
        if shared > overlap:
            best, overlap = cluster, shared
    return best
