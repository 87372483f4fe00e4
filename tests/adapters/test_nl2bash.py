"""NL2Bash from icalfa: loading, the host filter, and the `effect` check against gold commands."""

from __future__ import annotations

import asyncio
import importlib.util
from dataclasses import replace
from pathlib import Path

import pytest

from harnessevolve.adapters import load_benchmark_spec
from harnessevolve.adapters.nl2bash import map_roots, touches_host
from harnessevolve.core import paths
from harnessevolve.core.errors import BenchmarkError
from harnessevolve.core.tasks import Check
from harnessevolve.evaluate.checkers import run_checks
from harnessevolve.evaluate.effect_check import submitted_command
from harnessevolve.execute.agent import run_agent
from harnessevolve.execute.workspace import create_workspace, remove_workspace
from harnessevolve.harness.load import load_harness
from harnessevolve.models.scripted import register_script, unregister_script
from harnessevolve.scoring.references import replay_gold
from harnessevolve.scoring.sandboxed_checks import sandboxed_runner

NOWHERE = Path("/nonexistent")  # effect checks build their own workspaces


@pytest.fixture(scope="module")
def fs5():
    return load_benchmark_spec("nl2bash:5")


def test_loads_icalfa_tasks(fs5) -> None:
    everything = load_benchmark_spec("nl2bash:all")
    assert len(everything.tasks) == 300  # 153 + 49 + 57 + 23 + 18, as icalfa 0.3.6 ships them
    default = load_benchmark_spec("nl2bash")
    assert default.name == "nl2bash" and len(default.tasks) == 199
    assert len(fs5.tasks) == 16 and fs5.name == "nl2bash-fs5"
    assert [t.id for t in load_benchmark_spec("nl2bash:fs5,1").tasks][:2] == ["fs1-000", "fs1-001"]
    copy = load_benchmark_spec("nl2bash:1").task("fs1-003")
    assert copy.instruction.startswith(
        "create a copy of testbed/hello.php named testbed/hello-COPY.php\n\nWork in the current directory."
    ), copy.instruction
    assert copy.answer == "cp testbed/hello.php testbed/hello-COPY.php"
    task = fs5.task("fs5-002")
    assert task.checks == (Check(type="effect", run=task.answer),)
    assert [g.tool for g in task.gold] == ["bash", "submit"] and task.gold[1].arguments[
        "answer"
    ] == task.answer
    assert task.tags == ("nl2bash-fs5", "difficulty-2")
    assert "setup_nl2b_fs_5.sh" in task.setup_files and "/testbed" in task.setup_files["setup_nl2b_fs_5.sh"]
    assert "mkdir -p testbed/dir1" in task.setup_commands[0]
    assert fs5.references_dir == paths.builtin_dir("trajectories") / "nl2bash"  # one folder, every subset


def test_splits_are_stable_and_balanced() -> None:
    first, second = load_benchmark_spec("nl2bash"), load_benchmark_spec("nl2bash")
    assert [t.split for t in first.tasks] == [t.split for t in second.tasks]
    counts = {s: len(first.split(s)) for s in ("train", "validation", "test")}
    assert 0.4 < counts["train"] / 199 < 0.6 and min(counts.values()) > 40


