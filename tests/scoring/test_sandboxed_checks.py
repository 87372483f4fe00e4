"""Effect checks run the agent's submitted command; the pipeline runs it in the sandbox."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from check_runners import HostRunner, effect_task

from harnessevolve.evaluate.checkers import run_checks
from harnessevolve.sandbox.base import BwrapSandbox, SandboxLimits
from harnessevolve.scoring.sandboxed_checks import sandboxed_runner

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")


SAY_HI = effect_task("say-hi", "print hi", "echo hi", {"notes.txt": "x\n"})


def test_a_hostile_submitted_command_cannot_touch_the_host(tmp_path: Path) -> None:
    canary = tmp_path / "host-canary"
    escaped = tmp_path / "escaped"
    canary.write_text("keep me\n")
    answer = f"echo pwned > {escaped}; rm -f {canary}; echo hi"
    run_checks(SAY_HI, tmp_path, answer, runner=sandboxed_runner())
    assert not escaped.exists() and canary.read_text() == "keep me\n"


def test_the_same_command_unsandboxed_would_have_escaped(tmp_path: Path) -> None:
    """What the sandboxed runner prevents (the host runner is what checks used before)."""
    escaped = tmp_path / "escaped"
    run_checks(SAY_HI, tmp_path, f"echo pwned > {escaped}; echo hi", runner=HostRunner())
    assert escaped.exists()


def test_a_correct_command_passes_in_the_sandbox(tmp_path: Path) -> None:
    result = run_checks(SAY_HI, tmp_path, "echo hi", runner=sandboxed_runner())
    assert result.passed, result.details


FLOOD = "for i in 1 2 3; do head -c 20M /dev/zero > f$i || echo $((40 + 2))-full; done; echo hi"
"""Prints ``42-full`` (text the command itself does not contain) when a write fails."""


@pytest.mark.skipif(os.geteuid() != 0, reason="the effect check's scratch folder is a tmpfs only as root")
def test_a_submitted_disk_flood_is_bounded_like_a_workspace(tmp_path: Path) -> None:
    runner = sandboxed_runner(BwrapSandbox(SandboxLimits(workspace_mb=32)))
    result = run_checks(SAY_HI, tmp_path, FLOOD, runner=runner)
    assert not result.passed and "42-full" in result.details[0].message, result.details


def test_positive_control_on_the_host_the_same_flood_is_not_bounded(tmp_path: Path) -> None:
    result = run_checks(SAY_HI, tmp_path, FLOOD, runner=HostRunner())
    assert "42-full" not in result.details[0].message, result.details
