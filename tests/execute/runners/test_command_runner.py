"""The command runner end to end through the public API: a real program in the bwrap sandbox, the
scripted provider behind the rollout's endpoint, and every way an external agent can go wrong."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import textwrap
from pathlib import Path

import pytest
import yaml
from one_rollout import run_rollout

from harnessevolve.core.tasks import Benchmark
from harnessevolve.execute.runners import RUNNERS, runner_for, runner_identity
from harnessevolve.execute.runners.endpoint import budget_check
from harnessevolve.execute.workspace import create_workspace, remove_workspace
from harnessevolve.harness.load import load_harness
from harnessevolve.models.scripted import register_script, unregister_script
from harnessevolve.models.usage import UsageMeter, usage_scope

TEMPLATE = Path(__file__).parents[3] / "harnesses" / "python-agent"
HAS_BWRAP = os.access("/usr/bin/bwrap", os.X_OK)
pytestmark = pytest.mark.skipif(not HAS_BWRAP, reason="needs bubblewrap")

COUNT = {"tool_calls": [{"name": "bash", "arguments": {"command": "wc -l < list.txt"}}]}
SUBMIT = {"tool_calls": [{"name": "submit", "arguments": {"answer": "11"}}]}


def make_harness(tmp_path: Path, agent_py: str | None = None, **agent: object) -> Path:
    """The python-agent template, with ``agent.py`` replaced and ``agent:`` settings changed."""
    root = tmp_path / "harness"
    shutil.copytree(TEMPLATE, root)
    if agent_py is not None:
        (root / "agent.py").write_text(textwrap.dedent(agent_py))
    doc = yaml.safe_load((root / "harness.yaml").read_text())
    doc["agent"].update(agent)
    (root / "harness.yaml").write_text(yaml.safe_dump(doc))
    return root


def rollout(harness_root: Path, task, model: str = "scripted/cmd"):
    harness = load_harness(harness_root)

    async def go():
        workspace = await create_workspace(task)
        try:
            trajectory = await runner_for(harness).run(harness, task, workspace, model=model, seed=3)
            return trajectory, {p.name for p in workspace.iterdir()}
        finally:
            remove_workspace(workspace)

    return asyncio.run(go())


@pytest.fixture
def task(shell_basics: Benchmark):
    return next(t for t in shell_basics.tasks if t.id == "count-lines-01")


@pytest.fixture
def script():
    names: list[str] = []

    def register(replies) -> str:
        register_script("cmd", replies)
        names.append("cmd")
        return "scripted/cmd"

    yield register
    for name in names:
        unregister_script(name)


def test_python_agent_solves_a_task_through_the_endpoint(tmp_path: Path, task, script) -> None:
    script([COUNT, SUBMIT])
    meter = UsageMeter()
    with usage_scope(meter, stage="execute"):
        trajectory, files = rollout(make_harness(tmp_path), task)
    extra = trajectory.extra
    assert extra["stop_reason"] == "submitted" and extra["answer"] == "11", extra.get("error")
    assert extra["runner"] == "command" and extra["steps_from"] == "endpoint"
    sources = [s.source for s in trajectory.steps]
    assert sources == ["system", "user", "agent", "agent"]
    bash = trajectory.steps[2]
    assert bash.tool_calls[0].arguments == {"command": "wc -l < list.txt"}
    assert bash.observations[0].content.strip() == "11"  # the command really ran in the workspace
    assert [c["status"] for c in extra["model_calls"]] == [200, 200]
    assert extra["model_calls"][1]["new_messages"][0]["role"] == "tool"
    total = (
        trajectory.final_metrics["total_prompt_tokens"] + trajectory.final_metrics["total_completion_tokens"]
    )
    assert total > 0 and meter.totals().tokens == total  # metered into the run's meter
    assert files == {"list.txt"}  # nothing of ours left in the workspace


def test_runner_identity_and_registry() -> None:
    assert set(RUNNERS) == {"builtin", "command", "mini-swe-agent"}
    assert runner_identity(load_harness(TEMPLATE)) == "command@1"


def test_sandbox_shows_harness_read_only_and_no_keys(tmp_path: Path, task, script, monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-host-secret")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-host-secret")
    script([])
    agent = """
        import os, pathlib
        report = {"env": dict(os.environ), "harness": sorted(os.listdir("/harness"))}
        try:
            pathlib.Path("/harness/agent.py").write_text("overwritten")
            report["write"] = "allowed"
        except OSError as exc:
            report["write"] = type(exc).__name__
        pathlib.Path(os.environ["HARNESSEVOLVE_ANSWER"]).write_text(repr(report))
    """
    root = make_harness(tmp_path, agent)
    (root / ".harnessevolve").mkdir()
    (root / ".harnessevolve" / "cache.json").write_text("{}")
    trajectory, _ = rollout(root, task)
    report = eval(trajectory.extra["answer"])  # noqa: S307 - our own repr
    assert "sk-host-secret" not in str(report) and "sk-ant" not in str(report)
    assert report["env"]["OPENAI_API_KEY"] == "harnessevolve-endpoint-no-key"
    assert report["env"]["OPENAI_BASE_URL"].startswith("http://127.0.0.1:")
    assert report["write"] in ("OSError", "PermissionError")
    assert ".harnessevolve" not in report["harness"] and "agent.py" in report["harness"]


def test_sandbox_refuses_every_other_connection(tmp_path: Path, task, script) -> None:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    socket.create_connection(("127.0.0.1", port), timeout=2).close()  # reachable from the host itself
    script(["hello"])
    agent = f"""
        import os, socket, pathlib
        from openai import OpenAI
        results = {{}}
        for name, address in {{"host_loopback": ("127.0.0.1", {port}), "internet": ("1.1.1.1", 80),
                               "dns": ("pypi.org", 443)}}.items():
            try:
                socket.create_connection(address, timeout=2).close()
                results[name] = "connected"
            except OSError as exc:
                results[name] = "refused"
        reply = OpenAI(max_retries=0).chat.completions.create(
            model=os.environ["OPENAI_MODEL"], messages=[{{"role": "user", "content": "hi"}}])
        results["endpoint"] = reply.choices[0].message.content
        pathlib.Path(os.environ["HARNESSEVOLVE_ANSWER"]).write_text(repr(results))
    """
    trajectory, _ = rollout(make_harness(tmp_path, agent), task)
    server.close()
    results = eval(trajectory.extra["answer"])  # noqa: S307
    assert results == {
        "host_loopback": "refused",
        "internet": "refused",
        "dns": "refused",
        "endpoint": "hello",
    }


def test_another_model_name_is_refused_and_recorded(tmp_path: Path, task, script) -> None:
    script(["never asked"])
    agent = """
        from openai import OpenAI, NotFoundError
        try:
            messages = [{"role": "user", "content": "x"}]
            OpenAI(max_retries=0).chat.completions.create(model="gpt-4o", messages=messages)
        except NotFoundError as exc:
            print("refused:", exc.status_code)
    """
    trajectory, _ = rollout(make_harness(tmp_path, agent), task)
    extra = trajectory.extra
    assert extra["stop_reason"] == "model_refused"
    assert "gpt-4o" in extra["error"] and "scripted/cmd" in extra["error"]
    assert extra["model_calls"][0]["status"] == 404 and extra["model_calls"][0]["requested_model"] == "gpt-4o"
    assert "refused: 404" in extra["agent_output"]


@pytest.mark.parametrize(
    ("agent", "settings", "stop", "words"),
    [
        (
            "import sys\nprint('boom', file=sys.stderr)\nsys.exit(3)\n",
            {},
            "agent_crashed",
            "exit code 3: boom",
        ),
        ("import time\ntime.sleep(60)\n", {"timeout_s": 1.5}, "agent_timeout", "killed after 1.5s"),
        (
            "import sys\nwhile True: sys.stdout.write('x' * 65536)\n",
            {"output_limit": 100},
            "output_flood",
            "killed after printing",
        ),
        (
            "import sys\nsys.stdout.buffer.write(bytes(range(256)) * 4)\n",
            {},
            "no_answer",
            "without an answer",
        ),
        (
            "import os\nopen(os.environ['HARNESSEVOLVE_ATIF'], 'w').write('{not json')\n",
            {},
            "bad_trajectory",
            "not JSON",
        ),
    ],
    ids=["crash", "hang", "flood", "garbage", "bad-atif"],
)
def test_failures_are_trajectories_with_a_stop_reason(
    tmp_path, task, script, agent, settings, stop, words
) -> None:
    script([])
    trajectory, _ = rollout(make_harness(tmp_path, agent, **settings), task)
    assert trajectory.extra["stop_reason"] == stop
    assert words in trajectory.extra["error"]
    assert len(trajectory.extra["agent_output"]) <= max(settings.get("output_limit", 20000), 100) + 100


def test_missing_program_at_run_time_is_a_failed_rollout(tmp_path: Path, task, script) -> None:
    script([])
    root = make_harness(tmp_path)
    harness = load_harness(root)
    (root / "agent.py").unlink()  # loaded fine, gone before the rollout: copied from memory
    harness = harness.__class__(**{**harness.__dict__, "files": {}})
    trajectory = run_rollout(harness, task, model="scripted/cmd")
    assert trajectory.extra["stop_reason"] == "agent_crashed" and "agent.py" in trajectory.extra["error"]


def test_agent_atif_file_is_checked_and_merged(tmp_path: Path, task, script) -> None:
    script([COUNT])
    agent = """
        import json, os
        from openai import OpenAI
        reply = OpenAI(max_retries=0).chat.completions.create(
            model=os.environ["OPENAI_MODEL"], messages=[{"role": "user", "content": "count"}])
        call = reply.choices[0].message.tool_calls[0]
        steps = [{"step_id": 1, "source": "user", "message": "count"},
                 {"step_id": 2, "source": "agent", "message": "", "metrics": {"prompt_tokens": 999999},
                  "tool_calls": [{"tool_call_id": call.id, "function_name": "bash",
                                  "arguments": {"command": "wc"}}]}]
        doc = {"schema_version": "ATIF-v1.4", "session_id": "mine",
               "agent": {"name": "my-agent", "version": "7"}, "steps": steps, "extra": {"answer": "11"}}
        json.dump(doc, open(os.environ["HARNESSEVOLVE_ATIF"], "w"))
    """
    trajectory, _ = rollout(make_harness(tmp_path, agent), task)
    assert trajectory.extra["stop_reason"] == "submitted" and trajectory.extra["answer"] == "11"
    assert trajectory.extra["steps_from"] == "agent_atif" and trajectory.agent_name == "my-agent"
    assert trajectory.steps[1].metrics["prompt_tokens"] != 999999  # the endpoint's count, not the agent's
    assert trajectory.final_metrics["total_prompt_tokens"] < 999999


def test_budget_stop_ends_an_external_agent_cleanly(tmp_path: Path, task, script) -> None:
    script([COUNT] * 20)
    calls = {"n": 0}

    def budget() -> str | None:
        calls["n"] += 1
        return "tokens budget reached: 120 of 100" if calls["n"] > 2 else None

    with budget_check(budget):
        trajectory, _ = rollout(make_harness(tmp_path, max_model_calls=20), task)
    extra = trajectory.extra
    assert extra["stop_reason"] == "budget_exhausted" and "tokens budget reached" in extra["error"]
    assert [c["status"] for c in extra["model_calls"]] == [200, 200, 402]
    assert "model endpoint refused: 402" in extra["agent_output"]  # the agent saw why
    assert extra["wall_s"] < 30


def test_call_limit_stops_the_rollout(tmp_path: Path, task, script) -> None:
    script([COUNT] * 5)
    trajectory, _ = rollout(make_harness(tmp_path, max_model_calls=2), task)
    assert trajectory.extra["stop_reason"] == "step_limit"
    assert [c["status"] for c in trajectory.extra["model_calls"]] == [200, 200, 403]


def test_trajectory_round_trips_as_atif(tmp_path: Path, task, script) -> None:
    from harnessevolve.core import atif

    script([COUNT, SUBMIT])
    trajectory, _ = rollout(make_harness(tmp_path), task)
    again = atif.from_dict(json.loads(json.dumps(trajectory.to_dict())))
    assert again.steps == trajectory.steps


def test_unsandboxed_and_docker_sandboxes(tmp_path: Path, task, script) -> None:
    """``none`` (--unsafe-no-sandbox) runs the same agent with host paths; docker cannot host one yet."""
    from harnessevolve.sandbox.base import UnsafeNoSandbox

    script([COUNT, SUBMIT])
    harness = load_harness(make_harness(tmp_path))

    class Docker:
        name = "docker"

    async def go(sandbox):
        workspace = await create_workspace(task, sandbox=UnsafeNoSandbox())
        try:
            runner = runner_for(harness)
            return await runner.run(harness, task, workspace, model="scripted/cmd", seed=0, sandbox=sandbox)
        finally:
            remove_workspace(workspace)

    plain = asyncio.run(go(UnsafeNoSandbox()))
    assert plain.extra["stop_reason"] == "submitted" and plain.extra["answer"] == "11"
    docker = asyncio.run(go(Docker()))
    assert docker.extra["stop_reason"] == "sandbox_error" and "--sandbox bwrap" in docker.extra["error"]
    assert "docker" in docker.extra["error"] and "cannot run an external agent" in docker.extra["error"]
