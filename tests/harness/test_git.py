"""HarnessRepo: a harness in its own repository or in a folder of a larger one."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from harnessevolve.core import paths
from harnessevolve.core.errors import HarnessGitError
from harnessevolve.harness.git import FALLBACK_AUTHOR, HarnessRepo

TEMPLATE = paths.builtin_dir("harnesses") / "shell-agent"


USER = "Test User <test@example.org>"


@pytest.fixture(autouse=True)
def isolated_git(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A private HOME whose ~/.gitconfig names USER; no system config, no identity in the environment."""
    home = tmp_path / "home"
    home.mkdir()
    (home / ".gitconfig").write_text("[user]\n\tname = Test User\n\temail = test@example.org\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    for var in (
        "GIT_CONFIG_GLOBAL",
        "GIT_AUTHOR_NAME",
        "GIT_AUTHOR_EMAIL",
        "GIT_COMMITTER_NAME",
        "GIT_COMMITTER_EMAIL",
        "GIT_DIR",
        "GIT_WORK_TREE",
        "EMAIL",
    ):
        monkeypatch.delenv(var, raising=False)


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


def own_repo(tmp_path: Path) -> tuple[HarnessRepo, Path]:
    root = tmp_path / "agent"
    shutil.copytree(TEMPLATE, root)
    repo = HarnessRepo.init_or_open(root)
    repo.commit_all("seed")
    return repo, root


def sub_repo(tmp_path: Path) -> tuple[HarnessRepo, Path, Path]:
    """A project repository with a README and the harness in project/agent."""
    top = tmp_path / "project"
    top.mkdir()
    git(top, "init", "--quiet", "--initial-branch=main")
    (top / "README.md").write_text("project\n")
    git(top, "add", "README.md")
    git(top, "-c", "user.name=u", "-c", "user.email=u@x", "commit", "--quiet", "-m", "readme")
    shutil.copytree(TEMPLATE, top / "agent")
    repo = HarnessRepo(top / "agent")
    repo.commit_all("add harness")
    return repo, top, top / "agent"


# --- creating and committing ----------------------------------------------------------------------------


def test_init_or_open_makes_a_fresh_directory_a_repository(tmp_path: Path) -> None:
    root = tmp_path / "agent"
    shutil.copytree(TEMPLATE, root)
    repo = HarnessRepo.init_or_open(root)
    assert (root / ".git").is_dir()
    assert repo.rel == "."
    with pytest.raises(HarnessGitError, match="no commits"):
        repo.head()
    assert "harness.yaml" in repo.dirty_paths()
    sha = repo.commit_all("seed harness")
    assert sha == repo.head() and len(sha) == 40
    assert repo.dirty_paths() == []
    assert [c.summary for c in repo.log()] == ["seed harness"]
    assert git(root, "log", "-1", "--format=%an <%ae>").strip() == USER


def test_init_or_open_reopens_an_existing_repository(tmp_path: Path) -> None:
    repo, root = own_repo(tmp_path)
    again = HarnessRepo.init_or_open(root)
    assert again.head() == repo.head()


def test_a_directory_outside_git_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(HarnessGitError, match="not in a git repository"):
        HarnessRepo(tmp_path)


NO_USER_SECTION_BUG = (
    "BUG: _git_commit calls config_reader().get_value('user', 'name', default=None); GitPython treats "
    "default=None as 'no default' and raises configparser.NoSectionError when no config has a [user] "
    "section, so the fallback identity is never used and commit_all crashes"
)


def test_commit_without_any_identity_uses_the_fallback(tmp_path: Path) -> None:
    (tmp_path / "home" / ".gitconfig").unlink()
    repo, root = own_repo(tmp_path)
    assert repo.log()[0].summary == "seed"
    author = git(root, "log", "-1", "--format=%an <%ae>").strip()
    assert author == f"{FALLBACK_AUTHOR[0]} <{FALLBACK_AUTHOR[1]}>"


def test_commit_with_the_identity_only_in_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "home" / ".gitconfig").unlink()
    for role in ("AUTHOR", "COMMITTER"):
        monkeypatch.setenv(f"GIT_{role}_NAME", "Ci Bot")
        monkeypatch.setenv(f"GIT_{role}_EMAIL", "ci@example.org")
    _, root = own_repo(tmp_path)
    assert git(root, "log", "-1", "--format=%an <%ae>").strip() == "Ci Bot <ci@example.org>"


def test_dirty_paths_lists_modified_and_untracked_files(tmp_path: Path) -> None:
    repo, root = own_repo(tmp_path)
    (root / "prompts" / "system.md").write_text("changed\n")
    (root / "skills" / "new").mkdir(parents=True)
    (root / "skills" / "new" / "SKILL.md").write_text("---\nname: new\ndescription: d\n---\n")
    assert sorted(repo.dirty_paths()) == ["prompts/system.md", "skills/new/SKILL.md"]


def test_run_state_is_not_dirt(tmp_path: Path) -> None:
    repo, root = own_repo(tmp_path)
    (root / ".harnessevolve" / "runs").mkdir(parents=True)
    (root / ".harnessevolve" / "runs" / "ledger.jsonl").write_text("{}\n")
    assert repo.dirty_paths() == []


