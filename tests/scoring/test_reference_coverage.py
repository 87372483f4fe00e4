"""A run on a suite whose train split has no reference trajectories says so once, with the cost."""

from __future__ import annotations

import shutil
from pathlib import Path

from harnessevolve.cli.app import app
from harnessevolve.core import paths


def test_a_suite_without_references_warns_once(cli, harness_dir: Path, tmp_path: Path) -> None:
    suite = tmp_path / "my-suite"
    shutil.copytree(paths.builtin_dir("benchmarks") / "shell-basics", suite)
    (suite / "benchmark.yaml").write_text("version: 1\nname: my-suite\n")
    args = ["run", "-H", str(harness_dir), "-b", str(suite), "-n", "1", "--batch-size", "4"]
    result = cli.invoke(app, [*args, "-m", "scripted/policy:gives_up"])
    assert result.exit_code == 1, result.output
    warning = "warning: no reference trajectories for the 32 train tasks of my-suite"
    assert result.output.count(warning) == 1, result.output
    assert "first divergent step" in result.output and "refs import -b" in result.output


def test_a_suite_with_references_does_not_warn(cli, harness_dir: Path) -> None:
    args = ["run", "-H", str(harness_dir), "-b", "shell-basics", "-n", "1", "--batch-size", "4"]
    result = cli.invoke(app, [*args, "-m", "scripted/policy:gives_up"])
    assert "no reference trajectories" not in result.output, result.output
