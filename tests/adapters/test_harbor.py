"""Harbor / Terminal-Bench task folders: loading, splits, the test.sh verifier, gold replay."""

from __future__ import annotations

import asyncio
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from harnessevolve.adapters import load_benchmark_spec
from harnessevolve.adapters.harbor import load_harbor_suite, map_app_path
from harnessevolve.core import paths
from harnessevolve.core.errors import BenchmarkError
from harnessevolve.core.tasks import Task
from harnessevolve.evaluate.checkers import run_checks
from harnessevolve.execute.workspace import create_workspace, remove_workspace
from harnessevolve.harness.load import load_harness
from harnessevolve.scoring.references import replay_gold
from harnessevolve.scoring.sandboxed_checks import sandboxed_runner

EXAMPLE = paths.builtin_dir("benchmarks") / "harbor-example"
TASK_IDS = ["count-words", "make-build-tree", "replace-word", "sort-unique-names", "sum-csv-column"]


@pytest.fixture(scope="module")
def example():
    return load_benchmark_spec(f"harbor:{EXAMPLE}")


def check_in_fresh_workspace(task: Task, command: str | None = None) -> tuple[bool, str, list[str]]:
    """Set the task's workspace up, optionally run a command there, then score it."""

    async def go() -> tuple[bool, str, list[str]]:
        workspace = await create_workspace(task)
        try:
            if command:
                proc = await asyncio.create_subprocess_exec("bash", "-c", command, cwd=workspace)
                await proc.wait()
            listing = sorted(p.relative_to(workspace).as_posix() for p in workspace.rglob("*"))
            result = run_checks(task, workspace, None, runner=sandboxed_runner())
            return result.passed, result.details[0].message, listing
        finally:
            remove_workspace(workspace)

    return asyncio.run(go())


def test_example_suite_loads_as_tasks(example) -> None:
    assert example.name == "harbor-example"
    assert [t.id for t in example.tasks] == TASK_IDS
    task = example.task("count-words")
    assert task.instruction == "Count the words in notes.txt and write just that number to word_count.txt."
    assert task.setup_files == {"notes.txt": (EXAMPLE / "count-words/environment/notes.txt").read_text()}
    assert [c.type for c in task.checks] == ["command"]
    assert task.tags[:2] == ("text-processing", "difficulty-easy")
    # solve.sh is one bash call ("cd /app" is the workspace already, so it is dropped), then submit
    assert [(g.tool, g.arguments) for g in task.gold] == [
        ("bash", {"command": "wc -w < notes.txt > word_count.txt"}),
        ("submit", {"answer": "done"}),
    ]
    assert example.task("make-build-tree").gold[0].arguments["command"] == (
        "mkdir -p ./build/bin ./build/lib\ntouch ./build/README"
    )
    assert example.references_dir == EXAMPLE / "trajectories"


def test_spec_forms_agree_and_a_single_task_folder_loads(example) -> None:
    detected = load_benchmark_spec(str(EXAMPLE))
    assert [(t.id, t.split) for t in detected.tasks] == [(t.id, t.split) for t in example.tasks]
    assert load_benchmark_spec("harbor-example").root == EXAMPLE  # a built-in suite, by name
    single = load_benchmark_spec(f"harbor:{EXAMPLE / 'replace-word'}")
    assert [t.id for t in single.tasks] == ["replace-word"]


def test_splits_are_stable_and_cover_all_three(example) -> None:
    again = load_harbor_suite(EXAMPLE)
    splits = {t.id: t.split for t in example.tasks}
    assert splits == {t.id: t.split for t in again.tasks}
    assert sorted(splits.values()) == ["test", "train", "train", "train", "validation"]


def test_metadata_split_is_kept(tmp_path: Path) -> None:
    suite = tmp_path / "suite"
    shutil.copytree(EXAMPLE, suite)
    toml = suite / "count-words" / "task.toml"
    toml.write_text(toml.read_text().replace("[metadata]\n", '[metadata]\nsplit = "test"\n'))
    assert load_benchmark_spec(str(suite)).task("count-words").split == "test"
    toml.write_text(toml.read_text().replace('split = "test"', 'split = "dev"'))
    with pytest.raises(BenchmarkError) as err:
        load_benchmark_spec(str(suite))
    assert err.value.field == "metadata.split" and err.value.file == str(toml)


def test_malformed_tasks_name_the_file(tmp_path: Path) -> None:
    suite = tmp_path / "suite"
    shutil.copytree(EXAMPLE, suite)
    (suite / "replace-word" / "task.toml").write_text("version = [")
    with pytest.raises(BenchmarkError, match="not valid TOML") as err:
        load_benchmark_spec(f"harbor:{suite}")
    assert err.value.file == str(suite / "replace-word" / "task.toml")
    shutil.copy(EXAMPLE / "replace-word" / "task.toml", suite / "replace-word" / "task.toml")
    (suite / "sum-csv-column" / "tests" / "test.sh").unlink()
    with pytest.raises(BenchmarkError, match="no tests/test.sh"):
        load_benchmark_spec(f"harbor:{suite}")
    with pytest.raises(BenchmarkError, match="no Harbor tasks"):
        load_benchmark_spec(f"harbor:{tmp_path / 'suite' / 'sum-csv-column' / 'tests'}")


@pytest.mark.parametrize("task_id", TASK_IDS)
def test_verifier_passes_with_solve_sh_and_fails_without(example, task_id: str) -> None:
    task = example.task(task_id)
    passed, message, listing = check_in_fresh_workspace(task)
    assert not passed, message
    # The agent's workspace holds the environment files, never the tests or the solution.
    assert not any(p.startswith(("tests", "solution")) or p.endswith(".sh") for p in listing)
    solve = (EXAMPLE / task_id / "solution" / "solve.sh").read_text()
    passed, message, _ = check_in_fresh_workspace(task, map_app_path(solve))
    assert passed, message


def test_reward_file_decides_over_exit_status(example) -> None:
    # replace-word's test.sh always exits 0 but writes reward 0 until the words are replaced.
    task = example.task("replace-word")
    passed, _, _ = check_in_fresh_workspace(task, "sed -i s/colour/color/ docs/palette.md")
    assert not passed  # one "colour" is left on the second line
    passed, message, _ = check_in_fresh_workspace(task, "sed -i s/colour/color/g docs/*.md")
    assert passed, message


def test_gold_replays_through_the_agent_loop(example) -> None:
    harness = load_harness(paths.builtin_dir("harnesses") / "shell-agent")
    trajectory = asyncio.run(replay_gold(harness, example.task("sum-csv-column")))
    calls = [c.function_name for s in trajectory.agent_steps for c in s.tool_calls]
    assert calls == ["bash", "submit"] and trajectory.extra["passed"] is True
    broken = replace(example.task("sum-csv-column"), gold=example.task("count-words").gold)
    with pytest.raises(BenchmarkError, match="fails its checker"):
        asyncio.run(replay_gold(harness, broken))


def test_map_app_path() -> None:
    assert (
        map_app_path("cd /app && cat /app/x.txt > /application/y") == "cd . && cat ./x.txt > /application/y"
    )
