"""The ``effect`` check (NL2Bash): the agent's submitted command must do what the gold command
does -- same exit status, same stdout, same files -- in two identical copies of the task's setup.

``effect_oracle`` applies the same comparison to the *steps* of a failed run for alignment: a shell
call whose text differs from the reference's call but that does the same in the same starting state
(the set-up plus the reference's earlier shell commands) matches it (``evaluate/effect_match.py``).

Both commands (and the setup) run through the ``CommandRunner`` the caller passes, in a scratch
folder it provides (``runner.scratch``); the pipeline's runs them in the agent's sandbox, in a folder
bounded like a workspace, since the submitted command is LLM-written.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from harnessevolve.core.tasks import Check, Task
from harnessevolve.core.text import quote
from harnessevolve.evaluate.actions import Action
from harnessevolve.evaluate.command_runner import MINIMAL_PATH, CommandRunner
from harnessevolve.evaluate.effect_match import EffectOracle, shell_command

MAX_TREE_ENTRIES = 50_000
_FENCE = re.compile(r"\A```[\w-]*\n(.*?)\n?```\Z", re.DOTALL)


@dataclass(frozen=True)
class Effect:
    """What one command did in a fresh workspace."""

    succeeded: bool
    stdout: str
    tree: dict[str, str]


def submitted_command(answer: str) -> str:
    """The command in an answer: code fences, surrounding backticks and a leading ``$ `` removed."""
    text = answer.strip()
    fenced = _FENCE.match(text)
    if fenced:
        text = fenced.group(1).strip()
    if len(text) > 1 and text[0] == text[-1] == "`":
        text = text.strip("`").strip()
    return text.removeprefix("$ ").strip()


def check_effect(
    task: Task, check: Check, answer: str | None, *, timeout_s: float, runner: CommandRunner
) -> tuple[bool, str]:
    if not answer or not submitted_command(answer):
        return False, "expected a bash command as the answer, found none submitted"
    command = submitted_command(answer)
    with runner.scratch(f"he-effect-{task.id}-") as base:
        error = _set_up(task, base / "start", timeout_s=timeout_s, runner=runner)
        if error:
            return False, f"the task's setup failed, so nothing to compare: {error}"
        # Both commands run at the same path, one after the other: a sandbox that gives each
        # workspace its own uid then gives both the same one (owners show in `ls -l` and tar files).
        gold, error = command_effect(
            base / "start", base / "run", check.run, timeout_s=timeout_s, runner=runner
        )
        if gold is None:
            return False, f"the gold command {quote(check.run)} could not be run: {error}"
        _remove_tree(base / "run")
        found, error = command_effect(
            base / "start", base / "run", command, timeout_s=timeout_s, runner=runner
        )
    if found is None:
        return False, f"{quote(command)}: {error}"
    problems = []
    if found.succeeded != gold.succeeded:
        problems.append(f"expected {'success' if gold.succeeded else 'failure'}, found the opposite")
    if found.stdout != gold.stdout:
        problems.append(f"expected stdout {quote(gold.stdout)}, found {quote(found.stdout)}")
    if found.tree != gold.tree:
        problems.append(f"files differ from the gold command's: {tree_difference(gold.tree, found.tree)}")
    if problems:
        return False, f"{quote(command)}: " + "; ".join(problems)
    return True, f"{quote(command)} has the gold command's effect (stdout, exit status and files)"


MAX_ORACLE_COMPARISONS = 8
"""Pairs of commands one oracle runs at most (each runs the set-up and both commands)."""


def effect_oracle(
    task: Task, *, timeout_s: float, runner: CommandRunner, limit: int = MAX_ORACLE_COMPARISONS
) -> EffectOracle | None:
    """An oracle for alignment when ``task`` has an ``effect`` check, else None: two shell calls
    match when, run in fresh copies of the set-up after the reference's earlier shell commands, they
    give the same stdout, exit status and files. Answers None for other calls and after ``limit``
    comparisons (then text and observations decide); never raises."""
    if not any(c.type == "effect" for c in task.checks):
        return None
    cache: dict[tuple[tuple[str, ...], str, str], bool | None] = {}

    def oracle(run: Action, ref: Action, before: Sequence[Action]) -> bool | None:
        mine, theirs = shell_command(run), shell_command(ref)
        if mine is None or theirs is None:
            return None
        prefix = tuple(c for c in (shell_command(a) for a in before) if c is not None)
        key = (prefix, mine, theirs)
        if key not in cache:
            if len(cache) >= limit:
                return None
            cache[key] = _same_effect(task, prefix, mine, theirs, timeout_s=timeout_s, runner=runner)
        return cache[key]

    return oracle


def _same_effect(
    task: Task, prefix: tuple[str, ...], mine: str, theirs: str, *, timeout_s: float, runner: CommandRunner
) -> bool | None:
    try:
        with runner.scratch(f"he-step-effect-{task.id}-") as base:
            start = base / "start"
            if _set_up(task, start, timeout_s=timeout_s, runner=runner):
                return None
            for command in prefix:
                runner(command, start, _effect_env(start), timeout_s=timeout_s, fresh=True)
            theirs_effect, _ = command_effect(start, base / "run", theirs, timeout_s=timeout_s, runner=runner)
            _remove_tree(base / "run")
            mine_effect, _ = command_effect(start, base / "run", mine, timeout_s=timeout_s, runner=runner)
    except OSError:
        return None
    if theirs_effect is None or mine_effect is None:
        return None
    return theirs_effect == mine_effect


def _effect_env(workspace: Path) -> dict[str, str]:
    return {"PATH": MINIMAL_PATH, "HOME": str(workspace), "LC_ALL": "C"}


def _set_up(task: Task, workspace: Path, *, timeout_s: float, runner: CommandRunner) -> str:
    """Build the task's starting workspace (setup files, then commands); the error, or ``""``."""
    workspace.mkdir()
    for rel, content in task.setup_files.items():
        target = (workspace / rel).resolve()
        if not target.is_relative_to(workspace.resolve()):
            return f"setup file {rel!r} is outside the workspace"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content, encoding="utf-8")
    for setup in task.setup_commands:
        done = runner(setup, workspace, _effect_env(workspace), timeout_s=timeout_s, fresh=True)
        if done.returncode != 0:
            return f"setup command failed ({done.returncode}): {quote(done.output.strip())}"
    return ""


