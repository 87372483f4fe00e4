"""The null-agent floor: do-nothing and trivial agents on every task, scored by the task's own
checks in the sandbox; ``validate --floor`` names the tasks they pass; a run refuses a benchmark
whose sampled floor is above the set share (exit 2) unless told the benchmark means it."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from run_args import run_args

from harnessevolve.cli.app import app
from harnessevolve.core.tasks import load_benchmark
from harnessevolve.judging.floor import (
    MIN_REFUSAL_TASKS,
    FloorResult,
    floor_sample,
    floor_verdict,
    null_floor,
)
from harnessevolve.runs.ledger import read_lines

SOUND = '{{type: file, path: out.txt, expected: "ok{i}"}}'


def write_suite(root: Path, checkers: dict[str, str], per_split: int = 2) -> Path:
    """A suite of ``per_split`` tasks per split; ``checkers`` overrides a task id's checker."""
    (root / "tasks").mkdir(parents=True)
    (root / "benchmark.yaml").write_text("version: 1\nname: floor-test\n")
    for i in range(1, per_split + 1):
        for split in ("train", "validation", "test"):
            task_id = f"t-{split}-{i}"
            checker = checkers.get(task_id, SOUND.format(i=i))
            (root / "tasks" / f"{task_id}.yaml").write_text(
                f"version: 1\nid: {task_id}\nsplit: {split}\ntags: [w{i}]\n"
                f"instruction: Write the text ok{i} into out.txt, then submit done.\n"
                f"checker:\n  - {checker}\n"
                "gold:\n"
                f'  - {{tool: write_file, arguments: {{path: out.txt, content: "ok{i}"}}}}\n'
                "  - {tool: submit, arguments: {answer: done}}\n"
            )
    return root


def test_null_agents_pass_exactly_the_checkers_that_need_no_work(tmp_path: Path) -> None:
    suite = write_suite(
        tmp_path / "suite",
        {
            "t-train-1": '{type: command, run: "true"}',
            "t-train-2": "{type: answer, expected: out.txt, match: contains}",  # the instruction says it
        },
    )
    benchmark = load_benchmark(str(suite))
    floor = asyncio.run(null_floor(benchmark.tasks, None))
    assert floor.passed == {
        "t-train-1": ("do-nothing", "empty-answer", "echo-instruction"),
        "t-train-2": ("echo-instruction",),
    }
    assert floor.rollouts == 18 and floor.share == 2 / 6 and not floor.errors


def test_floor_sample_is_seeded_and_spans_the_splits(tmp_path: Path) -> None:
    benchmark = load_benchmark(str(write_suite(tmp_path / "suite", {}, per_split=4)))
    first = floor_sample(benchmark, 5, seed=3)
    assert [t.id for t in first] == [t.id for t in floor_sample(benchmark, 5, seed=3)]
    assert len(first) == 5 and len(floor_sample(benchmark, 50, seed=3)) == 12


def test_validate_floor_names_the_always_pass_task_and_exits_2(tmp_path: Path, cli) -> None:
    suite = write_suite(tmp_path / "suite", {"t-train-1": '{type: command, run: "true"}'})
    result = cli.invoke(app, ["validate", str(suite), "--floor"])
    assert result.exit_code == 2, result.output
    assert "t-train-1" in result.output and "t-train-2" not in result.output
    assert "1 of 6 tasks" in result.output
    as_json = cli.invoke(app, ["validate", str(suite), "--floor", "--json"])
    assert json.loads(as_json.output)["passed"] == {
        "t-train-1": ["do-nothing", "empty-answer", "echo-instruction"]
    }
    sound = cli.invoke(app, ["validate", str(write_suite(tmp_path / "sound", {})), "--floor"])
    assert sound.exit_code == 0, sound.output
    assert "0 of 6 tasks" in sound.output


def test_a_run_refuses_a_high_floor_with_exit_2_and_records_the_share(
    tmp_path: Path, harness_dir: Path, cli, scripts
) -> None:
    always = '{type: command, run: "true"}'
    suite = write_suite(
        tmp_path / "suite", {f"t-{s}-{i}": always for s in ("train", "validation") for i in (1, 2)}
    )
    model = scripts("never-called", [])
    result = cli.invoke(app, run_args(harness_dir, model, benchmark=suite, generations=1, batch_size=2))
    assert result.exit_code == 2, result.output
    assert "benchmark floor too high" in result.output and "4 of 6 sampled tasks" in result.output
    runs = list((harness_dir / ".harnessevolve" / "runs").iterdir())
    lines = read_lines(runs[0] / "ledger.jsonl")
    floor = next(line for line in lines if line["event"] == "floor_checked")
    assert floor["refused"] and floor["share"] == round(4 / 6, 4) and floor["tasks"] == 6
    assert sorted(floor["passed"]) == ["t-train-1", "t-train-2", "t-validation-1", "t-validation-2"]
    assert lines[-1]["event"] == "run_failed"
    assert not any(line["event"] == "baseline" for line in lines)  # no rollout was spent


def test_accept_floor_records_the_share_and_runs(tmp_path: Path, harness_dir: Path, cli, scripts) -> None:
    always = '{type: command, run: "true"}'
    suite = write_suite(
        tmp_path / "suite", {f"t-{s}-{i}": always for s in ("train", "validation") for i in (1, 2)}
    )
    model = scripts(
        "submits",
        lambda messages, tools: {"tool_calls": [{"name": "submit", "arguments": {"answer": "done"}}]},
    )
    args = run_args(harness_dir, model, "--accept-floor", benchmark=suite, generations=1, batch_size=2)
    result = cli.invoke(app, args)
    assert result.exit_code in (0, 1), result.output
    assert not isinstance(result.exception, Exception), repr(result.exception)  # SystemExit is fine
    runs = list((harness_dir / ".harnessevolve" / "runs").iterdir())
    lines = read_lines(runs[0] / "ledger.jsonl")
    floor = next(line for line in lines if line["event"] == "floor_checked")
    assert floor["accepted"] and not floor["refused"] and floor["share"] == round(4 / 6, 4)
    assert any(line["event"] == "run_finished" for line in lines)


def test_a_sample_too_small_warns_but_does_not_refuse() -> None:
    def result(n: int) -> FloorResult:
        tasks = tuple(f"t-{i}" for i in range(n))
        return FloorResult(tasks=tasks, passed={t: ("do-nothing",) for t in tasks})

    assert floor_verdict(result(MIN_REFUSAL_TASKS - 1), 0.25, accepted=False) is None
    refusal = floor_verdict(result(MIN_REFUSAL_TASKS), 0.25, accepted=False)
    assert refusal is not None and refusal.startswith("benchmark floor too high")
