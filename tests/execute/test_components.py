"""Runtime components in the builtin loop (docs/runtime.md): experience memory in the prompt,
recovery rules on loop events, the progress notes tool, world-model forecasts; a failing
component is reported and the rollout goes on; a harness that turns none on runs as before."""

from __future__ import annotations

import asyncio
import shutil
import uuid
from pathlib import Path
from typing import Any

import pytest
from test_agent import make_task

from harnessevolve.core import paths
from harnessevolve.evaluate.actions import read_actions
from harnessevolve.evaluate.tool_schemas import offered_tools
from harnessevolve.execute import memory as memory_module
from harnessevolve.execute.agent import NO_HOOKS, loop_hooks, run_agent
from harnessevolve.execute.memory import retrieve
from harnessevolve.execute.runners.external import task_document
from harnessevolve.harness.load import load_harness
from harnessevolve.harness.runtime import MemoryEntry
from harnessevolve.models.scripted import register_script, unregister_script
from harnessevolve.proposing.context import forecast_misses

TASK = make_task(instruction="What word is in a.txt? Read the text file and submit the word.")
READ = {"tool_calls": [{"name": "read_file", "arguments": {"path": "a.txt"}}]}
SUBMIT = {"tool_calls": [{"name": "submit", "arguments": {"answer": "maple"}}]}
ENTRIES = {
    "memory/read.yaml": "version: 1\ntask: Read a text file and submit the word in it\n"
    "lesson: Call read_file on the file, then submit its first word.\noutcome: success\n",
    "memory/git.yaml": "version: 1\ntask: Rebase a git branch\n"
    "lesson: Run git rebase main.\noutcome: success\n",
}


def harness_with(tmp_path: Path, settings: str, files: dict[str, str] | None = None) -> Any:
    root = tmp_path / "h"
    shutil.copytree(paths.builtin_dir("harnesses") / "shell-agent", root)
    settings_file = root / "harness.yaml"  # no stop_on_repeat: the rules under test see every call
    text = settings_file.read_text().replace("stop_on_repeat: 2", "stop_on_repeat: 0")
    settings_file.write_text(text + settings)
    for rel, text in (files or {}).items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return load_harness(root)


