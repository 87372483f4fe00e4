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
  for line anchors). The file is read inside the sandbox; a path that resolves outside the
  workspace (``..``, absolute, or a symlink that escapes) fails and is never read, and so does
  anything but a regular file (a FIFO would block).
- ``command`` checks run ``bash -c RUN`` in the workspace, inside the sandbox, with a minimal fixed
  environment (``CHECK_ENV``: ``PATH`` of system folders only, ``HOME`` = the sandbox's fresh
  private /tmp -- never a folder the agent wrote --, ``PYTHONNOUSERSITE=1``, ``LC_ALL=C`` and
  ``ANSWER`` = the answer or ``""``), the check's own files (``Check.mounts``, e.g. Harbor's
  ``tests/``) shown read-only at their paths; exit 0 passes, anything else or running past
  ``timeout_s`` fails. The agent may have planted startup files (``sitecustomize.py``, a
  ``Makefile``, a ``.pth``) in the workspace: they run, if at all, inside that sandbox.
- ``effect`` checks compare what the submitted answer, read as a bash command, does with what the
  gold command in ``run`` does: the task's setup (files, then commands) is built once and copied,
  times and modes kept, into two workspaces, one per command, each run with ``HOME`` = its
  workspace. They pass when both succeed or both fail
  (exit 0 or not), their stdout is the same once each workspace's path is replaced by
  ``<workspace>`` and trailing whitespace dropped, and the two workspaces end up with the same
  entries (relative path, kind, permission bits, file contents, symlink targets; times and owners
  are not compared). Code fences or backticks around the answer are removed first.

Every check that runs a program or opens a workspace file does it through the ``runner`` the caller
passes (``CommandRunner``: the pipeline's runs each command in the sandbox); nothing here runs a
command or opens a workspace path on the host.

A check the task itself gets wrong (an invalid regex, a non-numeric ``expected`` for ``number``,
an unknown type, no checks at all) raises ``BenchmarkError``: that is a bug in the benchmark,
not a failure of the agent.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from harnessevolve.core.atif import Trajectory
from harnessevolve.core.errors import BenchmarkError
from harnessevolve.core.tasks import Check, Task
from harnessevolve.core.text import quote
from harnessevolve.evaluate.command_runner import (
    CHECK_HOME,
    MAX_FILE_BYTES,
    MAX_OUTPUT_BYTES,
    MINIMAL_PATH,
    BashRun,
    CommandRunner,
    refuse_nul,
    run_process,
)

__all__ = [
    "CHECK_HOME",
    "MAX_FILE_BYTES",
    "MAX_OUTPUT_BYTES",
    "MINIMAL_PATH",
    "BashRun",
    "CommandRunner",
    "refuse_nul",
    "run_process",
]

NUMBER_TOLERANCE = 1e-9

# A sign counts only when it does not follow a word character, so "item-3" reads as 3, not -3.
_NUMBER = re.compile(r"(?:(?<![\w.])[-+])?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?")


@dataclass(frozen=True)
class CheckOutcome:
    """The result of one check: its position in the task's checker list, type, verdict, why."""

    index: int
    type: str
    ok: bool
    message: str
    score: float | None = None
    """A ``python`` check's own score in [0, 1]; None: 1 when ``ok``, else 0."""


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
    runner: CommandRunner,
    timeout_s: float = 30.0,
    trajectory: Trajectory | None = None,
) -> CheckResult:
    """Run every check of ``task`` against ``workspace`` and the submitted ``answer``.

    ``runner`` runs every program a check starts and reads every workspace file a check reads
    (``scoring.sandboxed_checks.sandboxed_runner``: in the sandbox); there is no host default.
    ``trajectory``: the run's, for ``python`` checks (they also read the tool state it holds)."""
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
            ok, message = _check_file(check, workspace, task_id=task.id, where=where, runner=runner)
        elif check.type == "command":
            ok, message = _check_command(check, workspace, answer, timeout_s=timeout_s, runner=runner)
        elif check.type == "effect":
            from harnessevolve.evaluate.effect_check import check_effect  # it builds on this module

            ok, message = check_effect(task, check, answer, timeout_s=timeout_s, runner=runner)
        elif check.type == "python":
            from harnessevolve.evaluate.python_check import check_python

            value, message = check_python(
                task, check, workspace, answer, trajectory, runner=runner, timeout_s=timeout_s
            )
            outcomes.append(CheckOutcome(index, check.type, value == 1.0, message, score=value))
            continue
        elif check.type == "judge":
            from harnessevolve.evaluate.judge_check import check_judge

            ok, message = check_judge(check, trajectory)
        else:
            raise BenchmarkError(
                f"unknown check type {check.type!r}",
                file=task.id,
                field=where,
                hint="check types are answer, file, command, effect, python and judge",
            )
        outcomes.append(CheckOutcome(index=index, type=check.type, ok=ok, message=message))
    score = sum(float(o.ok) if o.score is None else o.score for o in outcomes) / len(outcomes)
    return CheckResult(score=score, passed=score == 1.0, details=tuple(outcomes))


