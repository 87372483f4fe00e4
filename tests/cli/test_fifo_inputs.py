"""A named pipe where the user's YAML or JSON belongs is refused at once (exit 2, file named), never
waited on: it is opened non-blocking and only a regular file is read."""

from __future__ import annotations

import os
import shutil
import threading
from pathlib import Path

from harnessevolve.cli.app import app
from harnessevolve.core import paths


def invoke_bounded(cli, args: list[str], seconds: float = 60.0):
    """The command's result, or a failure when it is still running after ``seconds`` (a hang)."""
    out: list = []
    thread = threading.Thread(target=lambda: out.append(cli.invoke(app, args)), daemon=True)
    thread.start()
    thread.join(seconds)
    assert out, f"harnessevolve {' '.join(args)} hung on a named pipe"
    return out[0]


def test_a_fifo_gates_file_is_refused_not_waited_on(cli, harness_dir: Path, tmp_path: Path) -> None:
    fifo = tmp_path / "gates.yaml"
    os.mkfifo(fifo)
    result = invoke_bounded(
        cli, ["run", "-H", str(harness_dir), "-b", "shell-basics", "--gates", str(fifo), "-m", "scripted/x"]
    )
    assert result.exit_code == 2, result.output
    assert "named pipe" in result.output and "gates.yaml" in result.output
    assert "Traceback" not in result.output


def test_a_fifo_task_file_is_refused_by_validate(cli, tmp_path: Path) -> None:
    suite = tmp_path / "suite"
    shutil.copytree(paths.builtin_dir("benchmarks") / "shell-basics", suite)
    task = next((suite / "tasks").glob("*.yaml"))
    task.unlink()
    os.mkfifo(task)
    result = invoke_bounded(cli, ["validate", str(suite)])
    assert result.exit_code == 2, result.output
    assert "named pipe" in result.output and task.name in result.output
