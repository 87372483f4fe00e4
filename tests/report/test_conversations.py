"""The HTML report shows each kept trajectory as a conversation, linked from the task matrix, with
the first divergence marked; checked in a real browser."""

from __future__ import annotations

import html
import shutil
import subprocess
from pathlib import Path

import pytest
from run_args import run_args

from harnessevolve.cli.app import app
from harnessevolve.core.atif import ObservationResult, Step, ToolCall, Trajectory
from harnessevolve.core.conversation import conversation, transcript_text

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
SECOND_TURN = "Now add as many pears as there are apples in my cart."


@pytest.fixture(scope="module")
def multi_turn_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from typer.testing import CliRunner

    root = tmp_path_factory.mktemp("conv")
    cli = CliRunner()
    harness = root / "h"
    assert cli.invoke(app, ["init", str(harness), "--template", "tool-agent"]).exit_code == 0
    args = run_args(
        harness, "scripted/policy:gives_up", benchmark="tool-use-example", generations=1, batch_size=2
    )
    result = cli.invoke(app, args)
    assert result.exit_code in (0, 1), result.output
    return harness


def test_report_html_shows_the_user_turns_of_a_multi_turn_run(
    multi_turn_run: Path, tmp_path: Path, cli
) -> None:
    out = tmp_path / "r.html"
    result = cli.invoke(app, ["report", "-H", str(multi_turn_run), "--html", str(out)])
    assert result.exit_code == 0, result.output
    page = out.read_text()
    assert 'id="conversations"' in page
    assert html.escape(SECOND_TURN, quote=False) in page or SECOND_TURN in page
    assert 'href="#conv-' in page  # the task matrix links to the conversation


@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (apt-get install chromium)")
def test_chromium_renders_the_conversations(multi_turn_run: Path, tmp_path: Path, cli) -> None:
    out = tmp_path / "r.html"
    assert cli.invoke(app, ["report", "-H", str(multi_turn_run), "--html", str(out)]).exit_code == 0
    command = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom", out.as_uri()]
    dom = subprocess.run(command, capture_output=True, text=True, timeout=90, check=False)
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert dom.stdout.count('class="conversation"') >= 2
    assert SECOND_TURN in dom.stdout and 'class="turn user"' in dom.stdout


def test_conversation_entries_cut_long_results_and_skip_the_system_prompt() -> None:
    steps = (
        Step(1, "system", "PROMPT"),
        Step(2, "user", "hi"),
        Step(
            3,
            "agent",
            "looking",
            (ToolCall("c", "bash", {"command": "ls"}),),
            (ObservationResult("c", "x" * 50),),
        ),
    )
    entries = conversation(Trajectory("s", "a", "1", "m", steps), observation_limit=10)
    assert [e.kind for e in entries] == ["user", "agent", "call", "observation"]
    assert entries[2].text == 'bash({"command": "ls"})'
    assert entries[3].text == "x" * 10 and entries[3].cut == 40
    assert "PROMPT" not in transcript_text(Trajectory("s", "a", "1", "m", steps))
