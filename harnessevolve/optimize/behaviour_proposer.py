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
* unknown_tool: an unknown name goes to the closest tool / ``repair_calls`` / the closest tool names
  itself;
* off_list_value: -- / ``repair_calls`` (a value matched to the one option its parameter allows,
  from its enum or the list its description states, or answered with the options) / --;
* placeholder_value: -- / ``refuse_placeholders`` (a call whose value looks made up and was never
  told is answered once, asking for the real value: look it up, or ask) / --;
* malformed_call: a tool call written as JSON text is run / ``json_grammar`` with ``repair_calls``
  in one candidate (local model; the two together scored 33.3 on HumanEval 1.5B where the grammar
  alone scored 11.1 and the check alone 16.7), else (refused, or not a local model) ``repair_calls``
  (each call checked against its tool's schema before it runs; alone at once when the only fault
  is a value wholly in a code fence, which a grammar would keep) / --;
* untested_write (its detector is not among ``trajectory_patterns.DETECTORS``: measured, no change):
  -- / ``check_writes`` (what each ``write_file`` call wrote is parsed by its suffix
  in the sandbox, and a note says when it does not parse, holds a Python function with no code, or
  changed nothing) / --;
* finishes_early (its detector is not among ``trajectory_patterns.DETECTORS`` yet: no default run
  proposes it until it is measured): -- / ``verify_finish`` (the first attempt to finish is held back
  once, the request quoted, asking whether every part is done) / --.

Every candidate is a normal edit-operation candidate (``Candidate.edits``), gated like any other;
code edits meet the quality gate's compile and sandboxed smoke run. Never revised.
"""

from __future__ import annotations

from typing import Any

from harnessevolve.core.documents import bounded_yaml
from harnessevolve.core.signals import Cause, Cluster
from harnessevolve.optimize.code_levers import (
    Lever,
    _answer_check_code,
    _answer_check_why,
    _final_submit_code,
    _final_submit_why,
    _reference_answer_pattern,
    _repeat_code,
    _section,
    _text_call_code,
    _unknown_code,
    agent_script,
    harness_settings,
)
from harnessevolve.optimize.proposal import Candidate, ProposalContext, ProposalFailed
from harnessevolve.optimize.trajectory_patterns import Pattern, find_patterns, harness_tools

CAUSE_OF = {
    "repeated_call": Cause.STEP_LIMIT,
    "never_submits": Cause.STEP_LIMIT,
    "wrong_submission": Cause.WRONG_ARGUMENT,
    "unknown_tool": Cause.UNKNOWN_TOOL,
    "malformed_call": Cause.FORMAT_ERROR,
    "off_list_value": Cause.WRONG_ARGUMENT,
    "placeholder_value": Cause.WRONG_ARGUMENT,
    "finishes_early": Cause.PREMATURE_FINISH,
    "untested_write": Cause.PREMATURE_FINISH,
}
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
    fenced_only = pattern.detail.get("fenced") == len(pattern.tasks)  # a grammar keeps the fences
    if pattern.kind == "malformed_call" and not loop.get("json_grammar") and not fenced_only:
        model = str(settings.get("model", ""))
        if model.startswith("local/"):
            edits = [{"op": "set_loop", "setting": "json_grammar", "value": True}]
            if loop.get("repair_calls"):
                return (
                    edits,
                    "constrain replies to JSON tool calls",
                    "the runs' replies were not valid tool calls.",
                )
            # Both sides of one fault: the grammar keeps the model writing JSON (escaping the quotes
            # in code it writes), the schema check reads what a grammar cannot fix (fences, types).
            edits.append({"op": "set_loop", "setting": "repair_calls", "value": True})
            why = (
                "the runs' replies were not valid tool calls; replies are now constrained to JSON tool "
                "calls, and each call is checked against its tool's schema before it runs (a value "
                "wholly in a code fence unwrapped, a near-miss name or a wrong type repaired)."
            )
            summary = "constrain replies to JSON tool calls and check them against their schemas"
            if summary not in context.rejected:  # refused as a pair: the schema check alone, below
                return edits, summary, why
    if pattern.kind == "finishes_early" and not loop.get("verify_finish"):
        edit = {"op": "set_loop", "setting": "verify_finish", "value": True}
        why = (
            "the runs ended having done less than the task needs; the first attempt to finish is now "
            "held back once with the request quoted again, asking whether every part of it is done."
        )
        return [edit], "ask the agent to check every part of the request before it finishes", why
    if pattern.kind == "untested_write" and not loop.get("check_writes"):
        edit = {"op": "set_loop", "setting": "check_writes", "value": True}
        why = (
            f"the runs wrote a file with {pattern.detail['tool']} and finished at once, never running "
            "or reading it; each write is now parsed by its suffix in the sandbox, and its result says "
            "when the file does not parse, a Python function holds no code, or the write changed nothing."
        )
        return [edit], "check what each file write wrote", why
    if pattern.kind == "placeholder_value" and not loop.get("refuse_placeholders"):
        edit = {"op": "set_loop", "setting": "refuse_placeholders", "value": True}
        detail = pattern.detail
        why = (
            f"the runs passed {detail['tool']} {detail['argument']}={detail['value']!r} ({detail['why']}), "
            "a value they were never told; a call whose value looks made up is now answered once "
            "instead of run, asking for the real value (look it up with a tool, or ask the user)."
        )
        return [edit], "answer calls with made-up values instead of running them", why
    if pattern.kind in ("malformed_call", "unknown_tool", "off_list_value") and not loop.get("repair_calls"):
        edit = {"op": "set_loop", "setting": "repair_calls", "value": True}
        if pattern.kind == "off_list_value":
            allowed = _shown(pattern.detail["options"])
            why = (
                f"the runs passed {pattern.detail['tool']} {pattern.detail['argument']}="
                f"{pattern.detail['value']!r}, outside the values it allows ({allowed}), "
                "and such a tool may take it without an error; each call is now checked against its "
                "tool's schema and the value lists its descriptions state before it runs: a value that "
                "stands for one listed option becomes that option, and one that fits none is answered "
                "with the list instead of run."
            )
            return [edit], "check tool call values against the options their tools allow", why
        what = (
            "called tools the harness does not have"
            if pattern.kind == "unknown_tool"
            else "wrote code fences into tool arguments"
            if fenced_only
            else "made calls without their required arguments or with malformed ones"
        )
        why = (
            f"the runs {what}; each call is now checked against its tool's schema before it runs: "
            "a near-miss name, a value of the wrong type or one wholly in a code fence is repaired "
            "where one reading fits, and a call missing a required argument is answered with what it "
            "needs instead of run."
        )
        return [edit], "check tool calls against their schemas before they run", why
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


def _shown(options: list[Any]) -> str:
    text = ", ".join(str(o) for o in options[:8])
    return text + (f", ... ({len(options) - 8} more)" if len(options) > 8 else "")


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
    parts = "agent code, loop settings or tool definitions"
    """What it edits (named when ``run`` refuses a harness none of its proposers reaches)."""

    def reaches(self, context: ProposalContext) -> bool:
        """Its levers: a command agent's editable script, the builtin loop's settings or recovery
        rules, or an editable tool definition."""
        settings = harness_settings(context)
        loop = _builtin(settings) and (
            context.may_edit("harness.yaml", "loop") or context.may_edit("harness.yaml", "recovery")
        )
        return (
            loop
            or bool(context.editable_files("tools/*.yaml"))
            or agent_script(context, settings) is not None
        )

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
