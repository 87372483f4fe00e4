"""Task-level context: loaded from the task (or a file of its benchmark), rendered ahead of the
harness's prompt for every runner, never editable (an edit copying it is refused), and a task
opened by its simulated user is known by that user's scenario."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from suite_files import answer_task, write_suite

from harnessevolve.core import paths
from harnessevolve.core.errors import BenchmarkError
from harnessevolve.core.task_tools import SimulatedUser
from harnessevolve.core.tasks import Check, Task, load_benchmark
from harnessevolve.execute.agent import run_agent
from harnessevolve.execute.runners.external import task_document
from harnessevolve.gate.config import LeakageConfig
from harnessevolve.gate.leakage import ngram_verdict
from harnessevolve.harness.load import load_harness

POLICY = (
    "Refunds are allowed within thirty days of delivery when the customer keeps the receipt and the "
    "item is unopened.\n\nNever change a booking without first asking the customer for the booking "
    "number and confirming the new date back to them in writing."
)
HARNESS = load_harness(paths.builtin_dir("harnesses") / "shell-agent")


def suite(tmp_path: Path, **task_fields: object) -> Path:
    root = write_suite(
        tmp_path / "suite", "ctx", answer_task("t1", "Refund my order.", "done", **task_fields)
    )
    (root / "policy.md").write_text(POLICY)
    return root


def test_context_from_the_task_or_a_file_of_its_benchmark(tmp_path: Path) -> None:
    inline = load_benchmark(str(suite(tmp_path / "a", context="Be brief."))).tasks[0]
    assert inline.context == "Be brief."
    from_file = load_benchmark(str(suite(tmp_path / "b", context_file="policy.md"))).tasks[0]
    assert from_file.context == POLICY


@pytest.mark.parametrize(
    "fields, field",
    [({"context_file": "../outside.md"}, "context_file"), ({"context_file": "nope.md"}, "context_file")],
)
def test_a_context_file_outside_the_benchmark_or_missing_is_refused(tmp_path: Path, fields, field) -> None:
    (tmp_path / "outside.md").write_text("secret")
    with pytest.raises(BenchmarkError) as err:
        load_benchmark(str(suite(tmp_path, **fields)))
    assert err.value.field == field


def test_context_is_rendered_ahead_of_the_harness_prompt(scripts, tmp_path: Path) -> None:
    seen: list[str] = []

    def policy(messages, tools):
        seen.append(messages[0]["content"])
        return {"tool_calls": [{"name": "submit", "arguments": {"answer": "done"}}]}

    model = scripts("context-reader", policy)
    task = Task("t", "Refund my order.", "train", (Check(type="answer", expected="done"),), context=POLICY)
    trajectory = asyncio.run(run_agent(HARNESS, task, tmp_path, model=model, seed=0))
    system = seen[0]
    assert system.startswith(POLICY) and system.endswith(HARNESS.assembled_prompt())
    assert trajectory.steps[0].message == system
    document = task_document(HARNESS, task, model)
    assert document["context"] == POLICY and document["system_prompt"].startswith(POLICY)


def test_an_edit_copying_the_task_context_is_refused() -> None:
    task = Task("t", "Refund my order.", "train", (Check(type="answer", expected="done"),), context=POLICY)
    before = {"prompts/system.md": "You are an agent.\n"}
    second_paragraph = POLICY.split("\n\n")[1]
    after = {"prompts/system.md": f"You are an agent.\nRule: {second_paragraph}\n"}
    verdict = ngram_verdict(before, after, [task], LeakageConfig())
    assert not verdict.passed
    assert "context paragraph 2" in verdict.reason and "not editable" in verdict.reason
    harmless = {"prompts/system.md": "You are an agent.\nAsk for the booking number first.\n"}
    assert ngram_verdict(before, harmless, [task], LeakageConfig()).passed


def test_a_task_opened_by_its_simulated_user_is_known_by_the_scenario() -> None:
    user = SimulatedUser(
        model="scripted/x", instructions="You want a refund for order 4411 placed last week."
    )
    task = Task("t", "", "validation", (Check(type="answer", expected="ok"),), user=user)
    assert task.opening_text == user.instructions
    after = {"prompts/system.md": "Example: You want a refund for order 4411 placed last week.\n"}
    verdict = ngram_verdict({"prompts/system.md": ""}, after, [task], LeakageConfig())
    assert not verdict.passed and "instruction" in verdict.reason


def test_a_task_files_user_scenario_is_what_the_task_is_known_by(tmp_path: Path) -> None:
    user = {
        "model": "scripted/u",
        "instructions": "You are a user simulator. PERSONA: Mia.",
        "scenario": "A refund.",
    }
    task = answer_task("refund", "", "ok", user=user)
    del task["instruction"]
    suite = write_suite(tmp_path / "suite", "scenarios", task)
    (loaded,) = load_benchmark(str(suite)).tasks
    assert loaded.user is not None and loaded.user.scenario == "A refund."
    assert loaded.opening_text == "A refund."
