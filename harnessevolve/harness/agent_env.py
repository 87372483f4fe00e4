"""What an external agent's process sees of its environment inside the sandbox: where the harness
is mounted, its PATH, and the sample values a template is checked with."""

from __future__ import annotations

import platform
import sys
from pathlib import Path
from typing import Any

HARNESS_MOUNT = "/harness"
"""Where an external agent sees the harness directory (read-only) inside the sandbox."""
SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"


def agent_python_bin() -> str:
    """The bin folder of the Python environment harnessevolve runs in; first on an agent's PATH, so
    ``python`` inside the sandbox is this interpreter with its packages (openai, mini-swe-agent)."""
    return str(Path(sys.prefix) / "bin")


def agent_path() -> str:
    """The PATH an external agent gets inside the sandbox."""
    return f"{agent_python_bin()}:{SYSTEM_PATH}"


def sample_template_vars(task: str = "List the files in the workspace.") -> dict[str, Any]:
    """What a template sees when checked: a sample task and this machine's uname, as at run time."""
    return {
        **platform.uname()._asdict(),
        "task": task,
        "cwd": "/workspace",
        "timeout": 30,
        "HOME": "/workspace",
        "PATH": agent_path(),
        "PWD": "/workspace",
        "n_model_calls": 0,
        "model_cost": 0.0,
        "elapsed_seconds": 0,
    }
