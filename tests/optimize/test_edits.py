"""Edit operations: each type applies to a real harness, validates, commits and reverts cleanly;
malformed or inapplicable edits are refused with a reason and nothing is half-applied."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from harnessevolve.core.errors import EditError
from harnessevolve.core.files import atomic_write_text
from harnessevolve.core.schema import load_schema
from harnessevolve.harness.git import HarnessRepo
from harnessevolve.harness.load import load_harness, read_files, validate_harness
from harnessevolve.optimize.edits import EDIT_OPS, apply_edits, check_edit
from harnessevolve.optimize.reply_format import normalize_reply, strict_reply_schema

SEED = Path(__file__).parents[2] / "harnesses" / "shell-agent"
EDITABLE = ("prompts/*.md", "skills/*/SKILL.md", "tools/*.yaml", "harness.yaml", "hooks/*.py")
SKILL = "---\nname: count-lines\ndescription: Counting lines in a file.\n---\n\nRun `wc -l < FILE`.\n"
HOOK = "def after_step(step):\n    return step\n"


@pytest.fixture
def harness(tmp_path: Path) -> Path:
    """The seed harness with a skill and a hook, everything editable, committed in its own repo."""
    root = tmp_path / "h"
    shutil.copytree(SEED, root)
    doc = (
        (root / "harness.yaml")
        .read_text()
        .replace("  - tools/*.yaml\n", "  - tools/*.yaml\n  - harness.yaml\n  - hooks/*.py\n")
    )
    (root / "harness.yaml").write_text(doc)
    (root / "skills" / "count-lines").mkdir(parents=True)
    (root / "skills" / "count-lines" / "SKILL.md").write_text(SKILL)
    (root / "hooks").mkdir()
    (root / "hooks" / "steps.py").write_text(HOOK)
    (root / "prompts" / "examples.md").write_text(
        '## Example\nTask: old\n{"tool": "submit", "arguments": {"answer": "x"}}\n'
    )
    assert validate_harness(root) == []
    HarnessRepo.init_or_open(root).commit_all("seed")
    return root


EVERY_EDIT = {
    "replace_text": {
        "op": "replace_text",
        "path": "prompts/system.md",
        "old": "call submit",
        "new": "call the submit tool",
    },
    "insert_text": {
        "op": "insert_text",
        "path": "prompts/system.md",
        "anchor": "Use the tools",
        "where": "before",
        "text": "Think first. ",
    },
    "delete_text": {
        "op": "delete_text",
        "path": "prompts/system.md",
        "old": " Use the tools to look at the files and do the task.",
    },
    "add_skill": {
        "op": "add_skill",
        "name": "read-first",
        "description": "Before answering, read the file.",
        "body": "Call `read_file` on the file named in the task.",
    },
    "update_skill": {
        "op": "update_skill",
        "name": "count-lines",
        "body": "Run `wc -l < FILE` and submit the number only.",
    },
    "remove_skill": {"op": "remove_skill", "name": "count-lines"},
    "edit_tool": {
        "op": "edit_tool",
        "name": "read_file",
        "description": "Read a text file of the task folder; pass its exact relative path.",
    },
    "set_loop": {"op": "set_loop", "setting": "max_steps", "value": 9},
    "set_recovery": {
        "op": "set_recovery",
        "rules": [{"event": "repeated_call", "action": "note", "note": "Use the result or submit."}],
    },
    "patch_hook": {
        "op": "patch_hook",
        "path": "hooks/steps.py",
        "old": "return step",
        "new": "return dict(step)",
    },
    "write_hook": {"op": "write_hook", "path": "hooks/notes.py", "code": "NOTE = 'submit when done'\n"},
    "patch_file": {  # a code edit: a unified diff
        "op": "patch_file",
        "path": "hooks/steps.py",
        "diff": "--- a/hooks/steps.py\n+++ b/hooks/steps.py\n@@ -1,2 +1,3 @@\n def after_step(step):\n"
        "+    step = dict(step)\n     return step\n",
    },
}


def write(root: Path, changes: dict[str, str | None]) -> None:
    for rel, text in changes.items():
        if text is None:
            (root / rel).unlink()
        else:
            atomic_write_text(root / rel, text)


def test_every_op_has_an_example() -> None:
    assert set(EVERY_EDIT) == set(EDIT_OPS)


@pytest.mark.parametrize("op", EDIT_OPS)
def test_each_edit_applies_validates_commits_and_reverts_cleanly(harness: Path, op: str) -> None:
    before = read_files(harness)
    changes = apply_edits(before, [EVERY_EDIT[op]], EDITABLE)
    assert changes and before == read_files(harness)  # computed in memory only
    write(harness, changes)
    assert validate_harness(harness) == []
    repo = HarnessRepo(harness)
    sha = repo.commit_all(f"edit: {op}")
    assert repo.dirty_paths() == []
    after = read_files(harness)
    assert after != before
    repo.revert(sha, f"revert {op}")
    assert read_files(harness) == before
    assert repo.dirty_paths() == []
    assert repo.repo.git.status("--porcelain") == ""


def test_edits_do_what_they_say(harness: Path) -> None:
    files = read_files(harness)
    changes = apply_edits(
        files, list(EVERY_EDIT.values())[:2] + [EVERY_EDIT["set_loop"], EVERY_EDIT["edit_tool"]], EDITABLE
    )
    assert changes["prompts/system.md"].startswith(
        "You are an agent working in a folder of files. Think first. Use the tools"
    )
    assert "call the submit tool" in changes["prompts/system.md"]
    assert "  max_steps: 9\n" in changes["harness.yaml"]
    assert "# end a run that repeats" in changes["harness.yaml"]  # comments survive set_loop
    write(harness, changes)
    loaded = load_harness(harness)
    assert loaded.loop.max_steps == 9
    assert loaded.tool("read_file").description.startswith("Read a text file")


def test_skill_ops_and_set_loop_of_a_missing_setting(harness: Path) -> None:
    files = read_files(harness)
    changes = apply_edits(
        files,
        [
            EVERY_EDIT["add_skill"],
            {"op": "update_skill", "name": "read-first", "description": "Read before you answer."},
            {"op": "set_loop", "setting": "observation_note", "value": "Submit: once you know"},
        ],
        EDITABLE,
    )
    write(harness, changes)
    loaded = load_harness(harness)
    skill = next(s for s in loaded.skills if s.name == "read-first")
    assert skill.description == "Read before you answer." and "read_file" in skill.body
    assert loaded.loop.observation_note == "Submit: once you know"


def test_insert_at_start_and_end_and_counted_replace(harness: Path) -> None:
    files = {**read_files(harness), "prompts/system.md": "a x b x c"}
    changes = apply_edits(
        files,
        [
            {"op": "replace_text", "path": "prompts/system.md", "old": "x", "new": "y", "count": 2},
            {"op": "insert_text", "path": "prompts/system.md", "position": "start", "text": "S "},
            {"op": "insert_text", "path": "prompts/system.md", "position": "end", "text": "E\n"},
        ],
        EDITABLE,
    )
    assert changes["prompts/system.md"] == "S a y b y c\nE\n"


def test_edit_tool_parameters_stay_a_valid_tool(harness: Path) -> None:
    params = {
        "type": "object",
        "properties": {"path": {"type": "string", "description": "Relative path."}},
        "required": ["path"],
    }
    changes = apply_edits(
        read_files(harness), [{"op": "edit_tool", "name": "read_file", "parameters": params}], EDITABLE
    )
    assert yaml.safe_load(changes["tools/read_file.yaml"])["parameters"] == params


BAD = [
    (
        {"op": "replace_text", "path": "prompts/system.md", "old": "no such text", "new": "x"},
        "text not found",
    ),
    ({"op": "replace_text", "path": "prompts/system.md", "old": "the", "new": "a"}, "occurs"),
    ({"op": "replace_text", "path": "prompts/nope.md", "old": "a", "new": "b"}, "does not exist"),
    ({"op": "insert_text", "path": "prompts/system.md", "text": "x"}, "exactly one of anchor or position"),
    ({"op": "insert_text", "path": "prompts/system.md", "anchor": "zzz", "text": "x"}, "text not found"),
    ({"op": "add_skill", "name": "count-lines", "description": "d", "body": "b"}, "already exists"),
    ({"op": "add_skill", "name": "Bad Name", "description": "d", "body": "b"}, "does not match"),
    ({"op": "update_skill", "name": "ghost", "body": "b"}, "does not exist"),
    ({"op": "remove_skill", "name": "ghost"}, "no skill named"),
    ({"op": "edit_tool", "name": "ghost", "description": "d"}, "no tool"),
    (
        {
            "op": "edit_tool",
            "name": "bash",
            "parameters": {"type": "object", "properties": {}, "required": ["x"]},
        },
        "required argument",
    ),
    ({"op": "edit_tool", "name": "bash", "parameters": {"type": "array"}}, "invalid"),
    ({"op": "set_loop", "setting": "max_steps", "value": 1000}, "greater than the maximum"),
    ({"op": "set_loop", "setting": "max_steps", "value": "many"}, "is not of type"),
    ({"op": "set_loop", "setting": "warp_speed", "value": 9}, "is not one of"),
    (
        {"op": "patch_hook", "path": "hooks/steps.py", "old": "return step", "new": "return (step"},
        "would not compile",
    ),
    ({"op": "write_hook", "path": "hooks/x.py", "code": "def f(:\n"}, "would not compile"),
    ({"op": "write_hook", "path": "prompts/x.py", "code": "x = 1\n"}, "does not match"),
    (  # a code edit (unified diff) that breaks the syntax
        {"op": "patch_file", "path": "hooks/steps.py", "diff": "@@\n-    return step\n+    return (s\n"},
        "would not compile",
    ),
    (  # a patch that does not apply
        {"op": "patch_file", "path": "hooks/steps.py", "diff": "@@\n-    return st\n+    return 1\n"},
        "does not apply",
    ),
    (  # a patch whose header names another file than the edit's path
        {"op": "patch_file", "path": "hooks/steps.py", "diff": "--- a/x.py\n+++ b/x.py\n@@\n-a\n+b\n"},
        "names x.py",
    ),
    ({"op": "patch_file", "path": "hooks/steps.py", "diff": "no diff here"}, "no hunks"),
    ({"op": "replace_text", "path": "../outside.md", "old": "a", "new": "b"}, "inside the harness"),
    ({"op": "replace_text", "path": "harness.yaml", "old": "submit]", "new": "]"}, "does not validate"),
    ({"op": "frobnicate", "path": "x"}, "is not one of"),
    (
        {"op": "replace_text", "path": "prompts/system.md", "old": "agent", "new": "agent", "extra": 1},
        "unknown",
    ),
    ("not an object", "is not of type"),
]


@pytest.mark.parametrize(("edit", "reason"), BAD, ids=[f"{i}" for i in range(len(BAD))])
def test_malformed_or_inapplicable_edits_are_refused_with_a_reason(harness: Path, edit, reason: str) -> None:
    files = read_files(harness)
    good = EVERY_EDIT["replace_text"]
    with pytest.raises(EditError) as info:
        apply_edits(files, [good, edit], EDITABLE)
    assert info.value.index == 1 and info.value.field == "edits[1]"
    assert reason in info.value.reason or (
        reason == "unknown" and "Additional properties" in info.value.reason
    )
    assert files == read_files(harness)  # nothing half-applied, nothing written


def test_forbidden_paths_are_refused_even_for_set_loop_and_edit_tool(harness: Path) -> None:
    files = read_files(harness)
    prompts_only = ("prompts/*.md",)
    for edit, path in [
        (EVERY_EDIT["set_loop"], "harness.yaml"),
        (EVERY_EDIT["edit_tool"], "tools/read_file.yaml"),
        (EVERY_EDIT["add_skill"], "skills/read-first/SKILL.md"),
        (EVERY_EDIT["write_hook"], "hooks/notes.py"),
        (EVERY_EDIT["patch_file"], "hooks/steps.py"),  # a code edit on a file that is not editable
    ]:
        with pytest.raises(EditError) as info:
            apply_edits(files, [edit], prompts_only)
        assert info.value.file == path and f"{path} is not editable" in info.value.reason
        assert "prompts/*.md" in info.value.reason


def test_empty_and_no_op_edit_lists_are_refused(harness: Path) -> None:
    files = read_files(harness)
    with pytest.raises(EditError, match="empty"):
        apply_edits(files, [], EDITABLE)
    with pytest.raises(EditError, match="changes nothing"):
        apply_edits(
            files,
            [{"op": "replace_text", "path": "prompts/system.md", "old": "agent", "new": "agent"}],
            EDITABLE,
        )
    with pytest.raises(EditError, match="already"):
        apply_edits(files, [{"op": "set_loop", "setting": "max_steps", "value": 5}], EDITABLE)


def test_later_edits_see_earlier_ones() -> None:
    files = {"prompts/system.md": "one"}
    edits = [
        {"op": "replace_text", "path": "prompts/system.md", "old": "one", "new": "two"},
        {"op": "replace_text", "path": "prompts/system.md", "old": "two", "new": "three"},
    ]
    assert apply_edits(files, edits, EDITABLE) == {"prompts/system.md": "three"}


def test_set_loop_enum_matches_the_harness_schema() -> None:
    loop = set(load_schema("harness")["properties"]["loop"]["properties"])
    assert set(load_schema("edits")["$defs"]["set_loop"]["properties"]["setting"]["enum"]) == loop


def test_strict_reply_schema_round_trips_to_the_edits_schema() -> None:
    from jsonschema import Draft202012Validator

    strict = strict_reply_schema()
    Draft202012Validator.check_schema(strict)
    # strict mode: every object lists all of its properties as required and forbids others
    for variant in strict["properties"]["edits"]["items"]["anyOf"]:
        assert (
            set(variant["required"]) == set(variant["properties"])
            and variant["additionalProperties"] is False
        )
    params = {"type": "object", "properties": {"p": {"type": "string"}}, "required": ["p"]}
    reply = {
        "summary": "s",
        "rationale": "r",
        "targets": ["wrong_tool"],
        "edits": [
            {"op": "edit_tool", "name": "bash", "description": None, "parameters": json.dumps(params)},
            {
                "op": "insert_text",
                "path": "p.md",
                "text": "t",
                "anchor": None,
                "where": None,
                "position": "end",
            },
        ],
    }
    assert Draft202012Validator(strict).is_valid(reply)
    normal = normalize_reply(reply)
    assert normal["edits"][0] == {"op": "edit_tool", "name": "bash", "parameters": params}
    for i, edit in enumerate(normal["edits"]):
        check_edit(edit, i)


# --- harness.yaml#SECTION: one section of harness.yaml editable -----------------------------------------


def test_a_section_entry_lets_set_loop_change_only_the_loop(harness: Path) -> None:
    from harnessevolve.gate.config import QualityConfig
    from harnessevolve.gate.quality import quality_gate

    files = read_files(harness)
    loop_only = ("prompts/*.md", "harness.yaml#loop")
    changes = apply_edits(files, [{"op": "set_loop", "setting": "final_submit", "value": True}], loop_only)
    after = yaml.safe_load(changes["harness.yaml"])
    assert after["loop"]["final_submit"] is True
    assert {k: v for k, v in after.items() if k != "loop"} == {
        k: v for k, v in yaml.safe_load(files["harness.yaml"]).items() if k != "loop"
    }
    with pytest.raises(EditError) as info:  # the recovery section is not opened by harness.yaml#loop
        apply_edits(files, [EVERY_EDIT["set_recovery"]], loop_only)
    assert (
        info.value.file == "harness.yaml"
        and "harness.yaml is not editable, nor its recovery section" in info.value.reason
    )
    with pytest.raises(EditError) as info:  # nor is the file as a whole
        apply_edits(
            files,
            [{"op": "replace_text", "path": "harness.yaml", "old": "name:", "new": "name: "}],
            loop_only,
        )
    assert "harness.yaml is not editable" in info.value.reason
    # the quality gate reads the same rule: a loop change passes, a model change does not
    before = dict(files)
    (harness / "harness.yaml").write_text(changes["harness.yaml"])
    assert quality_gate(harness, before, loop_only, QualityConfig()).passed
    doc = yaml.safe_load(changes["harness.yaml"])
    (harness / "harness.yaml").write_text(yaml.safe_dump({**doc, "model": "scripted/other"}))
    verdict = quality_gate(harness, before, loop_only, QualityConfig())
    assert not verdict.passed and verdict.reason == "edits a path that is not editable: harness.yaml"
