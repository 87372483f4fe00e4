"""Scoring a finished run with its task's own checks (``answer``, ``file``, ``command``, ``effect``).

``run_checks`` runs every check of a task against the workspace the agent left behind and the
answer it submitted. The score is the fraction of checks that pass; a run passes when all do.
Every outcome carries a short message saying what was expected and what was found, so a failed
run can be explained without rerunning it.

Match modes:

- ``answer`` checks (``None`` answer = failure): ``exact`` compares after stripping and collapsing
  runs of whitespace; ``contains`` is a case-insensitive substring test; ``number`` takes the
  first number in the answer (int or float, optional sign) and compares it with ``float(expected)``
  within ``NUMBER_TOLERANCE``; ``regex`` is ``re.search(expected, answer)``.
- ``file`` checks read a workspace-relative file: ``exact`` compares after dropping trailing
  newlines on both sides; ``contains`` is case-sensitive; ``regex`` is ``re.search`` (use ``(?m)``
  for line anchors). A path that resolves outside the workspace (``..``, absolute, or a symlink
  that escapes) fails and is never read.
- ``command`` checks run ``bash -c RUN`` in the workspace with a minimal environment (``PATH``,
  ``HOME`` = the workspace, ``LC_ALL=C`` and ``ANSWER`` = the answer or ``""``); exit 0 passes,
  anything else or running past ``timeout_s`` fails.
- ``effect`` checks compare what the submitted answer, read as a bash command, does with what the
  gold command in ``run`` does: the task's setup (files, then commands) is built once and copied,
  times and modes kept, into two workspaces, one per command, each run with ``HOME`` = its
  workspace. They pass when both succeed or both fail
  (exit 0 or not), their stdout is the same once each workspace's path is replaced by
  ``<workspace>`` and trailing whitespace dropped, and the two workspaces end up with the same
  entries (relative path, kind, permission bits, file contents, symlink targets; times and owners
  are not compared). Code fences or backticks around the answer are removed first.

A check the task itself gets wrong (an invalid regex, a non-numeric ``expected`` for ``number``,
an unknown type, no checks at all) raises ``BenchmarkError``: that is a bug in the benchmark,
not a failure of the agent.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from harnessevolve.core.errors import BenchmarkError
from harnessevolve.core.tasks import Check, Task

MINIMAL_PATH = "/usr/local/bin:/usr/bin:/bin"
NUMBER_TOLERANCE = 1e-9
MESSAGE_QUOTE_LIMIT = 80
"""Characters of expected / found text quoted in an outcome message before it is cut."""
MAX_FILE_BYTES = 10_000_000
"""A checked file larger than this fails rather than being read into memory."""

# A sign counts only when it does not follow a word character, so "item-3" reads as 3, not -3.
_NUMBER = re.compile(r"(?:(?<![\w.])[-+])?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?")


@dataclass(frozen=True)
class CheckOutcome:
    """The result of one check: its position in the task's checker list, type, verdict, why."""

    index: int
    type: str
    ok: bool
    message: str


@dataclass(frozen=True)
class CheckResult:
    """All checks of one run. ``score`` is the fraction that passed; ``passed`` means all did."""

    score: float
    passed: bool
    details: tuple[CheckOutcome, ...]

    @property
    def failures(self) -> tuple[CheckOutcome, ...]:
        return tuple(d for d in self.details if not d.ok)


def run_checks(
    task: Task,
    workspace: Path,
    answer: str | None,
    *,
    timeout_s: float = 30.0,
    runner: CommandRunner | None = None,
) -> CheckResult:
    """Run every check of ``task`` against ``workspace`` and the submitted ``answer``.

    ``runner`` runs the commands of ``effect`` checks -- the agent's submitted command among them,
    so the pipeline passes a sandboxed one; ``None`` runs them on the host (``run_bash``)."""
    if not task.checks:
        raise BenchmarkError(
            "task has no checks",
            file=task.id,
            field="checker",
            hint="give the task at least one answer, file or command check",
        )
    outcomes = []
    for index, check in enumerate(task.checks):
        where = f"checker[{index}]"
        if check.type == "answer":
            ok, message = _check_answer(check, answer, task_id=task.id, where=where)
        elif check.type == "file":
            ok, message = _check_file(check, workspace, task_id=task.id, where=where)
        elif check.type == "command":
            ok, message = _check_command(check, workspace, answer, timeout_s=timeout_s)
        elif check.type == "effect":
            from harnessevolve.evaluate.effect_check import check_effect  # it builds on this module

            ok, message = check_effect(task, check, answer, timeout_s=timeout_s, runner=runner or run_bash)
        else:
            raise BenchmarkError(
                f"unknown check type {check.type!r}",
                file=task.id,
                field=where,
                hint="check types are answer, file, command and effect",
            )
        outcomes.append(CheckOutcome(index=index, type=check.type, ok=ok, message=message))
    score = sum(o.ok for o in outcomes) / len(outcomes)
    return CheckResult(score=score, passed=score == 1.0, details=tuple(outcomes))


def quote(text: str, limit: int = MESSAGE_QUOTE_LIMIT) -> str:
    """``text`` as a Python literal, cut to ``limit`` characters (``...`` marks a cut)."""
    return repr(text) if len(text) <= limit else repr(text[:limit]) + "..."


def first_number(text: str) -> float | None:
    """The first int or float written in ``text`` (``"There are 12 lines"`` -> 12.0), else None."""
    found = _NUMBER.search(text)
    return float(found.group()) if found else None


