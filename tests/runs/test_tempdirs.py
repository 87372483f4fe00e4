"""A killed run's temp folder, with its workspace tmpfs mounts, is unmounted and removed by the next
run or ``harnessevolve clean``; the sweep reports only what it really removed."""

from __future__ import annotations

import ctypes
import ctypes.util
import json
import os
import tempfile
from pathlib import Path

import pytest

from harnessevolve.cli.app import app
from harnessevolve.runs import tempdirs
from harnessevolve.runs.tempdirs import PREFIX, clean, run_tempdir, sweep_dead
from harnessevolve.sandbox.limits import MOUNT_SOURCE, mount_workspace, workspace_mounts

DEAD_PID = 2**22 + 12346
can_mount = pytest.mark.skipif(os.geteuid() != 0, reason="a workspace tmpfs needs root")


def _mount(folder: Path, source: str) -> None:
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    if libc.mount(source.encode(), str(folder).encode(), b"tmpfs", 6, b"size=1m") != 0:
        pytest.skip(f"cannot mount a tmpfs here (errno {ctypes.get_errno()})")


def _umount(folder: Path) -> None:
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    libc.umount2(str(folder).encode(), 2)


@can_mount
def test_a_killed_runs_mounted_workspace_is_unmounted_and_its_folder_removed(tmp_path: Path) -> None:
    dead = tmp_path / f"{PREFIX}{DEAD_PID}-20261201-000000-000-abcd"
    workspace = dead / "he-task-1-xyz"
    workspace.mkdir(parents=True)
    _mount(workspace, f"{MOUNT_SOURCE}-{DEAD_PID}")
    (workspace / "big.txt").write_text("x" * 1000)
    swept = sweep_dead(tmp_path)
    assert swept.removed == [dead.name] and swept.left == []
    assert swept.unmounted == [str(workspace)]
    assert not dead.exists() and str(workspace) not in workspace_mounts()


@can_mount
def test_what_cannot_be_removed_is_reported_left_never_removed(tmp_path: Path) -> None:
    dead = tmp_path / f"{PREFIX}{DEAD_PID}-20261201-000000-000-abcd"
    foreign = dead / "someone-elses-mount"
    foreign.mkdir(parents=True)
    _mount(foreign, "not-ours")  # not a workspace tmpfs: never unmounted by us
    try:
        swept = sweep_dead(tmp_path)
        assert swept.removed == [] and swept.unmounted == []
        assert [path for path, _ in swept.left] == [str(dead)]
        assert dead.exists()
    finally:
        _umount(foreign)


def test_a_folder_the_removal_leaves_is_not_counted(tmp_path: Path, monkeypatch) -> None:
    dead = tmp_path / f"{PREFIX}{DEAD_PID}-old"
    dead.mkdir()
    monkeypatch.setattr(tempdirs, "remove_tree", lambda path: None)  # a removal that fails silently
    swept = sweep_dead(tmp_path)
    assert swept.removed == [] and swept.left[0][0] == str(dead)


@can_mount
def test_a_run_unmounts_its_own_workspaces_when_it_ends_by_an_error(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.delenv("HARNESSEVOLVE_NO_WORKSPACE_TMPFS", raising=False)
    with pytest.raises(KeyboardInterrupt), run_tempdir("rid") as (folder, _swept):
        workspace = Path(tempfile.mkdtemp(prefix="he-task-"))
        if not mount_workspace(workspace, size_mb=1, files=100):
            pytest.skip("no workspace tmpfs here")
        assert str(workspace) in workspace_mounts()
        raise KeyboardInterrupt("SIGTERM")  # what stop_signals turns SIGTERM into
    assert not folder.exists() and str(workspace) not in workspace_mounts()


@can_mount
def test_clean_command_unmounts_and_removes_and_says_what(tmp_path: Path, monkeypatch) -> None:
    from typer.testing import CliRunner

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    dead = tmp_path / f"{PREFIX}{DEAD_PID}-20261201-000000-000-abcd"
    workspace = dead / "he-task-1-xyz"
    workspace.mkdir(parents=True)
    _mount(workspace, f"{MOUNT_SOURCE}-{DEAD_PID}")
    result = CliRunner().invoke(app, ["clean", "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert doc["removed"] == [dead.name] and str(workspace) in doc["unmounted"] and doc["left"] == []
    assert not dead.exists()
    again = CliRunner().invoke(app, ["clean"])
    assert again.exit_code == 0 and "nothing to clean" in again.output


def test_clean_names_what_it_could_not_remove_and_exits_3(tmp_path: Path, monkeypatch) -> None:
    from typer.testing import CliRunner

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    (tmp_path / f"{PREFIX}{DEAD_PID}-old").mkdir()
    monkeypatch.setattr(tempdirs, "remove_tree", lambda path: None)
    result = CliRunner().invoke(app, ["clean"])
    assert result.exit_code == 3
    assert f"{PREFIX}{DEAD_PID}-old" in result.output and "removed 0" in result.output
    assert clean(tmp_path).removed == []
