"""`init` and `validate` through the CLI."""

from __future__ import annotations

import subprocess
from pathlib import Path

import git

from harnessevolve.cli.app import app


def test_help_lists_commands(cli) -> None:
    result = cli.invoke(app, ["--help"])
    assert result.exit_code == 0
    for command in ("init", "validate", "run", "gate"):
        assert command in result.output


def test_init_creates_own_repo_with_one_commit(harness_dir: Path) -> None:
    repo = git.Repo(harness_dir)
    assert Path(repo.working_tree_dir) == harness_dir
    assert [c.summary for c in repo.iter_commits()] == [
        "harnessevolve: new harness from template shell-agent"
    ]
    assert not repo.is_dirty(untracked_files=True)
    assert (harness_dir / "tools" / "submit.yaml").is_file()


def init_in_a_repo(cli, tmp_path: Path, file: str, text: str, target: str):
    """`init` of ``target`` inside a new git repository (``tmp_path/project``) that holds an
    uncommitted ``file``; returns (the repository's folder, the result)."""
    outer = tmp_path / "project"
    outer.mkdir()
    subprocess.run(["git", "init", "-q", str(outer)], check=True)
    (outer / file).write_text(text)
    result = cli.invoke(app, ["init", str(outer / target)])
    assert result.exit_code == 0, result.output
    return outer, result


def test_init_as_folder_of_existing_repo(tmp_path: Path, cli) -> None:
    outer, _ = init_in_a_repo(cli, tmp_path, "unrelated.txt", "user's own uncommitted work\n", "agents/mine")
    repo = git.Repo(outer)
    assert not (outer / "agents" / "mine" / ".git").exists()
    head = repo.head.commit
    assert all(p.startswith("agents/mine/") for p in head.stats.files)
    assert "unrelated.txt" in repo.untracked_files


def test_init_refuses_non_empty_folder(tmp_path: Path, cli) -> None:
    target = tmp_path / "busy"
    target.mkdir()
    (target / "keep.txt").write_text("mine")
    result = cli.invoke(app, ["init", str(target)])
    assert result.exit_code == 2
    assert "not empty" in result.output
    assert sorted(p.name for p in target.iterdir()) == ["keep.txt"]


def test_init_unknown_template(tmp_path: Path, cli) -> None:
    result = cli.invoke(app, ["init", str(tmp_path / "x"), "--template", "nope"])
    assert result.exit_code == 2
    assert "--template" in result.output and "shell-agent" in result.output
    assert not (tmp_path / "x").exists()


def test_validate_ok(harness_dir: Path, cli) -> None:
    result = cli.invoke(app, ["validate", str(harness_dir)])
    assert result.exit_code == 0, result.output
    assert "valid" in result.output


def test_validate_names_file_and_field(harness_dir: Path, cli) -> None:
    text = (harness_dir / "harness.yaml").read_text().replace("max_steps: 5", "max_steps: -1")
    (harness_dir / "harness.yaml").write_text(text)
    result = cli.invoke(app, ["validate", str(harness_dir), "--json"])
    assert result.exit_code == 2
    assert '"field": "loop.max_steps"' in result.output
    assert '"file": "harness.yaml"' in result.output


def test_validate_bad_yaml_names_line(harness_dir: Path, cli) -> None:
    (harness_dir / "harness.yaml").write_text("version: 1\nname: [unclosed\n")
    result = cli.invoke(app, ["validate", str(harness_dir)])
    assert result.exit_code == 2
    assert "line" in result.output and "harness.yaml" in result.output


def test_validate_missing_tool_file(harness_dir: Path, cli) -> None:
    (harness_dir / "tools" / "bash.yaml").unlink()
    result = cli.invoke(app, ["validate", str(harness_dir), "--json"])
    assert result.exit_code == 2
    assert "tools/bash.yaml does not exist" in result.output


def test_init_in_an_ignored_folder_of_a_repo_makes_its_own_repo(tmp_path: Path, cli) -> None:
    outer, result = init_in_a_repo(cli, tmp_path, ".gitignore", ".scratch/\n", ".scratch/agent")
    assert "its own new repository" in result.output
    assert (outer / ".scratch" / "agent" / ".git").is_dir()
