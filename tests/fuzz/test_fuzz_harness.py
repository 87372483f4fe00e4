"""Fuzz: bad harnesses. ``validate`` and ``run`` each refuse with exit 2 and one line naming the
file and the field, a hint, nothing written (no run folder, no commit, no lock)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from refusal import refused  # noqa: E402


def replace_in(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, (path, old)
    path.write_text(text.replace(old, new))


def link_out(harness: Path, rel: str, *, folder: bool = False) -> None:
    target = harness.parent / ("outside-dir" if folder else "outside.md")
    if folder:
        target.mkdir(exist_ok=True)
        (target / "SKILL.md").write_text("---\nname: x\ndescription: d\n---\nsecret\n")
    else:
        target.write_text("secret from the host\n")
    path = harness / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists() or path.is_symlink():
        path.unlink()
    path.symlink_to(target)


def loop_setting(setting: str, value: str) -> Callable[[Path], None]:
    def change(harness: Path) -> None:
        text = (harness / "harness.yaml").read_text()
        lines = [
            f"  {setting}: {value}" if line.startswith(f"  {setting}:") else line
            for line in text.splitlines()
        ]
        (harness / "harness.yaml").write_text("\n".join(lines) + "\n")

    return change


def write(rel: str, data: str | bytes) -> Callable[[Path], None]:
    def change(harness: Path) -> None:
        path = harness / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(data, bytes):
            path.write_bytes(data)
        else:
            path.write_text(data)

    return change


def folder_instead(rel: str) -> Callable[[Path], None]:
    def change(harness: Path) -> None:
        (harness / rel).unlink()
        (harness / rel).mkdir()

    return change


def symlink_loop(harness: Path) -> None:
    (harness / "prompts" / "a.md").symlink_to(harness / "prompts" / "b.md")
    (harness / "prompts" / "b.md").symlink_to(harness / "prompts" / "a.md")


# (id, mutation, file named, field named)
CASES: list[tuple[str, Callable[[Path], None], str, str | None]] = [
    ("symlinked-prompt", lambda h: link_out(h, "prompts/system.md"), "prompts/system.md", None),
    ("symlinked-examples", lambda h: link_out(h, "prompts/examples.md"), "prompts/examples.md", None),
    ("symlinked-tool", lambda h: link_out(h, "tools/bash.yaml"), "tools/bash.yaml", None),
    ("symlinked-skill-folder", lambda h: link_out(h, "skills/x", folder=True), "skills/x", None),
    ("symlinked-hook", lambda h: link_out(h, "hooks/loop.py"), "hooks/loop.py", None),
    ("symlinked-extra-file", lambda h: link_out(h, "notes/readme.md"), "notes/readme.md", None),
    ("symlink-loop", symlink_loop, "prompts/a.md", None),
    ("prompt-path-absolute", lambda h: replace_in(h / "harness.yaml", "prompts/system.md", "/etc/hostname"),
     "harness.yaml", "system_prompt"),
    ("prompt-path-dotdot", lambda h: replace_in(h / "harness.yaml", "prompts/system.md", "../outside.md"),
     "harness.yaml", "system_prompt"),
    ("timeout-nan", loop_setting("command_timeout_s", ".nan"), "harness.yaml", "loop.command_timeout_s"),
    ("timeout-inf", loop_setting("command_timeout_s", ".inf"), "harness.yaml", "loop.command_timeout_s"),
    ("timeout-negative", loop_setting("command_timeout_s", "-5"), "harness.yaml", "loop.command_timeout_s"),
    ("temperature-nan", loop_setting("temperature", ".NaN"), "harness.yaml", "loop.temperature"),
    ("temperature-minus-inf", loop_setting("temperature", "-.inf"), "harness.yaml", "loop.temperature"),
    ("max-steps-inf", loop_setting("max_steps", ".inf"), "harness.yaml", "loop.max_steps"),
    ("harness-yaml-not-utf8", write("harness.yaml", b"version: 1\nname: \xff\xfe\n"), "harness.yaml", None),
    ("harness-yaml-empty", write("harness.yaml", ""), "harness.yaml", "(top level)"),
    ("harness-yaml-a-list", write("harness.yaml", "- 1\n- 2\n"), "harness.yaml", "(top level)"),
    ("harness-yaml-deep", write("harness.yaml", "[" * 5000 + "]" * 5000), "harness.yaml", None),
    ("harness-yaml-bad-syntax", write("harness.yaml", "version: [1\n"), "harness.yaml", "line"),
    ("prompt-not-utf8", write("prompts/system.md", b"\xff\xfe\x00bad"), "prompts/system.md", None),
    ("prompt-missing", lambda h: (h / "prompts" / "system.md").unlink(), "harness.yaml", "system_prompt"),
    ("prompt-is-a-folder", folder_instead("prompts/system.md"), "harness.yaml", "system_prompt"),
    ("tool-parameters-not-a-schema", lambda h: replace_in(h / "tools/bash.yaml", "type: object", "type: 7"),
     "tools/bash.yaml", "parameters"),
    ("tool-parameters-bad-property",
     lambda h: replace_in(h / "tools" / "bash.yaml", "{type: string,", "{type: [1, 2],"), "tools/bash.yaml",
     "parameters"),
    ("tool-file-not-utf8", write("tools/bash.yaml", b"name: \xff\n"), "tools/bash.yaml", None),
    ("tool-missing", lambda h: (h / "tools" / "bash.yaml").unlink(), "harness.yaml", "tools"),
    ("skill-not-utf8", write("skills/x/SKILL.md", b"---\nname: x\n\xff---\n"), "skills/x/SKILL.md", None),
    ("hook-syntax-error", write("hooks/x.py", "def (:\n"), "hooks/x.py", "line 1"),
    ("unknown-loop-key", loop_setting("max_steps", "5\n  colour: blue"), "harness.yaml", "loop"),
]  # fmt: skip


@pytest.mark.parametrize(("mutate", "file", "field"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_validate_refuses(harness_dir: Path, mutate, file: str, field: str | None) -> None:
    mutate(harness_dir)
    refused(harness_dir.parent, ["validate", str(harness_dir)], file=file, field=field, line_prefix="  ")


RUN_CASES = [c for c in CASES if c[0] in {
    "symlinked-prompt", "symlinked-tool", "symlinked-skill-folder", "timeout-nan", "temperature-minus-inf",
    "prompt-not-utf8", "tool-parameters-not-a-schema", "harness-yaml-deep",
}]  # fmt: skip


def one_generation_run(harness_dir: Path) -> list[str]:
    """``run`` arguments: one generation on shell-basics with the scripted learner."""
    where = ["-H", str(harness_dir), "-b", "shell-basics"]
    return ["run", *where, "-n", "1", "--model", "scripted/policy:learner"]


@pytest.mark.parametrize(
    ("mutate", "file", "field"), [c[1:] for c in RUN_CASES], ids=[c[0] for c in RUN_CASES]
)
def test_run_refuses_before_writing(harness_dir: Path, mutate, file: str, field: str | None) -> None:
    mutate(harness_dir)
    refused(harness_dir.parent, one_generation_run(harness_dir), file=file, field=field)


def test_run_refuses_a_prompt_already_above_the_quality_cap(harness_dir: Path, tmp_path: Path) -> None:
    gates = tmp_path / "gates.yaml"
    gates.write_text("version: 1\nquality:\n  max_prompt_chars: 50\n")
    args = [*one_generation_run(harness_dir), "--gates", str(gates)]
    result = refused(tmp_path, args, file="harness.yaml", field="system_prompt")
    assert "cap of 50" in result.error_line