def check_rollout(
    task: Task, workspace: Path, trajectory: Trajectory, *, runner: CommandRunner, timeout_s: float = 30.0
) -> CheckResult:
    """``run_checks`` of one rollout: the answer it submitted (``extra.answer``) and its trajectory."""
    return run_checks(
        task,
        workspace,
        trajectory.extra.get("answer"),
        runner=runner,
        timeout_s=timeout_s,
        trajectory=trajectory,
    )


def first_number(text: str) -> float | None:
    """The first int or float written in ``text`` (``"There are 12 lines"`` -> 12.0), else None."""
    found = _NUMBER.search(text)
    return float(found.group()) if found else None


def _check_answer(check: Check, answer: str | None, *, task_id: str, where: str) -> tuple[bool, str]:
    if answer is None:
        return False, f"expected an answer ({check.match} {quote(check.expected)}), found none submitted"
    ok = _match(check, answer, in_file=False, task_id=task_id, where=where)
    return ok, _compared(check, answer, ok)


# Run in the sandbox by a ``file`` check: resolve the path, refuse what leaves the workspace or is
# not a regular file, then print at most MAX_FILE_BYTES + 1 bytes. Exit codes name the refusal.
_READ_FILE = """f=$(realpath -m -- "$HE_PATH" 2>/dev/null) || exit 8
case "$f/" in "$HE_ROOT"/*) ;; *) exit 4 ;; esac
[ -e "$f" ] || exit 3
[ -d "$f" ] && exit 5
[ -f "$f" ] || exit 6
[ "$(stat -c %s -- "$f")" -le @MAX@ ] || exit 7
exec head -c @MAX@ -- "$f"
""".replace("@MAX@", str(MAX_FILE_BYTES))
_READ_REFUSALS = {
    3: "does not exist",
    4: "resolves outside the workspace; not read",
    5: "is a directory",
    6: "is not a regular file (a FIFO, socket or device); not read",
    7: f"is larger than {MAX_FILE_BYTES} bytes; not read",
    8: "cannot be resolved (a symlink loop?); not read",
}


def _check_file(
    check: Check, workspace: Path, *, task_id: str, where: str, runner: CommandRunner
) -> tuple[bool, str]:
    root = os.path.realpath(workspace)
    env = {"PATH": MINIMAL_PATH, "LC_ALL": "C", "HE_PATH": check.path, "HE_ROOT": root}
    try:
        run = runner(_READ_FILE, Path(root), env, timeout_s=30.0, with_stderr=False)
    except OSError as exc:
        return False, f"could not read {check.path!r}: {exc}"
    if run.returncode in _READ_REFUSALS:
        return False, f"expected file {check.path!r}, but it {_READ_REFUSALS[run.returncode]}"
    if run.returncode != 0:
        return False, f"could not read {check.path!r} (exit {run.returncode})"
    content = run.output
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


def check_env(answer: str | None) -> dict[str, str]:
    """The environment of a ``command`` check (see the module docstring)."""
    return {
        "PATH": MINIMAL_PATH,
        "HOME": CHECK_HOME,
        "TMPDIR": CHECK_HOME,
        "LC_ALL": "C",
        "PYTHONNOUSERSITE": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
        "ANSWER": answer or "",
    }


def _check_command(
    check: Check, workspace: Path, answer: str | None, *, timeout_s: float, runner: CommandRunner
) -> tuple[bool, str]:
    try:
        run = runner(check.run, workspace, check_env(answer), timeout_s=timeout_s, read_only=check.mounts)
    except OSError as exc:
        return False, f"could not run {quote(check.run)}: {exc}"
    if run.returncode is None:
        return False, f"{quote(check.run)} timed out after {timeout_s:g}s (expected exit 0)"
    output = run.output.strip()
    if run.returncode == 0:
        return True, f"{quote(check.run)} exited 0"
    return False, f"{quote(check.run)}: expected exit 0, found exit {run.returncode}, output {quote(output)}"
