"""Bad tool-use task input is refused at load/validate time: one line naming the file and field, exit 2;
--adapter and benchmark.yaml's adapter; --sandbox-ro (and sandbox_ro) for tools that read host files."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from tool_use_bench import NONE, counter_tools, write_bench

from harnessevolve.cli.app import app

ANSWER = [{"type": "answer", "expected": "x"}]


def bench_with(tmp_path: Path, **task: object) -> Path:
    return write_bench(tmp_path / "bench", {"count": {"instruction": "count", "checker": ANSWER, **task}})


def python_tool(ref: str, name: str = "ping") -> list[dict]:
    return [{"name": name, "description": "d", "parameters": NONE, "implementation": {"python": ref}}]


@pytest.mark.parametrize(
    ("task", "field", "message"),
    [
        (
            {"tools": python_tool("no_such_module:Thing.go")},
            "tools[0].implementation.python",
            "Python module 'no_such_module' not found",
        ),
        (
            {"tools": python_tool("counter_tools:Nope.go")},
            "tools[0].implementation.python",
            "module 'counter_tools' has no 'Nope'",
        ),
        (
            {"tools": python_tool("counter_tools:Counter.nope")},
            "tools[0].implementation.python",
            "class 'Counter' of 'counter_tools' has no method 'nope'",
        ),
        (
            {"tools": python_tool("counter_tools")},
            "tools[0].implementation.python",
            "'counter_tools' is not a Python reference",
        ),
        ({"tools": python_tool("counter_tools:shout", name="bad name!")}, "tools[0].name", "does not match"),
        (
            {"tools": counter_tools("add") + counter_tools("add")},
            "tools[1].name",
            "tool 'addToCounter' is defined twice",
        ),
        ({"turns": []}, "turns", "should be non-empty"),
        (
            {"tool_setup": {"counter_tools:Other": {}}, "tools": counter_tools("add")},
            "tool_setup.counter_tools:Other",
            "is not the class of any Python tool",
        ),
        (
            {"checker": [{"type": "python", "python": "no_checks:score"}]},
            "checker[0].python",
            "Python module 'no_checks' not found",
        ),
        (
            {"checker": [{"type": "python", "python": "counter_checks:missing"}]},
            "checker[0].python",
            "has no 'missing'",
        ),
        (
            {"user": {"model": "scripted/u", "instructions": "x"}, "turns": ["a", "b"]},
            "user",
            "either turns or a simulated user",
        ),
    ],
)
def test_bad_tool_use_input_is_one_line_exit_2(
    cli, tmp_path: Path, task: dict, field: str, message: str
) -> None:
    bench = bench_with(tmp_path, **task)
    result = cli.invoke(app, ["validate", str(bench)])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output and message in result.output and field in result.output
    assert "tasks/count.yaml" in result.output
    refs = cli.invoke(
        app, ["refs", "import", "-b", str(bench), "--split", "all", "--out", str(tmp_path / "o")]
    )
    assert refs.exit_code == 2 and "Traceback" not in refs.output and message in refs.output
    assert not (tmp_path / "o").exists()  # nothing written


def test_camel_case_tool_names_hyphens_and_dots_are_accepted(cli, tmp_path: Path) -> None:
    """``math.add`` (BFCL-style) too: it is offered to the model under a safe name (models/tool_names.py)."""
    tools = (
        python_tool("counter_tools:shout", name="shoutLoud")
        + python_tool("counter_tools:shout", name="shout-2")
        + python_tool("counter_tools:shout", name="math.add")
    )
    result = cli.invoke(app, ["validate", str(bench_with(tmp_path, tools=tools))])
    assert result.exit_code == 0, result.output


QA_ADAPTER = """
from pathlib import Path
from harnessevolve.core.tasks import Benchmark, Check, GoldCall, Task


class QAAdapter:
    name = "qa-lines"

    def detect(self, spec):
        return spec.endswith(".qa")

    def load(self, spec):
        path = Path(spec)
        if path.is_dir():
            path = path / "questions.qa"
        tasks = []
        for i, line in enumerate(path.read_text().splitlines()):
            question, answer = line.split("=")
            tasks.append(Task(id=f"q{i}", instruction=question, split=("train", "validation", "test")[i % 3],
                              checks=(Check(type="answer", expected=answer),), answer=answer,
                              gold=(GoldCall("submit", {"answer": answer}),)))
        return Benchmark(name="qa", root=path.parent, tasks=tuple(tasks))


