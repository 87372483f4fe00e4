"""run --evolve-environments: once a family is mastered, harder variants join later minibatches;
validation and test never change; every decision is in the ledger; the pool is rebuilt on resume."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from harnessevolve.cli.app import app
from harnessevolve.core.tasks import load_benchmark, load_task
from harnessevolve.execute.executor import LocalExecutor
from harnessevolve.models.scripted import register_script, unregister_script
from harnessevolve.pipeline.evolve_env import EnvironmentEvolver
from harnessevolve.runs.ledger import Ledger
from harnessevolve.scoring.references import load_references
from harnessevolve.scoring.scorer import Scorer


class SoloSolver:
    """Solves every original task by replaying its gold calls; gives up on anything else."""

    def __init__(self) -> None:
        self.by_instruction = {t.instruction: t for t in load_benchmark("shell-onecall").tasks}

    def __call__(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
        task = self.by_instruction.get(messages[1]["content"])
        turn = sum(1 for m in messages if m["role"] == "assistant")
        if task is None:
            return {"tool_calls": [{"name": "submit", "arguments": {"answer": "I do not know"}}]}
        gold = task.gold[min(turn, len(task.gold) - 1)]
        return {"tool_calls": [{"name": gold.tool, "arguments": gold.arguments}]}


@pytest.fixture
def solo():
    register_script("solo", SoloSolver())
    yield "scripted/solo"
    unregister_script("solo")


def events(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run_dir / "ledger.jsonl").read_text().splitlines()]


def test_mastered_families_get_harder_tasks_in_later_batches(cli, harness_dir, solo, tmp_path):
    args = ["run", "--harness", str(harness_dir), "--benchmark", "shell-onecall", "-n", "4"]
    result = cli.invoke(app, [*args, "--batch-size", "8", "--model", solo, "--evolve-environments"])
    assert result.exit_code in (0, 1), result.output
    run_dir = sorted((harness_dir / ".harnessevolve" / "runs").iterdir())[-1]
    ledger = events(run_dir)
    generated = [e for e in ledger if e["event"] == "task_generated"]
    kept = [e for e in generated if e["kept"]]
    assert kept, generated
    assert all(
        ".chain-" in e["task"] and e["maker"] == "chain" and e["difficulty"]["level"] == 2 for e in kept
    )
    for e in kept:  # each kept task's document and its gold reference are in the run folder
        assert (run_dir / "generated" / f"{e['task']}.yaml").is_file()
        assert (run_dir / "generated" / f"{e['task']}.json").is_file()
    status = [e for e in ledger if e["event"] == "environment_status"]
    assert [s["generation"] for s in status] == [1, 2, 3, 4]
    first_kept = min(e["generation"] for e in kept)
    later = [s for s in status if s["generation"] > first_kept]
    assert later and all(s["in_batch"] >= 1 and s["passed_in_batch"] == 0 for s in later)
    batches = [e for e in ledger if e["event"] == "batch_evaluated"]
    assert any(".chain-" in t for b in batches for t in b["tasks"])
    assert not any(".chain-" in t for b in batches if b["generation"] <= first_kept for t in b["tasks"])
    html = tmp_path / "report.html"
    assert cli.invoke(app, ["report", str(run_dir), "--html", str(html)]).exit_code == 0
    page = html.read_text()
    assert (
        "Environment evolution" in page
        and f"{len(generated)} harder train tasks generated, {len(kept)} kept" in page
    )
    # validation and test are untouched: the held-out gate and the report score the same tasks
    baseline = next(e for e in ledger if e["event"] == "baseline")
    assert baseline["tasks"] == len(load_benchmark("shell-onecall").split("validation"))


def test_the_pool_is_rebuilt_from_the_ledger(cli, harness_dir, solo, tmp_path):
    args = ["run", "--harness", str(harness_dir), "--benchmark", "shell-onecall", "-n", "3"]
    assert cli.invoke(
        app, [*args, "--batch-size", "8", "--model", solo, "--evolve-environments"]
    ).exit_code in (0, 1)
    run_dir = sorted((harness_dir / ".harnessevolve" / "runs").iterdir())[-1]
    kept = [e["task"] for e in events(run_dir) if e["event"] == "task_generated" and e["kept"]]
    bench = load_benchmark("shell-onecall")
    scorer = Scorer(LocalExecutor(1), model=solo, seed=0, references=load_references(bench))
    ledger = Ledger(tmp_path / "scratch.jsonl")
    evolver = EnvironmentEvolver(benchmark=bench, scorer=scorer, ledger=ledger, run_dir=run_dir, seed=0)
    evolver.restore(next_generation=99)
    assert [t.id for t in evolver.pool] == kept
    assert all(t.id in scorer.references for t in evolver.pool)
    batches = evolver.rebuild_batches(bench.tasks, 3)
    assert len(batches) == 3 and all(len(b) == 8 for b in batches)


def test_an_adapter_suite_is_refused_before_anything_is_written(cli, harness_dir, solo):
    result = cli.invoke(
        app,
        [
            "run",
            "--harness",
            str(harness_dir),
            "--benchmark",
            "harbor-example",
            "-n",
            "1",
            "--model",
            solo,
            "--evolve-environments",
        ],
    )
    assert result.exit_code == 2, result.output
    assert "--evolve-environments" in result.output
    assert not (harness_dir / ".harnessevolve" / "runs").exists()


class SweSolver(SoloSolver):
    def __init__(self) -> None:
        self.by_instruction = {t.instruction: t for t in load_benchmark("swe-synth").tasks}


def test_synthesized_tasks_get_one_more_bug(cli, harness_dir):
    register_script("swe-solo", SweSolver())
    try:
        args = [
            "run",
            "--harness",
            str(harness_dir),
            "--benchmark",
            "swe-synth",
            "-n",
            "1",
            "--batch-size",
            "4",
        ]
        result = cli.invoke(app, [*args, "--model", "scripted/swe-solo", "--evolve-environments"])
    finally:
        unregister_script("swe-solo")
    assert result.exit_code in (0, 1), result.output
    run_dir = sorted((harness_dir / ".harnessevolve" / "runs").iterdir())[-1]
    kept = [e for e in events(run_dir) if e["event"] == "task_generated" and e["kept"]]
    assert kept and all(e["maker"] == "more-mutations" and e["difficulty"]["mutations"] == 2 for e in kept)
    task = load_task(run_dir / "generated" / f"{kept[0]['task']}.yaml")
    assert "generated" in task.tags and task.split == "train" and len(task.checks) == 2


@pytest.mark.parametrize("value", ["nan", "1.5"])
def test_a_bad_threshold_is_refused(cli, harness_dir, solo, value):
    args = ["run", "--harness", str(harness_dir), "--benchmark", "shell-onecall", "-n", "1", "--model", solo]
    result = cli.invoke(app, [*args, "--evolve-environments", "--evolve-threshold", value])
    assert result.exit_code == 2, result.output
    assert "evolve-threshold" in result.output and "Traceback" not in result.output
    assert not (harness_dir / ".harnessevolve" / "runs").exists()
