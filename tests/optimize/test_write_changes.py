"""Edits are written into the harness only when every path stays inside it (symlinks resolved)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harnessevolve.core.errors import EditError
from harnessevolve.optimize.edits import write_changes


@pytest.fixture
def harness(tmp_path: Path) -> Path:
    root = tmp_path / "harness"
    (root / "prompts").mkdir(parents=True)
    (root / "prompts" / "system.md").write_text("old\n")
    return root


def test_writes_and_deletes_inside(harness: Path) -> None:
    write_changes(harness, {"prompts/system.md": "new\n", "skills/x/SKILL.md": "skill\n"})
    assert (harness / "prompts" / "system.md").read_text() == "new\n"
    write_changes(harness, {"skills/x/SKILL.md": None})
    assert not (harness / "skills" / "x" / "SKILL.md").exists()


def test_a_symlinked_folder_leading_out_is_refused_before_any_write(harness: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (harness / "skills").symlink_to(outside, target_is_directory=True)
    with pytest.raises(EditError, match="outside the harness") as caught:
        write_changes(harness, {"prompts/system.md": "new\n", "skills/x/SKILL.md": "escaped\n"})
    assert caught.value.file == "skills/x/SKILL.md"
    assert list(outside.iterdir()) == []
    assert (harness / "prompts" / "system.md").read_text() == "old\n"  # nothing of the list was applied


def test_a_symlinked_file_leading_out_is_refused(harness: Path, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("host file\n")
    (harness / "prompts" / "examples.md").symlink_to(secret)
    with pytest.raises(EditError, match="outside the harness"):
        write_changes(harness, {"prompts/examples.md": "overwritten\n"})
    assert secret.read_text() == "host file\n"
