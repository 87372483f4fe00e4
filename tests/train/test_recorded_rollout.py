"""End to end: a rollout on a ``local/torch:`` model keeps the token ids on its steps (agent loop ->
trajectory), and the trainer's sample is stitched from them, nothing re-tokenised."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from harnessevolve.core.tasks import load_benchmark
from harnessevolve.execute.agent import run_agent
from harnessevolve.execute.workspace import create_workspace, remove_workspace
from harnessevolve.harness.model import Harness
from harnessevolve.models import torch_backend
from harnessevolve.train.samples import RECORDED, TOKEN_FIELDS, trajectory_sample


def test_torch_rollout_records_ids_and_the_sample_uses_them(
    tiny_base: Path, tokenizer: Any, harness: Harness
) -> None:
    task = load_benchmark("shell-onecall").task("make-dir-01")

    async def rollout() -> Any:
        workspace = await create_workspace(task)
        try:
            return await run_agent(harness, task, workspace, model=f"local/torch:{tiny_base}", seed=0)
        finally:
            remove_workspace(workspace)

    try:
        trajectory = asyncio.run(rollout())
    finally:
        torch_backend.release_models()
    steps = trajectory.agent_steps
    assert steps and all(all(f in s.extra for f in TOKEN_FIELDS) for s in steps)
    sample = trajectory_sample(trajectory, tokenizer, max_len=100_000)
    assert sample is not None and sample.tokenised == RECORDED
    generated = [t for t, m in zip(sample.input_ids, sample.loss_mask, strict=True) if m]
    assert generated == [t for s in steps for t in s.extra["completion_token_ids"]]
    assert (
        list(sample.input_ids[: len(steps[0].extra["prompt_token_ids"])])
        == steps[0].extra["prompt_token_ids"]
    )
