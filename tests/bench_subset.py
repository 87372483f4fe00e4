"""Cut-down copies of the built-in shell-basics benchmark, for tests that run whole ``run``s on a few
of its families: the benchmark file, those families' tasks and the references they have."""

from __future__ import annotations

import shutil
from collections.abc import Collection
from pathlib import Path

SHELL_BASICS = Path(__file__).parents[1] / "benchmarks" / "shell-basics"
REFERENCES = Path(__file__).parents[1] / "trajectories" / "shell-basics"


def shell_basics_subset(root: Path, families: Collection[str]) -> Path:
    """``root`` (a new folder) made a copy of shell-basics with only ``families``' tasks; returns it."""
    (root / "tasks").mkdir(parents=True)
    (root / "trajectories").mkdir()
    shutil.copy(SHELL_BASICS / "benchmark.yaml", root / "benchmark.yaml")
    for path in sorted((SHELL_BASICS / "tasks").glob("*.yaml")):
        if path.stem.rsplit("-", 1)[0] not in families:
            continue
        shutil.copy(path, root / "tasks" / path.name)
        reference = REFERENCES / f"{path.stem}.json"
        if reference.is_file():
            shutil.copy(reference, root / "trajectories" / reference.name)
    return root