def _check_answer(check: Check, answer: str | None, *, task_id: str, where: str) -> tuple[bool, str]:
    if answer is None:
        return False, f"expected an answer ({check.match} {quote(check.expected)}), found none submitted"
    ok = _match(check, answer, in_file=False, task_id=task_id, where=where)
    return ok, _compared(check, answer, ok)


def _check_file(check: Check, workspace: Path, *, task_id: str, where: str) -> tuple[bool, str]:
    try:
        root = workspace.resolve()
        target = (root / check.path).resolve()
    except (OSError, RuntimeError) as exc:  # a symlink loop raises RuntimeError before 3.13
        return False, f"cannot resolve {check.path!r}: {exc}"
    if not target.is_relative_to(root):
        return False, f"path {check.path!r} resolves outside the workspace; not read"
    if not target.is_file():
        what = "is a directory" if target.is_dir() else "does not exist"
        return False, f"expected file {check.path!r}, but it {what}"
    if target.stat().st_size > MAX_FILE_BYTES:
        return False, f"file {check.path!r} is larger than {MAX_FILE_BYTES} bytes; not read"
    content = target.read_bytes().decode("utf-8", errors="replace")
    ok = _match(check, content, in_file=True, task_id=task_id, where=where)
    return ok, f"{check.path}: {_compared(check, content, ok)}"


def _compared(check: Check, found: str, ok: bool) -> str:
    verdict = "matches" if ok else "expected"
    return f"{verdict} {check.match} {quote(check.expected)}, found {quote(found)}"


def _match(check: Check, found: str, *, in_file: bool, task_id: str, where: str) -> bool:
    """Compare ``found`` (an answer, or a file's text when ``in_file``) with ``check.expected``."""
    expected = check.expected
    if check.match == "exact":
        if in_file:
            return found.rstrip("\r\n") == expected.rstrip("\r\n")
        return " ".join(found.split()) == " ".join(expected.split())
    if check.match == "contains":
        return expected in found if in_file else expected.casefold() in found.casefold()
    if check.match == "number" and not in_file:
        try:
            target = float(expected)
        except ValueError:
            raise BenchmarkError(
                f"expected {expected!r} is not a number",
                file=task_id,
                field=f"{where}.expected",
                hint="write a plain number",
            ) from None
        value = first_number(found)
        return value is not None and abs(value - target) <= NUMBER_TOLERANCE
    if check.match == "regex":
        try:
            return re.search(expected, found) is not None
        except re.error as exc:
            raise BenchmarkError(
                f"invalid regex {expected!r}: {exc}", file=task_id, field=f"{where}.expected"
            ) from None
    modes = "exact, contains and regex" if in_file else "exact, contains, number and regex"
    raise BenchmarkError(
        f"unknown match mode {check.match!r} for a {check.type} check",
        file=task_id,
        field=f"{where}.match",
        hint=f"match modes here are {modes}",
    )


@dataclass(frozen=True)
class BashRun:
    """One ``bash -c`` run by a check: exit code (``None``: it timed out) and its output."""

    returncode: int | None
    output: str


class CommandRunner(Protocol):
    """Runs ``bash -c command`` in ``workspace`` like ``run_bash`` (same arguments, same result)."""

    def __call__(
        self,
        command: str,
        workspace: Path,
        env: dict[str, str],
        *,
        timeout_s: float,
        with_stderr: bool = True,
    ) -> BashRun: ...


def run_bash(
    command: str, workspace: Path, env: dict[str, str], *, timeout_s: float, with_stderr: bool = True
) -> BashRun:
    """Run ``bash -c command`` in ``workspace`` on the host; killed with everything it started after
    ``timeout_s``. Raises ``OSError`` when bash cannot be started."""
    return run_process(["bash", "-c", command], workspace, env, timeout_s=timeout_s, with_stderr=with_stderr)


def run_process(
    argv: list[str], cwd: Path, env: dict[str, str], *, timeout_s: float, with_stderr: bool = True
) -> BashRun:
    """Run ``argv`` in its own process group; after ``timeout_s`` the whole group is killed."""
    proc = subprocess.Popen(
        argv,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT if with_stderr else subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        raw, _ = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        return BashRun(None, "")
    finally:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)  # whatever it left running in the background
    return BashRun(proc.returncode, raw.decode("utf-8", errors="replace"))


def _check_command(
    check: Check, workspace: Path, answer: str | None, *, timeout_s: float
) -> tuple[bool, str]:
    env = {"PATH": MINIMAL_PATH, "HOME": str(workspace), "LC_ALL": "C", "ANSWER": answer or ""}
    try:
        run = run_bash(check.run, workspace, env, timeout_s=timeout_s)
    except OSError as exc:
        return False, f"could not run {quote(check.run)}: {exc}"
    if run.returncode is None:
        return False, f"{quote(check.run)} timed out after {timeout_s:g}s (expected exit 0)"
    output = run.output.strip()
    if run.returncode == 0:
        return True, f"{quote(check.run)} exited 0"
    return False, f"{quote(check.run)}: expected exit 0, found exit {run.returncode}, output {quote(output)}"


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """Kill the command and everything it started (it leads its own session)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    try:
        proc.communicate(timeout=5)
    except subprocess.TimeoutExpired:  # a grandchild left the group and holds the pipe
        proc.kill()
        proc.wait()


# --- effect checks -------------------------------------------------------------------------------
