"""`refs generate` (hinted agent runs, genuine check, regret) and gold scripts."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from harnessevolve.cli.app import app
from harnessevolve.core.atif import load
from harnessevolve.core.tasks import load_task
from harnessevolve.models.scripted import register_script, unregister_script

TASK = "read-word-01"


def file_in(instruction: str) -> str:
    return re.search(r"(\w+\.txt)", instruction).group(1)


def honest(messages, tools):
    """Reads the file the task names, then submits what it read."""
    instruction = messages[1]["content"]
    results = [m for m in messages if m["role"] == "tool"]
    if not results:
        return {"tool_calls": [{"name": "read_file", "arguments": {"path": file_in(instruction)}}]}
    return {"tool_calls": [{"name": "submit", "arguments": {"answer": results[-1]["content"].strip()}}]}


def parrot(messages, tools):
    """Submits the hinted answer without looking (and gives up without a hint)."""
    hint = re.search(r"the answer is (\S+)\.", messages[1]["content"])
    return {"tool_calls": [{"name": "submit", "arguments": {"answer": hint.group(1) if hint else "?"}}]}


@pytest.fixture
def model(request):
    register_script(request.param.__name__, request.param)
    yield f"scripted/{request.param.__name__}"
    unregister_script(request.param.__name__)


def generate(cli, model: str, out: Path):
    return cli.invoke(
        app,
        [
            "refs",
            "generate",
            "--benchmark",
            "shell-basics",
            "--task",
            TASK,
            "--model",
            model,
            "--attempts",
            "2",
            "--probes",
            "2",
            "--out",
            str(out),
        ],
    )


@pytest.mark.parametrize("model", [honest], indirect=True)
def test_genuine_run_is_kept_without_the_hint(tmp_path: Path, cli, model: str) -> None:
    result = generate(cli, model, tmp_path)
    assert result.exit_code == 0, result.output
    reference = load(tmp_path / f"{TASK}.json")
    assert "Hint" not in reference.steps[1].message
    assert [c.function_name for s in reference.agent_steps for c in s.tool_calls] == ["read_file", "submit"]
    regret = json.loads((tmp_path / "regret.json").read_text())["tasks"][TASK]
    assert regret["pass_with_hint"] == 1.0 and regret["pass_without_hint"] == 1.0 and regret["regret"] == 0.0


@pytest.mark.parametrize("model", [parrot], indirect=True)
def test_restating_the_hint_is_not_genuine(tmp_path: Path, cli, model: str) -> None:
    result = generate(cli, model, tmp_path)
    assert result.exit_code == 0, result.output
    assert not (tmp_path / f"{TASK}.json").exists()
    assert "0 of 1 kept" in result.output
    regret = json.loads((tmp_path / "regret.json").read_text())["tasks"][TASK]
    assert regret == {"pass_without_hint": 0.0, "pass_with_hint": 1.0, "regret": 1.0, "attempts": 2}


def test_gold_script_becomes_bash_calls_then_submit(tmp_path: Path) -> None:
    doc = {
        "version": 1,
        "id": "count-it",
        "instruction": "Count the lines of a.txt.",
        "split": "train",
        "setup": {"files": {"a.txt": "x\ny\n"}},
        "answer": "2",
        "checker": [{"type": "answer", "expected": "2", "match": "number"}],
        "gold_script": "# count them\nwc -l a.txt\n\ncat a.txt\n",
    }
    (tmp_path / "count-it.yaml").write_text(yaml.safe_dump(doc))
    task = load_task(tmp_path / "count-it.yaml")
    assert [(g.tool, g.arguments) for g in task.gold] == [
        ("bash", {"command": "wc -l a.txt"}),
        ("bash", {"command": "cat a.txt"}),
        ("submit", {"answer": "2"}),
    ]


def test_regret_sampling_prefers_high_regret_tasks(shell_basics) -> None:
    from harnessevolve.pipeline.loop import sample_batch

    train = shell_basics.split("train")
    weights = {t.id: (1.0 if t.tags[0] == "count-lines" else 0.0) for t in train}
    drawn = [t.tags[0] for g in range(20) for t in sample_batch(train, 8, 0, g, weights)]
    uniform = [t.tags[0] for g in range(20) for t in sample_batch(train, 8, 0, g)]
    assert drawn.count("count-lines") > 2 * uniform.count("count-lines")
    assert len(set(drawn)) > 1  # every task keeps a chance


def test_a_stop_on_a_later_task_keeps_the_references_already_made(
    tmp_path: Path, cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each kept reference is written when its task is done: an error on the second task (here a
    judge that could not be reached) ends the command with one line and keeps the first."""
    from harnessevolve.cli import refs_cmd
    from harnessevolve.core.errors import JudgeUnavailableError

    real = refs_cmd.generate_reference
    seen: list[str] = []

    async def second_fails(agent, task, **kw):
        seen.append(task.id)
        if len(seen) == 2:
            raise JudgeUnavailableError("judge scripted/down failed: ConnectionError: refused (fake)")
        return await real(agent, task, **kw)

    monkeypatch.setattr(refs_cmd, "generate_reference", second_fails)
    register_script("honest", honest)
    try:
        args = ["refs", "generate", "-b", "shell-basics", "--task", TASK, "--task", "read-word-02"]
        result = cli.invoke(
            app, [*args, "-m", "scripted/honest", "--attempts", "1", "--probes", "0", "--out", str(tmp_path)]
        )
    finally:
        unregister_script("honest")
    assert result.exit_code == 2, result.output
    assert "judge scripted/down failed" in result.output and "Traceback" not in result.output
    assert seen == [TASK, "read-word-02"]
    assert load(tmp_path / f"{TASK}.json").task_id == TASK
