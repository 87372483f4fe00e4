"""Real runs for report, status and log tests: `harnessevolve run` with the scripted family learner.

A run takes seconds, so test modules make one per module and copy it before changing anything.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from policies import FamilyLearner
from run_args import run_args
from typer.testing import CliRunner

from harnessevolve.cli.app import app
from harnessevolve.core.tasks import load_benchmark
from harnessevolve.models.scripted import register_script, unregister_script


def make_scripted_run(root: Path, *extra: str, generations: int = 2) -> Path:
    """A harness under ``root`` with one finished run on it; returns the run folder."""
    cli = CliRunner()
    harness = root / "harness"
    result = cli.invoke(app, ["init", str(harness)])
    assert result.exit_code == 0, result.output
    register_script("report-learner", FamilyLearner(load_benchmark("shell-basics")))
    try:
        result = cli.invoke(
            app, run_args(harness, "scripted/report-learner", *extra, generations=generations)
        )
    finally:
        unregister_script("report-learner")
    assert result.exit_code in (0, 1), result.output
    (run_dir,) = (harness / ".harnessevolve" / "runs").iterdir()
    return run_dir


def copy_run(run_dir: Path, dest: Path) -> Path:
    """A private copy of the run's whole harness (git history included); returns the copied run."""
    harness = run_dir.parents[2]
    shutil.copytree(harness, dest / harness.name, symlinks=True)
    return dest / harness.name / run_dir.relative_to(harness)


def ledger_events(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run_dir / "ledger.jsonl").read_text().splitlines() if line.strip()]


def write_events(run_dir: Path, events: list[dict[str, Any]]) -> None:
    (run_dir / "ledger.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))


def write_lock(run_dir: Path, pid: int) -> None:
    harness = run_dir.parents[2]
    (harness / ".harnessevolve" / "lock").write_text(json.dumps({"pid": pid, "run_id": run_dir.name}))


def dead_pid() -> int:
    """The pid of a process that has exited (and been reaped)."""
    import subprocess
    import sys

    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid
