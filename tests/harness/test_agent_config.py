"""The agent: section and the two agent templates through ``init`` and ``validate``: every bad input is
one line naming the file and field, exit 2; the quality gate refuses edits that break the agent."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import pytest
import yaml

from harnessevolve.cli.app import app
from harnessevolve.gate.config import QualityConfig
from harnessevolve.gate.quality import quality_gate
from harnessevolve.harness.load import load_harness, read_files

HARNESSES = Path(__file__).parents[2] / "harnesses"
HAS_MINI = importlib.util.find_spec("minisweagent") is not None


def copy(tmp_path: Path, template: str) -> Path:
    root = tmp_path / template
    shutil.copytree(HARNESSES / template, root)
    return root


def edit_yaml(path: Path, change) -> None:
    doc = yaml.safe_load(path.read_text())
    change(doc)
    path.write_text(yaml.safe_dump(doc, sort_keys=False))


def invalid(cli, root: Path) -> str:
    result = cli.invoke(app, ["validate", str(root)])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    return result.output


@pytest.mark.parametrize("template", ["python-agent", "mini-swe-agent"])
def test_init_and_validate_each_agent_template(tmp_path: Path, cli, template: str) -> None:
    if template == "mini-swe-agent" and not HAS_MINI:
        pytest.skip("needs the agents extra")
    target = tmp_path / "h"
    assert cli.invoke(app, ["init", str(target), "--template", template]).exit_code == 0
    result = cli.invoke(app, ["validate", str(target)])
    assert result.exit_code == 0, result.output
    assert load_harness(target).agent.kind == ("command" if template == "python-agent" else "mini-swe-agent")


def test_init_lists_the_templates(tmp_path: Path, cli) -> None:
    result = cli.invoke(app, ["init", "--list-templates"])
    assert result.exit_code == 0, result.output
    rows = [
        [cell.strip() for cell in line.split("│")[1:3]] for line in result.output.splitlines() if "│" in line
    ]
    for pair in (
        ["shell-agent", "builtin"],
        ["python-agent", "command"],
        ["mini-swe-agent", "mini-swe-agent"],
    ):
        assert pair in rows, result.output
    bad = cli.invoke(app, ["init", str(tmp_path / "x"), "--template", "nope"])
    assert bad.exit_code == 2 and "python-agent" in bad.output and "mini-swe-agent" in bad.output


def test_unknown_agent_kind(tmp_path: Path, cli) -> None:
    root = copy(tmp_path, "python-agent")
    edit_yaml(root / "harness.yaml", lambda d: d["agent"].update(kind="no-such-runner"))
    out = invalid(cli, root)
    assert "harness.yaml" in out and "agent.kind" in out and "no-such-runner" in out


@pytest.mark.parametrize(
    ("command", "field", "words"),
    [
        (["no-such-agent-program"], "agent.command[0]", "not found or not executable"),
        (["python", "/harness/missing.py"], "agent.command[1]", "missing.py does not exist"),
        (["/harness/agent.py"], "agent.command[0]", "is not executable"),
    ],
    ids=["missing-program", "missing-harness-file", "not-executable"],
)
def test_bad_agent_command(tmp_path: Path, cli, command, field, words) -> None:
    root = copy(tmp_path, "python-agent")
    (root / "agent.py").chmod(0o644)
    edit_yaml(root / "harness.yaml", lambda d: d["agent"].update(command=command))
    out = invalid(cli, root)
    assert "harness.yaml" in out and field in out and words in out


def test_command_kind_needs_a_command(tmp_path: Path, cli) -> None:
    root = copy(tmp_path, "python-agent")
    edit_yaml(root / "harness.yaml", lambda d: d["agent"].pop("command"))
    out = invalid(cli, root)
    assert "agent" in out and "command" in out


def test_agent_code_must_compile(tmp_path: Path, cli) -> None:
    root = copy(tmp_path, "python-agent")
    (root / "agent.py").write_text((root / "agent.py").read_text() + "\ndef broken(:\n")
    out = invalid(cli, root)
    assert "agent.py" in out and "syntax error" in out.lower() and "line" in out


BAD_MINI = [
    ("agent: [unclosed\n", "mini.yaml", "invalid YAML"),
    ("environment: {}\n", "mini.yaml", "no 'agent' mapping"),
    ("agent: {system_template: hi}\n", "agent.instance_template", "AgentConfig"),
    ("agent: {system_template: hi, instance_template: x, step_limit: many}\n", "agent.step_limit", "integer"),
    (
        "agent: {system_template: 'hi {{ task', instance_template: x}\n",
        "system_template",
        "TemplateSyntaxError",
    ),
    (
        "agent: {system_template: '{{ no_such_var }}', instance_template: x}\n",
        "agent.system_template",
        "undefined",
    ),
    (
        "agent: {system_template: hi, instance_template: x}\nmodel: {observation_template: '{% if %}'}\n",
        "model.observation_template",
        "TemplateSyntaxError",
    ),
    (
        "agent: {system_template: \"{{ ''.__class__.__mro__ }}\", instance_template: x}\n",
        "agent.system_template",
        "SecurityError",
    ),
]


@pytest.mark.skipif(not HAS_MINI, reason="needs the agents extra")
@pytest.mark.parametrize(("text", "field", "words"), BAD_MINI, ids=lambda v: None)
def test_bad_mini_swe_agent_config(tmp_path: Path, cli, text: str, field: str, words: str) -> None:
    root = copy(tmp_path, "mini-swe-agent")
    (root / "mini.yaml").write_text(text)
    out = invalid(cli, root)
    assert "mini.yaml" in out and field in out and words in out, out


@pytest.mark.skipif(not HAS_MINI, reason="needs the agents extra")
def test_mini_config_file_missing(tmp_path: Path, cli) -> None:
    root = copy(tmp_path, "mini-swe-agent")
    (root / "mini.yaml").unlink()
    out = invalid(cli, root)
    assert "harness.yaml" in out and "agent.config" in out


@pytest.mark.skipif(not HAS_MINI, reason="needs the agents extra")
@pytest.mark.parametrize(
    ("old", "new", "words"),
    [
        ("    Task: {{task}}\n", "    Task: {{task}\n", "TemplateSyntaxError"),
        ("  step_limit: 6\n", "  step_limit: [6\n", "invalid YAML"),
    ],
    ids=["jinja", "yaml"],
)
def test_quality_gate_refuses_an_edit_that_breaks_the_mini_config(tmp_path: Path, old, new, words) -> None:
    root = copy(tmp_path, "mini-swe-agent")
    before = read_files(root)
    text = (root / "mini.yaml").read_text()
    assert old in text
    (root / "mini.yaml").write_text(text.replace(old, new))
    verdict = quality_gate(root, before, ("mini.yaml",), QualityConfig())
    assert not verdict.passed and "mini.yaml" in verdict.reason and words in verdict.reason


def test_quality_gate_refuses_agent_code_that_does_not_compile(tmp_path: Path) -> None:
    root = copy(tmp_path, "python-agent")
    before = read_files(root)
    code = (root / "agent.py").read_text().replace("def main() -> int:", "def main( -> int:")
    (root / "agent.py").write_text(code)
    verdict = quality_gate(root, before, ("agent.py",), QualityConfig())
    assert not verdict.passed and "agent.py" in verdict.reason
