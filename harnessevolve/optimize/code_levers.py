"""The ``behaviour`` proposer's first lever: edits to the agent's own code (``agent.kind: command``
whose script is editable, e.g. the python-agent template), as ``patch_file`` unified diffs on the
loop's statements (see ``behaviour_proposer``'s docstring for the operators per pattern); also the
lever type and the harness settings every lever reads."""

from __future__ import annotations

import difflib
from collections.abc import Callable
from typing import Any

from harnessevolve.core.documents import bounded_yaml
from harnessevolve.harness.model import ANSWER_CHECK_REPLY, FINAL_SUBMIT_ASK
from harnessevolve.optimize.proposal import ProposalContext
from harnessevolve.optimize.trajectory_patterns import Pattern, harness_tools

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