def test_bad_subset_and_missing_package(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(BenchmarkError, match="unknown NL2Bash subset '9'"):
        load_benchmark_spec("nl2bash:9")
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(BenchmarkError) as err:
        load_benchmark_spec("nl2bash")
    assert "harnessevolve[nl2bash]" in err.value.hint


def test_mapping_and_host_filter() -> None:
    assert map_roots("cp /testbed/a /system/b; cat /workspace/x > /backup/y") == (
        "cp testbed/a system/b; cat workspace/x > backup/y"
    )
    assert map_roots("find /var/log") == "find /var/log" and map_roots("/testbedx") == "/testbedx"
    for command in (
        "ps aux",
        "ls | wc -l && date",
        "ln x -s /",
        "mv -t / a",
        "cat /etc/hosts",
        "find w -print | sed 's@^@/usr/@' | xargs mkdir -p",
        "echo $$",
    ):
        assert touches_host(command), command
    for command in (
        "ls -a",
        "find testbed -name '*.c' -exec /bin/echo {} \\;",
        "cut -d'/' -f3",
        "sed 's#^#testbed/#'",
        "grep x f 2>/dev/null",
        "cat ~/.bashrc",
    ):
        assert not touches_host(command), command


def score(task, answer: str | None):
    return run_checks(task, NOWHERE, answer, runner=sandboxed_runner())


def test_effect_check_compares_files(fs5) -> None:
    task = fs5.task("fs5-002")  # sort -r testbed/dir1/textfile1.txt > ..._reverse_sorted.txt
    assert score(task, task.answer).passed
    assert score(task, f"```bash\n{task.answer}\n```").passed
    wrong = score(task, "echo nope > testbed/dir1/textfile1_reverse_sorted.txt")
    assert not wrong.passed and "files differ" in wrong.details[0].message
    assert "changed testbed/dir1/textfile1_reverse_sorted.txt" in wrong.details[0].message
    missing = score(task, "true")
    assert "missing testbed/dir1/textfile1_reverse_sorted.txt" in missing.details[0].message
    assert not score(task, None).passed and "none submitted" in score(task, None).details[0].message


def test_effect_check_compares_stdout_and_success(fs5) -> None:
    task = fs5.task("fs5-013")  # tail -n 10 testbed/dir3/subdir1/subsubdir1/textfile3.txt
    assert score(task, task.answer).passed
    assert score(task, "cat testbed/dir3/subdir1/subsubdir1/textfile3.txt").passed  # same output
    wrong = score(task, "head -c 3 testbed/dir3/subdir1/subsubdir1/textfile3.txt")
    assert not wrong.passed and "expected stdout" in wrong.details[0].message
    fails = score(replace(task, checks=(Check(type="effect", run="rm no-such-file"),)), "rm other-file")
    assert fails.passed  # both fail, print nothing, change nothing
    assert not score(replace(task, checks=(Check(type="effect", run="rm no-such-file"),)), "true").passed


def test_effect_masks_the_workspace_path(fs5) -> None:
    task = replace(fs5.task("fs5-013"), checks=(Check(type="effect", run="pwd; echo $HOME"),))
    assert score(task, "echo $PWD; echo ~").passed


def test_submitted_command_unwraps() -> None:
    assert submitted_command("`ls -a`") == "ls -a"
    assert submitted_command("```sh\nls -a\n```") == "ls -a"
    assert submitted_command("$ ls -a") == "ls -a"


def test_agent_with_the_gold_command_passes_and_a_wrong_one_fails(fs5) -> None:
    harness = load_harness(paths.builtin_dir("harnesses") / "shell-agent")
    task = fs5.task("fs5-016")  # grep -rl "Hello" testbed | xargs sed -i 's/Hello/Hi/g'
    reference = asyncio.run(replay_gold(harness, task))
    assert reference.extra["passed"] is True

    async def agent_says(command: str) -> bool:
        register_script(
            "nl2bash-wrong",
            [
                {"tool_calls": [{"name": "bash", "arguments": {"command": command}}]},
                {"tool_calls": [{"name": "submit", "arguments": {"answer": command}}]},
            ],
        )
        workspace = await create_workspace(task)
        try:
            trajectory = await run_agent(harness, task, workspace, model="scripted/nl2bash-wrong", seed=0)
            return run_checks(
                task, workspace, trajectory.extra.get("answer"), runner=sandboxed_runner()
            ).passed
        finally:
            unregister_script("nl2bash-wrong")
            remove_workspace(workspace)

    assert asyncio.run(agent_says(task.answer))
    assert not asyncio.run(agent_says("grep -rl Hello testbed | xargs sed -i 's/Hello/Hey/g'"))


def test_every_fs5_gold_command_matches_itself(fs5) -> None:
    failing = [t.id for t in fs5.tasks if not score(t, t.answer).passed]
    assert failing == []


@pytest.mark.slow
def test_every_default_gold_command_matches_itself() -> None:
    """What UNSTABLE_TASKS was found with (about two minutes on two cores)."""
    default = load_benchmark_spec("nl2bash")
    failing = [t.id for t in default.tasks if not score(t, t.answer).passed]
    assert failing == []


@pytest.mark.slow
def test_no_default_task_is_passed_by_a_command_that_does_nothing() -> None:
    """What NULL_PASSED_TASKS was found with: a null agent scores 0 on the default tasks."""
    default = load_benchmark_spec("nl2bash")
    passed = [(t.id, null) for t in default.tasks for null in ("true", "false") if score(t, null).passed]
    assert passed == []
