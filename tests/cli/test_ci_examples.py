"""The CI examples in docs/ci/ stay valid: well-formed workflows whose every `harnessevolve ...`
command line is accepted by the real command-line parser (options, types, ranges)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import typer.main
import yaml

from harnessevolve.cli.app import app

CI_DIR = Path(__file__).parents[2] / "docs" / "ci"
WORKFLOWS = sorted(CI_DIR.glob("*.yml"))
SHELL_OPERATORS = {"|", "||", "&&", ";", ">", ">>", "2>&1", "&"}


def load(path: Path) -> dict[str, Any]:
    doc = yaml.safe_load(path.read_text())
    doc["on"] = doc.pop(True, doc.get("on"))  # YAML 1.1 reads a bare `on` key as true
    return doc


def steps(doc: dict[str, Any]) -> list[tuple[dict[str, str], dict[str, Any]]]:
    """(env in force, step) for every step of every job."""
    out = []
    for job in doc["jobs"].values():
        for step in job["steps"]:
            env = {**doc.get("env", {}), **job.get("env", {}), **step.get("env", {})}
            out.append(({k: str(v) for k, v in env.items()}, step))
    return out


def harnessevolve_commands(script: str, env: dict[str, str]) -> list[list[str]]:
    """Each `harnessevolve` invocation in a shell script, as argv after the program name, with
    $VARS from the workflow's env substituted and ${{ expressions }} replaced by a placeholder."""
    script = re.sub(r"\\\n\s*", " ", script)
    script = re.sub(r"\$\{\{[^}]*\}\}", "EXPR", script)
    script = re.sub(r"\$\{?([A-Z_][A-Z0-9_]*)\}?", lambda m: env.get(m.group(1), m.group(0)), script)
    commands = []
    for line in script.splitlines():
        words = shlex.split(line, comments=True)
        start = 0
        while start < len(words):  # one simple command at a time, split at shell operators
            end = next((i for i in range(start, len(words)) if words[i] in SHELL_OPERATORS), len(words))
            if words[start] == "harnessevolve":
                commands.append(words[start + 1 : end])
            start = end + 1
    return commands


def parse_command_line(argv: list[str]) -> typer.Context:
    """Parse ``argv`` like `harnessevolve argv...` would, down to the subcommand, without running it
    (typer's click: options, types and ranges are checked; the command's function is not called)."""
    command = typer.main.get_command(app)
    name = "harnessevolve"
    while hasattr(command, "commands"):
        assert argv, f"`{name}` needs a subcommand"
        sub = command.get_command(typer.Context(command), argv[0])
        assert sub is not None, f"`{name}` has no subcommand {argv[0]!r}"
        name, command, argv = f"{name} {argv[0]}", sub, argv[1:]
    return command.make_context(name, list(argv))


def test_the_examples_exist() -> None:
    assert {p.name for p in WORKFLOWS} >= {"overnight-run.yml", "pr-gate.yml"}


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_every_harnessevolve_command_line_parses(path: Path) -> None:
    doc = load(path)
    assert doc["name"] and doc["on"] and doc["jobs"]
    found = []
    for env, step in steps(doc):
        assert "uses" in step or "run" in step, step
        for argv in harnessevolve_commands(step.get("run", ""), env):
            context = parse_command_line(argv)
            found.append((context.info_name, context.params))
    assert found, f"{path.name} runs no harnessevolve command"


def test_the_overnight_run_evolves_pushes_and_keeps_the_report() -> None:
    doc = load(CI_DIR / "overnight-run.yml")
    assert "schedule" in doc["on"] and doc["permissions"]["contents"] == "write"
    commands = {}
    for env, step in steps(doc):
        for argv in harnessevolve_commands(step.get("run", ""), env):
            commands.setdefault(argv[0], []).append(parse_command_line(argv).params)
    assert commands["run"][0]["generations"] == 10 and commands["run"][0]["max_hours"] == 5.0
    assert any(p["html"] == Path("report.html") for p in commands["report"])
    runs = " ".join(step.get("run", "") for _, step in steps(doc))
    assert "git push" in runs
    upload = next(
        step for _, step in steps(doc) if step.get("uses", "").startswith("actions/upload-artifact")
    )
    assert "report.html" in upload["with"]["path"]


def test_the_pr_gate_writes_junit_and_markdown_and_comments() -> None:
    doc = load(CI_DIR / "pr-gate.yml")
    assert "pull_request" in doc["on"] and doc["permissions"]["pull-requests"] == "write"
    gates = [
        parse_command_line(argv).params
        for env, step in steps(doc)
        for argv in harnessevolve_commands(step.get("run", ""), env)
        if argv[0] == "gate"
    ]
    assert len(gates) == 1 and gates[0]["junit"] and gates[0]["markdown"] == Path("gate-summary.md")
    comment = next(step for _, step in steps(doc) if step.get("uses", "").startswith("actions/github-script"))
    assert "gate-summary.md" in comment["with"]["script"] and "createComment" in comment["with"]["script"]


def test_the_checker_rejects_what_the_cli_rejects() -> None:
    with pytest.raises(typer.TyperException, match="No such option"):
        parse_command_line(["run", "--harness", "h", "--benchmark", "b", "--no-such-option"])
    with pytest.raises(typer.BadParameter):
        parse_command_line(["run", "--harness", "h", "--benchmark", "b", "--generations", "0"])
    with pytest.raises(AssertionError, match="no subcommand"):
        parse_command_line(["evolve"])
    assert harnessevolve_commands('harnessevolve status -H "$D" || echo', {"D": "x y"}) == [
        ["status", "-H", "x y"]
    ]
