"""The GEPA arm of benchmarks/perf/vs_gepa.py on scripted models: candidates reach the agent as
harness files, scores come from the benchmark's checkers, the reflective dataset carries the
evaluator's verdict, and gepa.optimize with a scripted reflector finds the candidate that works.
Also the best-of-k selection rule. No real model: the scripted provider plays agent and reflector."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest

from harnessevolve.core.paths import builtin_dir
from harnessevolve.core.tasks import Benchmark, Task, load_benchmark
from harnessevolve.harness.load import load_harness
from harnessevolve.models.scripted import register_script, unregister_script

PERF = builtin_dir("benchmarks") / "perf"


def load_script(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, PERF / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


gepa_arm = load_script("gepa_arm")
harness_arms = load_script("harness_arms")
vs_gepa = load_script("vs_gepa")

MAGIC = "Always finish the task with one tool call, then submit."


class MagicWordAgent:
    """Replays a task's gold calls only when the system prompt holds ``MAGIC``; otherwise runs a
    harmless wrong command and submits."""

    def __init__(self, benchmark: Benchmark) -> None:
        self.by_instruction = {t.instruction: t for t in benchmark.tasks}

    def __call__(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
        task = self.by_instruction[messages[1]["content"]]
        turn = sum(1 for m in messages if m["role"] == "assistant")
        if MAGIC in messages[0]["content"]:
            gold = task.gold[min(turn, len(task.gold) - 1)]
            return {"tool_calls": [{"name": gold.tool, "arguments": gold.arguments}]}
        if turn == 0:
            return {"tool_calls": [{"name": "bash", "arguments": {"command": "ls"}}]}
        return {"tool_calls": [{"name": "submit", "arguments": {"answer": "done"}}]}


@pytest.fixture(scope="module")
def onecall() -> Benchmark:
    return load_benchmark("shell-onecall")


@pytest.fixture
def agent(onecall: Benchmark, scripts) -> str:
    return scripts("magic-word-agent", MagicWordAgent(onecall))


@pytest.fixture
def seed_dir(tmp_path: Path) -> Path:
    return harness_arms.copy_harness(builtin_dir("harnesses") / "shell-agent", tmp_path / "seed")


def tasks(benchmark: Benchmark, split: str, n: int) -> list[Task]:
    return list(benchmark.split(split))[:n]  # type: ignore[arg-type]


def test_components_are_the_editable_texts_and_round_trip(seed_dir: Path, tmp_path: Path) -> None:
    skill = seed_dir / "skills" / "listing" / "SKILL.md"
    skill.parent.mkdir(parents=True)
    skill.write_text("---\nname: listing\ndescription: List files.\n---\nRun ls first.\n")
    components = gepa_arm.harness_components(seed_dir)
    assert set(components) == {"prompts/system.md", "prompts/examples.md", "skills/listing/SKILL.md"}
    assert components["skills/listing/SKILL.md"] == "Run ls first.\n"
    edited = {**components, "skills/listing/SKILL.md": "Run ls -la first.\n", "prompts/system.md": MAGIC}
    harness = load_harness(gepa_arm.write_components(seed_dir, tmp_path / "cand", edited))
    assert harness.skills[0].body.strip() == "Run ls -la first." and harness.skills[0].description
    assert harness.system_prompt == MAGIC


def test_evaluate_scores_candidates_with_the_checkers(
    onecall: Benchmark, agent: str, seed_dir: Path, tmp_path: Path
) -> None:
    scorer = harness_arms.make_scorer(onecall, agent)
    validation = tasks(onecall, "validation", 2)
    adapter = gepa_arm.HarnessGEPAAdapter(seed_dir, tmp_path / "work", scorer, validation)
    batch = tasks(onecall, "train", 3)
    seed = gepa_arm.harness_components(seed_dir)

    plain = adapter.evaluate(batch, seed, capture_traces=True)
    assert plain.scores == [0.0, 0.0, 0.0] and scorer.rollouts == 3
    records = adapter.make_reflective_dataset(seed, plain, ["prompts/system.md"])["prompts/system.md"]
    assert [r["Inputs"]["task"] for r in records] == [t.instruction for t in batch]
    assert all(
        r["Feedback"].startswith("Wrong") and "A correct run did this instead" in r["Feedback"]
        for r in records
    )
    assert "bash" in records[0]["Generated Outputs"]

    magic = adapter.evaluate(batch, {**seed, "prompts/system.md": MAGIC}, capture_traces=False)
    assert magic.scores == [1.0, 1.0, 1.0] and magic.trajectories is None
    again = adapter.evaluate(batch, seed)  # memoised: no new rollouts
    assert again.scores == plain.scores and scorer.rollouts == 6
    adapter.evaluate(validation, {**seed, "prompts/system.md": MAGIC})
    assert adapter.validation_log == [(8, 1.0)]


def test_optimize_with_a_scripted_reflector_finds_the_working_prompt(
    onecall: Benchmark, agent: str, seed_dir: Path, tmp_path: Path
) -> None:
    register_script("reflector", lambda _m, _t: f"Here is the new instruction:\n```\n{MAGIC}\n```")
    small = Benchmark(
        onecall.name,
        onecall.root,
        tuple(tasks(onecall, "train", 3) + tasks(onecall, "validation", 2)),
    )
    scorer = harness_arms.make_scorer(onecall, agent)
    reflector = gepa_arm.LiteLLMReflector("scripted/reflector")
    try:
        best, adapter = gepa_arm.run_gepa(
            seed_dir, small, scorer, budget=14, reflector=reflector, seed=0, work_dir=tmp_path / "gepa"
        )
    finally:
        unregister_script("reflector")
    assert MAGIC in best.values()
    assert reflector.calls >= 1
    assert not [line for line in adapter.log.lines if "failed" in line]
    assert adapter.validation_log[0] == (2, 0.0) and adapter.validation_log[-1][1] == 1.0
    assert vs_gepa.curve_best(adapter.validation_log) == (1.0, adapter.validation_log[-1][0])
    assert scorer.rollouts <= 14 + 2  # the budget, overshot by at most one validation pass


def test_self_consistent_pick_prefers_the_largest_group_of_submitted_runs(
    onecall: Benchmark, agent: str, seed_dir: Path, tmp_path: Path
) -> None:
    scorer = harness_arms.make_scorer(onecall, agent)
    task = tasks(onecall, "train", 1)
    wrong = harness_arms.score_split(scorer, load_harness(seed_dir), task, "wrong")[0]
    magic_dir = gepa_arm.write_components(seed_dir, tmp_path / "magic", {"prompts/system.md": MAGIC})
    right = harness_arms.score_split(scorer, load_harness(magic_dir), task, "right")[0]
    assert (wrong.score, right.score) == (0.0, 1.0)
    assert vs_gepa.self_consistent_pick([wrong, right, right]) is right
    assert vs_gepa.self_consistent_pick([wrong, right]) is wrong  # a tie goes to the earliest sample
