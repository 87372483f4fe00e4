"""How many rollouts run at once when the user does not say (pipeline/rollouts/scorer_setup.py)."""

from __future__ import annotations

import pytest

from harnessevolve.models import local_pool
from harnessevolve.models.local_pool import LocalPoolError
from harnessevolve.pipeline.rollouts.scorer_setup import default_concurrency


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
