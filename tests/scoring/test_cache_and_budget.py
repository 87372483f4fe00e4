"""The persistent rollout cache and the run budgets, with the scripted provider."""

from __future__ import annotations

import asyncio
from pathlib import Path

import git
import pytest
from policies import ulimit_probe
from run_args import run_args

from harnessevolve.cli.app import app
from harnessevolve.core.errors import InfraFailureError
from harnessevolve.core.tasks import Benchmark
from harnessevolve.execute.executor import LocalExecutor
from harnessevolve.harness.load import load_harness
from harnessevolve.models.budget import Budget, BudgetExhausted, BudgetGuard
from harnessevolve.models.scripted import register_script, unregister_script
from harnessevolve.models.usage import UsageMeter
from harnessevolve.runs.ledger import read_lines
from harnessevolve.scoring.references import load_references
from harnessevolve.scoring.rollout_cache import RolloutCache
from harnessevolve.scoring.scorer import Scorer


class Counting:
    def __init__(self, inner) -> None:
        self.inner = inner
        self.calls = 0

    def __call__(self, messages, tools):
        self.calls += 1
        return self.inner(messages, tools)


@pytest.fixture
def counting(shell_basics: Benchmark):
    from policies import FamilyLearner

    policy = Counting(FamilyLearner(shell_basics))
    register_script("counting", policy)
    yield policy
    unregister_script("counting")


def scorer(cache: RolloutCache | None, shell_basics: Benchmark, model: str = "scripted/counting", seed=0):
    return Scorer(
        LocalExecutor(4), model=model, seed=seed, references=load_references(shell_basics), cache=cache
    )


def test_an_unchanged_harness_is_rescored_without_model_calls(
    tmp_path: Path, harness_dir: Path, shell_basics: Benchmark, counting: Counting
) -> None:
    harness = load_harness(harness_dir)
    tasks = shell_basics.split("validation")[:6]
    cache = RolloutCache(tmp_path / "cache")
    first = asyncio.run(scorer(cache, shell_basics).score(harness, tasks, "first"))
    calls = counting.calls
    assert calls >= len(tasks)
    # A new scorer (as in a later run) with the same cache: no model call, same results, full trajectories.
    again = scorer(RolloutCache(tmp_path / "cache"), shell_basics)
    second = asyncio.run(again.score(harness, tasks, "second"))
    assert counting.calls == calls and again.cached == len(tasks) and again.rollouts == 0
    assert [(r.task_id, r.score, r.passed) for r in second] == [(r.task_id, r.score, r.passed) for r in first]
    assert [r.trajectory.to_dict() for r in second] == [r.trajectory.to_dict() for r in first]
    assert [r.signal for r in second] == [r.signal for r in first]
    # Another seed or another model is another key.
    asyncio.run(scorer(RolloutCache(tmp_path / "cache"), shell_basics, seed=1).score(harness, tasks, "s"))
    assert counting.calls == calls + len(tasks)


def test_provider_failures_are_not_cached(tmp_path: Path, harness_dir: Path, shell_basics: Benchmark) -> None:
    def broken(messages, tools):
        raise RuntimeError("503 upstream unavailable")

    register_script("broken-once", broken)
    try:
        cache = RolloutCache(tmp_path / "cache")
        with pytest.raises(InfraFailureError, match="endpoint 2"):  # a 5xx is the machine's failure
            asyncio.run(
                scorer(cache, shell_basics, "scripted/broken-once").score(
                    load_harness(harness_dir), shell_basics.split("validation")[:2], "x"
                )
            )
    finally:
        unregister_script("broken-once")
    assert not list((tmp_path / "cache").rglob("*.json"))


def test_a_rollout_that_ends_while_the_command_is_stopping_is_not_cached(
    tmp_path: Path, harness_dir: Path, shell_basics: Benchmark, counting: Counting, monkeypatch
) -> None:
    """A stop signal cuts a local model's reply (a judge check's call fails, failing the check):
    whatever a rollout scored while the command is stopping stays out of the cache."""
    from harnessevolve.core import interrupts

    monkeypatch.setattr(interrupts, "stopping", lambda: True)
    tasks = shell_basics.split("validation")[:2]
    cache = RolloutCache(tmp_path / "cache")
    results = asyncio.run(scorer(cache, shell_basics).score(load_harness(harness_dir), tasks, "x"))
    assert len(results) == 2 and counting.calls >= 2
    assert not list((tmp_path / "cache").rglob("*.json"))
    monkeypatch.undo()  # not stopping: the same rollouts are cached
    asyncio.run(scorer(cache, shell_basics).score(load_harness(harness_dir), tasks, "x"))
    assert list((tmp_path / "cache").rglob("*.json"))


def test_a_corrupt_cache_entry_is_a_miss(tmp_path: Path, harness_dir: Path, shell_basics, counting) -> None:
    harness = load_harness(harness_dir)
    task = shell_basics.split("validation")[:1]
    asyncio.run(scorer(RolloutCache(tmp_path / "c"), shell_basics).score(harness, task, "x"))
    (entry,) = list((tmp_path / "c").rglob("*.json"))
    entry.write_text("{ torn")
    calls = counting.calls
    fresh = scorer(RolloutCache(tmp_path / "c"), shell_basics)
    asyncio.run(fresh.score(harness, task, "y"))
    assert counting.calls > calls and fresh.cached == 0


