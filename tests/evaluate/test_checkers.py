"""run_checks: every check type and match mode, passing and failing, and the sandboxing rules."""

from __future__ import annotations

import dataclasses
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from harnessevolve.core.errors import BenchmarkError
from harnessevolve.core.tasks import Check, Task
from harnessevolve.core.text import MESSAGE_QUOTE_LIMIT
from harnessevolve.evaluate.checkers import (
    MINIMAL_PATH,
    CheckOutcome,
    CheckResult,
    first_number,
    run_checks,
)
from harnessevolve.scoring.sandboxed_checks import sandboxed_runner

RUNNER = sandboxed_runner()
"""Checks run programs and read files only in the sandbox (bubblewrap, installed by make install)."""


def task_with(*checks: Check) -> Task:
    return Task(id="t-01", instruction="do it", split="train", checks=checks)


def outcome(check: Check, workspace: Path, answer: str | None = None, **kwargs: float) -> CheckOutcome:
    result = run_checks(task_with(check), workspace, answer, runner=RUNNER, **kwargs)
    assert len(result.details) == 1
    assert result.passed is result.details[0].ok
    assert result.score == (1.0 if result.passed else 0.0)
    return result.details[0]


# --- answer checks ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("match", "expected", "answer", "ok"),
    [
        ("exact", "hello world", "  hello \n  world\t", True),
        ("exact", "hello world", "hello  world!", False),
        ("exact", "Maple", "maple", False),
        ("contains", "Blue", "the sky is BLUE today", True),
        ("contains", "blue", "the sky is grey", False),
        ("number", "12", "There are 12 lines.", True),
        ("number", "3", "3.0", True),
        ("number", "0.5", "+.5", True),
        ("number", "-4", "x=-4", True),
        ("number", "3", "item-3", True),
        ("number", "1e3", "1000 items", True),
        ("number", "12", "13 lines, not 12", False),
        ("number", "12", "twelve", False),
        ("number", "0.3", "0.30000001", False),
        ("regex", r"^id-\d{3}$", "id-042", True),
        ("regex", r"^id-\d{3}$", "id-42", False),
    ],
)
def test_answer_match_modes(tmp_path: Path, match: str, expected: str, answer: str, ok: bool) -> None:
    result = outcome(Check(type="answer", expected=expected, match=match), tmp_path, answer)
    assert result.ok is ok
    assert result.type == "answer"
    assert repr(expected) in result.message


def test_missing_answer_fails(tmp_path: Path) -> None:
    result = outcome(Check(type="answer", expected="x", match="contains"), tmp_path, None)
    assert not result.ok
    assert "none submitted" in result.message


def test_first_number() -> None:
    assert first_number("about -2.5 or 7") == -2.5
    assert first_number("v2 of 3") == 2.0
    assert first_number("none here") is None


def test_message_says_expected_and_found_and_is_truncated(tmp_path: Path) -> None:
    long_answer = "y" * 5000
    result = outcome(Check(type="answer", expected="x"), tmp_path, long_answer)
    assert not result.ok
    assert result.message.startswith("expected exact 'x', found 'yyy")
    assert result.message.endswith("...")
    assert len(result.message) < MESSAGE_QUOTE_LIMIT + 60


def test_score_is_fraction_of_checks(tmp_path: Path) -> None:
    task = task_with(
        Check(type="answer", expected="7", match="number"),
        Check(type="answer", expected="seven", match="contains"),
        Check(type="file", path="missing.txt", expected=""),
        Check(type="command", run="true"),
    )
    result = run_checks(task, tmp_path, "7", runner=RUNNER)
    assert isinstance(result, CheckResult)
    assert result.score == 0.5
    assert not result.passed
    assert [d.ok for d in result.details] == [True, False, False, True]
    assert [d.index for d in result.details] == [0, 1, 2, 3]
    assert [d.index for d in result.failures] == [1, 2]
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.score = 1.0  # type: ignore[misc]


# --- file checks -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("match", "expected", "content", "ok"),
    [
        ("exact", "line one\nline two", "line one\nline two\n\n", True),
        ("exact", "line one\nline two\n", "line one\nline two", True),
        ("exact", "line one\nline two", "line one\n line two\n", False),
        ("contains", "two", "line one\nline two\n", True),
        ("contains", "TWO", "line one\nline two\n", False),
        ("regex", r"(?m)^line two$", "line one\nline two\n", True),
        ("regex", r"^line two", "line one\nline two\n", False),
    ],
)
def test_file_match_modes(tmp_path: Path, match: str, expected: str, content: str, ok: bool) -> None:
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "result.txt").write_text(content)
    result = outcome(Check(type="file", path="out/result.txt", expected=expected, match=match), tmp_path)
    assert result.ok is ok
    assert result.message.startswith("out/result.txt: ")


def test_missing_file_and_directory_fail(tmp_path: Path) -> None:
    (tmp_path / "adir").mkdir()
    missing = outcome(Check(type="file", path="nope.txt", expected=""), tmp_path)
    assert not missing.ok
    assert "does not exist" in missing.message
    directory = outcome(Check(type="file", path="adir", expected=""), tmp_path)
    assert not directory.ok
    assert "is a directory" in directory.message


@pytest.mark.parametrize("path", ["../secret.txt", "sub/../../secret.txt"])
def test_file_path_escaping_the_workspace_fails(tmp_path: Path, path: str) -> None:
    workspace = tmp_path / "ws"
    (workspace / "sub").mkdir(parents=True)
    (tmp_path / "secret.txt").write_text("top secret\n")
    result = outcome(Check(type="file", path=path, expected="top secret"), workspace)
    assert not result.ok
    assert "outside the workspace" in result.message
    assert "top secret" not in result.message


