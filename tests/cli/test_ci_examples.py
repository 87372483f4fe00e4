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
    assert "schedule" in doc["on"] and doc["jobs"]["evolve"]["permissions"]["contents"] == "write"
    commands = {}
    for env, step in steps(doc):
        for argv in harnessevolve_commands(step.get("run", ""), env):
            commands.setdefault(argv[0], []).append(parse_command_line(argv).params)
    assert commands["run"][0]["generations"] == 10 and commands["run"][0]["max_hours"] == 5.0
    assert any(p["html"] == Path("report.html") for p in commands["report"])
    runs = " ".join(step.get("run", "") for _, step in steps(doc))
    assert re.search(r"\bgit .*\bpush --set-upstream origin\b", re.sub(r"\\\n\s*", " ", runs))
    upload = next(
        step for _, step in steps(doc) if step.get("uses", "").startswith("actions/upload-artifact")
    )
    assert "report.html" in upload["with"]["path"]


def test_the_pr_gate_writes_junit_and_markdown_and_comments() -> None:
    doc = load(CI_DIR / "pr-gate.yml")
    assert "pull_request" in doc["on"] and doc["jobs"]["gate"]["permissions"]["pull-requests"] == "write"
    gates = [
        parse_command_line(argv).params
        for env, step in steps(doc)
        for argv in harnessevolve_commands(step.get("run", ""), env)
        if argv[0] == "gate"
    ]
    assert len(gates) == 1 and gates[0]["junit"] and gates[0]["markdown"] == Path("gate-summary.md")
    comment = next(step for _, step in steps(doc) if step.get("uses", "").startswith("actions/github-script"))
    assert "gate-summary.md" in comment["with"]["script"] and "createComment" in comment["with"]["script"]


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_user_namespaces_are_allowed_right_after_installing_bubblewrap(path: Path) -> None:
    """GitHub's ubuntu-24.04 runners restrict unprivileged user namespaces (AppArmor): bwrap fails
    with "setting up uid map: Permission denied" unless a step lifts it, before anything runs."""
    runs = [step.get("run", "") for _, step in steps(load(path))]
    install = next(i for i, run in enumerate(runs) if "install -y -qq bubblewrap" in run)
    lift = runs[install + 1]
    assert "sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0" in lift
    assert "bwrap " in lift  # and a smoke test, so a broken sandbox fails this step
    first_use = next(i for i, run in enumerate(runs) if re.search(r"^\s*harnessevolve ", run, re.MULTILINE))
    assert install < first_use


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_pip_and_the_models_are_cached_before_the_install(path: Path) -> None:
    listed = [step for _, step in steps(load(path))]
    caches = {
        step["with"]["path"]: i
        for i, step in enumerate(listed)
        if step.get("uses", "").startswith("actions/cache@")
    }
    assert set(caches) == {"~/.cache/pip", "~/.cache/harnessevolve/models"}
    install = next(i for i, step in enumerate(listed) if "pip install" in step.get("run", ""))
    assert all(i < install for i in caches.values())
    for step in listed:
        if step.get("uses", "").startswith("actions/cache@"):
            assert "${{ runner.os }}" in step["with"]["key"] and step["with"]["restore-keys"]
            assert "steps.keys.outputs" in step["with"]["key"]


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_actions_are_pinned_and_scripts_take_no_expressions(path: Path) -> None:
    """What `make lint`'s zizmor checks too: a hash per action, no ${{ }} spliced into a script."""
    for _, step in steps(load(path)):
        if "uses" in step:
            assert re.fullmatch(r"[\w./-]+@[0-9a-f]{40}", step["uses"]), step["uses"]
        assert "${{" not in step.get("run", ""), step["run"]


def test_the_pr_gate_runs_on_benchmark_changes_too() -> None:
    doc = load(CI_DIR / "pr-gate.yml")
    paths = doc["on"]["pull_request"]["paths"]
    assert f"{doc['env']['HARNESS_DIR']}/**" in paths and f"{doc['env']['BENCHMARK']}/**" in paths


def test_the_overnight_control_cost_and_switch_are_documented() -> None:
    text = (CI_DIR / "overnight-run.yml").read_text()
    assert "best-of-k" in text and "NEW rollouts" in text and "--control-k 0" in text
    readme = (CI_DIR / "README.md").read_text()
    assert "--control-k 0" in readme and "apparmor_restrict_unprivileged_userns=0" in readme
    parse_command_line(["report", "--harness", "h", "--final", "--control-k", "0"])


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