NOT_AN_ADAPTER = 42
"""


@pytest.fixture
def qa_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "qa_adapter.py").write_text(QA_ADAPTER)
    (tmp_path / "questions.qa").write_text("one plus one?=2\ncapital of France?=Paris\nsky colour?=blue\n")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_adapter_option_loads_a_suite_without_installing(cli, qa_folder: Path) -> None:
    args = ["refs", "import", "--adapter", "qa_adapter:QAAdapter", "-b", "questions.qa", "--split", "all"]
    result = cli.invoke(app, [*args, "--out", str(qa_folder / "refs")])
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in (qa_folder / "refs").iterdir()) == ["q0.json", "q1.json", "q2.json"]
    explicit = cli.invoke(app, [*args[:4], "-b", "qa-lines:questions.qa", "--split", "all", "--out", "r2"])
    assert explicit.exit_code == 0, explicit.output


@pytest.mark.parametrize(
    ("ref", "message"),
    [
        ("no_such_adapter_mod:X", "cannot import adapter module 'no_such_adapter_mod'"),
        ("qa_adapter:Missing", "module 'qa_adapter' has no 'Missing'"),
        ("qa_adapter:NOT_AN_ADAPTER", "qa_adapter:NOT_AN_ADAPTER is not an adapter"),
        ("qa_adapter", "'qa_adapter' is not a Python reference"),
    ],
)
def test_bad_adapter_option_is_exit_2(cli, qa_folder: Path, ref: str, message: str) -> None:
    for command in (["refs", "import"], ["refs", "generate"]):
        result = cli.invoke(app, [*command, "--adapter", ref, "-b", "questions.qa"])
        assert result.exit_code == 2, result.output
        assert message in result.output and "--adapter" in result.output and "Traceback" not in result.output


def test_a_benchmark_folder_names_its_own_adapter(cli, qa_folder: Path) -> None:
    folder = qa_folder / "suite"
    folder.mkdir()
    (folder / "loader.py").write_text(QA_ADAPTER)
    (folder / "questions.qa").write_text("two plus two?=4\n")
    (folder / "benchmark.yaml").write_text(
        yaml.safe_dump({"version": 1, "name": "qa", "adapter": "loader:QAAdapter"})
    )
    result = cli.invoke(
        app, ["refs", "import", "-b", str(folder), "--split", "all", "--out", str(qa_folder / "o")]
    )
    assert result.exit_code == 0, result.output
    assert (qa_folder / "o" / "q0.json").is_file()
    valid = cli.invoke(app, ["validate", str(folder)])
    assert valid.exit_code == 0 and "valid: benchmark qa (1 tasks" in valid.output, valid.output
    (folder / "benchmark.yaml").write_text(
        yaml.safe_dump({"version": 1, "name": "qa", "adapter": "loader:Gone"})
    )
    invalid = cli.invoke(app, ["validate", str(folder)])
    assert invalid.exit_code == 2 and "adapter: module 'loader' has no 'Gone'" in invalid.output


def reads_host_file(tmp_path: Path, meta: dict | None = None) -> tuple[Path, Path]:
    data = tmp_path / "host-data"
    data.mkdir()
    (data / "secret.txt").write_text("42\n")
    tool = {
        "name": "readData",
        "description": "read the data file",
        "parameters": NONE,
        "implementation": {"command": f"cat {data}/secret.txt > copy.txt"},
    }
    task = {
        "instruction": "read it",
        "tools": [tool],
        "checker": [{"type": "file", "path": "copy.txt", "expected": "42"}],
        "gold": [{"tool": "readData", "arguments": {}}, {"tool": "submit", "arguments": {"answer": "42"}}],
    }
    return write_bench(tmp_path / "bench", {"read": task}, meta=meta), data


def test_sandbox_ro_shows_a_host_path_and_a_failed_replay_names_the_tool_error(cli, tmp_path: Path) -> None:
    bench, data = reads_host_file(tmp_path)
    args = ["refs", "import", "-b", str(bench), "--split", "all", "--out", str(tmp_path / "o")]
    hidden = cli.invoke(app, args)
    assert hidden.exit_code == 2
    assert "first tool error: step 3: readData({}) -> tool_error: exit code 1" in hidden.output
    assert "No such file or directory" in hidden.output
    shown = cli.invoke(app, [*args, "--sandbox-ro", str(data)])
    assert shown.exit_code == 0, shown.output


def test_benchmark_yaml_sandbox_ro(cli, tmp_path: Path) -> None:
    bench, data = reads_host_file(tmp_path, meta={"sandbox_ro": ["../host-data"]})
    result = cli.invoke(
        app, ["refs", "import", "-b", str(bench), "--split", "all", "--out", str(tmp_path / "o")]
    )
    assert result.exit_code == 0, result.output
    bad = tmp_path / "b2"
    write_bench(bad, {"t": {"instruction": "x", "checker": ANSWER}}, meta={"sandbox_ro": ["missing-dir"]})
    result = cli.invoke(app, ["validate", str(bad)])
    assert (
        result.exit_code == 2
        and "sandbox_ro[0]" in result.output
        and "'missing-dir' does not exist" in result.output
    )


def test_run_and_report_final_load_the_suite_with_the_recorded_adapter(
    cli, qa_folder: Path, harness_dir: Path
) -> None:
    run = ["run", "-H", str(harness_dir), "--adapter", "qa_adapter:QAAdapter", "-b", "questions.qa"]
    result = cli.invoke(app, [*run, "-n", "1", "--batch-size", "1", "--model", "scripted/policy:learner"])
    assert result.exit_code in (0, 1), result.output
    final = cli.invoke(app, ["report", "-H", str(harness_dir), "--final"])  # no --adapter: the run's own
    assert final.exit_code == 0, final.output
    assert "test split (1 tasks)" in final.output
