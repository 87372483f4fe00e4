"""``--sandbox-ro`` and ``--sandbox-limits`` are checked before anything runs (issue 26): a read-only
path that is ``/``, the temp folder, the harness, its run folder or a folder above one of them is
refused with why (exit 2), and so is a limit outside its documented range."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from run_args import run_args

from harnessevolve.cli.app import app
from harnessevolve.cli.options import read_only_paths
from harnessevolve.core.errors import SandboxError
from harnessevolve.sandbox.launch import LIMIT_RANGES


def invoke(cli, harness_dir: Path, *extra: str):
    return cli.invoke(
        app, run_args(harness_dir, "scripted/policy:gives_up", *extra, generations=1, batch_size=2)
    )


@pytest.mark.parametrize(
    ("which", "why"),
    [
        ("root", "the whole host"),
        ("temp", "the temp folder"),
        ("harness", "the harness"),
        ("above-harness", "the harness"),
        ("run-folder", "run folders"),
    ],
)
def test_sandbox_ro_refuses_what_would_show_agents_everything(
    cli, harness_dir: Path, which: str, why: str
) -> None:
    (harness_dir / ".harnessevolve" / "runs").mkdir(parents=True, exist_ok=True)
    path = {
        "root": Path("/"),
        "temp": Path(tempfile.gettempdir()),
        "harness": harness_dir,
        "above-harness": harness_dir.parent,
        "run-folder": harness_dir / ".harnessevolve" / "runs",
    }[which]
    result = invoke(cli, harness_dir, "--sandbox-ro", str(path))
    assert result.exit_code == 2, result.output
    assert "--sandbox-ro" in result.output and why in result.output


def test_sandbox_ro_refuses_the_benchmark_folder(cli, harness_dir: Path, tmp_path: Path) -> None:
    from harnessevolve.core import paths

    suite = paths.builtin_dir("benchmarks") / "shell-basics"
    result = invoke(cli, harness_dir, "--sandbox-ro", str(suite.parent))
    assert result.exit_code == 2, result.output
    assert "every task's answer" in result.output


def test_sandbox_ro_of_a_plain_folder_is_accepted(harness_dir: Path, tmp_path: Path) -> None:
    data = tmp_path / "toolchain"  # beside the harness, under the temp folder: neither is shown
    data.mkdir()
    assert read_only_paths([data], harness=harness_dir) == (str(data.resolve()),)
    with pytest.raises(SandboxError, match="the harness"):
        read_only_paths([data, tmp_path], harness=harness_dir)


@pytest.mark.parametrize(
    "limits",
    [
        "memory_mb=1",
        "rollout_memory_mb=999999999999",
        "cpu_s=100000000",
        "workspace_files=1",
        "max_processes=0",
    ],
)
def test_sandbox_limits_outside_their_range_are_refused(cli, harness_dir: Path, limits: str) -> None:
    result = invoke(cli, harness_dir, "--sandbox-limits", limits)
    assert result.exit_code == 2, result.output
    name = limits.split("=")[0]
    low, high = LIMIT_RANGES[name]
    assert "--sandbox-limits" in result.output and f"between {low} and {high}" in result.output
