"""The quality gate's code check: changed Python compiles, then loads in the sandbox (the smoke run,
never in this process) within a timeout. A code edit to the python-agent template's agent.py
passes; a syntax error, a crash at load and a hang are each rejected with the reason."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from harnessevolve.gate.quality import SmokeOutcome, code_gate
from harnessevolve.harness.load import read_files
from harnessevolve.judging.code_smoke import SandboxedCodeSmoke
from harnessevolve.sandbox.base import make_sandbox

PY_AGENT = Path(__file__).parents[2] / "harnesses" / "python-agent"
needs_bwrap = pytest.mark.skipif(not os.access("/usr/bin/bwrap", os.X_OK), reason="needs bubblewrap")
MAIN = "def main() -> int:\n"


@pytest.fixture
def candidate(tmp_path: Path):
    """(before, candidate folder, edit(old, new)): a copy of python-agent whose agent.py an edit changes."""
    root = tmp_path / "candidate"
    shutil.copytree(PY_AGENT, root)
    before = read_files(root)

    def edit(old: str, new: str) -> None:
        text = before["agent.py"]
        assert text.count(old) == 1
        (root / "agent.py").write_text(text.replace(old, new))

    return before, root, edit


@needs_bwrap
def test_a_working_code_edit_passes_the_sandboxed_smoke_run(candidate) -> None:
    before, root, edit = candidate
    edit(MAIN, "def nudge() -> str:\n    return NO_TOOL_NUDGE.upper()\n\n\n" + MAIN)
    verdict = code_gate(root, before, SandboxedCodeSmoke(make_sandbox("bwrap")))
    assert verdict.passed, verdict.reason
    assert verdict.gate == "code" and verdict.numbers["python"] == ["agent.py"]
    assert verdict.numbers["smoke_returncode"] == 0


def test_a_syntax_error_is_rejected_before_anything_runs(candidate) -> None:
    before, root, edit = candidate
    edit(MAIN, "def main( -> int:\n")

    def never(*_args) -> SmokeOutcome:
        raise AssertionError("a file that does not compile is never run")

    verdict = code_gate(root, before, never)
    assert not verdict.passed
    assert verdict.reason.startswith("agent.py does not compile: ")
    line = before["agent.py"][: before["agent.py"].index(MAIN)].count("\n") + 1
    assert verdict.reason.endswith(f"(line {line})")  # the line of `def main(`


@needs_bwrap
def test_a_crash_at_load_is_rejected_with_the_traceback(candidate) -> None:
    before, root, edit = candidate
    edit("import httpx\n", "import httpx\nimport no_such_module_anywhere\n")
    verdict = code_gate(root, before, SandboxedCodeSmoke(make_sandbox("bwrap")))
    assert not verdict.passed and "failed (exit 1)" in verdict.reason
    assert "No module named 'no_such_module_anywhere'" in verdict.reason


@needs_bwrap
def test_a_hanging_smoke_run_is_a_rejection(candidate) -> None:
    before, root, edit = candidate
    edit("import httpx\n", "import httpx\nwhile True:\n    pass\n")
    verdict = code_gate(root, before, SandboxedCodeSmoke(make_sandbox("bwrap")), timeout_s=2)
    assert not verdict.passed
    assert verdict.reason == "the smoke run of agent.py did not finish in 2s"
    assert verdict.numbers["smoke_returncode"] is None


@needs_bwrap
def test_the_smoke_run_cannot_touch_the_host(candidate, tmp_path: Path) -> None:
    """It runs in the sandbox: a write outside its scratch workspace fails, and so the smoke run."""
    before, root, edit = candidate
    target = tmp_path / "written-by-the-smoke-run"
    edit("import httpx\n", f"import httpx\nopen({str(target)!r}, 'w').write('x')\n")
    verdict = code_gate(root, before, SandboxedCodeSmoke(make_sandbox("bwrap")))
    assert not verdict.passed and not target.exists()


def test_no_python_changed_passes_at_once(candidate) -> None:
    before, root, _ = candidate
    (root / "prompts" / "system.md").write_text("Be brief.\n")
    verdict = code_gate(root, before, None)
    assert verdict.passed and verdict.reason == "no Python changed"
