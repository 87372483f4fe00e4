"""Git versioning of a harness directory: its own repository or a folder of a larger one."""

from __future__ import annotations

import contextlib
import io
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from harnessevolve.core.errors import HarnessGitError
from harnessevolve.core.files import atomic_write_text

FALLBACK_AUTHOR = ("harnessevolve", "harnessevolve@localhost")
RUN_STATE_DIR = ".harnessevolve"
RUN_STATE_IGNORE = f"{RUN_STATE_DIR}/\n"
"""The run state (runs, lock, caches) lives in the harness folder but is never harness content:
``init`` writes this line into every new harness's .gitignore, and the repository's dirty check and
commits leave the folder out even where a .gitignore lacks it."""


def ensure_run_state_ignored(harness_dir: Path) -> None:
    """Add the run-state folder to ``harness_dir``/.gitignore unless a line there already names it."""
    path = Path(harness_dir) / ".gitignore"
    text = path.read_text(encoding="utf-8") if path.is_file() else ""
    names = {line.strip().strip("/") for line in text.splitlines()}
    if RUN_STATE_DIR not in names:
        sep = "" if not text or text.endswith("\n") else "\n"
        atomic_write_text(path, text + sep + RUN_STATE_IGNORE)


@dataclass(frozen=True)
class Commit:
    sha: str
    summary: str
    message: str


def _own_session_repo() -> type:
    """``git.Repo`` whose git processes (the persistent ``cat-file`` helpers included) start in
    their own session: a terminal's Ctrl-C goes to the whole foreground process group, and a git
    helper killed by it would break the very git calls that record where the run stopped."""
    import git

    global _SessionRepo
    if _SessionRepo is None:

        class SessionGit(git.Git):
            def execute(self, command, **kwargs):  # type: ignore[no-untyped-def, override]
                kwargs.setdefault("start_new_session", True)
                return super().execute(command, **kwargs)

        class SessionRepo(git.Repo):
            GitCommandWrapperType = SessionGit

        _SessionRepo = SessionRepo
    return _SessionRepo


_SessionRepo: type | None = None