# --- a harness inside a bigger repository ---------------------------------------------------------------


def test_subfolder_dirty_paths_ignore_the_rest_of_the_repository(tmp_path: Path) -> None:
    repo, top, root = sub_repo(tmp_path)
    assert repo.rel == "agent"
    assert repo.dirty_paths() == []
    (top / "README.md").write_text("edited\n")
    (top / "scratch.txt").write_text("untracked\n")
    assert repo.dirty_paths() == []
    (root / "prompts" / "system.md").write_text("changed\n")
    assert repo.dirty_paths() == ["agent/prompts/system.md"]


def test_subfolder_commit_all_commits_only_the_harness(tmp_path: Path) -> None:
    repo, top, root = sub_repo(tmp_path)
    (top / "README.md").write_text("edited\n")
    (top / "scratch.txt").write_text("untracked\n")
    (root / "prompts" / "system.md").write_text("changed\n")
    sha = repo.commit_all("edit prompt")
    changed = git(top, "show", "--name-only", "--format=", sha).split()
    assert changed == ["agent/prompts/system.md"]
    status = git(top, "status", "--porcelain")
    assert " M README.md" in status and "?? scratch.txt" in status
    assert [c.summary for c in repo.log()] == ["edit prompt", "add harness"]  # not the README commit


def test_subfolder_export_returns_the_harness_path(tmp_path: Path) -> None:
    repo, top, root = sub_repo(tmp_path)
    out = repo.export("HEAD", tmp_path / "export")
    assert out == tmp_path / "export" / "agent"
    assert (out / "harness.yaml").read_text() == (root / "harness.yaml").read_text()
    assert not (tmp_path / "export" / "README.md").exists()


def test_subfolder_export_before_the_harness_existed(tmp_path: Path) -> None:
    repo, _, _ = sub_repo(tmp_path)
    with pytest.raises(HarnessGitError, match="no harness.yaml"):
        repo.export("HEAD~1", tmp_path / "before")


# --- revert, export, resolve ----------------------------------------------------------------------------


def test_revert_creates_a_new_commit_restoring_the_content(tmp_path: Path) -> None:
    repo, root = own_repo(tmp_path)
    prompt = root / "prompts" / "system.md"
    original = prompt.read_text()
    prompt.write_text(original + "## Rules\n- Never guess.\n")
    (root / "prompts" / "extra.md").write_text("extra\n")
    edit = repo.commit_all("harnessevolve: add a rule")
    reverted = repo.revert(edit, "harnessevolve: revert add a rule\n\nRejected-By: performance")
    assert reverted not in (edit, repo.resolve("HEAD~1"))
    assert repo.head() == reverted
    assert prompt.read_text() == original
    assert not (root / "prompts" / "extra.md").exists()
    assert repo.dirty_paths() == []
    log = repo.log()
    assert [c.summary for c in log] == [
        "harnessevolve: revert add a rule",
        "harnessevolve: add a rule",
        "seed",
    ]
    assert "Rejected-By: performance" in log[0].message


def test_export_writes_that_revisions_files(tmp_path: Path) -> None:
    repo, root = own_repo(tmp_path)
    seed = repo.head()
    (root / "prompts" / "system.md").write_text("new prompt\n")
    repo.commit_all("edit")
    out = repo.export(seed, tmp_path / "old")
    assert out == tmp_path / "old"
    assert (out / "prompts" / "system.md").read_text() == (TEMPLATE / "prompts" / "system.md").read_text()
    assert (root / "prompts" / "system.md").read_text() == "new prompt\n"  # working tree untouched
    newer = repo.export("HEAD", tmp_path / "new")
    assert (newer / "prompts" / "system.md").read_text() == "new prompt\n"


def test_resolve(tmp_path: Path) -> None:
    repo, _ = own_repo(tmp_path)
    assert repo.resolve("HEAD") == repo.head()
    assert repo.resolve("main") == repo.head()
    assert repo.resolve(repo.head()[:10]) == repo.head()
    for bad in ("no-such-branch", "HEAD~5", "deadbeef", "0123456789" * 4):
        with pytest.raises(HarnessGitError, match="unknown revision"):
            repo.resolve(bad)
    with pytest.raises(HarnessGitError, match="unknown revision"):
        repo.export("no-such-branch", tmp_path / "out")


def test_resolve_rejects_the_null_sha(tmp_path: Path) -> None:
    repo, _ = own_repo(tmp_path)
    with pytest.raises(HarnessGitError, match="unknown revision"):
        repo.resolve("0" * 40)
    with pytest.raises(HarnessGitError):
        repo.export("0" * 40, tmp_path / "out")


def test_discard_changes(tmp_path: Path) -> None:
    repo, root = own_repo(tmp_path)
    (root / "prompts" / "system.md").write_text("half-applied\n")
    (root / "prompts" / "new.md").write_text("new\n")
    repo.discard_changes()
    assert repo.dirty_paths() == []
    assert (root / "prompts" / "system.md").read_text() == (TEMPLATE / "prompts" / "system.md").read_text()
    assert not (root / "prompts" / "new.md").exists()
