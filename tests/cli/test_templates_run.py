"""Every template runs straight after `init`: the run's own state never counts as an uncommitted change."""

from __future__ import annotations

import subprocess
from pathlib import Path

import git
import pytest

from harnessevolve.cli.app import app
from harnessevolve.cli.harness_cmds import templates
from harnessevolve.harness.git import RUN_STATE_IGNORE, HarnessRepo, ensure_run_state_ignored
from tests.run_args import run_args

BENCHMARK = {"tool-agent": "tool-use-example"}
"""A built-in suite each template's agent fits (shell-basics for the rest)."""


def test_every_template_is_listed_and_ignores_its_run_state(tmp_path: Path, cli) -> None:
    assert {"shell-agent", "tool-agent", "python-agent", "mini-swe-agent"} <= set(templates())
    for template in templates():
        target = tmp_path / template
        result = cli.invoke(app, ["init", str(target), "--template", template])
        assert result.exit_code == 0, result.output
        assert RUN_STATE_IGNORE.strip() in (target / ".gitignore").read_text().splitlines()
        assert not git.Repo(target).is_dirty(untracked_files=True), template


@pytest.mark.parametrize("template", ["tool-agent", "shell-agent", "python-agent"])
def test_init_then_run_exits_cleanly(template: str, tmp_path: Path, cli) -> None:
    target = tmp_path / "h"
    assert cli.invoke(app, ["init", str(target), "--template", template]).exit_code == 0
    args = run_args(
        target,
        "scripted/policy:gives_up",
        benchmark=BENCHMARK.get(template, "shell-basics"),
        generations=1,
        batch_size=2,
    )
    result = cli.invoke(app, args)
    assert result.exit_code in (0, 1), result.output
    assert "uncommitted" not in result.output
    assert not git.Repo(target).is_dirty(untracked_files=True)


def test_run_state_is_never_harness_content_even_without_gitignore(tmp_path: Path) -> None:
    """A harness folder inside a user's repository whose .gitignore lacks the line: the run's lock
    and runs are neither dirty nor committed."""
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    harness = tmp_path / "agent"
    (harness / ".harnessevolve" / "runs").mkdir(parents=True)
    (harness / "harness.yaml").write_text("version: 1\n")
    (harness / ".harnessevolve" / "lock").write_text("{}")
    repo = HarnessRepo(harness)
    assert repo.dirty_paths() == ["agent/harness.yaml"]
    repo.commit_all("add the harness\n")
    committed = git.Repo(tmp_path).head.commit.stats.files
    assert set(committed) == {"agent/harness.yaml"}
    assert repo.dirty_paths() == []


def test_ensure_run_state_ignored_keeps_the_users_lines(tmp_path: Path) -> None:
    (tmp_path / ".gitignore").write_text("*.log")
    ensure_run_state_ignored(tmp_path)
    ensure_run_state_ignored(tmp_path)
    assert (tmp_path / ".gitignore").read_text() == "*.log\n" + RUN_STATE_IGNORE