def command_effect(
    start: Path, workspace: Path, command: str, *, timeout_s: float, runner: CommandRunner
) -> tuple[Effect | None, str]:
    """Copy ``start`` (times and modes kept) to ``workspace``, run ``command`` there: its effect, or
    None and why not. Both sides of an effect check start from copies of one setup, so files the
    setup stamps with the current time (archives) are identical."""
    try:
        shutil.copytree(start, workspace, symlinks=True)
        run = runner(
            command, workspace, _effect_env(workspace), timeout_s=timeout_s, with_stderr=False, fresh=True
        )
        if run.returncode is None:
            return None, f"timed out after {timeout_s:g}s"
        stdout = "\n".join(line.rstrip() for line in _mask(run.output, workspace).rstrip().splitlines())
        return Effect(run.returncode == 0, stdout, file_tree(workspace)), ""
    except (OSError, shutil.Error) as exc:
        return None, str(exc)


def _mask(text: str, workspace: Path) -> str:
    for form in {str(workspace.resolve()), str(workspace)}:
        text = text.replace(form, "<workspace>")
    return text


def file_tree(workspace: Path) -> dict[str, str]:
    """Relative path -> kind, permission bits and content hash (or symlink target) of every entry."""
    tree: dict[str, str] = {}
    for root, dirs, files in os.walk(workspace):
        for name in dirs + files:
            path = Path(root) / name
            rel = path.relative_to(workspace).as_posix()
            info = path.lstat()
            mode = f"{info.st_mode & 0o7777:o}"
            if stat.S_ISLNK(info.st_mode):  # from lstat: nothing here follows a link
                tree[rel] = f"link -> {_mask(os.readlink(path), workspace)}"
            elif stat.S_ISDIR(info.st_mode):
                tree[rel] = f"dir {mode}"
            elif stat.S_ISREG(info.st_mode):
                tree[rel] = f"file {mode} {_file_hash(path)}"
            else:
                tree[rel] = f"other {mode}"
            if len(tree) > MAX_TREE_ENTRIES:
                raise OSError(f"more than {MAX_TREE_ENTRIES} files in the workspace")
    return tree


def _file_hash(path: Path) -> str:
    """Hash of a regular file, opened without following a symlink or blocking (the entry was a
    regular file when listed; anything else now is reported, never read)."""
    digest = hashlib.sha256()
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:  # unreadable (chmod 000 as a non-root user): compare the reason instead
        return f"unreadable {exc.errno}"
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return "not a regular file"
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()[:16]


def tree_difference(expected: dict[str, str], found: dict[str, str], limit: int = 3) -> str:
    missing = sorted(set(expected) - set(found))
    extra = sorted(set(found) - set(expected))
    changed = sorted(p for p in set(expected) & set(found) if expected[p] != found[p])
    parts = [
        f"{label} {', '.join(items[:limit])}{' ...' if len(items) > limit else ''}"
        for label, items in (("missing", missing), ("unexpected", extra), ("changed", changed))
        if items
    ]
    return "; ".join(parts)


def _remove_tree(path: Path) -> None:
    """Remove a workspace even where a command took away write permission on its folders; never
    follows a symlink the command planted (a chmod through one would change a host file)."""
    if not os.path.lexists(path):
        return

    top = os.path.abspath(path)

    def make_writable(func, target, _exc):  # noqa: ANN001 - shutil's onerror signature
        for folder in (os.path.dirname(target), target):
            inside = os.path.abspath(folder) == top or os.path.abspath(folder).startswith(top + os.sep)
            if not inside:  # never the folder above the tree
                continue
            try:
                fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
            except OSError:
                continue
            with contextlib.suppress(OSError):
                os.fchmod(fd, 0o700)
            os.close(fd)
        with contextlib.suppress(OSError):
            func(target)

    shutil.rmtree(path, onerror=make_writable)