def test_a_second_run_from_the_same_start_is_served_by_the_cache(harness_dir: Path, cli, counting) -> None:
    start = git.Repo(harness_dir).head.commit.hexsha
    first = cli.invoke(app, run_args(harness_dir, "scripted/counting", "-n", "1"))
    assert first.exit_code == 0, first.output
    calls = counting.calls
    git.Repo(harness_dir).git.reset("--hard", start)
    second = cli.invoke(app, run_args(harness_dir, "scripted/counting", "-n", "1"))
    assert second.exit_code == 0, second.output
    assert counting.calls == calls  # every rollout of the second run came from the cache
    runs = sorted((harness_dir / ".harnessevolve" / "runs").iterdir())
    finished = read_lines(runs[-1] / "ledger.jsonl")[-1]
    assert finished["event"] == "run_finished"
    assert finished["rollouts"] == 0 and finished["cached_rollouts"] > 0
    no_cache = cli.invoke(app, run_args(harness_dir, "scripted/counting", "-n", "1", "--no-cache"))
    assert no_cache.exit_code in (0, 1) and counting.calls > calls


def test_a_token_budget_stops_the_run_cleanly(harness_dir: Path, cli, learner) -> None:
    result = cli.invoke(app, run_args(harness_dir, learner, "-n", "5", "--max-tokens", "50"))
    assert result.exit_code in (0, 1), result.output
    assert "tokens budget reached" in result.output and "everything is saved" in result.output
    (run,) = list((harness_dir / ".harnessevolve" / "runs").iterdir())
    events = read_lines(run / "ledger.jsonl")
    stop = next(e for e in events if e["event"] == "budget_exhausted")
    assert stop["limit"] == "tokens" and stop["spent"] >= 50
    finished = events[-1]
    assert finished["event"] == "run_finished" and finished["stopped"]["limit"] == "tokens"
    assert finished["usage"]["by_stage"]["baseline"]["tokens"] > 0
    assert not (harness_dir / ".harnessevolve" / "lock").exists()
    assert not git.Repo(harness_dir).is_dirty(untracked_files=True)
    assert "model usage" in result.output  # spend per stage is printed


def test_budget_guard_limits() -> None:
    meter = UsageMeter()
    now = [0.0]
    guard = BudgetGuard(Budget(max_cost_usd=0.5, max_hours=1.0), meter, clock=lambda: now[0])
    guard.check()
    meter.record(stage="execute", proposer=None, model="openai/x", prompt_tokens=10, cost_usd=0.6)
    with pytest.raises(BudgetExhausted, match="cost_usd"):
        guard.check()
    hours = BudgetGuard(Budget(max_hours=1.0), meter, clock=lambda: now[0], elapsed_s=3000)
    hours.check()
    now[0] = 700.0
    with pytest.raises(BudgetExhausted, match="hours"):
        hours.check()


class RemoteLike:
    """Runs rollouts where this process's usage scope cannot see them (as Ray workers do)."""

    meters_remotely = True

    def __init__(self) -> None:
        self.inner = LocalExecutor(4)
        self.sandbox = self.inner.sandbox

    async def run(self, harness, tasks, **kwargs):
        import contextvars

        return await asyncio.create_task(
            self.inner.run(harness, tasks, **kwargs), context=contextvars.Context()
        )


def test_rollouts_run_elsewhere_are_metered_from_their_trajectories(
    harness_dir: Path, shell_basics: Benchmark, counting: Counting
) -> None:
    from harnessevolve.models.usage import usage_scope

    meter = UsageMeter()
    tasks = shell_basics.split("validation")[:3]
    remote = Scorer(RemoteLike(), model="scripted/counting", seed=0, references=load_references(shell_basics))

    async def score():
        with usage_scope(meter, stage="execute"):
            return await remote.score(load_harness(harness_dir), tasks, "remote")

    results = asyncio.run(score())
    usage = meter.snapshot()["by_stage"]["execute"]
    assert usage["tokens"] == sum(r.tokens for r in results) > 0
    assert usage["calls"] == counting.calls


def test_bad_sandbox_limits_are_bad_input(harness_dir: Path, cli, learner) -> None:
    result = cli.invoke(app, run_args(harness_dir, learner, "--sandbox-limits", "memory_mb=lots"))
    assert result.exit_code == 2
    assert "--sandbox-limits" in result.output and "whole number" in result.output
    assert not (harness_dir / ".harnessevolve" / "runs").exists()


def test_sandbox_limits_reach_the_commands(harness_dir: Path, cli) -> None:
    register_script("ulimit-probe", ulimit_probe)
    try:
        result = cli.invoke(
            app,
            run_args(
                harness_dir, "scripted/ulimit-probe", "-n", "1", "--sandbox-limits", "max_file_mb=2,cpu_s=30"
            ),
        )
    finally:
        unregister_script("ulimit-probe")
    assert result.exit_code in (0, 1), result.output
    (run,) = list((harness_dir / ".harnessevolve" / "runs").iterdir())
    assert read_lines(run / "ledger.jsonl")[0]["options"]["sandbox_limits"] == "max_file_mb=2,cpu_s=30"
    saved = next((run / "trajectories").rglob("*.json")).read_text()
    assert "2048\\n30" in saved  # 2 MiB in 1 KiB blocks, then 30 CPU seconds, as bash reports them
