"""The rollout cache key holds everything that can change a rollout's outcome: change any one of
sandbox kind, limits, read-only paths, runner identity or version, the tool server's code, the
task's own Python code or the adapter's version, and the cache misses."""

from __future__ import annotations

import asyncio
import copy
from dataclasses import replace
from pathlib import Path

import pytest

from harnessevolve.core.tasks import Benchmark
from harnessevolve.execute.executor import LocalExecutor
from harnessevolve.harness.load import load_harness
from harnessevolve.sandbox.base import BwrapSandbox, UnsafeNoSandbox
from harnessevolve.sandbox.launch import SandboxLimits
from harnessevolve.scoring import rollout_cache
from harnessevolve.scoring.references import load_references
from harnessevolve.scoring.rollout_cache import RolloutCache, rollout_environment, rollout_key
from harnessevolve.scoring.scorer import Scorer


def key(task, *, sandbox=None, runner="builtin@1", adapter="harnessevolve@0") -> str:
    return rollout_key(
        harness_hash="h",
        task=task,
        model="m",
        seed=0,
        reference=None,
        runner=runner,
        environment=rollout_environment(sandbox, adapter),
    )


@pytest.fixture
def task(shell_basics: Benchmark):
    return shell_basics.tasks[0]


def test_the_same_environment_gives_the_same_key(task) -> None:
    assert key(task, sandbox=BwrapSandbox()) == key(task, sandbox=BwrapSandbox())
    assert key(task) == key(task)


@pytest.mark.parametrize(
    "changed",
    [
        {"sandbox": UnsafeNoSandbox()},  # --unsafe-no-sandbox
        {"sandbox": BwrapSandbox(SandboxLimits(memory_mb=512))},  # a tighter --sandbox-limits
        {"sandbox": BwrapSandbox(SandboxLimits(workspace_files=500))},
        {"sandbox": BwrapSandbox(read_only_paths=("/opt",))},  # --sandbox-ro
        {"runner": "command@1"},  # another runner
        {"runner": "builtin@2"},  # the same runner, another version
        {"adapter": "harnessevolve@1"},  # the adapter's version
        {"adapter": "mine@0"},
    ],
    ids=["unsafe", "memory", "files", "read-only", "runner", "runner-version", "adapter-version", "adapter"],
)
def test_each_change_is_a_different_key(task, changed) -> None:
    base = {"sandbox": BwrapSandbox(), "runner": "builtin@1", "adapter": "harnessevolve@0"}
    assert key(task, **{**base, **changed}) != key(task, **base)


def test_a_sandbox_view_change_is_a_different_key(task) -> None:
    sandbox = BwrapSandbox()
    other = copy.copy(sandbox)
    other.code_only_paths = ("/srv/suite",)  # what the agent's own commands may not see
    assert key(task, sandbox=other) != key(task, sandbox=sandbox)


def test_harnessevolves_own_code_is_in_the_key(task, tmp_path: Path, monkeypatch) -> None:
    """The loop, the providers' parsing, the tool server and the checks decide a cached rollout:
    a comparison resumed at another commit must not reuse rollouts an older loop made (it did: a
    BFCL seed cell resumed after a loop change came back in 0.2 s with the old loop's score)."""
    import harnessevolve

    package = tmp_path / "harnessevolve"
    (package / "execute").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "execute" / "agent.py").write_text("STOP_ON_REPEAT = 3\n")
    before = rollout_cache.code_digest(package)
    (package / "execute" / "agent.py").write_text("STOP_ON_REPEAT = 2\n")
    assert rollout_cache.code_digest(package) != before
    (package / "execute" / "agent.py").write_text("STOP_ON_REPEAT = 3\n")
    assert rollout_cache.code_digest(package) == before
    (package / "execute" / "loop.py").write_text("")
    assert rollout_cache.code_digest(package) != before  # a new module too

    real = key(task)
    monkeypatch.setattr(harnessevolve, "__file__", str(package / "__init__.py"))
    rollout_cache.serving_code.cache_clear()
    try:
        assert key(task) != real  # the key follows the package's code
    finally:
        monkeypatch.undo()
        rollout_cache.serving_code.cache_clear()
    assert key(task) == real


def test_the_tasks_own_python_code_is_in_the_key(task, tmp_path: Path) -> None:
    code = tmp_path / "tools"
    code.mkdir()
    (code / "cart.py").write_text("def add(x):\n    return x + 1\n")
    with_code = replace(task, python_path=(str(code),))
    before = key(with_code)
    (code / "cart.py").write_text("def add(x):\n    return x + 2\n")
    rollout_cache._code_hash.cache_clear()
    assert key(with_code) != before


def test_a_scorer_with_other_limits_misses_the_cache(
    tmp_path: Path, harness_dir: Path, shell_basics: Benchmark, learner
) -> None:
    harness = load_harness(harness_dir)
    tasks = shell_basics.split("validation")[:1]
    cache = RolloutCache(tmp_path / "cache")
    references = load_references(shell_basics)

    def scored(sandbox, adapter: str = "harnessevolve@0") -> Scorer:
        scorer = Scorer(
            LocalExecutor(1, sandbox),
            model=learner,
            seed=0,
            references=references,
            cache=cache,
            adapter=adapter,
        )
        asyncio.run(scorer.score(harness, tasks, "x"))
        return scorer

    assert scored(BwrapSandbox()).cached == 0
    assert scored(BwrapSandbox()).cached == len(tasks)  # the same environment: served by the cache
    assert scored(BwrapSandbox(SandboxLimits(cpu_s=7))).cached == 0
    assert scored(UnsafeNoSandbox()).cached == 0
    assert scored(BwrapSandbox(), adapter="harnessevolve@9").cached == 0
