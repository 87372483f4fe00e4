"""``core/planted.py``: files in a model-written folder are reached without following a link,
only as plain bounded files, never blocking; writes replace what is there."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from harnessevolve.core import planted
from harnessevolve.core.planted import PlantedFileError


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "ok.txt").write_text("fine\n")
    return root


def test_a_plain_file_reads(folder: Path) -> None:
    assert planted.read_text(folder, "sub/ok.txt") == "fine\n"
    assert planted.read_head(folder, "sub/ok.txt", 2) == b"fi"
    assert planted.entry_kind(folder, "sub/ok.txt") == "file"
    assert planted.entry_kind(folder, "sub/none.txt") is None


@pytest.mark.parametrize("make, why", [
    (lambda root, out: os.symlink(out, root / "x"), "a symbolic link"),
    (lambda root, out: os.mkfifo(root / "x"), "a named pipe"),
    (lambda root, out: os.link(out, root / "x"), "a hard link"),
    (lambda root, out: (root / "x").mkdir(), "a folder"),
])  # fmt: skip
def test_links_pipes_hard_links_and_folders_are_refused(folder: Path, tmp_path: Path, make, why: str) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("host secret\n")
    make(folder, outside)
    with pytest.raises(PlantedFileError) as err:
        planted.read_text(folder, "x")  # a FIFO would block a plain open(): this returns at once
    assert why in err.value.reason


def test_a_link_in_a_parent_folder_is_not_followed(folder: Path, tmp_path: Path) -> None:
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "f.txt").write_text("host\n")
    os.symlink(tmp_path / "elsewhere", folder / "linked")
    with pytest.raises(PlantedFileError, match="not a plain folder"):
        planted.read_text(folder, "linked/f.txt")
    with pytest.raises(PlantedFileError, match="not a plain folder"):
        planted.write_text(folder, "linked/f.txt", "overwritten")
    assert (tmp_path / "elsewhere" / "f.txt").read_text() == "host\n"


def test_over_size_files_and_devices_are_refused(folder: Path) -> None:
    (folder / "big").write_bytes(b"a" * 2048)
    with pytest.raises(PlantedFileError) as err:
        planted.read_bytes(folder, "big", max_bytes=1024)
    assert err.value.too_large
    assert planted.read_bytes(folder, "big", max_bytes=2048) == b"a" * 2048  # exactly at the bound
    os.symlink("/dev/zero", folder / "zero")
    with pytest.raises(PlantedFileError, match="symbolic link"):
        planted.read_bytes(folder, "zero")


def test_binary_and_non_utf8_text_is_refused(folder: Path) -> None:
    (folder / "nul").write_bytes(b"a\0b")
    (folder / "latin").write_bytes(b"\xff\xfe")
    with pytest.raises(PlantedFileError, match="binary"):
        planted.read_text(folder, "nul")
    with pytest.raises(PlantedFileError, match="UTF-8"):
        planted.read_text(folder, "latin")


def test_a_write_replaces_a_planted_link_instead_of_writing_through_it(folder: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("host\n")
    os.symlink(outside, folder / "FEEDBACK.md")
    planted.write_text(folder, "FEEDBACK.md", "feedback")
    assert outside.read_text() == "host\n"
    assert not (folder / "FEEDBACK.md").is_symlink() and (folder / "FEEDBACK.md").read_text() == "feedback"
    planted.write_text(folder, "new/deep/file.md", "made")  # missing folders are made
    assert (folder / "new" / "deep" / "file.md").read_text() == "made"
    assert [p.name for p in folder.iterdir() if p.name.endswith(".tmp")] == []


def test_remove_takes_the_link_not_its_target(folder: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("host\n")
    os.symlink(outside, folder / "l")
    planted.remove(folder, "l")
    planted.remove(folder, "never-there")
    assert outside.exists() and not (folder / "l").exists()


@pytest.mark.parametrize("rel", ["../escape", "/etc/passwd", "", "a/../../b"])
def test_paths_leaving_the_folder_are_refused(folder: Path, rel: str) -> None:
    with pytest.raises(PlantedFileError):
        planted.read_text(folder, rel)


def test_a_plain_file_is_rewritten_in_place_keeping_its_owner(folder: Path) -> None:
    before = os.stat(folder / "sub" / "ok.txt")
    planted.write_text(folder, "sub/ok.txt", "x" * 200_000)
    after = os.stat(folder / "sub" / "ok.txt")
    assert (after.st_ino, after.st_uid, after.st_mode) == (before.st_ino, before.st_uid, before.st_mode)
    assert (folder / "sub" / "ok.txt").read_text() == "x" * 200_000
