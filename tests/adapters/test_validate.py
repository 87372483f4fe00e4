"""``harnessevolve validate`` on a benchmark folder: every task file, check and reference at once,
each problem naming file and key, exit 2; a sound suite is valid with its counts."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from suite_files import answer_task, write_suite
from typer.testing import CliRunner

from harnessevolve.cli.app import app
from harnessevolve.core import paths

TASK = answer_task("say-hi", "Answer hi.", "hi")


def test_builtin_suites_are_valid_by_folder_and_by_name() -> None:
    cli = CliRunner()
    for spec in (str(paths.builtin_dir("benchmarks") / "shell-onecall"), "shell-basics"):
        result = cli.invoke(app, ["validate", spec])
        assert result.exit_code == 0, result.output
        assert "valid: benchmark" in result.output and "32 train, 16 validation, 16 test" in result.output
        assert "32 reference trajectories" in result.output


def test_every_problem_names_file_and_key(tmp_path: Path) -> None:
    suite = write_suite(
        tmp_path / "s",
        "mine",
        TASK,
        {**TASK, "id": "typo", "checker": [{"type": "answer", "expcted": "x"}]},
        {**TASK, "id": "no-split", "split": None},
        {**TASK, "id": "bad-kind", "checker": [{"type": "smell", "run": "true"}]},
        {**TASK, "id": "bad-regex", "checker": [{"type": "answer", "expected": "(", "match": "regex"}]},
        {**TASK, "id": "bad-shell", "checker": [{"type": "command", "run": "if then fi ("}]},
        {**TASK, "id": "wrong-name"} | {"id": "other"},
    )
    (suite / "tasks" / "other.yaml").rename(suite / "tasks" / "wrong-name.yaml")
    (suite / "trajectories").mkdir()
    (suite / "trajectories" / "ghost.json").write_text("{}")
    before = sorted(p.name for p in suite.rglob("*"))
    result = CliRunner().invoke(app, ["validate", str(suite)])
    assert result.exit_code == 2, result.output
    out = result.output
    assert "typo.yaml: checker[0].expcted: unknown key 'expcted'" in out
    assert "no-split.yaml: split: None is not one of" in out and "train, validation or test" in out
    assert "bad-kind.yaml: checker[0].type: type 'smell' is not one of: answer, file, command, effect" in out
    assert "bad-regex.yaml: checker[0].expected: invalid regex" in out
    assert "bad-shell.yaml: checker[0].run: shell syntax error" in out
    assert "wrong-name.yaml: id: id 'other' differs from the file name" in out
    assert "ghost.json" in out and "unknown task 'ghost'" in out
    assert "say-hi.yaml" not in out  # the sound task is not reported
    assert sorted(p.name for p in suite.rglob("*")) == before  # nothing written
    assert "Traceback" not in out


def test_json_and_notes_for_a_suite_without_references(tmp_path: Path) -> None:
    suite = write_suite(tmp_path / "s", "mine", TASK)
    result = CliRunner().invoke(app, ["validate", str(suite), "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert doc["valid"] and doc["tasks"] == 1 and doc["by_split"]["train"] == 1 and doc["references"] == 0
    assert any("without a reference trajectory" in n for n in doc["notes"])
    assert any(n == "no test tasks" for n in doc["notes"])
    text = CliRunner().invoke(app, ["validate", str(suite)]).output
    assert "note: 1 train task(s) without a reference trajectory (say-hi)" in text


def test_a_harbor_folder_is_validated_through_its_adapter(tmp_path: Path) -> None:
    source = paths.builtin_dir("benchmarks") / "harbor-example"
    result = CliRunner().invoke(app, ["validate", str(source)])
    assert result.exit_code == 0, result.output
    assert "valid: benchmark harbor-example (5 tasks" in result.output
    broken = tmp_path / "h"
    shutil.copytree(source, broken)
    (broken / "trajectories" / "count-words.json").write_text("not json")
    result = CliRunner().invoke(app, ["validate", str(broken)])
    assert result.exit_code == 2 and "count-words.json" in result.output, result.output


def test_a_folder_that_is_neither_says_what_validate_takes(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["validate", str(tmp_path)])
    assert result.exit_code == 2
    assert "harness directory (harness.yaml) or a benchmark folder (benchmark.yaml)" in result.output


ADAPTER = """
from harnessevolve.core.tasks import Benchmark, Check, Task
from harnessevolve.core.task_tools import TaskTool


class Loader:
    name = "probe-adapter"

    def detect(self, spec):
        return False

    def load(self, spec):
        from pathlib import Path

        root = Path(spec)
        py = (str(root),)
        tool = TaskTool(name="look", description="look", parameters={"type": "object", "properties": {}},
                        python="shop:Shop.no_such_method")
        return Benchmark(name="probe", root=root, tasks=(
            Task(id="sound", instruction="hi", split="train", python_path=py,
                 checks=(Check(type="python", python="checks:passes"),)),
            Task(id="broken", instruction="hi", split="validation", python_path=py,
                 checks=(Check(type="python", python="checks:no_such_function"),), tools=(tool,)),
        ))
"""


def test_an_adapter_suite_has_every_python_reference_checked(tmp_path: Path) -> None:
    root = tmp_path / "adapted"
    root.mkdir()
    (root / "benchmark.yaml").write_text("version: 1\nname: probe\nadapter: loader:Loader\n")
    (root / "loader.py").write_text(ADAPTER)
    (root / "checks.py").write_text("def passes(inp):\n    return 1.0\n")
    (root / "shop.py").write_text("class Shop:\n    def look(self):\n        return 'ok'\n")
    result = CliRunner().invoke(app, ["validate", str(root)])
    assert result.exit_code == 2, result.output
    assert "task broken" in result.output and "checker[0].python" in result.output
    assert "no_such_function" in result.output
    assert "task sound" not in result.output
    result = CliRunner().invoke(app, ["validate", str(root), "--json"])
    report = json.loads(result.output)
    fields = sorted(p["field"] for p in report["problems"])
    assert fields == ["checker[0].python", "tools[0].implementation.python"]
    assert any("no reference trajectory and no gold" in note for note in report["notes"])


def test_validate_takes_an_adapter_as_run_does(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``validate SPEC --adapter module:attr``: no benchmark.yaml wrapper needed."""
    root = tmp_path / "adapted"
    root.mkdir()
    (root / "loader.py").write_text(ADAPTER.replace("return False", "return spec.endswith('adapted')"))
    (root / "checks.py").write_text("def passes(inp):\n    return 1.0\n")
    (root / "shop.py").write_text("class Shop:\n    def look(self):\n        return 'ok'\n")
    monkeypatch.chdir(root)
    result = CliRunner().invoke(app, ["validate", "probe-adapter:" + str(root), "--adapter", "loader:Loader"])
    assert result.exit_code == 2, result.output
    assert "task broken" in result.output and "no_such_function" in result.output
    result = CliRunner().invoke(app, ["validate", str(root), "--adapter", "loader:Loader", "--json"])
    assert result.exit_code == 2, result.output
    assert json.loads(result.output)["name"] == "probe"
    # without the adapter, the bare folder is no benchmark
    assert CliRunner().invoke(app, ["validate", str(root)]).exit_code == 2
