"""What makes two cells comparable, as JSON their result files hold: the benchmark (its name and
the content of its test split: a slice or a changed task is another benchmark), the agent model
(its name, and the pinned file hash of a shipped local model), the scorer (the sandbox kind and
limits its checks ran under, the adapter that loaded the tasks), and the harnessevolve that made
them (version, git commit when it runs from a checkout; recorded, not compared)."""

from __future__ import annotations

import functools
import hashlib
import json
import subprocess
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from harnessevolve import __version__
from harnessevolve.core.tasks import Benchmark
from harnessevolve.runs.run_config import ExecutionConfig
from harnessevolve.scoring.rollout_cache import code_digest, task_fingerprint

SCORER = "harnessevolve.scoring.scorer.Scorer"
"""Every arm's final harness is scored by the pipeline's scorer (execute, then the task's checks)."""


def benchmark_identity(suite: Benchmark, spec: str) -> dict[str, Any]:
    """``name``, ``spec`` (as given; not compared: a folder's path differs between machines),
    ``test_tasks`` and ``test_sha``: a hash of the test split's task ids and contents. A task's
    code folders (``python_path``) count by what they are, never by where this checkout sits: one
    inside harnessevolve by its path in the package (its code is the commit the cell records),
    any other by the hash of its Python files. Two checkouts of one commit, or a benchmark folder
    copied to another machine, give one ``test_sha``."""
    tests = sorted(suite.split("test"), key=lambda t: t.id)
    digest = hashlib.sha256()
    for task in tests:
        placed = replace(task, python_path=tuple(_code_folder(p) for p in task.python_path))
        digest.update(f"{task.id}\0{task_fingerprint(placed)}\n".encode())
    return {"name": suite.name, "spec": spec, "test_tasks": len(tests), "test_sha": digest.hexdigest()[:16]}


def _code_folder(folder: str) -> str:
    """``folder`` as the test split's identity holds it (``benchmark_identity``)."""
    package = Path(__file__).resolve().parents[1]
    try:
        return f"harnessevolve/{Path(folder).resolve().relative_to(package).as_posix()}"
    except ValueError:
        return f"code {code_digest(Path(folder))}"


def model_identity(model: str) -> dict[str, Any]:
    """The agent model's name, and the sha256 of its file when it is a shipped local model."""
    from harnessevolve.models.catalog import CATALOG

    provider, _, name = model.partition("/")
    pinned = CATALOG.get(name) if provider == "local" else None
    return {"name": model, "sha256": pinned.sha256 if pinned is not None else None}


def scorer_identity(execution: ExecutionConfig, suite: Benchmark) -> dict[str, Any]:
    """The scorer's identity: the checks' sandbox (kind and limits) and the adapter that loaded
    the tasks. Where rollouts are scheduled and how many at once change no score: left out."""
    from harnessevolve.sandbox.launch import SandboxLimits

    limits = SandboxLimits.parse(execution.sandbox_limits) if execution.sandbox_limits else SandboxLimits()
    return {
        "scorer": SCORER,
        "sandbox": str(execution.sandbox.value),
        "limits": asdict(limits),
        "adapter": suite.adapter,
    }


@functools.lru_cache(maxsize=1)
def package_identity() -> dict[str, Any]:
    """``version`` and, when harnessevolve runs from a git checkout, its ``commit`` (else None)."""
    return {"version": __version__, "commit": _commit(Path(__file__).resolve().parents[2])}


def _commit(folder: Path) -> str | None:
    if not (folder / ".git").exists():
        return None
    try:
        done = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=folder, capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    sha = done.stdout.strip()
    return sha if done.returncode == 0 and len(sha) == 40 else None


def digest(document: Any) -> str:
    """A short, stable hash of a JSON document."""
    return hashlib.sha256(json.dumps(document, sort_keys=True, default=str).encode()).hexdigest()[:16]