@pytest.fixture
def model() -> Any:
    name = f"components-{uuid.uuid4().hex[:8]}"
    seen: list[list[dict[str, Any]]] = []

    def start(replies: list[dict[str, Any]]) -> str:
        queue = list(replies)

        def policy(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
            seen.append([dict(m) for m in messages])
            return queue.pop(0)

        register_script(name, policy)
        return f"scripted/{name}"

    start.seen = seen  # type: ignore[attr-defined]
    yield start
    unregister_script(name)


def rollout(harness: Any, model: str, tmp_path: Path) -> Any:
    workspace = tmp_path / "ws"
    workspace.mkdir(exist_ok=True)
    (workspace / "a.txt").write_text("maple\n")
    return asyncio.run(run_agent(harness, TASK, workspace, model=model, seed=1))


def test_a_harness_without_components_gets_no_hooks(tmp_path: Path) -> None:
    assert loop_hooks(harness_with(tmp_path, "")) is NO_HOOKS
    off = harness_with(tmp_path / "off", "memory: {enabled: false}\n", ENTRIES)
    assert loop_hooks(off) is NO_HOOKS and off.runtime.entries == ()


def test_bm25_ranks_the_entry_about_the_task_first_and_drops_unrelated_ones() -> None:
    entries = (
        MemoryEntry("memory/a.yaml", "Rebase a git branch", "git rebase main", "success"),
        MemoryEntry("memory/b.yaml", "Count the lines of a text file", "use wc -l", "success"),
        MemoryEntry("memory/c.yaml", "Sum numbers in a csv file", "use awk", "failure"),
    )
    found = retrieve(entries, "How many lines does the text file notes.txt have?", 3)
    assert [e.path for e, _ in found][0] == "memory/b.yaml"
    assert "memory/a.yaml" not in [e.path for e, _ in found]
    assert retrieve(entries, "zebra quantum", 3) == []


def test_memory_entries_are_in_the_prompt_the_model_sees(model: Any, tmp_path: Path) -> None:
    harness = harness_with(tmp_path, "memory: {top_k: 1}\n", ENTRIES)
    trajectory = rollout(harness, model([READ, SUBMIT]), tmp_path)
    first_prompt = model.seen[0][0]["content"]
    assert "# Memory" in first_prompt and "Call read_file on the file" in first_prompt
    assert "git rebase" not in first_prompt
    assert trajectory.steps[0].message == first_prompt  # the trajectory shows what the model saw
    assert trajectory.extra["memory"]["retrieved"] == ["memory/read.yaml"]
    assert trajectory.extra["answer"] == "maple"


def test_a_failing_component_is_reported_and_the_rollout_goes_on(
    model: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*_: Any) -> Any:
        raise RuntimeError("index is corrupt")

    monkeypatch.setattr(memory_module, "retrieve", broken)
    harness = harness_with(tmp_path, "memory: {top_k: 1}\n", ENTRIES)
    trajectory = rollout(harness, model([READ, SUBMIT]), tmp_path)
    assert trajectory.extra["component_errors"] == [
        {"component": "memory", "where": "before_query", "error": "RuntimeError: index is corrupt"}
    ]
    assert trajectory.extra["stop_reason"] == "submitted" and trajectory.extra["answer"] == "maple"
    assert "# Memory" not in model.seen[0][0]["content"]


def test_a_tool_error_rule_shows_its_note_before_the_next_call(model: Any, tmp_path: Path) -> None:
    rules = (
        "recovery:\n  rules:\n    - {event: tool_error, action: note, note: The path is wrong; list files.}\n"
    )
    harness = harness_with(tmp_path, rules)
    missing = {"tool_calls": [{"name": "read_file", "arguments": {"path": "nope.txt"}}]}
    trajectory = rollout(harness, model([missing, READ, SUBMIT]), tmp_path)
    assert model.seen[1][-1] == {"role": "user", "content": "The path is wrong; list files."}
    assert len(model.seen[2]) == len(model.seen[1]) + 2  # fired once (max_fires 1): no second note
    assert trajectory.extra["recovery"] == [
        {"rule": "tool_error->note", "event": "tool_error", "action": "note", "agent_step": 1}
    ]
    note = next(s for s in trajectory.steps if s.extra.get("component") == "recovery")
    assert note.source == "user" and note.message == "The path is wrong; list files."
    assert not note.is_user_turn  # the evaluator reads the run as one turn, the note inside it
    actions = read_actions(trajectory, offered_tools(trajectory)).actions
    assert [a.tool for a in actions] == ["read_file", "read_file", "submit"] and {
        a.turn for a in actions
    } == {1}


def test_a_repeated_call_rule_stops_and_submits_the_last_observation(model: Any, tmp_path: Path) -> None:
    rules = "recovery:\n  rules:\n    - {event: repeated_call, times: 2, action: stop}\n"
    harness = harness_with(tmp_path, rules)
    trajectory = rollout(harness, model([READ, READ, READ]), tmp_path)
    assert trajectory.extra["stop_reason"] == "submitted"
    assert trajectory.extra["answer"] == "maple\n"
    assert [f["rule"] for f in trajectory.extra["recovery"]] == ["repeated_call->stop"]
    assert len(model.seen) == 2


def test_step_limit_near_and_malformed_call_rules(model: Any, tmp_path: Path) -> None:
    rules = (
        "recovery:\n  rules:\n"
        "    - {event: malformed_call, action: retry, temperature: 0.9, note: Call one tool with JSON.}\n"
        "    - {event: step_limit_near, within: 2, action: note, note: Submit now.}\n"
    )
    harness = harness_with(tmp_path, rules)  # shell-agent: max_steps 5
    bad = {"tool_calls": [{"name": "read_file", "arguments": "{not json"}]}
    trajectory = rollout(harness, model([bad, READ, READ, SUBMIT]), tmp_path)
    assert model.seen[1][-1]["content"] == "Call one tool with JSON."
    assert model.seen[3][-1]["content"] == "Submit now."  # after the 3rd call: 2 of 5 left
    events = [(f["event"], f["agent_step"]) for f in trajectory.extra["recovery"]]
    assert events == [("malformed_call", 1), ("step_limit_near", 3)]


def test_progress_notes_persist_across_steps(model: Any, tmp_path: Path) -> None:
    harness = harness_with(tmp_path, "progress: {max_chars: 200}\n")
    write = {"tool_calls": [{"name": "notes", "arguments": {"action": "write", "text": "plan: read a.txt"}}]}
    append = {"tool_calls": [{"name": "notes", "arguments": {"action": "append", "text": "done: read"}}]}
    read = {"tool_calls": [{"name": "notes", "arguments": {"action": "read"}}]}
    trajectory = rollout(harness, model([write, READ, append, read, SUBMIT]), tmp_path)
    observed = [o.content for s in trajectory.agent_steps for o in s.observations]
    assert observed[3] == "plan: read a.txt\ndone: read"
    assert trajectory.extra["progress"] == {"notes": "plan: read a.txt\ndone: read", "writes": 2}
    assert "notes" in {d["function"]["name"] for d in trajectory.tool_definitions}


def test_world_model_forecasts_are_checked_against_observations(model: Any, tmp_path: Path) -> None:
    files = {"world_model.md": "read_file returns the file's text.\n"}
    harness = harness_with(tmp_path, "world_model: {file: world_model.md}\n", files)
    right = {**READ, "content": "Expect: the word maple"}
    wrong = {**READ, "content": "Expect: a list of directories"}
    trajectory = rollout(harness, model([right, wrong, READ, SUBMIT]), tmp_path)
    assert "# World model" in model.seen[0][0]["content"] and "Expect:" in model.seen[0][0]["content"]
    record = trajectory.extra["world_model"]
    assert (record["forecasts"], record["matches"], record["missing"]) == (2, 1, 1)
    assert [r["match"] for r in record["records"]] == [True, False]
    (missed,) = forecast_misses(trajectory)  # what the world_model proposer is shown
    assert missed["tools"] == ["read_file"] and missed["expected"] == "a list of directories"


def test_a_command_agents_task_file_carries_memory_and_rules(tmp_path: Path) -> None:
    rules = "recovery:\n  rules:\n    - {event: tool_error, action: stop}\n"
    harness = harness_with(tmp_path, "memory: {top_k: 1}\n" + rules, ENTRIES)
    document = task_document(harness, TASK, "scripted/x")
    assert [e["path"] for e in document["memory"]["entries"]] == ["memory/read.yaml"]
    assert document["system_prompt"].endswith(document["memory"]["section"] + "\n")
    assert document["recovery"][0]["event"] == "tool_error" and document["recovery"][0]["action"] == "stop"
    plain = task_document(harness_with(tmp_path / "plain", ""), TASK, "scripted/x")
    assert not {"memory", "recovery", "progress"} & set(plain)


def test_lookahead_samples_candidates_and_makes_the_one_the_model_picks(model: Any, tmp_path: Path) -> None:
    files = {"world_model.md": "read_file returns the file's text.\n"}
    harness = harness_with(tmp_path, "world_model: {lookahead: 2}\n", files)
    wrong = {
        "tool_calls": [{"name": "read_file", "arguments": {"path": "b.txt"}}],
        "content": "Expect: nothing",
    }
    right = {**READ, "content": "Expect: maple"}
    trajectory = rollout(harness, model([wrong, right, "2", SUBMIT, SUBMIT]), tmp_path)
    pick_prompt = model.seen[2][-1]["content"]
    assert "1. read_file" in pick_prompt and "expects: maple" in pick_prompt
    first = trajectory.agent_steps[0]
    assert first.tool_calls[0].arguments == {"path": "a.txt"}  # the picked candidate was made
    record = trajectory.extra["world_model"]["lookahead"]
    assert record[0] == {"agent_step": 1, "sampled": 2, "distinct": 2, "picked": 2, "pick_reply": "2"}
    assert record[1] == {"agent_step": 2, "sampled": 2, "distinct": 1}  # two submits: nothing to pick
    assert len(model.seen) == 5 and trajectory.extra["answer"] == "maple"


def test_a_command_agent_keeps_progress_notes_in_its_notes_file(model: Any, tmp_path: Path) -> None:
    """The python-agent template offers the task file's notes tool, keeps the notes in
    $HARNESSEVOLVE_NOTES, and the runner reads them back into the trajectory (cut at max_chars)."""
    from harnessevolve.execute.executor import run_one
    from harnessevolve.execute.workspace import remove_workspace

    root = tmp_path / "py"
    shutil.copytree(paths.builtin_dir("harnesses") / "python-agent", root)
    (root / "harness.yaml").write_text((root / "harness.yaml").read_text() + "progress: {max_chars: 100}\n")
    harness = load_harness(root)
    assert task_document(harness, TASK, "scripted/x")["progress"]["tool"]["name"] == "notes"
    write = {"tool_calls": [{"name": "notes", "arguments": {"action": "write", "text": "plan: read a.txt"}}]}
    long = "done: read it all, " + "and more " * 12
    append = {"tool_calls": [{"name": "notes", "arguments": {"action": "append", "text": long}}]}
    read = {"tool_calls": [{"name": "notes", "arguments": {"action": "read"}}]}
    done = asyncio.run(run_one(harness, TASK, model=model([write, READ, append, read, SUBMIT]), seed=1))
    try:
        assert done.answer == "maple", done.trajectory.extra.get("error")
        kept = f"plan: read a.txt\n{long}"[:100]
        assert done.trajectory.extra["progress"]["notes"] == kept
        last_request = model.seen[-1]
        assert any(m["role"] == "tool" and m["content"] == kept for m in last_request)
    finally:
        if done.workspace:
            remove_workspace(done.workspace)
