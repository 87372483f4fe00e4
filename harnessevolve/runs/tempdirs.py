"""One temporary folder per run process: every workspace, scratch harness and check folder the
run makes lives in ``$TMPDIR/he-run-<pid>-<run-id>/`` (``TMPDIR`` and ``tempfile`` point there while
the run lives), removed when it ends. A ``kill -9`` leaves it behind; the next run on this machine
removes every such folder whose process is gone, before it starts."""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from harnessevolve.runs.rundir import pid_alive

PREFIX = "he-run-"
_NAME = re.compile(rf"^{PREFIX}(?P<pid>\d+)-")


def sweep_dead(base: Path) -> list[str]:
    """Remove the run folders in ``base`` whose process is gone; their names."""
    removed = []
    for folder in sorted(base.glob(f"{PREFIX}*")):
        found = _NAME.match(folder.name)
        if found is None or folder.is_symlink() or not folder.is_dir():
            continue
        pid = int(found["pid"])
        if pid == os.getpid() or pid_alive(pid):
            continue
        shutil.rmtree(folder, ignore_errors=True)
        removed.append(folder.name)
    return removed


@contextmanager
def run_tempdir(run_id: str) -> Iterator[tuple[Path, list[str]]]:
    """This run's temp folder (and the dead runs' folders swept before it was made)."""
    base = Path(tempfile.gettempdir())
    swept = sweep_dead(base)
    folder = base / f"{PREFIX}{os.getpid()}-{run_id}"
    folder.mkdir(mode=0o700, exist_ok=True)
    saved_env, saved_dir = os.environ.get("TMPDIR"), tempfile.tempdir
    os.environ["TMPDIR"], tempfile.tempdir = str(folder), str(folder)
    try:
        yield folder, swept
    finally:
        tempfile.tempdir = saved_dir
        if saved_env is None:
            os.environ.pop("TMPDIR", None)
        else:
            os.environ["TMPDIR"] = saved_env
        shutil.rmtree(folder, ignore_errors=True)
