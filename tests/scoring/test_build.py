"""Building the one Scorer from an ExecutionConfig, and how many rollouts run at once when the user
does not say (scoring/build.py)."""

from __future__ import annotations

import pytest

from harnessevolve.models import local_pool
from harnessevolve.models.local_pool import LocalPoolError
from harnessevolve.scoring.build import build_scorer, check_execution, default_concurrency


def test_a_local_model_runs_as_many_rollouts_as_its_pool_serves(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(local_pool.os, "cpu_count", lambda: 3)
    monkeypatch.delenv(local_pool.POOL_ENV, raising=False)
    assert default_concurrency(None, "local/qwen2.5-coder-0.5b") == 1  # one instance: they take turns
    monkeypatch.setenv(local_pool.POOL_ENV, "2")
    assert default_concurrency(None, "local/qwen2.5-coder-0.5b") == 2
    monkeypatch.setenv(local_pool.POOL_ENV, "8")
    assert default_concurrency(None, "local/qwen2.5-coder-0.5b") == 3  # the pool holds one per core
    monkeypatch.setenv(local_pool.POOL_ENV, "auto")
    assert default_concurrency(None, "local/smollm2-135m") == 3
    assert default_concurrency(None, "openai/gpt-4o-mini") == 4  # the pool is the local model's only
    assert default_concurrency(5, "local/smollm2-135m") == 5  # asked for: as asked
    monkeypatch.setenv(local_pool.POOL_ENV, "two")
    with pytest.raises(LocalPoolError, match="HARNESSEVOLVE_LOCAL_POOL"):
        default_concurrency(None, "local/smollm2-135m")


def test_a_scorer_is_built_from_the_execution_section_alone(shell_basics, tmp_path) -> None:
    from harnessevolve.core.enums import SandboxName
    from harnessevolve.runs.run_config import ExecutionConfig

    execution = ExecutionConfig(sandbox=SandboxName.NONE, unsafe_no_sandbox=True, concurrency=3)
    scorer = build_scorer(
        execution, benchmark=shell_basics, model="scripted/x", default_model="m", seed=5, references={}
    )
    assert scorer.executor.concurrency == 3 and scorer.seed == 5 and scorer.model == "scripted/x"
    assert scorer.adapter == shell_basics.adapter
    twin = scorer.with_seed(6, tmp_path)  # a repetition: same executor and tally, its own memo
    assert twin.executor is scorer.executor and twin.infra is scorer.infra
    assert (twin.seed, twin.out_dir, twin.memo, twin.rollouts) == (6, tmp_path, {}, 0)
    assert twin.memo is not scorer.memo


def test_an_unknown_executor_or_bad_limits_are_refused_before_anything_runs() -> None:
    from harnessevolve.core.errors import HarnessEvolveError
    from harnessevolve.runs.run_config import ExecutionConfig

    with pytest.raises(HarnessEvolveError, match="unknown executor"):
        check_execution(ExecutionConfig(executor="nope"))  # type: ignore[arg-type]
    with pytest.raises(HarnessEvolveError) as err:
        check_execution(ExecutionConfig(sandbox_limits="cpu_s=lots"))
    assert err.value.field == "--sandbox-limits"
