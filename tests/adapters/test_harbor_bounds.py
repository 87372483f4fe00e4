"""Harbor rewards are in [0, 1]: 1 passes, 1.5 (a wrong scale) fails and says why."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest

from harnessevolve.adapters import load_benchmark_spec
from harnessevolve.core import paths
from harnessevolve.evaluate.checkers import run_checks
from harnessevolve.execute.workspace import create_workspace, remove_workspace
from harnessevolve.scoring.sandboxed_checks import sandboxed_runner


def score_with_reward(tmp_path: Path, reward: str) -> tuple[bool, str]:
    suite = tmp_path / "suite"
    shutil.copytree(paths.builtin_dir("benchmarks") / "harbor-example" / "count-words", suite / "count-words")
    (suite / "count-words" / "tests" / "test.sh").write_text(
        f"#!/bin/bash\nmkdir -p /logs/verifier\necho {reward} > /logs/verifier/reward.txt\n"
    )
    task = load_benchmark_spec(f"harbor:{suite}").task("count-words")

    async def go() -> tuple[bool, str]:
        workspace = await create_workspace(task)
        try:
            result = run_checks(task, workspace, None, runner=sandboxed_runner())
            return result.passed, result.details[0].message
        finally:
            remove_workspace(workspace)

    return asyncio.run(go())


@pytest.mark.parametrize(("reward", "passes"), [("1", True), ("1.0", True), ("0.5", False), ("1.5", False)])
def test_reward_scale(tmp_path: Path, reward: str, passes: bool) -> None:
    passed, message = score_with_reward(tmp_path, reward)
    assert passed is passes, message
    if reward == "1.5":
        assert "outside [0, 1]" in message
