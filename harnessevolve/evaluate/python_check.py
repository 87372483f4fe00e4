"""``python`` checks: a benchmark's own function scores a run, inside the sandbox.

The check's input (workspace path, answer, trajectory, the tool server's per-turn state, the
check's ``args``) is written to a JSON file in a fresh folder, and ``python_check_main.py`` runs
through the check ``runner`` (the rollout's sandbox) with that folder shown read-only. The sandbox
must also show the Python runtime and the task's ``python_path``: the pipeline's sandbox does for
benchmarks with Python code (``execute.tool_server.benchmark_sandbox``).

The check scores in [0, 1]; a per-turn check scores the mean of its turns and passes when all do.
A check that cannot be imported, raises, returns something else than a score in [0, 1], prints
too much or outlives ``timeout_s`` fails with that cause in its message (never an exception).
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from harnessevolve.core.atif import Trajectory
from harnessevolve.core.tasks import Check, Task

MAIN = Path(__file__).with_name("python_check_main.py")
MAX_OUTPUT_CHARS = 200_000


def check_python(
    task: Task,
    check: Check,
    workspace: Path,
    answer: str | None,
    trajectory: Trajectory | None,
    *,
    runner: Any,
    timeout_s: float,
) -> tuple[float, str]:
    """(score, message) of one ``python`` check (see the module docstring)."""
    doc = {
        "check": check.python,
        "args": check.args,
        "per_turn": check.per_turn,
        "python_path": list(task.python_path),
        "workspace": str(workspace.resolve()),
        "answer": answer,
        "turns": len(task.user_turns)
        if task.user is None
        else max(1, (trajectory.extra.get("turns", 1) if trajectory else 1)),
        "trajectory": trajectory.to_dict() if trajectory is not None else {"steps": [], "extra": {}},
    }
    folder = Path(tempfile.mkdtemp(prefix="he-pycheck-"))
    try:
        folder.chmod(0o755)
        source = folder / "input.json"
        source.write_text(json.dumps(doc), encoding="utf-8")
        source.chmod(0o644)
        command = shlex.join([os.path.abspath(sys.executable), "-P", "-B", "-s", str(MAIN), str(source)])
        env = {
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "HOME": str(workspace),
            "LC_ALL": "C.UTF-8",
            "PYTHONDONTWRITEBYTECODE": "1",
        }
        try:
            run = runner(
                command, workspace, env, timeout_s=timeout_s, with_stderr=False, read_only=(str(folder),)
            )
        except OSError as exc:
            return 0.0, f"{check.python}: could not start: {exc}"
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    if run.returncode is None:
        return 0.0, f"{check.python}: timed out after {timeout_s:g}s"
    lines = run.output[-MAX_OUTPUT_CHARS:].strip().splitlines()
    try:
        results = json.loads(lines[-1])["results"]
    except (IndexError, ValueError, KeyError, TypeError):
        return 0.0, (
            f"{check.python}: the check runner exited {run.returncode} without a result "
            "(is the Python runtime visible in the sandbox?)"
        )
    return summarize(check, results)


def summarize(check: Check, results: list[dict[str, Any]]) -> tuple[float, str]:
    errors = [(i, r["error"]) for i, r in enumerate(results) if "error" in r]
    if errors:
        index, error = errors[0]
        where = f"turn {index}: " if check.per_turn and len(results) > 1 else ""
        return 0.0, f"{check.python}: {where}{error}"
    scores = [r["score"] for r in results]
    score = sum(scores) / len(scores)
    if not check.per_turn:
        return score, f"{check.python}: score {score:g}" + (
            f" ({results[0]['reason']})" if results[0]["reason"] else ""
        )
    failing = next((i for i, s in enumerate(scores) if s < 1.0), None)
    if failing is None:
        return score, f"{check.python}: all {len(scores)} turns pass"
    reason = results[failing]["reason"] or f"score {scores[failing]:g}"
    passing = sum(s == 1.0 for s in scores)
    return score, f"{check.python}: {passing}/{len(scores)} turns pass; turn {failing}: {reason}"
