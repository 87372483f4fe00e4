"""One temporary folder per run process: every workspace, scratch harness and check folder the
run makes lives in ``$TMPDIR/he-run-<pid>-<run-id>/`` (``TMPDIR`` and ``tempfile`` point there while
the run lives), removed when it ends however it ends (normally, by an error, by SIGTERM or Ctrl-C):
the workspace tmpfs mounts inside it are unmounted first, then the tree is removed.

A ``kill -9`` leaves the folder behind, with its workspaces still mounted. The next run on this
machine (or ``harnessevolve clean``) unmounts and removes every such folder whose process is gone,
before it starts, and says only what it really removed; what it could not remove is reported
with the reason, never counted as removed.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from harnessevolve.runs.rundir import pid_alive
from harnessevolve.sandbox.launch import release_workspaces_under, remove_tree
from harnessevolve.sandbox.limits import sweep_stale_workspaces, unmount_workspaces_under

PREFIX = "he-run-"
_NAME = re.compile(rf"^{PREFIX}(?P<pid>\d+)-")


@dataclass
class Sweep:
    """What a clean-up did: folders removed, workspace mounts unmounted, and what was left (why)."""

    removed: list[str] = field(default_factory=list)
    unmounted: list[str] = field(default_factory=list)
    left: list[tuple[str, str]] = field(default_factory=list)
    """(path, reason) of everything that is still there."""

    def to_dict(self) -> dict[str, object]:
        return {
            "removed": self.removed,
            "unmounted": self.unmounted,
            "left": [{"path": path, "reason": reason} for path, reason in self.left],
        }


def remove_run_folder(folder: Path, sweep: Sweep) -> None:
    """Unmount the workspaces inside ``folder``, then remove it; recorded in ``sweep``."""
    unmounted, still = unmount_workspaces_under(folder)
    sweep.unmounted += unmounted
    for point in still:
        sweep.left.append((point, "a workspace mount that could not be unmounted"))
    try:
        remove_tree(folder)
    except OSError as exc:
        sweep.left.append((str(folder), exc.strerror or str(exc)))
        return
    if os.path.lexists(folder):
        sweep.left.append((str(folder), _why_left(folder)))
    else:
        sweep.removed.append(folder.name)


def _why_left(folder: Path) -> str:
    try:
        inside = sum(1 for _ in folder.rglob("*"))
    except OSError as exc:
        return exc.strerror or str(exc)
    return f"{inside} entries could not be removed (permissions, or a mount inside)"


def sweep_dead(base: Path) -> Sweep:
    """Unmount and remove the run folders in ``base`` whose process is gone."""
    sweep = Sweep()
    for folder in sorted(base.glob(f"{PREFIX}*")):
        found = _NAME.match(folder.name)
        if found is None or folder.is_symlink() or not folder.is_dir():
            continue
        pid = int(found["pid"])
        if pid == os.getpid() or pid_alive(pid):
            continue
        remove_run_folder(folder, sweep)
    return sweep


def clean(base: Path | None = None) -> Sweep:
    """Everything killed runs left on this machine: their run folders in ``base`` (default: the
    system temp folder) and every workspace tmpfs whose harnessevolve process is gone."""
    sweep = sweep_dead(Path(base or tempfile.gettempdir()))
    sweep.unmounted += sweep_stale_workspaces()
    return sweep


@contextmanager
def tempdir_at(folder: Path) -> Iterator[None]:
    """``$TMPDIR`` and ``tempfile.tempdir`` point at ``folder`` inside the block; both are put back
    as they were after it."""
    saved_env, saved_dir = os.environ.get("TMPDIR"), tempfile.tempdir
    os.environ["TMPDIR"], tempfile.tempdir = str(folder), str(folder)
    try:
        yield
    finally:
        tempfile.tempdir = saved_dir
        if saved_env is None:
            os.environ.pop("TMPDIR", None)
        else:
            os.environ["TMPDIR"] = saved_env


@contextmanager
def run_tempdir(run_id: str) -> Iterator[tuple[Path, Sweep]]:
    """This run's temp folder (and what sweeping the dead runs' folders before it did)."""
    base = Path(tempfile.gettempdir())
    swept = sweep_dead(base)
    folder = base / f"{PREFIX}{os.getpid()}-{run_id}"
    folder.mkdir(mode=0o700, exist_ok=True)
    try:
        with tempdir_at(folder):
            yield folder, swept
    finally:
        remove_run_folder(folder, Sweep())
        release_workspaces_under(folder)
