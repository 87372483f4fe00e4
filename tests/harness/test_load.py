"""load_harness and validate_harness on the shell-agent template and on broken variants of it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from harnessevolve.core import paths
from harnessevolve.core.errors import HarnessError
from harnessevolve.harness.load import load_harness, validate_harness
from harnessevolve.harness.model import LoopSettings


@pytest.fixture
def harness_dir(tmp_path: Path) -> Path:
    dest = tmp_path / "shell-agent"
    shutil.copytree(paths.builtin_dir("harnesses") / "shell-agent", dest)
    return dest


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, f"{old!r} not in {path}"
    path.write_text(text.replace(old, new))


def load_error(root: Path) -> HarnessError:
    with pytest.raises(HarnessError) as info:
        load_harness(root)
    return info.value


# --- the template --------------------------------------------------------------------------------------


def test_template_loads(harness_dir: Path) -> None:
    harness = load_harness(harness_dir)
    assert harness.name == "shell-agent"
    assert harness.model == "local/smollm2-135m"
    assert [t.name for t in harness.tools] == ["bash", "read_file", "write_file", "submit"]
    assert harness.tool("submit").builtin == "submit"
    assert harness.tool("read_file").parameters["required"] == ["path"]
    assert harness.tool("nope") is None
    assert harness.loop == LoopSettings(
        max_steps=5,
        temperature=0.0,
        max_tokens=128,
        tool_output_limit=1500,
        command_timeout_s=20,
        json_grammar=False,
        stop_on_repeat=2,
    )
    assert harness.editable == ("prompts/*.md", "skills/*/SKILL.md", "tools/*.yaml", "harness.yaml#loop")
    assert harness.skills == ()
    assert harness.system_prompt == (harness_dir / "prompts" / "system.md").read_text()
    assert {"harness.yaml", "prompts/system.md", "prompts/examples.md", "tools/bash.yaml"} <= set(
        harness.files
    )
    assert harness.assembled_prompt().startswith(harness.system_prompt.strip())
    assert validate_harness(harness_dir) == []


def test_run_state_and_git_are_not_harness_files(harness_dir: Path) -> None:
    (harness_dir / ".harnessevolve" / "runs").mkdir(parents=True)
    (harness_dir / ".harnessevolve" / "runs" / "ledger.jsonl").write_text("{}\n")
    (harness_dir / ".git").mkdir()
    (harness_dir / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    files = load_harness(harness_dir).files
    assert not any(p.startswith((".harnessevolve/", ".git/")) for p in files)


def test_content_hash_follows_the_files(harness_dir: Path) -> None:
    first = load_harness(harness_dir).content_hash()
    assert load_harness(harness_dir).content_hash() == first
    (harness_dir / "prompts" / "system.md").write_text("Different.\n")
    assert load_harness(harness_dir).content_hash() != first


def test_skill_and_examples_appear_in_the_assembled_prompt(harness_dir: Path) -> None:
    skill = harness_dir / "skills" / "count-lines" / "SKILL.md"
    skill.parent.mkdir(parents=True)
    skill.write_text("---\nname: count-lines\ndescription: Count lines of a file.\n---\nUse wc -l < FILE.\n")
    (harness_dir / "prompts" / "examples.md").write_text("## Example\nTask: t\n")
    harness = load_harness(harness_dir)
    assert [s.name for s in harness.skills] == ["count-lines"]
    assert harness.skills[0].body.strip() == "Use wc -l < FILE."
    prompt = harness.assembled_prompt()
    assert "# Skills" in prompt and "## count-lines" in prompt and "Use wc -l < FILE." in prompt
    assert prompt.index("# Skills") < prompt.index("# Examples") < prompt.index("## Example\nTask: t")


# --- broken variants ----------------------------------------------------------------------------------


def test_not_a_harness_directory(tmp_path: Path) -> None:
    error = load_error(tmp_path)
    assert "no harness.yaml" in error.message


def test_missing_tool_file(harness_dir: Path) -> None:
    (harness_dir / "tools" / "write_file.yaml").unlink()
    error = load_error(harness_dir)
    assert (error.file, error.field) == ("harness.yaml", "tools")
    assert "tools/write_file.yaml" in error.message
    problems = validate_harness(harness_dir)
    assert len(problems) == 1 and problems[0].field == "tools"


def test_bad_yaml_names_the_line(harness_dir: Path) -> None:
    edit(harness_dir / "harness.yaml", "  max_steps: 5\n", "  max_steps: 5: 7\n")
    line = (harness_dir / "harness.yaml").read_text().splitlines().index("  max_steps: 5: 7") + 1
    error = load_error(harness_dir)
    assert error.message.startswith("invalid YAML")
    assert error.file is not None and error.file.endswith("harness.yaml")
    assert error.field == f"line {line}"
    problems = validate_harness(harness_dir)
    assert len(problems) == 1 and problems[0].field == error.field


def test_schema_violation_names_the_json_path(harness_dir: Path) -> None:
    edit(harness_dir / "harness.yaml", "max_steps: 5", "max_steps: 0")
    error = load_error(harness_dir)
    assert (error.file, error.field) == ("harness.yaml", "loop.max_steps")


def test_validate_lists_every_schema_violation(harness_dir: Path) -> None:
    edit(harness_dir / "harness.yaml", "max_steps: 5", "max_steps: 0")
    edit(harness_dir / "harness.yaml", "temperature: 0.0", "temperature: hot")
    edit(harness_dir / "harness.yaml", "editable:", "colour: blue\neditable:")
    problems = validate_harness(harness_dir)
    fields = {p.field for p in problems}
    assert {"loop.max_steps", "loop.temperature", "colour"} <= fields  # the unknown key itself
    assert all(p.file == "harness.yaml" for p in problems)
    assert any("colour" in p.message for p in problems)
    assert str(problems[0]).startswith("harness.yaml: ")


def test_tool_schema_violation(harness_dir: Path) -> None:
    edit(harness_dir / "tools" / "bash.yaml", "builtin: bash", "builtin: python")
    error = load_error(harness_dir)
    assert error.file == "tools/bash.yaml"


def test_tool_name_must_match_its_file(harness_dir: Path) -> None:
    edit(harness_dir / "tools" / "bash.yaml", "name: bash", "name: shell")
    error = load_error(harness_dir)
    assert (error.file, error.field) == ("tools/bash.yaml", "name")


def test_required_argument_must_be_a_property(harness_dir: Path) -> None:
    edit(harness_dir / "tools" / "read_file.yaml", "required: [path]", "required: [path, encoding]")
    error = load_error(harness_dir)
    assert (error.file, error.field) == ("tools/read_file.yaml", "parameters.required")
    assert "encoding" in error.message


def test_a_harness_without_submit_is_refused(harness_dir: Path) -> None:
    edit(
        harness_dir / "harness.yaml",
        "tools: [bash, read_file, write_file, submit]",
        "tools: [bash, read_file]",
    )
    error = load_error(harness_dir)
    assert error.field == "tools" and "submit" in error.message


def test_answer_from_must_name_a_tool_of_the_harness(harness_dir: Path) -> None:
    edit(harness_dir / "harness.yaml", "loop:\n", "loop:\n  answer_from: shell.command\n")
    error = load_error(harness_dir)
    assert (error.file, error.field) == ("harness.yaml", "loop.answer_from")
    assert "'shell'" in error.message and "bash" in error.hint
    edit(harness_dir / "harness.yaml", "answer_from: shell.command", "answer_from: bash.command")
    assert load_harness(harness_dir).loop.answer_from == "bash.command"
    edit(harness_dir / "harness.yaml", "loop:\n", "loop:\n  answer_check: shell.command\n")
    error = load_error(harness_dir)
    assert (error.file, error.field) == ("harness.yaml", "loop.answer_check")


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("name: count\ndescription: x\n", "missing front matter"),
        ("---\nname: count\ndescription: x\nbody without a closing fence\n", "not closed"),
        ("---\nname: [count\n---\nbody\n", "invalid YAML"),
    ],
)
def test_skill_with_bad_front_matter(harness_dir: Path, text: str, words: str) -> None:
    skill = harness_dir / "skills" / "count" / "SKILL.md"
    skill.parent.mkdir(parents=True)
    skill.write_text(text)
    error = load_error(harness_dir)
    assert (error.file, error.field) == ("skills/count/SKILL.md", "(front matter)")
    assert words in error.message


def test_skill_front_matter_schema_and_name(harness_dir: Path) -> None:
    skill = harness_dir / "skills" / "count" / "SKILL.md"
    skill.parent.mkdir(parents=True)
    skill.write_text("---\nname: count\n---\nbody\n")
    assert load_error(harness_dir).file == "skills/count/SKILL.md"
    skill.write_text("---\nname: other\ndescription: d\n---\nbody\n")
    error = load_error(harness_dir)
    assert (error.file, error.field) == ("skills/count/SKILL.md", "name")


def test_hook_with_a_python_syntax_error(harness_dir: Path) -> None:
    hook = harness_dir / "hooks" / "before_step.py"
    hook.parent.mkdir()
    hook.write_text("import os\n\ndef before_step(step:\n    return step\n")
    error = load_error(harness_dir)
    assert error.file == "hooks/before_step.py"
    assert error.field == "line 3"
    assert error.message.startswith("Python syntax error")


def test_a_valid_hook_loads(harness_dir: Path) -> None:
    hook = harness_dir / "hooks" / "before_step.py"
    hook.parent.mkdir()
    hook.write_text("def before_step(step):\n    return step\n")
    assert "hooks/before_step.py" in load_harness(harness_dir).files


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("system_prompt", "../outside.md"),
        ("system_prompt", "/etc/hostname"),
        ("examples", "prompts/../../outside.md"),
    ],
)
def test_path_escaping_the_harness(harness_dir: Path, field: str, value: str) -> None:
    (harness_dir.parent / "outside.md").write_text("secret\n")
    old = {"system_prompt": "system_prompt: prompts/system.md", "examples": "examples: prompts/examples.md"}[
        field
    ]
    edit(harness_dir / "harness.yaml", old, f"{field}: {value}")
    error = load_error(harness_dir)
    assert (error.file, error.field) == ("harness.yaml", field)
    assert "must stay inside the harness" in error.message


def test_missing_system_prompt_file(harness_dir: Path) -> None:
    (harness_dir / "prompts" / "system.md").unlink()
    error = load_error(harness_dir)
    assert (error.file, error.field) == ("harness.yaml", "system_prompt")


def test_non_utf8_file_is_refused(harness_dir: Path) -> None:
    (harness_dir / "prompts" / "logo.md").write_bytes(b"\xff\xfe\x00binary")
    error = load_error(harness_dir)
    assert error.file is not None and error.file.endswith("logo.md")