class HarnessRepo:
    """The git repository that holds a harness, with every operation scoped to the harness folder."""

    def __init__(self, harness_dir: Path) -> None:
        import git

        self.dir = Path(harness_dir).resolve()
        try:
            self.repo = _own_session_repo()(self.dir, search_parent_directories=True)
        except (git.InvalidGitRepositoryError, git.NoSuchPathError):
            raise HarnessGitError(
                "the harness is not in a git repository",
                file=str(harness_dir),
                hint="create it with `harnessevolve init DIR`, or run `git init` there",
            ) from None
        self.top = Path(self.repo.working_tree_dir).resolve()
        self.rel = self.dir.relative_to(self.top).as_posix() if self.dir != self.top else "."

    # -- creating --------------------------------------------------------------------------
    @staticmethod
    def init_or_open(harness_dir: Path) -> HarnessRepo:
        """Open the repository around ``harness_dir``, or make ``harness_dir`` a new repository."""
        import git

        try:
            outer = git.Repo(harness_dir, search_parent_directories=True)
        except git.InvalidGitRepositoryError:
            outer = None
        if outer is None or outer.ignored(str(Path(harness_dir).resolve())):
            # Outside any repository, or in a folder the enclosing repository ignores: its own repo.
            git.Repo.init(harness_dir, initial_branch="main")
        return HarnessRepo(harness_dir)

    # -- reading ---------------------------------------------------------------------------
    def head(self) -> str:
        try:
            return self.repo.head.commit.hexsha
        except ValueError:
            raise HarnessGitError(
                "the repository has no commits yet", file=str(self.dir), hint="commit the harness first"
            ) from None

    def resolve(self, rev: str) -> str:
        import git

        try:
            return self.repo.git.rev_parse("--verify", "--quiet", f"{rev}^{{commit}}").strip()
        except (git.BadName, ValueError, git.GitCommandError):
            raise HarnessGitError(
                f"unknown revision {rev!r}",
                file=str(self.dir),
                hint="use a commit sha, branch or tag of the harness repository",
            ) from None

    def _pathspec(self) -> list[str]:
        """The harness folder, less its run state (never harness content). Where a .gitignore
        already ignores the state, the exclusion is left out: ``git add`` refuses a pathspec that
        names an ignored path."""
        state = RUN_STATE_DIR if self.rel == "." else f"{self.rel.rstrip('/')}/{RUN_STATE_DIR}"
        if self.repo.ignored(state + "/"):
            return ["--", self.rel]
        return ["--", self.rel, f":(exclude){state}"]

    def dirty_paths(self) -> list[str]:
        """Uncommitted changes (staged, unstaged, untracked) inside the harness folder, run state aside."""
        out = self.repo.git.status("--porcelain", "--untracked-files=all", *self._pathspec())
        return [line[3:] for line in out.splitlines() if line.strip()]

    def changed_files(self, old: str, new: str = "HEAD") -> list[str]:
        """Harness files that differ between two revisions (paths relative to the harness folder;
        run state excluded). Empty: the two revisions hold the same harness."""
        out = self.repo.git.diff("--name-only", "--no-renames", old, new, "--", self.rel)
        prefix = "" if self.rel == "." else self.rel.rstrip("/") + "/"
        files = [line.removeprefix(prefix) for line in out.splitlines() if line.strip()]
        return [f for f in files if not f.startswith(".harnessevolve/")]

    def log(self, max_count: int = 20) -> list[Commit]:
        return [
            Commit(c.hexsha, c.summary, c.message)
            for c in self.repo.iter_commits(paths=self.rel, max_count=max_count)
        ]

    def export(self, rev: str, dest: Path) -> Path:
        """Write the harness folder as of ``rev`` into ``dest``; returns the harness's path there."""
        import git

        sha = self.resolve(rev)
        try:
            data = self.repo.git.archive(sha, "--", self.rel, stdout_as_string=False)
        except git.GitCommandError:
            data = None
        if data is not None:
            with tarfile.open(fileobj=io.BytesIO(data)) as tar:
                try:
                    tar.extractall(dest, filter="data")
                except tarfile.FilterError as exc:  # a link to an absolute path or out of the harness
                    member = getattr(exc, "tarinfo", None)
                    name = getattr(member, "name", "?")
                    target = getattr(member, "linkname", "")
                    raise HarnessGitError(
                        f"revision {rev!r}: {name} links to {target!r}, outside the harness ({exc})",
                        file=str(self.dir),
                        hint="a harness file cannot link out of the harness folder; commit the file itself",
                    ) from None
        out = dest / self.rel if self.rel != "." else dest
        if data is None or not (out / "harness.yaml").is_file():
            raise HarnessGitError(
                f"revision {rev!r} has no harness.yaml in {self.rel}",
                file=str(self.dir),
                hint="pick a revision made after the harness was created",
            )
        return out

    # -- writing ---------------------------------------------------------------------------
    def _git_commit(self, message: str) -> str:
        reader = self.repo.config_reader()
        # Fall back to our own identity only where git config has none (GIT_AUTHOR_* etc. still win).
        has_identity = reader.has_option("user", "name") and reader.has_option("user", "email")
        identity = (
            []
            if has_identity
            else ["-c", f"user.name={FALLBACK_AUTHOR[0]}", "-c", f"user.email={FALLBACK_AUTHOR[1]}"]
        )
        self.repo.git.execute(
            ["git", *identity, "commit", "--quiet", "--no-verify", "-m", message, "--", self.rel]
        )
        return self.repo.head.commit.hexsha

    def commit_all(self, message: str) -> str:
        """Stage everything inside the harness folder and commit it; returns the new sha."""
        with self._git_errors("commit"):
            self.repo.git.add("--all", *self._pathspec())
            return self._git_commit(message)

    def revert(self, sha: str, message: str) -> str:
        """Undo ``sha`` with a new commit carrying ``message``; history keeps both."""
        with self._git_errors(f"revert {sha[:8]}"):
            self.repo.git.revert("--no-commit", sha)
            return self._git_commit(message)

    def restore(self, sha: str, message: str) -> str | None:
        """Make the harness folder what it was at ``sha``, as a new commit; None if nothing changed."""
        with self._git_errors(f"restore {sha[:8]}"):
            self.repo.git.restore(f"--source={sha}", "--staged", "--worktree", "--", self.rel)
            if not self.dirty_paths():
                return None
            return self.commit_all(message)

    @contextlib.contextmanager
    def _git_errors(self, what: str) -> Iterator[None]:
        import git

        try:
            yield
        except git.GitCommandError as exc:
            detail = (exc.stderr or str(exc)).strip().splitlines()
            raise HarnessGitError(
                f"git could not {what}: {detail[0] if detail else exc}",
                file=str(self.dir),
                hint="check the repository with `git status`; nothing was committed",
            ) from None

    def recover_interrupted(self) -> list[str]:
        """After a crash (``kill -9``) mid-git-operation: remove a stale ``index.lock`` and quit a
        half-done revert. Only call it while holding the harness lock. Returns what was done."""
        done = []
        lock = Path(self.repo.git_dir) / "index.lock"
        if lock.exists():
            lock.unlink()
            done.append("removed a stale .git/index.lock")
        if (Path(self.repo.git_dir) / "REVERT_HEAD").exists():
            with contextlib.suppress(Exception):
                self.repo.git.revert("--quit")
            done.append("quit an unfinished git revert")
        return done

    def message(self, rev: str = "HEAD") -> str:
        return self.repo.commit(rev).message

    NOTES_REF = "harnessevolve"
    """Git notes ref for what is learnt about a commit after it was made (whether an edit fired):
    ``git log --notes=harnessevolve``. Notes never rewrite the commit."""

    def add_note(self, rev: str, text: str) -> None:
        """Append ``text`` (trailer lines) to the commit's note under ``NOTES_REF``."""
        with self._git_errors("add a note to the commit"):
            self.repo.git.notes("--ref", self.NOTES_REF, "append", "-m", text, rev)

    def note(self, rev: str = "HEAD") -> str:
        """The commit's note under ``NOTES_REF`` ("" when none)."""
        import git

        try:
            return str(self.repo.git.notes("--ref", self.NOTES_REF, "show", rev))
        except git.GitCommandError:
            return ""

    def discard_changes(self) -> None:
        """Throw away uncommitted changes inside the harness folder (after a failed apply)."""
        self.repo.git.checkout("HEAD", "--", self.rel)
        self.repo.git.clean("-fd", "--", self.rel)
