"""run_process: a command that exits while a background child holds its output open is not a
timeout; the child is killed with the process group; a command still running at the deadline is."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

from harnessevolve.evaluate.checkers import run_process


def alive(marker: str) -> bool:
    return subprocess.run(["pgrep", "-f", marker], capture_output=True).returncode == 0


def test_a_daemon_left_behind_is_killed_and_the_exit_status_counts(tmp_path: Path) -> None:
    marker = f"sleep 3{os.getpid() % 1000}.5"
    started = time.monotonic()
    run = run_process(["bash", "-c", f"{marker} & echo hi; exit 3"], tmp_path, dict(os.environ), timeout_s=10)
    assert (run.returncode, run.output) == (3, "hi\n")
    assert time.monotonic() - started < 5
    time.sleep(0.2)
    assert not alive(marker)


def test_a_command_still_running_at_the_deadline_times_out(tmp_path: Path) -> None:
    marker = f"sleep 4{os.getpid() % 1000}.5"
    run = run_process(["bash", "-c", marker], tmp_path, dict(os.environ), timeout_s=1)
    assert run.returncode is None
    time.sleep(0.2)
    assert not alive(marker)
