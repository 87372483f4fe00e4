"""tasks synthesize end to end on a small repository: kept mutants fail their checker, their gold
passes it, the output is deterministic, and bad repositories are one-line errors (exit 2)."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harnessevolve.cli.app import app
from harnessevolve.core.tasks import load_benchmark
from harnessevolve.execute.tools import run_shell
from harnessevolve.execute.workspace import create_workspace, remove_workspace

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")

CALC = '''"""A tiny calculator."""


def clamp(x, low, high):
    if x < low:
        return low
    if x > high:
        return high
    return x


def mean(values):
    if not values:
        raise ValueError("no values")
    return sum(values) / len(values)


def window(items, size):
    return [items[i : i + size] for i in range(len(items) - size + 1)]
'''

TESTS = """import unittest

from calc import clamp, mean, window


class ClampTest(unittest.TestCase):
    def test_inside(self):
        self.assertEqual(clamp(5, 0, 10), 5)

    def test_low(self):
        self.assertEqual(clamp(-1, 0, 10), 0)

    def test_edges(self):
        self.assertEqual(clamp(0, 0, 10), 0)
        self.assertEqual(clamp(10, 0, 10), 10)

    def test_high(self):
        self.assertEqual(clamp(11, 0, 10), 10)


class MeanTest(unittest.TestCase):
    def test_mean(self):
        self.assertEqual(mean([1, 2, 3]), 2)

    def test_empty(self):
        with self.assertRaises(ValueError):
            mean([])


class WindowTest(unittest.TestCase):
    def test_pairs(self):
        self.assertEqual(window([1, 2, 3], 2), [[1, 2], [2, 3]])

    def test_whole(self):
        self.assertEqual(window([1, 2], 2), [[1, 2]])
"""


def make_repo(root: Path, tests: str = TESTS) -> Path:
    repo = root / "calc-1.0"
    (repo / "tests").mkdir(parents=True)
    (repo / "calc.py").write_text(CALC)
    (repo / "tests" / "__init__.py").write_text("")
    (repo / "tests" / "test_calc.py").write_text(tests)
    return repo


def synthesize(repo: Path, out: Path, *extra: str):
    return CliRunner().invoke(
        app,
        [
            "tasks",
            "synthesize",
            "--repo",
            str(repo),
            "--out",
            str(out),
            "--count",
            "4",
            "--seed",
            "3",
            *extra,
        ],
    )


def test_kept_mutants_fail_their_checker_and_gold_passes(tmp_path):
    repo = make_repo(tmp_path)
    out = tmp_path / "suite"
    result = synthesize(repo, out)
    assert result.exit_code == 0, result.output
    assert "kept 4" in result.output
    bench = load_benchmark(str(out))
    assert len(bench.tasks) == 4 and all(t.id.startswith("calc-") for t in bench.tasks)
    record = json.loads((out / "synthesis.json").read_text())
    assert record["kept"] == 4 and record["stable_tests"] == 8
    task = bench.tasks[0]
    assert task.split in ("train", "validation", "test")
    assert "calc.py" in task.setup_files and task.setup_files["calc.py"] != CALC  # the bug is in
    assert "x < low" not in task.instruction and "def " not in task.instruction  # no diff revealed

    async def target_check_fails() -> bool:
        workspace = await create_workspace(task)
        try:
            result = await run_shell(task.checks[0].run, workspace, timeout_s=60, limit=100_000)
            return result.error is not None
        finally:
            remove_workspace(workspace)

    assert asyncio.run(target_check_fails())
    refs = CliRunner().invoke(app, ["refs", "import", "-b", str(out), "--split", "all"])
    assert refs.exit_code == 0, refs.output
    assert len(list((out / "trajectories").glob("*.json"))) == 4


def test_editing_the_tests_does_not_pass_the_checker(tmp_path):
    out = tmp_path / "suite"
    assert synthesize(make_repo(tmp_path), out).exit_code == 0
    task = load_benchmark(str(out)).tasks[0]

    async def cheat() -> str | None:
        workspace = await create_workspace(task)
        try:
            (workspace / "tests" / "test_calc.py").write_text("import unittest\n")
            result = await run_shell(task.checks[0].run, workspace, timeout_s=60, limit=100_000)
            return result.error
        finally:
            remove_workspace(workspace)

    assert asyncio.run(cheat()) is not None


def test_same_seed_same_tasks(tmp_path):
    repo = make_repo(tmp_path)
    assert synthesize(repo, tmp_path / "a").exit_code == 0
    assert synthesize(repo, tmp_path / "b").exit_code == 0
    a = sorted(p.name for p in (tmp_path / "a" / "tasks").iterdir())
    assert a == sorted(p.name for p in (tmp_path / "b" / "tasks").iterdir())
    assert all(
        (tmp_path / "a" / "tasks" / n).read_text() == (tmp_path / "b" / "tasks" / n).read_text() for n in a
    )


def test_two_mutations_per_task_are_recorded_as_harder(tmp_path):
    out = tmp_path / "suite"
    result = synthesize(make_repo(tmp_path), out, "--mutations", "2", "--count", "2")
    assert result.exit_code == 0, result.output
    record = json.loads((out / "synthesis.json").read_text())
    assert all(t["difficulty"]["mutations"] == 2 for t in record["tasks"].values())


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        ("missing", "is not a folder"),
        ("no-tests", "has no tests"),
        ("failing", "no test passes"),
        ("hang", "did not finish"),
    ],
)
def test_bad_repositories_are_one_line_errors(tmp_path, setup, message):
    if setup == "missing":
        repo = tmp_path / "nope"
    elif setup == "no-tests":
        repo = tmp_path / "calc"
        repo.mkdir()
        (repo / "calc.py").write_text(CALC)
    elif setup == "failing":
        repo = make_repo(tmp_path, TESTS.replace("from calc import", "from calc_missing import"))
    else:
        repo = make_repo(
            tmp_path,
            TESTS.replace(
                "def test_inside(self):",
                "def test_inside(self):\n        while True: pass\n\n    def test_x(self):",
            ),
        )
    out = tmp_path / "out"
    result = synthesize(repo, out, "--timeout", "3")
    assert result.exit_code == 2, result.output
    assert message in result.output and "Traceback" not in result.output
    assert not out.exists()  # nothing written


def test_flaky_tests_are_left_out(tmp_path):
    flaky = (
        TESTS
        + """

class FlakyTest(unittest.TestCase):
    def test_coin(self):
        import os
        self.assertTrue(int.from_bytes(os.urandom(1), "big") % 2)
"""
    )
    out = tmp_path / "suite"
    result = synthesize(make_repo(tmp_path, flaky), out, "--count", "2", "--max-tries", "40")
    assert result.exit_code == 0, result.output
    record = json.loads((out / "synthesis.json").read_text())
    # a coin test passes both baseline runs 1 time in 4: only then is it in the stable set
    coin = "tests.test_calc.FlakyTest.test_coin"
    assert record["stable_tests"] + len(record["dropped_tests"]) == 9
    assert (record["stable_tests"] == 9) == (coin not in record["dropped_tests"])


def test_out_inside_the_repo_is_refused(tmp_path):
    repo = make_repo(tmp_path)
    result = synthesize(repo, repo / "tasks-out")
    assert result.exit_code == 2 and "inside --repo" in result.output
