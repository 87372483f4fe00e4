"""Effect checks run the agent's submitted command; the pipeline runs it in the sandbox."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from check_runners import HostRunner

from harnessevolve.core.tasks import Check, Task
from harnessevolve.evaluate.checkers import run_checks
from harnessevolve.pipeline.sandboxed_checks import sandboxed_runner

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")


def effect_task() -> Task:
    return Task(
        id="say-hi",
        instruction="print hi",
        split="train",
        checks=(Check(type="effect", run="echo hi"),),
        setup_files={"notes.txt": "x\n"},
    )


def test_a_hostile_submitted_command_cannot_touch_the_host(tmp_path: Path) -> None:
    canary = tmp_path / "host-canary"
    escaped = tmp_path / "escaped"
    canary.write_text("keep me\n")
    answer = f"echo pwned > {escaped}; rm -f {canary}; echo hi"
    run_checks(effect_task(), tmp_path, answer, runner=sandboxed_runner())
    assert not escaped.exists() and canary.read_text() == "keep me\n"


def test_the_same_command_unsandboxed_would_have_escaped(tmp_path: Path) -> None:
    """What the sandboxed runner prevents (the host runner is what checks used before)."""
    escaped = tmp_path / "escaped"
    run_checks(effect_task(), tmp_path, f"echo pwned > {escaped}; echo hi", runner=HostRunner())
    assert escaped.exists()


def test_a_correct_command_passes_in_the_sandbox(tmp_path: Path) -> None:
    result = run_checks(effect_task(), tmp_path, "echo hi", runner=sandboxed_runner())
    assert result.passed, result.details
