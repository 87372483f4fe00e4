"""The agent-code levers of the behaviour operators do what they say when the patched python-agent
agent.py runs: a misspelt tool name runs the closest tool, a tool call written as JSON text is
read, the step limit ends in one submit-only model call and, failing that, in the argument the
references submit. (The module is loaded with a fake task file and a fake model client; no model.)"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from harnessevolve.core.signals import Cause
from harnessevolve.optimize.behaviour_proposer import BehaviourProposer

sys.path.insert(0, str(Path(__file__).parent))
from test_behaviour_proposer import PY_AGENT, command_tasks, context, misnamed, without_submit  # noqa: E402
from tool_specs import builtin_tools  # noqa: E402

TOOLS = builtin_tools("bash", "submit")


def load_agent(code: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    task = {
        "turns": ["do it"],
        "system_prompt": "",
        "tools": TOOLS,
        "loop": {
            "max_steps": 2,
            "temperature": 0.0,
            "max_tokens": 64,
            "tool_output_limit": 500,
            "command_timeout_s": 10,
            "observation_note": "",
        },
    }
    (tmp_path / "task.json").write_text(json.dumps(task))
    (tmp_path / "agent.py").write_text(code)
    monkeypatch.setenv("HARNESSEVOLVE_TASK", str(tmp_path / "task.json"))
    monkeypatch.setenv("OPENAI_API_KEY", "test")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("OPENAI_MODEL", "test")
    monkeypatch.delenv("HARNESSEVOLVE_MODEL_SOCKET", raising=False)
    monkeypatch.chdir(tmp_path)
    spec = importlib.util.spec_from_file_location("patched_agent", tmp_path / "agent.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def patched(ctx) -> str:
    candidate = asyncio.run(BehaviourProposer().propose(ctx))
    return candidate.changes["agent.py"]


def fake_client(tool_calls):
    message = SimpleNamespace(tool_calls=tool_calls, content="")
    reply = SimpleNamespace(choices=[SimpleNamespace(message=message)])
    seen: list = []

    def create(**kwargs):
        seen.append(kwargs)
        return reply

    return SimpleNamespace(chat=SimpleNamespace(completions=SimpleNamespace(create=create))), seen


def test_a_misspelt_tool_runs_the_closest_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tasks = command_tasks(tmp_path / "bench")
    agent = load_agent(
        patched(context(PY_AGENT, tasks, misnamed, cause=Cause.UNKNOWN_TOOL)), tmp_path, monkeypatch
    )
    assert agent.run_tool("bassh", {"command": "echo hello"}) == ("hello\n", None)
    assert agent.run_tool("frobnicate", {})[0].startswith("error: unknown tool 'frobnicate'")


def test_a_tool_call_written_as_text_is_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tasks = command_tasks(tmp_path / "bench")
    code = patched(context(PY_AGENT, tasks, lambda t: (), cause=Cause.FORMAT_ERROR))
    agent = load_agent(code, tmp_path, monkeypatch)
    text = 'I will run it: {"name": "bash", "arguments": {"command": "ls"}}'
    assert agent.text_call(text) == ("bash", {"command": "ls"})
    assert agent.text_call("no call here") is None
    assert agent.text_call('{"name": "nope", "arguments": {}}') is None


def test_the_step_limit_asks_for_submit_then_falls_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tasks = command_tasks(tmp_path / "bench")  # references submit the bash command they ran
    agent = load_agent(patched(context(PY_AGENT, tasks, without_submit)), tmp_path, monkeypatch)
    history = [
        {"role": "user", "content": "do it"},
        {
            "role": "assistant",
            "tool_calls": [{"function": {"name": "bash", "arguments": '{"command": "du -sh ."}'}}],
        },
        {"role": "tool", "content": "4.0K ."},
    ]
    call = SimpleNamespace(function=SimpleNamespace(name="submit", arguments='{"answer": "du -sh ."}'))
    agent.client, seen = fake_client([call])
    assert agent.final_submit(history) == "du -sh ."
    assert [t["function"]["name"] for t in seen[0]["tools"]] == ["submit"]  # only submit offered
    assert seen[0]["messages"][-1]["content"].startswith("You have used all your steps.")
    agent.client, _ = fake_client(None)  # the model still does not submit: the references' pattern
    assert agent.final_submit(history) == "du -sh ."