def test_absolute_file_path_fails(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    outside = tmp_path / "secret.txt"
    outside.write_text("top secret\n")
    result = outcome(Check(type="file", path=str(outside), expected="top secret"), workspace)
    assert not result.ok
    assert "outside the workspace" in result.message


def test_symlink_escaping_the_workspace_fails(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (tmp_path / "secret.txt").write_text("top secret\n")
    (workspace / "link.txt").symlink_to(tmp_path / "secret.txt")
    (workspace / "linkdir").symlink_to(tmp_path)
    for path in ("link.txt", "linkdir/secret.txt"):
        result = outcome(Check(type="file", path=path, expected="top secret"), workspace)
        assert not result.ok, path
        assert "outside the workspace" in result.message


def test_symlink_inside_the_workspace_is_followed(tmp_path: Path) -> None:
    (tmp_path / "real.txt").write_text("hello\n")
    (tmp_path / "alias.txt").symlink_to(tmp_path / "real.txt")
    assert outcome(Check(type="file", path="alias.txt", expected="hello"), tmp_path).ok


def test_symlink_loop_fails(tmp_path: Path) -> None:
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    assert not outcome(Check(type="file", path="a", expected=""), tmp_path).ok


# --- command checks --------------------------------------------------------------------------


def test_command_exit_zero_passes_and_runs_in_workspace(tmp_path: Path) -> None:
    (tmp_path / "made.txt").write_text("x")
    result = outcome(Check(type="command", run="test -f made.txt && grep -q x made.txt"), tmp_path)
    assert result.ok
    assert "exited 0" in result.message


def test_command_nonzero_exit_fails_with_output(tmp_path: Path) -> None:
    result = outcome(Check(type="command", run="echo nope; exit 3"), tmp_path)
    assert not result.ok
    assert "found exit 3" in result.message
    assert "nope" in result.message


def test_command_sees_answer_and_minimal_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HARNESSEVOLVE_TEST_LEAK", "1")
    run = (
        '[ "$ANSWER" = "42 apples" ] && [ "$PATH" = "' + MINIMAL_PATH + '" ]'
        ' && [ -z "${HARNESSEVOLVE_TEST_LEAK:-}" ]'
    )
    assert outcome(Check(type="command", run=run), tmp_path, "42 apples").ok
    assert not outcome(Check(type="command", run=run), tmp_path, "41 apples").ok


def test_command_answer_is_empty_when_none_submitted(tmp_path: Path) -> None:
    run = '[ -z "$ANSWER" ] && env | grep -q "^ANSWER="'
    assert outcome(Check(type="command", run=run), tmp_path, None).ok


def test_command_timeout_fails_and_kills_the_group(tmp_path: Path) -> None:
    marker = f"he-check-sleeper-{uuid.uuid4().hex[:8]}"
    started = time.monotonic()
    run = f"(exec -a {marker} sleep 30) & sleep 30"
    result = outcome(Check(type="command", run=run), tmp_path, timeout_s=0.5)
    assert time.monotonic() - started < 5
    assert not result.ok
    assert "timed out after 0.5s" in result.message
    assert wait_gone(marker), "the background sleep outlived the timeout"


def wait_gone(marker: str, within_s: float = 3.0) -> bool:
    """True once no process on the host has ``marker`` in its command line."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        found = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True).stdout.strip()
        if not found:
            return True
        time.sleep(0.05)
    return False


def test_command_home_is_fresh_not_the_workspace(tmp_path: Path) -> None:
    """HOME of a check is the sandbox's private /tmp: nothing the agent put in the workspace is there."""
    (tmp_path / ".bashrc").write_text("echo planted\n")
    (tmp_path / ".local").mkdir()
    run = (
        '[ "$HOME" = /tmp ] && [ ! -e "$HOME/.bashrc" ] && [ ! -e "$HOME/.local" ]'
        f' && [ "$PYTHONNOUSERSITE" = 1 ] && [ "$PWD" = {tmp_path.resolve()} ] && [ -f .bashrc ]'
    )
    assert outcome(Check(type="command", run=run), tmp_path).ok


# --- bugs in the task itself -----------------------------------------------------------------


@pytest.mark.parametrize(
    "check",
    [
        Check(type="answer", expected="(unclosed", match="regex"),
        Check(type="answer", expected="twelve", match="number"),
        Check(type="file", path="a.txt", expected="1", match="number"),
        Check(type="answer", expected="x", match="fuzzy"),
        Check(type="script", run="true"),
    ],
)
def test_malformed_checks_raise_benchmark_error(tmp_path: Path, check: Check) -> None:
    (tmp_path / "a.txt").write_text("1")
    with pytest.raises(BenchmarkError) as caught:
        run_checks(task_with(check), tmp_path, "12", runner=RUNNER)
    assert caught.value.file == "t-01"
    assert caught.value.field is not None and caught.value.field.startswith("checker[0]")


def test_task_without_checks_raises(tmp_path: Path) -> None:
    with pytest.raises(BenchmarkError, match="no checks"):
        run_checks(task_with(), tmp_path, "x", runner=RUNNER)


def test_a_nul_byte_in_the_command_or_its_answer_fails_the_check_and_says_why(tmp_path: Path) -> None:
    """A model that copies a binary file's output into its call can submit a NUL byte: no program
    receives one (Popen raised ValueError and ended the whole run); the check fails, named."""
    found = outcome(Check(type="command", run='[ -n "$ANSWER" ]'), tmp_path, "ls\x00-la")
    assert not found.ok
    assert "$ANSWER holds a NUL byte" in found.message
    command = outcome(Check(type="command", run="true\x00"), tmp_path)
    assert not command.ok and "the command holds a NUL byte" in command.message
