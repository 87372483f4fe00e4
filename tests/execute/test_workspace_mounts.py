"""A process knows its own workspace tmpfs mounts: telling one needs no read of /proc/self/mountinfo
(the kernel writes out a line per mount on the machine at every read, three times per sandboxed
command before), while another process's mounts and stale ones are still found through it."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

from harnessevolve.sandbox import limits
from harnessevolve.sandbox.limits import (
    is_workspace_mount,
    mount_workspace,
    unmount_workspace,
    unmount_workspaces_under,
    workspace_full,
)

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="a workspace tmpfs needs root")


def fresh_mount(size_mb: int = 1, files: int = 50, parent: Path | None = None) -> Path:
    folder = Path(tempfile.mkdtemp(prefix="he-mounts-", dir=parent)).resolve()
    assert mount_workspace(folder, size_mb=size_mb, files=files)
    return folder


def test_an_own_mount_is_told_without_reading_mountinfo(count_mountinfo_reads: list[int]) -> None:
    folder = fresh_mount(files=3)
    count_mountinfo_reads[0] = 0  # a process's first mount sweeps stale ones (one read, once)
    try:
        assert is_workspace_mount(folder)
        assert workspace_full(folder) == set()
        for name in ("a", "b", "c", "d"):  # the root folder takes one inode of the three
            try:
                (folder / name).write_text("x")
            except OSError:
                break
        assert workspace_full(folder) == {"files"}
        assert count_mountinfo_reads[0] == 0
    finally:
        unmount_workspace(folder)
        os.rmdir(folder)
    assert not is_workspace_mount(folder)
    assert str(folder) not in limits._mounted


def test_a_mount_this_process_did_not_make_is_still_found(count_mountinfo_reads: list[int]) -> None:
    folder = fresh_mount()
    limits._mounted.discard(str(folder))  # as if another harnessevolve process had mounted it
    try:
        assert is_workspace_mount(folder)
        assert count_mountinfo_reads[0] >= 1
    finally:
        unmount_workspace(folder)
        os.rmdir(folder)
    assert not os.path.ismount(folder)


def test_an_ordinary_folder_or_another_mount_is_no_workspace(tmp_path: Path) -> None:
    assert not is_workspace_mount(tmp_path)
    assert not is_workspace_mount(Path("/proc"))  # a mount point, but not one of ours


def test_unmounting_everything_under_a_folder_forgets_those_mounts(tmp_path: Path) -> None:
    # under a folder of its own: unmounting everything under the system temp folder would take the
    # live workspaces of tests running beside it (another pytest-xdist worker's rollouts)
    folder = fresh_mount(parent=tmp_path)
    try:
        assert str(folder) in limits._mounted
        done, left = unmount_workspaces_under(folder.parent)
        assert str(folder) in done and str(folder) not in left
        assert str(folder) not in limits._mounted
        assert not is_workspace_mount(folder)
    finally:
        unmount_workspace(folder)
        os.rmdir(folder)
